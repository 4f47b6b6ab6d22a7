package coll

import (
	"fmt"
)

// Reference computes what a collective must produce, from its definition alone (no schedule):
// given every rank's send buffer (send[r], one float64 per element, as Execute takes them), it
// writes each rank's receive buffer (recv[r], already sized: Op.RecvBytes/element size) and leaves
// alone what the collective does not write (a non-root's buffer in Reduce). Executors check their
// results against it; the definitions are NCCL's (nccl-tests' checks, fact sheet §7): AllReduce
// folds all ranks, AllGather concatenates in rank order, ReduceScatter gives rank r the r-th block
// of the fold, Broadcast copies the root's buffer, Reduce folds into the root, AllToAll sends
// block j of rank r to block r of rank j, SendRecv delivers each transfer. Avg divides the sum by
// the number of ranks; PreMulSum is taken with a scalar of 1.
func Reference(p *Plan, send, recv [][]float64) error {
	n, cnt := p.NRanks, p.Count
	if len(send) != n || len(recv) != n {
		return fmt.Errorf("coll: Reference: %d send and %d receive buffers for %d ranks", len(send), len(recv), n)
	}
	var sendLen, recvLen int64
	switch p.Func {
	case AllGather:
		sendLen, recvLen = cnt, cnt*int64(n)
	case ReduceScatter:
		sendLen, recvLen = cnt*int64(n), cnt
	case AllToAll:
		sendLen, recvLen = cnt*int64(n), cnt*int64(n)
	case SendRecv:
		s, r := sendRecvSizes(p)
		elt := int64(p.DataType.Size())
		if elt == 0 {
			return fmt.Errorf("coll: Reference: unknown data type %v", p.DataType)
		}
		sendLen, recvLen = s/elt, r/elt
	default:
		sendLen, recvLen = cnt, cnt
	}
	for r := 0; r < n; r++ {
		if int64(len(send[r])) < sendLen || int64(len(recv[r])) < recvLen {
			return fmt.Errorf("coll: Reference: rank %d: buffers of %d and %d elements, want %d and %d", r, len(send[r]), len(recv[r]), sendLen, recvLen)
		}
	}
	fold := func(off int64) float64 {
		acc := send[0][off]
		for q := 1; q < n; q++ {
			acc = reduce(p.Op, acc, send[q][off])
		}
		if p.Op == Avg {
			acc /= float64(n)
		}
		return acc
	}
	switch p.Func {
	case AllReduce:
		for i := int64(0); i < cnt; i++ {
			v := fold(i)
			for r := 0; r < n; r++ {
				recv[r][i] = v
			}
		}
	case AllGather:
		for r := 0; r < n; r++ {
			for q := 0; q < n; q++ {
				copy(recv[r][int64(q)*cnt:int64(q+1)*cnt], send[q][:cnt])
			}
		}
	case ReduceScatter:
		for r := 0; r < n; r++ {
			for i := int64(0); i < cnt; i++ {
				recv[r][i] = fold(int64(r)*cnt + i)
			}
		}
	case Broadcast:
		for r := 0; r < n; r++ {
			copy(recv[r][:cnt], send[p.Root][:cnt])
		}
	case Reduce:
		for i := int64(0); i < cnt; i++ {
			recv[p.Root][i] = fold(i)
		}
	case AllToAll, SendRecv:
		for _, m := range p2pMessages(p) {
			copy(recv[m.to][m.recvOff:m.recvOff+m.count], send[m.from][m.sendOff:m.sendOff+m.count])
		}
	default:
		return fmt.Errorf("coll: Reference: unknown function %v", p.Func)
	}
	return nil
}
