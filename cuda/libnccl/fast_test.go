package main

import (
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/cuda"
)

// TestFastPath runs fast.c's one-rank path on the emulated driver (its copies come back to the
// engine there) and checks the data: a call alone, a group whose second call reads the first
// one's output (held calls keep their order), a nested group, and a group that a PreMulSum call
// (Go's path) hands to Go's group halfway (the held call, the PreMulSum and the call after it all
// run; calls of one group launched by Go run as one schedule, so they do not read each other's
// output), then a communicator taken off the C path (SIMCCL_NCCL_FAST=0): the same results
// through Go.
func TestFastPath(t *testing.T) {
	t.Setenv("SIMCCL_CUDA_EMULATE", "1")
	for _, fast := range []bool{true, false} {
		if !fast {
			t.Setenv("SIMCCL_NCCL_FAST", "0")
		}
		cs, err := initAll([]int{0})
		if err != nil {
			t.Fatal(err)
		}
		c := cs[0]
		h := newHandle(c)
		if fastOn(h) != fast {
			t.Fatalf("fast path on: %v, want %v", fastOn(h), fast)
		}
		const n = 1031
		var bufs [8]cuda.DevPtr
		in := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			coll.Float32.SetValue(in, i, float64(i%97)-13)
		}
		err = c.dev.Do(func(x *cuda.Ctx) error {
			for i := range bufs {
				var err error
				if bufs[i], err = x.Alloc(4 * n); err != nil {
					return err
				}
				if err := x.Memset(bufs[i], 0xa5, 4*n); err != nil {
					return err
				}
			}
			return x.CopyHtoD(bufs[0], in)
		})
		if err != nil {
			t.Fatal(err)
		}
		a, b, d, e, f, g, k, m := bufs[0], bufs[1], bufs[2], bufs[3], bufs[4], bufs[5], bufs[6], bufs[7]
		f32, sum := int(coll.Float32), int(coll.Sum)
		check := func(what string, r result, p cuda.DevPtr, scale float64) {
			t.Helper()
			if r != ncclSuccess {
				t.Fatalf("fast %v: %s: result %d (%s)", fast, what, r, lastError())
			}
			got := make([]byte, 4*n)
			if err := c.dev.Do(func(x *cuda.Ctx) error { return x.CopyDtoH(got, p) }); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				if v, want := coll.Float32.Value(got, i), scale*(float64(i%97)-13); v != want {
					t.Fatalf("fast %v: %s: element %d: %v, want %v", fast, what, i, v, want)
				}
			}
		}
		check("alone", cAllReduce(a, b, n, f32, sum, h), b, 1)
		cGroupStart()
		r := cAllGather(b, d, n, f32, h)
		if r == ncclSuccess {
			r = cReduceScatter(d, e, n, f32, sum, h) // reads d, written by the call before
		}
		if r == ncclSuccess {
			r = cGroupEnd()
		}
		check("group in order", r, e, 1)
		cGroupStart()
		cGroupStart()
		r = cAllReduce(e, f, n, f32, sum, h)
		if r == ncclSuccess {
			r = cGroupEnd()
		}
		if r == ncclSuccess {
			r = cGroupEnd()
		}
		check("nested group", r, f, 1)
		op := c.e.RedOpCreatePreMulSum(2)
		cGroupStart()
		r = cAllReduce(f, g, n, f32, sum, h)
		if r == ncclSuccess {
			r = cAllReduce(a, k, n, f32, int(op), h) // Go's path: the group goes to Go, the held call first
		}
		if r == ncclSuccess {
			r = cAllReduce(a, m, n, f32, sum, h) // to Go's group as well
		}
		if r == ncclSuccess {
			r = cGroupEnd()
		}
		check("group handed to Go: the held call", r, g, 1)
		check("group handed to Go: PreMulSum", r, k, 2)
		check("group handed to Go: the call after", r, m, 1)
		if r := cGroupEnd(); r == ncclSuccess {
			t.Fatal("ncclGroupEnd without ncclGroupStart succeeded")
		}
		if r := cAllReduce(a, b, n, 99, sum, h); r != ncclInvalidArgument {
			t.Fatalf("bad data type: %d, want ncclInvalidArgument", r)
		}
		_ = c.dev.Do(func(x *cuda.Ctx) error {
			for _, p := range bufs {
				_ = x.Free(p)
			}
			return nil
		})
		if err := c.destroy(); err != nil {
			t.Fatal(err)
		}
		drop(h)
	}
}
