package simnet

import "github.com/simccl/simccl/coll"

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

// The all-to-all (SimulateP2P) under the ECMP mean model. A real link must carry every byte the
// hash put on it, which at its capacity takes W (its bytes over its capacity); the model's replay
// kept it busy for B. Where W ≤ B for every hashed link the overloads came in bursts that fit the
// link's own busy time and the model stands, its time its replay's. Where some link owes W − B >
// 0 the model is uncertain: its replay alone is mostly a lower estimate (it spreads every
// connection evenly over its equal-cost links), t + W − B mostly an upper one (the busy periods of
// that link stretch by W − B, and every rank's next batch waits for all of its previous one; not
// a bound: where different links hold back different batches their waits add up, and 128 nodes
// with 2 per leaf at 1 MiB take 2.7% more than t + W − B in the replay of every rank), and
// where the exact time lies between depends on which connections collide: how many of a receiver's messages come
// late through that link (its copies out of the FIFO then queue behind the last arrival), and how
// much the other connections of the senders' NICs gain from the slowed ones. Only a replay of
// every rank sees that, and on the clusters where it matters (few hosts per leaf) the exact one
// costs up to minutes (24 DGX H100 nodes, 2 per leaf, 1 MiB: 62 s), almost all of it in rate
// computations over every connection at once. SimulateP2P therefore replays every rank there with
// at most one rate computation per interval (Engine.RateInterval: a new flow waits for its rate,
// and an ended flow's share for the others, up to one interval), within coarseWork, and the row
// says so (rate-interval-N). Past coarseBound or coarseWork the model stands with W − B added
// (ecmp-mean), except where it is too far to stand (a link over twice its capacity owing work),
// whose alternative is the exact replay of every rank with no bound: there the interval replay,
// cheaper than that, runs to its end whatever its work.

// coarseWork bounds the replay of every rank with a rate interval that SimulateP2P tries where
// the ECMP mean model owes work (owed > 0) and the exact replay did not fit exactWork: the flows
// its rate computations may visit (Engine.CompVisited), about 0.7 µs each on this project's
// 2-core development machine. The 17 cells of docs/cluster.md's table need 0.2–6.7 M; 32 to 48
// DGX H100 nodes with 2 per leaf at 1–8 MiB up to 30 M (48 nodes, 8 MiB: 26 s). A try that runs
// past it costs about as much. Tests lower it to see the mean model. It does not bound the
// replay where the model is too far to stand (SimulateP2P).
var coarseWork uint64 = 40_000_000

// backlogBudget is the largest work bound (workBound) for which SimulateP2P tries the replay of
// every rank with a rate interval, and that replay's work budget, for a model whose checked links
// were backlogged by ratio (twice the largest backlog over the model's time) and whose replay has
// work bound `bound`. Below backlogRef the budgets are coarseBound and coarseWork. Past it they
// grow with the square of the backlog over backlogRef, up to backlogMaxScale times, and the work
// budget is half the replay's own bound (the work was 4–46% of it wherever measured): a model
// backlogged that far was 5–14% fast where measured (128 one-GPU nodes, default fabric: 16–128
// MiB before stop 48, 256 MiB–1 GiB at stops 49 and 53, ratio 0.17–0.18), which a replay of tens of
// seconds removes (256 MiB: 11 s, +0.15% from the exact replay's 7 min; 1 GiB: 47 s, +0.05% from
// the exact replay's 31 min). The square, not the ratio itself: the model's error grew faster than
// the ratio where both were measured (−2.6% at 0.069, 128 DGX H100 nodes at 1 GiB with two
// channels per network peer, −3.7% at 0.125 with NCCL 2.28's one; −11.2…−13.6% at 0.169–0.181), and
// until stop 53 a budget growing with the ratio alone left 1 GiB (work bound 839 M, ratio 0.181)
// on the model. Rows past even that budget keep the model and its note.
func backlogBudget(ratio, bound float64) (limit float64, work uint64) {
	r := ratio / backlogRef
	scale := min(r*r, backlogMaxScale)
	if scale <= 1 {
		return coarseBound, coarseWork
	}
	return coarseBound * scale, max(coarseWork, uint64(bound/2))
}

