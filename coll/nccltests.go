package coll

import "fmt"

// nccl-tests' conventions (nccl-tests common.cu and the per-collective *_perf programs): the size
// argument of -b/-e is the total buffer; the count a collective is called with and the bytes
// algbw divides by follow from it; busbw is algbw times a factor per collective.

// TestName is the nccl-tests program name of f ("all_reduce", "alltoall", …).
func TestName(f Func) string {
	switch f {
	case AllReduce:
		return "all_reduce"
	case AllGather:
		return "all_gather"
	case ReduceScatter:
		return "reduce_scatter"
	case Broadcast:
		return "broadcast"
	case Reduce:
		return "reduce"
	case AllToAll:
		return "alltoall"
	case SendRecv:
		return "sendrecv"
	}
	return f.String()
}

// FuncOfTest maps an nccl-tests program name ("all_reduce", "all_reduce_perf") to its function.
func FuncOfTest(name string) (Func, error) {
	for f := Func(0); f <= AllToAll; f++ {
		if n := TestName(f); name == n || name == n+"_perf" {
			return f, nil
		}
	}
	return 0, fmt.Errorf("unknown nccl-tests collective %q", name)
}

// TestCount returns the count nccl-tests calls f with for a size of size bytes (the total buffer,
// -b/-e) over n ranks with elements of elt bytes, and the bytes algbw divides by. AllGather,
// ReduceScatter and AlltoAll call with base = size/elt/n elements rounded down to 16 bytes' worth
// (per rank, per peer); the others with size/elt.
func TestCount(f Func, size int64, elt, n int) (count, algBytes int64) {
	if elt <= 0 || n <= 0 {
		return 0, 0
	}
	count = size / int64(elt)
	switch f {
	case AllGather, ReduceScatter, AllToAll:
		base := count / int64(n)
		align := max(int64(16/elt), 1)
		base -= base % align
		return base, base * int64(elt) * int64(n)
	}
	return count, count * int64(elt)
}

// TestCall is the call nccl-tests makes for a size (TestCount's count, root 0, peer 1).
func TestCall(f Func, size int64, dt DataType, op RedOp, n int) Call {
	count, _ := TestCount(f, size, dt.Size(), n)
	return Call{Func: f, Count: count, DataType: dt, Op: op}
}

// BusFactor is nccl-tests' busbw factor: 2(n−1)/n for AllReduce, (n−1)/n for AllGather,
// ReduceScatter and AlltoAll, 1 for the others.
func BusFactor(f Func, n int) float64 {
	if n <= 0 {
		return 0
	}
	switch f {
	case AllReduce:
		return 2 * float64(n-1) / float64(n)
	case AllGather, ReduceScatter, AllToAll:
		return float64(n-1) / float64(n)
	}
	return 1
}

// Reduces reports whether f applies a reduction (nccl-tests prints "none" as the redop otherwise).
func (f Func) Reduces() bool {
	return f == AllReduce || f == Reduce || f == ReduceScatter
}

// TestValue is rank r's input element i in a --check run (runccl, and the engines' benchmarks):
// small integers (0..3), so that the inputs are exact in every type and sums of a few thousand
// ranks stay exact in the floats.
func TestValue(r int, i int64) float64 { return float64((int64(r)*7 + i*3) % 4) }

// TestWant returns the expectation of element i of rank's receive buffer after f ran over n ranks
// with count elements (per rank, or per peer for AllGather, ReduceScatter and AlltoAll), rank r's
// send element j being in(r, j) rounded to dt; scalar is PreMulSum's. SendRecv is nccl-tests'
// ring shift: every rank sends to rank+1 and receives from rank−1. It returns nil when the rank's
// receive buffer holds no result (Reduce off the root).
func TestWant(f Func, dt DataType, op RedOp, scalar float64, n, rank, root int, count int64, in func(r int, j int64) float64) (func(i int64) Expect, error) {
	p := &Plan{Func: f, NRanks: n, Count: count, DataType: dt, Op: op, Root: root, Peer: 1}
	ref, err := NewReferenceOf(p, scalar, func(r int, j int64) uint64 { return dt.FromFloat(in(r, j)) })
	if err != nil || f == Reduce && rank != root {
		return nil, err
	}
	return func(i int64) Expect {
		e, _ := ref.Want(rank, i)
		return e
	}, nil
}
