package engine_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/coll/colltest"
	"github.com/simccl/simccl/cuda"
	"github.com/simccl/simccl/cuda/engine"
	"github.com/simccl/simccl/planner"
)

// memBoot is an in-memory Bootstrap for n goroutine "processes".
type memBoot struct {
	n    int
	mu   sync.Mutex
	cond *sync.Cond
	gen  int
	got  [][]byte
	cnt  int
	last [][]byte
}

func newMemBoot(n int) *memBoot {
	b := &memBoot{n: n, got: make([][]byte, n)}
	b.cond = sync.NewCond(&b.mu)
	return b
}

type rankBoot struct {
	b    *memBoot
	rank int
}

func (r rankBoot) AllGather(data []byte) ([][]byte, error) {
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	gen := b.gen
	b.got[r.rank] = append([]byte(nil), data...)
	b.cnt++
	if b.cnt == b.n {
		b.last, b.got, b.cnt = b.got, make([][]byte, b.n), 0
		b.gen++
		b.cond.Broadcast()
	}
	deadline := time.Now().Add(30 * time.Second)
	for b.gen == gen {
		if time.Now().After(deadline) {
			return nil, errors.New("memBoot: timeout")
		}
		b.cond.Wait()
	}
	return b.last, nil
}

func (r rankBoot) Barrier() error { _, err := r.AllGather(nil); return err }

var segSeq int

// initRanks makes n communicators as n processes would (InitRank, each with its own mapping of
// the segment), on devices devs[:n], in dir.
func initRanks(t testing.TB, n int, cfg engine.Config) ([]*engine.Comm, error) {
	if cfg.Planner == nil {
		var s planner.Settings
		s.Tuning.MinNChannels = 2
		if cfg.SlotBytes > 0 {
			s.Tuning.BuffSize = int64(coll.NCCLSteps * cfg.SlotBytes)
		}
		m, err := planner.CPUMachine(n, 1, s)
		if err != nil {
			return nil, err
		}
		if cfg.Planner, err = planner.New(m); err != nil {
			return nil, err
		}
	}
	if shared {
		cfg.ShareGPUs = true
	}
	segSeq++
	name := fmt.Sprintf("simccl-xproc-test-%d", segSeq)
	dir := t.TempDir()
	b := newMemBoot(n)
	comms := make([]*engine.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = engine.InitRank(devs[r], r, n, rankBoot{b, r}, dir, name, &cfg)
		}()
	}
	wg.Wait()
	return comms, errors.Join(errs...)
}

func TestInitRankConformance(t *testing.T) {
	needDevs(t, 2)
	m := colltest.Matrix{
		TypeOps: map[coll.DataType][]coll.RedOp{
			coll.Float32:  colltest.AllOps,
			coll.Int32:    {coll.Sum, coll.Avg, coll.Max},
			coll.Bfloat16: {coll.Sum},
		},
		Counts: []int{1, 13, 1031},
	}
	long := colltest.Matrix{Counts: []int{1, 13, 1031, 4099}}
	most := min(len(devs), 4)
	if emulated && !colltest.Long() {
		most = 3
	}
	for n := 2; n <= most; n++ {
		m.Ranks = append(m.Ranks, n)
		long.Ranks = append(long.Ranks, n)
	}
	m.Name, long.Name = "xproc", "xproc"
	cfg := engine.Config{SlotBytes: 512, Timeout: 30 * time.Second}
	ex := colltest.ExecutorFunc(func(n int) (colltest.World, error) {
		comms, err := initRanks(t, n, cfg)
		if err != nil {
			return nil, err
		}
		return &engineWorld{comms: comms, premul: map[float64][]coll.RedOp{}}, nil
	})
	before := engine.LLSteps()
	colltest.Run(t, ex, colltest.Options{Matrix: []colltest.Matrix{m}, Long: []colltest.Matrix{long},
		MaxRanks: len(devs), Skip: colltest.SkipInPlaceP2P})
	// NCCL's tuning runs the small counts as LL: their lines cross processes in the LL buffers
	// published beside the Simple staging.
	if got := engine.LLSteps() - before; got == 0 {
		t.Error("no LL step ran across processes")
	} else {
		t.Logf("%d LL steps", got)
	}
}

