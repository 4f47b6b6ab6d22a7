package coll

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
func (b *builder) pat(p *Plan, ck *chunking) error {
	n := p.NRanks
	nch := p.nChannels()
	elt := ck.elt
	count := p.Count
	offs, cnts := p.parts(count, ck.align)
	// Every rank walks the relative positions in increasing order (AllGather: a block's parent
	// position y − lowbit(y) is smaller than y, so it comes first) or decreasing order
	// (ReduceScatter: children first). Since y ↦ y+d is monotone, the two ends of any connection
	// list its messages in the same order, as FIFO connections require.
	order := make([]int, n)
	for i := range order {
		order[i] = i
		if p.Func == ReduceScatter {
			order[i] = n - 1 - i
		}
	}
	mod := func(x int) int { return ((x % n) + n) % n }
	for c := 0; c < nch; c++ {
		part, cnt := offs[c], cnts[c]
		ci := 0
		for eo := int64(0); eo < cnt; eo += ck.chunkElems {
			ne := min64(ck.chunkElems, cnt-eo)
			data := part + eo
			for r := 0; r < n; r++ {
				for _, y := range order {
					q := mod(r - y) // the block's owner
					parent := -1
					if y != 0 {
						parent = mod(r - (y & -y))
					}
					var children []int
					for d := 1; d < n; d <<= 1 {
						if (y == 0 || d < y&-y) && y+d < n {
							children = append(children, mod(r+d))
						}
					}
					blk := &BufRef{Buf: BufRecv, Offset: (int64(q)*count + data) * elt}
					cl := call{rank: r, ch: c, nelem: ne, chunk: ci}
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
