package engine

import (
	"encoding/binary"
	"math"
	"sync"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/cuda"
	"github.com/simccl/simccl/planner"
)

// TestGroupLaunchOneThread: a process-wide group with calls for every rank of a clique is
// launched by launchTogether (one thread, no rendezvous) and gives the right sums; the same calls
// made by one goroutine per rank take the per-rank path. Runs on the emulator without a GPU (the
// package's TestMain initialises the driver or the emulator).
func TestGroupLaunchOneThread(t *testing.T) {
	n, err := cuda.DeviceCount()
	if err != nil || n == 0 {
		t.Skip("no device")
	}
	const ranks, count = 3, 70001
	devs := make([]*cuda.Device, ranks)
	for r := range devs {
		if devs[r], err = cuda.Open(r % n); err != nil {
			t.Fatal(err)
		}
		defer devs[r].Close()
	}
	var st planner.Settings
	st.Tuning.MinNChannels, st.Tuning.BuffSize = 2, coll.NCCLSteps*4096
	m, err := planner.CPUMachine(ranks, 1, st)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.New(m)
	if err != nil {
		t.Fatal(err)
	}
	comms, err := InitAll(devs, &Config{ShareGPUs: true, SlotBytes: 4096, Planner: p})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			_ = c.Destroy()
		}
	}()
	bufs := make([]cuda.DevPtr, ranks)
	streams := make([]cuda.Stream, ranks)
	for r, c := range comms {
		in := make([]byte, 4*count)
		for i := 0; i < count; i++ {
			binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(float32(r+i%5)))
		}
		err := c.dev.Do(func(x *cuda.Ctx) error {
			var err error
			if bufs[r], err = x.Alloc(4 * count); err != nil {
				return err
			}
			if streams[r], err = x.NewStream(); err != nil {
				return err
			}
			return x.CopyHtoD(bufs[r], in)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(round int) {
		t.Helper()
		// After `round` in-place all-reduces, element i is (sum of r + i%5 over ranks) × ranks^(round-1).
		for r, c := range comms {
			out := make([]byte, 4*count)
			if err := c.dev.Do(func(x *cuda.Ctx) error {
				if err := x.StreamSync(streams[r]); err != nil {
					return err
				}
				return x.CopyDtoH(out, bufs[r])
			}); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < count; i++ {
				want := 0.0
				for q := 0; q < ranks; q++ {
					want += float64(q + i%5)
				}
				want *= math.Pow(ranks, float64(round-1))
				if got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])); float64(got) != want {
					t.Fatalf("round %d rank %d [%d] = %v, want %v", round, r, i, got, want)
				}
			}
		}
	}
	// groupAllReduce makes every rank's in-place all-reduce in one process-wide group and checks
	// that launchTogether took it (the want-th launch since the start).
	before := togetherLaunches.Load()
	groupAllReduce := func(want int64) {
		t.Helper()
		GroupStart()
		for r, c := range comms {
			if err := c.AllReduce(bufs[r], bufs[r], count, coll.Float32, coll.Sum, streams[r]); err != nil {
				t.Fatal(err)
			}
		}
		if err := GroupEnd(); err != nil {
			t.Fatal(err)
		}
		if got := togetherLaunches.Load() - before; got != want {
			t.Fatalf("launchTogether took %d launches, want %d", got, want)
		}
	}
	groupAllReduce(1)
	check(1)
	// Goroutine per rank: the per-rank path.
	var wg sync.WaitGroup
	errs := make([]error, ranks)
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = c.AllReduce(bufs[r], bufs[r], count, coll.Float32, coll.Sum, streams[r])
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if got := togetherLaunches.Load() - before; got != 1 {
		t.Fatalf("per-rank calls went through launchTogether")
	}
	check(2)
	// Back to the group: the launch counts still agree, so the one-thread path is taken again.
	groupAllReduce(2)
	check(3)
	for r, c := range comms {
		_ = c.dev.Do(func(x *cuda.Ctx) error { _ = x.Free(bufs[r]); return x.DestroyStream(streams[r]) })
	}
}