// TestInitRankAbort: a rank that aborts makes the others' pending launch fail with ErrPeerGone
// promptly (not after the timeout), and their GetAsyncError report it.
func TestInitRankAbort(t *testing.T) {
	needDevs(t, 2)
	comms, err := initRanks(t, 2, engine.Config{SlotBytes: 512, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	d := comms[1].Device()
	s, err := newStream(d)
	if err != nil {
		t.Fatal(err)
	}
	p, err := upload(d, make([]byte, 64))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	t0 := time.Now()
	go func() { done <- comms[1].AllReduce(p, p, 16, coll.Float32, coll.Sum, s) }()
	time.Sleep(100 * time.Millisecond)
	if err := comms[0].Abort(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, engine.ErrPeerGone) {
			t.Fatalf("rank 1's AllReduce after rank 0 aborted: %v, want ErrPeerGone", err)
		}
		t.Logf("rank 1 failed after %v: %v", time.Since(t0).Round(time.Millisecond), err)
	case <-time.After(10 * time.Second):
		t.Fatal("rank 1's AllReduce still waiting 10 s after rank 0 aborted")
	}
	if err := comms[1].GetAsyncError(); !errors.Is(err, engine.ErrPeerGone) {
		t.Fatalf("GetAsyncError: %v", err)
	}
	_ = d.Do(func(x *cuda.Ctx) error { _ = x.Free(p); return x.DestroyStream(s) })
	for _, c := range comms {
		_ = c.Destroy()
	}
}

// TestInitRankBadCalls: bad arguments and a segment that already exists (O_EXCL) fail at init.
func TestInitRankBadCalls(t *testing.T) {
	needDevs(t, 1)
	cfg := engine.Config{SlotBytes: 512, Planner: cpuPlanner(t, 2, 512)}
	b := rankBoot{newMemBoot(1), 0}
	for _, bad := range []struct {
		rank, n int
		name    string
	}{{2, 2, "x"}, {-1, 2, "x"}, {0, 2, ""}, {0, 2, "../x"}, {0, 3, "x"}} {
		if _, err := engine.InitRank(devs[0], bad.rank, bad.n, b, t.TempDir(), bad.name, &cfg); !errors.Is(err, engine.ErrInvalidArgument) {
			t.Errorf("InitRank(rank %d of %d, %q): %v, want ErrInvalidArgument", bad.rank, bad.n, bad.name, err)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "taken"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Planner = cpuPlanner(t, 1, 512)
	if _, err := engine.InitRank(devs[0], 0, 1, b, dir, "taken", &cfg); err == nil {
		t.Fatal("InitRank over an existing segment file succeeded")
	}
}

// TestInitRankFailedLaunch: a rank whose part of a launch fails after the rendezvous (here its
// stream is not a stream) tells the other processes, whose launch then fails with ErrPeerGone
// promptly instead of waiting for its steps until Config.Timeout. (With one process per rank a
// peer cannot see the failing rank's Go state: before, the others waited the whole timeout.)
func TestInitRankFailedLaunch(t *testing.T) {
	needDevs(t, 2)
	if !emulated {
		t.Skip("the failure is injected with a stream handle that is not a stream, safe only on the emulated driver")
	}
	comms, err := initRanks(t, 2, engine.Config{SlotBytes: 512, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]cuda.DevPtr, 2)
	ss := make([]cuda.Stream, 2)
	for r, c := range comms {
		if ps[r], err = upload(c.Device(), make([]byte, 4096)); err != nil {
			t.Fatal(err)
		}
		if ss[r], err = newStream(c.Device()); err != nil {
			t.Fatal(err)
		}
	}
	bogus := ss[1] + 0x7fff0000
	errs := make([]error, 2)
	t0 := time.Now()
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := ss[r]
			if r == 1 {
				s = bogus
			}
			errs[r] = c.AllReduce(ps[r], ps[r], 1024, coll.Float32, coll.Sum, s)
		}()
	}
	wg.Wait()
	took := time.Since(t0)
	if errs[1] == nil || errors.Is(errs[1], engine.ErrPeerGone) {
		t.Fatalf("rank 1's AllReduce on a bogus stream: %v, want its own failure", errs[1])
	}
	if !errors.Is(errs[0], engine.ErrPeerGone) {
		t.Fatalf("rank 0's AllReduce while rank 1's part failed: %v, want ErrPeerGone", errs[0])
	}
	if took > 10*time.Second {
		t.Fatalf("rank 0 failed after %v, want well within the 1 min timeout", took)
	}
	t.Logf("rank 1: %v; rank 0 after %v: %v", errs[1], took.Round(time.Millisecond), errs[0])
	for r, c := range comms {
		if err := c.GetAsyncError(); err == nil {
			t.Errorf("rank %d's GetAsyncError after the failed launch: nil", r)
		}
		_ = c.Device().Do(func(x *cuda.Ctx) error { _ = x.Free(ps[r]); return x.DestroyStream(ss[r]) })
		_ = c.Destroy()
	}
}

// TestInitRankRefusesCapture: with the ranks in several processes, a launch on a stream that is
// capturing into a CUDA graph fails on every rank with ErrNotSupported at once (the steps' events
// are interprocess, which a capture cannot record: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED on
// H200), before the rendezvous, so the communicator stays usable: the next launch, not captured,
// gives the right sum. On the emulator the streams are marked capturing; on GPUs they capture.
func TestInitRankRefusesCapture(t *testing.T) {
	needDevs(t, 2)
	comms, err := initRanks(t, 2, engine.Config{SlotBytes: 512, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	const count = 1024
	ps := make([]cuda.DevPtr, 2)
	ss := make([]cuda.Stream, 2)
	for r, c := range comms {
		b := make([]byte, 4*count)
		for i := 0; i < count; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(r+1)))
		}
		if ps[r], err = upload(c.Device(), b); err != nil {
			t.Fatal(err)
		}
		if ss[r], err = newStream(c.Device()); err != nil {
			t.Fatal(err)
		}
	}
	capture := func(r int, on bool) error {
		if emulated {
			return cuda.EmulatorSetCapturing(ss[r], on)
		}
		return comms[r].Device().Do(func(x *cuda.Ctx) error {
			if on {
				return x.BeginCapture(ss[r], cuda.CaptureRelaxed)
			}
			g, err := x.EndCapture(ss[r])
			if err != nil {
				return err
			}
			return x.DestroyGraph(g)
		})
	}
	allReduce := func() []error {
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for r, c := range comms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[r] = c.AllReduce(ps[r], ps[r], count, coll.Float32, coll.Sum, ss[r])
			}()
		}
		wg.Wait()
		return errs
	}
	for r := range comms {
		if err := capture(r, true); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	errs := allReduce()
	took := time.Since(t0)
	for r, err := range errs {
		if !errors.Is(err, engine.ErrNotSupported) {
			t.Errorf("rank %d's AllReduce while capturing: %v, want ErrNotSupported", r, err)
		}
		if err := capture(r, false); err != nil {
			t.Fatal(err)
		}
	}
	if took > 5*time.Second {
		t.Errorf("the refusal took %v", took)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("refused in %v: %v", took.Round(time.Microsecond), errs[0])
	for r, err := range allReduce() {
		if err != nil {
			t.Fatalf("rank %d's AllReduce after the refused capture: %v", r, err)
		}
	}
	for r, c := range comms {
		if err := c.GetAsyncError(); err != nil {
			t.Errorf("rank %d's GetAsyncError: %v", r, err)
		}
		b, err := download(c.Device(), ps[r], 4*count, ss[r])
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < count; i++ {
			if g := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])); g != 3 {
				t.Fatalf("rank %d [%d] = %v after the uncaptured AllReduce, want 3", r, i, g)
			}
		}
		_ = c.Device().Do(func(x *cuda.Ctx) error { _ = x.Free(ps[r]); return x.DestroyStream(ss[r]) })
		_ = c.Destroy()
	}
}

