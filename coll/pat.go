package coll

import (
	"fmt"
	"math/bits"
	"slices"
	"sort"
)

// pat compiles AllGather and ReduceScatter over PAT's peers (NCCL 2.23+ "Parallel Aggregated
// Trees", one rank per node; binomial peers rank±2^k). Every rank's block travels
// along its own binomial tree, rooted at the block's owner: relative to the owner, rank y receives
// the block from y − lowbit(y) and forwards it to y + d for every power of two d < lowbit(y) (all
// d < n at the owner) that stays below n. AllGather walks the trees down (the owner CopySends, inner
// ranks RecvCopySend to all their children at once, leaves Recv); ReduceScatter walks them up
// (leaves Send, inner ranks RecvReduceSend from all children, the owner RecvReduceCopy). Each rank
// sends exactly n−1 blocks, as PAT does.
//
// Approximation: NCCL's PAT aggregates the blocks bound for one peer into one step and bounds the
// data in flight per phase; here every block of every chunk is its own message, so the message
// count (not the bytes, peers or dependency structure) differs from NCCL's.
//
// The builder compiles the programs of its schedule's ranks: all of them (Compile), or the
// representatives of a fold (CompilePATFold).
func (b *builder) pat(p *Plan, ck *chunking) error { return b.patFold(p, ck, b.s.NRanks) }

// patFold compiles the programs of ranks 0 … S−1 of p's PAT schedule (S divides p.NRanks), each
// peer r′ numbered r′ mod S. With S < NRanks (CompilePATFold) every connection of distance 2^k
// takes index PATFoldConn+k, so that connections of different distances between the same two
// representatives (or a representative and itself) stay apart.
func (b *builder) patFold(p *Plan, ck *chunking, S int) error {
	n := p.NRanks
	nch := p.nChannels()
	elt := ck.elt
	count := p.Count
	offs, cnts := p.parts(count, ck.align)
	// Every rank walks the relative positions in windows of PATWindow consecutive positions,
	// farthest distance first within each (the PAT paper's dimension-reversed order: Jeaugey
	// 2025, "PAT: a new algorithm for all-gather and reduce-scatter operations at scale"): a
	// window's first position (reached over the largest distance), then the positions reached
	// over W/2, W/4, …, 1 — the positions of a window in increasing order of their offset's bits
	// reversed. A block's parent position y − lowbit(y) clears y's lowest set bit: in an earlier
	// window, or earlier in the same one (the highest bit of the reversed offset), so it comes
	// first (AllGather); ReduceScatter walks the reverse, children first. On a connection of
	// distance d the sender's positions y′ map to the receiver's y′ + d, in the same window (d <
	// W: the same bits added to every reversed offset) or at a window's start (d ≥ W): both ends
	// list its messages in the same order, as FIFO connections require. The window bounds what a
	// connection holds: a window's distance-1 connection carries W/2 messages, all sent before the
	// first is consumed, and NCCL_STEPS slots hold them.
	const W = PATWindow
	w := bits.Len(uint(W - 1))
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	key := func(y int) int { return y&^(W-1) | int(bits.Reverse(uint(y&(W-1)))>>(bits.UintSize-w)) }
	sort.Slice(order, func(i, j int) bool { return key(order[i]) < key(order[j]) })
	if p.Func == ReduceScatter {
		slices.Reverse(order)
	}
	mod := func(x int) int { return ((x % n) + n) % n }
	fold := S < n
	var rIdx, sIdx []int // per peer connection indexes of a fold
	for c := 0; c < nch; c++ {
		part, cnt := offs[c], cnts[c]
		ci := 0
		for eo := int64(0); eo < cnt; eo += ck.chunkElems {
			ne := min64(ck.chunkElems, cnt-eo)
			data := part + eo
			for r := 0; r < S; r++ {
				for _, y := range order {
					q := mod(r - y) // the block's owner
					parent := -1
					if y != 0 {
						parent = mod(r - (y & -y))
					}
					var children []int
					rIdx, sIdx = rIdx[:0], sIdx[:0]
					for d, k := 1, 0; d < n; d, k = d<<1, k+1 {
						if (y == 0 || d < y&-y) && y+d < n {
							children = append(children, mod(r+d)%S)
							if p.Func == AllGather {
								sIdx = append(sIdx, PATFoldConn+k)
							} else {
								rIdx = append(rIdx, PATFoldConn+k)
							}
						}
					}
					if parent >= 0 {
						parent %= S
						k := bits.TrailingZeros(uint(y))
						if p.Func == AllGather {
							rIdx = append(rIdx, PATFoldConn+k)
						} else {
							sIdx = append(sIdx, PATFoldConn+k)
						}
					}
					blk := &BufRef{Buf: BufRecv, Offset: (int64(q)*count + data) * elt}
					cl := call{rank: r, ch: c, nelem: ne, chunk: ci}
					if fold {
						cl.recvIdxs, cl.sendIdxs = rIdx, sIdx
					}
					if p.Func == AllGather {
						switch {
						case y == 0:
							cl.prim, cl.src, cl.dst, cl.sendTo = CopySend, &BufRef{Buf: BufSend, Offset: data * elt}, blk, children
						case len(children) == 0:
							cl.prim, cl.recvFrom, cl.dst = Recv, []int{parent}, blk
						default:
							cl.prim, cl.recvFrom, cl.dst, cl.sendTo = RecvCopySend, []int{parent}, blk, children
						}
					} else {
						src := &BufRef{Buf: BufSend, Offset: (int64(q)*count + data) * elt}
						switch {
						case y == 0:
							cl.prim, cl.recvFrom, cl.src, cl.dst, cl.postOp = RecvReduceCopy, children, src, &BufRef{Buf: BufRecv, Offset: data * elt}, true
						case len(children) == 0:
							cl.prim, cl.src, cl.sendTo = Send, src, []int{parent}
						default:
							cl.prim, cl.recvFrom, cl.src, cl.sendTo = RecvReduceSend, children, src, []int{parent}
						}
					}
					b.emit(ck, cl)
				}
			}
			ci++
		}
	}
	return nil
}

