package simnet

// meanTooFar reports whether the ECMP mean model, whose replay took t and whose relaxed links
// check watched, is too far from the exact replay to stand for it (SimulateTree and SimulateRing
// then replay every rank). The model spreads every connection evenly over its equal-cost links,
// where ECMP hashes each onto one: a real link then carries, at the model's rates, more than its
// capacity, and in the exact replay the connections through it wait for the difference. That
// wait is the backlog the link builds, its load fed as a fluid queue drained at its capacity
// (relaxCheck.backlog): where the excess persists it grows with the call (on 16 DGX H100 nodes
// with 2 per leaf, a tree all-reduce of 1 GiB: 2,359 µs over the model's 6,290, and the exact
// replay is 37.6% slower), where it comes in bursts between which the link has room it drains. A
// tree's chunk crosses the fabric twice (reduced up, broadcast down), and may wait on each
// crossing: the model stands only where twice the largest backlog is within MaxCoarseError of the
// replay's time, and no link is over meanOverload times its capacity.
func meanTooFar(check *relaxCheck, t Time) bool {
	if check == nil {
		return false
	}
	return check.over > meanOverload || 2*float64(check.backlog()) > MaxCoarseError*float64(t)
}

// meanLagged is the time of an all-to-all (SimulateP2P) under the ECMP mean model whose replay
// took t and whose relaxed links check watched: t plus the largest backlog of the real links
// (relaxCheck.backlog). Each message crosses the fabric once, and what the hash put on a real link
// beyond its capacity at the model's rates is work that link still owes: in the exact replay its
// connections finish that much later, and since every rank's next operation waits for both
// halves of its previous one, the whole call with them. The replay of t alone is fast by that
// wait (16 DGX H100 nodes, 2 per leaf, 1–16 MiB: −4.1 to −7.6% against the exact replay); t plus
// the backlog is within +0.00…+0.44% there (docs/cluster.md, TestECMPMeanAllToAll).
func meanLagged(check *relaxCheck, t Time) Time {
	return t + check.backlog()
}