// backlogRef and backlogMaxScale shape backlogBudget: the budgets start to grow where twice the
// largest backlog passes 5% of the model's time (five times MaxCoarseError, the bar past which a
// row says it is backlogged: 64 DGX H100 nodes with 2 per leaf at 1 MiB, 2.4%, keep the model,
// whose time the interval replay's equals there) and grow at most eightfold (a work bound of 1.28
// G: 128 one-GPU nodes to 1 GiB, work bound 839 M, 47 s; until stop 53 fourfold, which left 1 GiB
// on the model). The 1,024-GPU all-to-all of the speed targets (128 DGX H100 nodes, 1 GiB, ratio
// 0.125: 6.25 times, 993 M; bound 6.7 G) is far past either.
// (Tests set backlogMaxScale to 1 with coarseWork to see the model.)
const backlogRef = 5 * MaxCoarseError

var backlogMaxScale = 8.0

// coarseBound is the largest bound on that replay's work (workBound) for which it is tried. The
// work was 4–25% of the bound wherever measured (the 17 cells; 32–64 nodes with 2 per leaf,
// 1–8 MiB), so a bound within 160 M keeps it within coarseWork: with 2 per leaf, 32 nodes bound
// 54–55 M, 40 nodes 100–102 M, 48 nodes 120–123 M. 56 and 64 nodes (bound 187–217 M, work 26–51
// M) are not tried; there the mean model with W − B stands within +0.13…+0.82% of the interval
// replay (1–4 MiB; docs/cluster.md), where at 32–48 nodes it was +1.2…+3.5% off.
const coarseBound = 160e6

// workBound bounds the work of the replay of every rank, scale times the programs of the
// symmetric replay x, with rate interval iv, over a time guess: a rate computation visits at
// most the flows then running, at most two a segment of a batch (its message and its receive's
// work), and there is at most one per interval.
func (x *p2pSim) workBound(guess, iv Time, scale float64) float64 {
	flows := 0
	for p := range x.net.programs() {
		most := 0
		for lo := x.net.segOff[p]; lo < x.net.segOff[p+1]; lo += coll.P2PBatch {
			most = max(most, int(min(lo+coll.P2PBatch, x.net.segOff[p+1])-lo))
		}
		flows += 2 * most
	}
	return (float64(guess)/float64(iv) + 1) * float64(flows) * scale
}

// interval is the rate interval of that replay, for a symmetric replay x that took t: a message
// waits for at most two deferred rate computations (its start; its share's growth when the flows
// it shares a link with end), and a program runs chain messages one after another (per batch the
// most messages one of its connections sends), so the replay is slow by at most 2 × chain
// intervals (an argument, not a proof: a share that grows several times waits for each); the
// interval keeps that within half of MaxCoarseError of t, the other half a margin (t is the
// model's time, itself a few percent off). Measured on the 17 cells: 0.02–0.48% slow, up to 99%
// of that bound.
func (x *p2pSim) interval(t Time) Time {
	chain := 1
	for p := range x.net.programs() {
		n := 0
		for lo := x.net.segOff[p]; lo < x.net.segOff[p+1]; lo += coll.P2PBatch {
			most := 0
			for g := lo; g < min(lo+coll.P2PBatch, x.net.segOff[p+1]); g++ {
				most = max(most, len(x.net.wire[x.net.segs[g].part]))
			}
			n += most
		}
		chain = max(chain, n)
	}
	return max(Picosecond, Time(MaxCoarseError/2*float64(t)/float64(2*chain)))
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
			bytes[l] += total * e.crossShare(l) // a queue pair's share where the link has one
		}
	})
	owed := 0.0
	check.linkBusy(func(l LinkID, busy Time) {
		owed = max(owed, bytes[l]/float64(e.LinkCap(l))-float64(busy))
	})
	return Time(owed)
}