// PATFoldConn is the first connection index of a PAT fold (CompilePATFold): its connection of
// distance 2^k has index PATFoldConn+k.
const PATFoldConn = 3

// CompilePATFold compiles the quotient of plan p's PAT schedule (AllGather or ReduceScatter) by
// the rotation of its ranks by S: the programs of ranks 0 … S−1 only, exactly as Compile(p) has
// them, with every peer r′ numbered r′ mod S and each connection kept apart by its distance
// (PATFoldConn). PAT's programs are alike under any rotation of the ranks (a rank's block
// positions are relative to itself), so a representative r stands for the ranks r + jS: its
// messages to r′ stand for theirs to r′ + jS, which its own receives from the representative of
// r − (r′ − r) mirror. The schedule is for timing (simnet's PAT fold), not for execution: a rank
// may be its own peer, and the data offsets are those of the representatives.
func CompilePATFold(p Plan, S int) (*Schedule, error) {
	if p.Algo != PAT || (p.Func != AllGather && p.Func != ReduceScatter) {
		return nil, fmt.Errorf("coll: CompilePATFold: %v %v is not a PAT all-gather or reduce-scatter", p.Func, p.Algo)
	}
	if err := p.checkArgs(); err != nil {
		return nil, err
	}
	n := p.NRanks
	if S < 1 || S > n || n%S != 0 {
		return nil, fmt.Errorf("coll: CompilePATFold: %d representatives do not divide %d ranks", S, n)
	}
	if est := p.EstimatedSteps() * float64(S) / float64(n); est > MaxSteps {
		return nil, fmt.Errorf("schedule would have about %.3g steps (limit %d): use fewer ranks, a smaller count or a larger chunk", est, MaxSteps)
	}
	b := newBuilder(S, p.ChannelLo+p.channelSpan(), nil)
	if err := b.addOp(&p); err != nil {
		return nil, fmt.Errorf("coll: CompilePATFold: %w", err)
	}
	return b.finish(), nil
}

// PATWindow is the positions a PAT rank walks farthest first before the next ones (coll's PAT
// schedule: one message per block). NCCL's PAT aggregates the blocks for one peer into one step
// of its connection's buffer and bounds what is in flight by the buffer; with a message per block
// the bound is the connection's NCCL_STEPS slots, which hold a window's distance-1 messages
// (W/2 of them, all sent before the first is consumed) for W = 2 × NCCL_STEPS. Farther windows
// would deadlock the schedule on its slots; nearer ones hide less of the network's latency.
const PATWindow = 2 * NCCLSteps
