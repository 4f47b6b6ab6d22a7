package engine_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/cuda"
	"github.com/simccl/simccl/cuda/engine"
)

// TestGraphCapture captures a group of collectives of every rank into one CUDA graph (Capture:
// every rank's stream in the capture sequence begun on rank 0's, forked and joined back by events)
// and replays it: the work must not run while it is captured, and every replay must give the
// results of the inputs it finds. Each case runs in a capture mode, with or without a launch of the same calls before
// the capture (the first launch of a shape creates the streams, events and staging buffers it
// needs).
//
// CUDA graphs are not emulated: the test runs where libcuda.so.1 is (GPU machines).
func TestGraphCapture(t *testing.T) {
	if emulated {
		t.Skip("CUDA graphs are not emulated (package cuda's emulator refuses them); this test runs on real GPUs")
	}
	for _, tc := range []struct {
		name string
		mode cuda.CaptureMode
		warm bool
	}{
		{"global/warm", cuda.CaptureGlobal, true},
		{"threadlocal/warm", cuda.CaptureThreadLocal, true},
		{"relaxed/warm", cuda.CaptureRelaxed, true},
		{"relaxed/cold", cuda.CaptureRelaxed, false},
		{"global/cold", cuda.CaptureGlobal, false},
	} {
		for _, n := range []int{2, 4} {
			t.Run(fmt.Sprintf("%s/n=%d", tc.name, n), func(t *testing.T) {
				captureCase(t, needDevs(t, n), tc.mode, tc.warm)
			})
		}
	}
}

// captureBufs is one rank's memory of a capture case: an all-reduce (send → ar) and an
// all-gather (send's first gcount elements → ag), float32.
type captureBufs struct {
	send, ar, ag cuda.DevPtr
	stream       cuda.Stream
}

