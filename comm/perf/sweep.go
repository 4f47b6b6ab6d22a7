package perf

import (
	"fmt"

	"github.com/simccl/simccl/coll"
)

// MaxSizes bounds the sizes of one sweep (-b 8 -e 1G -i 1 would be a billion rows).
const MaxSizes = 100000

// Sweep returns nccl-tests' sizes from min to max (src/common.cu, TimeTest): multiplied by factor
// when it is above 1 (-f), else increased by step bytes (-i).
func Sweep(min, max, factor, step int64) ([]int64, error) {
	switch {
	case min <= 0 || max < min:
		return nil, fmt.Errorf("bad size range %d..%d (want 0 < -b <= -e)", min, max)
	case factor < 1:
		return nil, fmt.Errorf("step factor %d (want 1, or 2 and more)", factor)
	case factor == 1 && step <= 0 && min < max:
		return nil, fmt.Errorf("step bytes %d (want a positive size)", step)
	}
	var out []int64
	for s := min; s <= max; {
		if len(out) == MaxSizes {
			return nil, fmt.Errorf("more than %d sizes from %d to %d: use a larger step", MaxSizes, min, max)
		}
		out = append(out, s)
		if factor > 1 {
			if s > max/factor {
				break
			}
			s *= factor
		} else {
			if step <= 0 || s > max-step {
				break
			}
			s += step
		}
	}
	return out, nil
}

// WarmupSizes are the sizes nccl-tests warms up at before a sweep: min, 2×min, … ≤ max of sizes
// (src/common.cu, TimeTest: "Warm-up for all sizes (using a stepfactor of 2)").
func WarmupSizes(sizes []int64) []int64 {
	if len(sizes) == 0 {
		return nil
	}
	lo, hi := sizes[0], sizes[0]
	for _, s := range sizes {
		lo, hi = min(lo, s), max(hi, s)
	}
	var out []int64
	for s := max(lo, 1); s <= hi; s *= 2 {
		out = append(out, s)
		if s > hi/2 {
			break
		}
	}
	return out
}

// NameOf is a collective's name as nccl-tests spells it (all_reduce, all_gather,
// reduce_scatter, broadcast, reduce, alltoall, sendrecv): its program is NameOf + "_perf".
func NameOf(c string) string {
	f, err := coll.ParseFunc(c)
	if err != nil {
		return c
	}
	return coll.TestName(f)
}

// NamesOf maps NameOf over cs.
func NamesOf(cs []string) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = NameOf(c)
	}
	return out
}

// OpName is a reduction's name as nccl-tests prints it in the redop column (src/common.cu
// test_opnames: sum, prod, max, min, avg, mulsum).
func OpName(op coll.RedOp) string {
	if op == coll.PreMulSum {
		return "mulsum"
	}
	return op.String()
}