// TestInitRankConformanceLL128 is TestInitRankConformance under NCCL_PROTO=LL,LL128: LL for the
// small counts and LL128 for the large ones on the same connections, their lines crossing
// processes in the LL and LL128 buffers published side by side.
func TestInitRankConformanceLL128(t *testing.T) {
	needDevs(t, 2)
	m := colltest.Matrix{
		TypeOps: map[coll.DataType][]coll.RedOp{coll.Float32: colltest.AllOps, coll.Int32: {coll.Avg}, coll.Float16: {coll.Sum}},
		Counts:  []int{1, 13, 200003},
		// the collectives (point-to-point never runs LL128; a 200003-element all-to-all on 512-byte
		// Simple slots has more steps than a program may across processes)
		Funcs: []coll.Func{coll.AllReduce, coll.Reduce, coll.ReduceScatter, coll.Broadcast, coll.AllGather},
	}
	for n := 2; n <= min(len(devs), 3); n++ {
		m.Ranks = append(m.Ranks, n)
	}
	m.Name = "xprocLL128"
	ex := colltest.ExecutorFunc(func(n int) (colltest.World, error) {
		var s planner.Settings
		s.Tuning.MinNChannels, s.Tuning.Proto, s.Tuning.BuffSize = 2, "LL,LL128", coll.NCCLSteps*512
		mach, err := planner.CPUMachine(n, 1, s)
		if err != nil {
			return nil, err
		}
		p, err := planner.New(mach)
		if err != nil {
			return nil, err
		}
		comms, err := initRanks(t, n, engine.Config{Planner: p, SlotBytes: 512, Timeout: 30 * time.Second})
		if err != nil {
			return nil, err
		}
		return &engineWorld{comms: comms, premul: map[float64][]coll.RedOp{}}, nil
	})
	before, before128 := engine.LLSteps(), engine.LL128Steps()
	colltest.Run(t, ex, colltest.Options{Matrix: []colltest.Matrix{m}, MaxRanks: len(devs), Skip: colltest.SkipInPlaceP2P})
	ll128 := engine.LL128Steps() - before128
	ll := engine.LLSteps() - before - ll128 // LLSteps counts both
	if ll == 0 || ll128 == 0 {
		t.Errorf("LL steps %d, LL128 steps %d across processes: want both", ll, ll128)
	} else {
		t.Logf("%d LL steps, %d LL128 steps", ll, ll128)
	}
}