func captureCase(t *testing.T, ds []*cuda.Device, mode cuda.CaptureMode, warm bool) {
	n := len(ds)
	const count = 1<<20 + 3 // 4 MiB of float32: several chunks on each of 2 channels
	const gcount = 1000
	comms, err := initAll(ds, &engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			_ = c.Destroy()
		}
	}()
	bufs := make([]captureBufs, n)
	for r, d := range ds {
		b := &bufs[r]
		err := d.Do(func(x *cuda.Ctx) error {
			var err error
			if b.send, err = x.Alloc(4 * count); err != nil {
				return err
			}
			if b.ar, err = x.Alloc(4 * count); err != nil {
				return err
			}
			if b.ag, err = x.Alloc(4 * gcount * n); err != nil {
				return err
			}
			b.stream, err = x.NewStream()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for r, d := range ds {
			b := &bufs[r]
			_ = d.Do(func(x *cuda.Ctx) error {
				_ = x.Free(b.send)
				_ = x.Free(b.ar)
				_ = x.Free(b.ag)
				return x.DestroyStream(b.stream)
			})
		}
	}()
	// input of rank r in round k, element i: small integers, so the float sums are exact.
	input := func(k, r, i int) float32 { return float32((i*3+r*5+k*7)%11 - 5) }
	setInputs := func(k int) {
		t.Helper()
		for r, d := range ds {
			in := make([]byte, 4*count)
			for i := 0; i < count; i++ {
				binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(input(k, r, i)))
			}
			if err := d.Do(func(x *cuda.Ctx) error { return x.CopyHtoD(bufs[r].send, in) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	// poison fills the outputs with NaN, which no correct result holds.
	poison := func() {
		t.Helper()
		for r, d := range ds {
			err := d.Do(func(x *cuda.Ctx) error {
				if err := x.Memset(bufs[r].ar, 0xff, 4*count); err != nil {
					return err
				}
				return x.Memset(bufs[r].ag, 0xff, 4*gcount*n)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// calls makes every rank's calls (one group per rank, one goroutine per rank).
	calls := func() {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, n)
		for r, c := range comms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b := &bufs[r]
				c.GroupStart()
				if err := c.AllReduce(b.send, b.ar, count, coll.Float32, coll.Sum, b.stream); err != nil {
					errs[r] = err
				}
				if err := c.AllGather(b.send, b.ag, gcount, coll.Float32, b.stream); err != nil && errs[r] == nil {
					errs[r] = err
				}
				if err := c.GroupEnd(); err != nil && errs[r] == nil {
					errs[r] = err
				}
			}()
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
	}
	// check compares every rank's outputs with round k's inputs (ok=false: expect the poison).
	check := func(k int, ran bool) {
		t.Helper()
		wrong := 0
		for r, d := range ds {
			ar, err := download(d, bufs[r].ar, 4*count, bufs[r].stream)
			if err != nil {
				t.Fatal(err)
			}
			ag, err := download(d, bufs[r].ag, 4*gcount*n, bufs[r].stream)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < count; i++ {
				got := math.Float32frombits(binary.LittleEndian.Uint32(ar[4*i:]))
				var want float32
				for q := 0; q < n; q++ {
					want += input(k, q, i)
				}
				if ran && got != want || !ran && !math.IsNaN(float64(got)) {
					if wrong++; wrong <= 5 {
						t.Errorf("round %d rank %d all-reduce[%d] = %g, want %g (ran %v)", k, r, i, got, want, ran)
					}
				}
			}
			for q := 0; q < n; q++ {
				for i := 0; i < gcount; i++ {
					got := math.Float32frombits(binary.LittleEndian.Uint32(ag[4*(q*gcount+i):]))
					if want := input(k, q, i); ran && got != want || !ran && !math.IsNaN(float64(got)) {
						if wrong++; wrong <= 5 {
							t.Errorf("round %d rank %d all-gather[%d] = %g, want %g (ran %v)", k, r, q*gcount+i, got, want, ran)
						}
					}
				}
			}
		}
		if wrong > 0 {
			t.Fatalf("round %d: %d wrong elements", k, wrong)
		}
	}

	if warm { // an ordinary launch of the same calls first
		setInputs(0)
		poison()
		calls()
		check(0, true)
	}

	// Capture (engine.Capture forks every rank's stream from rank 0's and joins them back). The
	// inputs and the poison go in first: synchronous copies are not allowed while a capture is open.
	setInputs(1)
	poison()
	d0, s0 := ds[0], bufs[0].stream
	streams := make([]cuda.Stream, n)
	for r := range streams {
		streams[r] = bufs[r].stream
	}
	exec, err := engine.Capture(comms, streams, mode, func() error { calls(); return nil })
	if err != nil {
		t.Fatalf("capture: %v", err)
	}
	defer d0.Do(func(x *cuda.Ctx) error { return x.DestroyGraphExec(exec) })
	check(1, false) // captured, not run

	// Replays, each with new inputs.
	for k := 1; k <= 3; k++ {
		setInputs(k)
		poison()
		if err := d0.Do(func(x *cuda.Ctx) error {
			if err := x.LaunchGraph(exec, s0); err != nil {
				return err
			}
			return x.StreamSync(s0)
		}); err != nil {
			t.Fatalf("replay %d: %v", k, err)
		}
		check(k, true)
	}
	// The communicators still work outside the graph afterwards.
	setInputs(4)
	poison()
	calls()
	check(4, true)
}

// TestCaptureArguments: Capture refuses mismatched streams, and on the emulator (no graphs) fails
// with one error before running fn.
func TestCaptureArguments(t *testing.T) {
	ds := needDevs(t, 2)
	comms, err := initAll(ds, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			_ = c.Destroy()
		}
	}()
	if _, err := engine.Capture(comms, []cuda.Stream{0}, cuda.CaptureGlobal, func() error { return nil }); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Errorf("one stream for two ranks: %v", err)
	}
	if !emulated {
		return
	}
	ran := false
	_, err = engine.Capture(comms, []cuda.Stream{0, 0}, cuda.CaptureGlobal, func() error { ran = true; return nil })
	if err == nil || ran || !strings.Contains(err.Error(), "graphs are not emulated") {
		t.Errorf("on the emulator: err %v, fn ran %v", err, ran)
	}
}
