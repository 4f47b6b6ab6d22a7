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

// meanLagged is the time of an all-to-all (SimulateP2P) under the ECMP mean model whose replay x
// took t and whose relaxed links check watched: t plus the largest work a real hashed link owes
// beyond its busy time in the replay (owed). The model spreads every connection evenly over its
// equal-cost links; ECMP puts it on one. A real link must carry every byte hashed onto it, which
// at its capacity takes W (its bytes over its capacity); the replay kept it busy for B, at the
// model's rates. Where W ≤ B the link had room enough within its own busy time: its overloads
// came in bursts that the exact replay absorbs (the senders' other connections take the bandwidth
// the slowed ones leave; the slowed ones catch up where the link has room). Where W > B the
// busy periods of that link must stretch by W − B, and since every rank's next batch waits for
// all of its previous one, the call with them, unless the link's idle moments in the replay take
// some of it: W − B is then an upper estimate. Measured against the exact replay (DGX H100, 2 per
// leaf, docs/cluster.md): 16 nodes, 1–16 MiB, the replay alone −4.1…−7.6%, with W − B
// +0.00…+0.44% (the links stay busy, the whole W − B is lost); 12, 20 and 24 nodes, 1–16 MiB,
// the replay alone −0.8…−4.7%, with W − B +1.0…+3.5% (30–85% of it is lost). Where no link
// owes anything (the default fabric: bursts over 32 uplinks a leaf) the time is the replay's
// (TestECMPMeanAllToAll).
func meanLagged(b *p2pBuild, x *p2pSim, check *relaxCheck, t Time) Time {
	return t + x.owed(b, check)
}

// owed is the largest W − B over the real links check watched (0 where none is positive): W the
// wire bytes of the member connections hashed onto the link over its capacity, B its busy time
// in the replay x.
func (x *p2pSim) owed(b *p2pBuild, check *relaxCheck) Time {
	if check == nil {
		return 0
	}
	e := b.e
	watched := make([]bool, e.NumLinks())
	for _, ls := range check.links {
		for _, l := range ls {
			watched[l] = true
		}
	}
	bytes := make([]float64, e.NumLinks())
	b.eachRoute(func(i, c, rk int, route []LinkID) {
		var total float64
		for _, l := range route {
			if !watched[l] {
				continue
			}
			if total == 0 {
				for _, w := range x.net.wire[x.net.part[x.net.base[i][c]+int32(rk%x.S)]] {
					total += w
				}
			}
			bytes[l] += total
		}
	})
	owed := 0.0
	check.linkBusy(func(l LinkID, busy Time) {
		owed = max(owed, bytes[l]/float64(e.LinkCap(l))-float64(busy))
	})
	return Time(owed)
}
