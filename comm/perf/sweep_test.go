package perf

import (
	"fmt"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
)

// The sizes nccl-tests runs for -b/-e/-f/-i (src/common.cu, TimeTest's loop).
func TestSweep(t *testing.T) {
	for _, c := range []struct {
		min, max, factor, step int64
		want                   string
	}{
		{8, 128, 2, 0, "[8 16 32 64 128]"},
		{8, 100, 4, 0, "[8 32]"},
		{32 << 20, 32 << 20, 1, 1 << 20, "[33554432]"}, // nccl-tests' defaults: one size
		{1 << 30, 10 << 30, 1, 9 << 30, "[1073741824 10737418240]"},
		{1, 4, 1, 1, "[1 2 3 4]"},
		{10, 25, 1, 10, "[10 20]"},
		{1 << 62, 1<<62 + 100, 2, 0, "[4611686018427387904]"}, // no overflow
		{8, 8, 1, 0, "[8]"},
		{0, 8, 2, 0, "bad size range"},
		{16, 8, 2, 0, "bad size range"},
		{8, 16, 0, 0, "step factor 0"},
		{8, 16, 1, 0, "step bytes 0"},
		{1, 1 << 30, 1, 1, "more than 100000 sizes"},
	} {
		sizes, err := Sweep(c.min, c.max, c.factor, c.step)
		got := fmt.Sprint(sizes)
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("Sweep(%d, %d, %d, %d) = %s, want %s", c.min, c.max, c.factor, c.step, got, c.want)
		}
	}
}

// nccl-tests warms up at min, 2×min, … ≤ max, whatever the step.
func TestWarmupSizes(t *testing.T) {
	for _, c := range []struct {
		sizes []int64
		want  string
	}{
		{[]int64{8, 1048584, 2097160}, "[8 16 32 64 128 256 512 1024 2048 4096 8192 16384 32768 65536 131072 262144 524288 1048576 2097152]"},
		{[]int64{1000}, "[1000]"},
		{[]int64{3, 12}, "[3 6 12]"},
		{nil, "[]"},
	} {
		if got := fmt.Sprint(WarmupSizes(c.sizes)); got != c.want {
			t.Errorf("WarmupSizes(%v) = %s, want %s", c.sizes, got, c.want)
		}
	}
}

func TestSpellings(t *testing.T) {
	if got := strings.Join(NamesOf(Collectives), " "); got != "all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv" {
		t.Errorf("NamesOf: %s", got)
	}
	var ops []string
	for op := coll.RedOp(0); op < coll.NumRedOps; op++ {
		ops = append(ops, OpName(op))
	}
	if got := strings.Join(ops, " "); got != "sum prod max min avg mulsum" { // nccl-tests' test_opnames
		t.Errorf("OpName: %s", got)
	}
	for a := 0; a <= 3; a++ {
		if v, err := AverageOf(a); err != nil || v.Flag() != a {
			t.Errorf("AverageOf(%d) = %v, %v", a, v, err)
		}
	}
	if _, err := AverageOf(4); err == nil {
		t.Errorf("-a 4 accepted")
	}
}
