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
	if !emulated {
		// CUDA refuses to open a process's own IPC handles (cuIpcOpenMemHandle:
		// CUDA_ERROR_INVALID_CONTEXT, seen on 2 H200): on GPUs these ranks must be processes,
		// which testdata/dropin's nccl_check.py and torch_check.py run.
		t.Skip("InitRank's ranks in one process need the emulated driver")
	}
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

// protoPlanner plans for n ranks of planner.CPUMachine under NCCL_PROTO=proto, at least minCh
// channels and 512-byte slots (NCCL_BUFFSIZE = NCCL_STEPS × 512).
func protoPlanner(n, minCh int, proto string) (coll.Planner, error) {
	var s planner.Settings
	s.Tuning.MinNChannels, s.Tuning.Proto, s.Tuning.BuffSize = minCh, proto, coll.NCCLSteps*512
	mach, err := planner.CPUMachine(n, 1, s)
	if err != nil {
		return nil, err
	}
	return planner.New(mach)
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

// TestInitRankConformanceFlags: the conformance kit with every launch ordered by device flags
// (Config.DeviceFlags, what a launch on a capturing stream uses), under NCCL_PROTO=Simple (whose
// messages wait on ready flags; 4099 elements on 512-byte slots reuse slots under credits) and
// NCCL_PROTO=LL,LL128 (line flags, credits): no step waits on another rank's event.
func TestInitRankConformanceFlags(t *testing.T) {
	needDevs(t, 2)
	before := cuda.EmulatorCrossDeviceWaits()
	for _, proto := range []string{"Simple", "LL,LL128"} {
		m := colltest.Matrix{
			Name: "xprocFlags" + proto,
			TypeOps: map[coll.DataType][]coll.RedOp{
				coll.Float32: colltest.AllOps,
				coll.Int32:   {coll.Sum, coll.Avg},
			},
			Counts: []int{1, 13, 4099},
		}
		for n := 2; n <= min(len(devs), 3); n++ {
			m.Ranks = append(m.Ranks, n)
		}
		ex := colltest.ExecutorFunc(func(n int) (colltest.World, error) {
			p, err := protoPlanner(n, 2, proto)
			if err != nil {
				return nil, err
			}
			comms, err := initRanks(t, n, engine.Config{Planner: p, SlotBytes: 512, Timeout: 30 * time.Second, DeviceFlags: true})
			if err != nil {
				return nil, err
			}
			return &engineWorld{comms: comms, premul: map[float64][]coll.RedOp{}}, nil
		})
		colltest.Run(t, ex, colltest.Options{Matrix: []colltest.Matrix{m}, MaxRanks: len(devs), Skip: colltest.SkipInPlaceP2P})
	}
	if emulated {
		if got := cuda.EmulatorCrossDeviceWaits() - before; got != 0 {
			t.Errorf("%d waits on another device's event in flag mode", got)
		}
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

// TestInitRankCapture: with the ranks in several processes, each rank captures its calls into
// its own CUDA graph (as PyTorch's torch.cuda.graph does in every process) and replays it; the
// launches are ordered by device flags (flags.go), which a capture records and each replay runs
// again. Captured: a Simple all-reduce that reuses staging slots under credits (70001 floats on
// 512-byte slots) and a small LL one. Five replays with new inputs give the right sums. On the
// emulator, which records no graph, the streams are marked capturing and the calls run as they
// are enqueued, ordered by flags alone (no wait on another device's event). A launch that one
// rank captures and another does not fails on both with ErrMismatch.
func TestInitRankCapture(t *testing.T) {
	needDevs(t, 2)
	n := 2
	comms, err := initRanks(t, n, engine.Config{SlotBytes: 512, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	counts := []int{70001, 13}
	type bufs struct{ x, y []cuda.DevPtr }
	bs := make([]bufs, n)
	ss := make([]cuda.Stream, n)
	for r, c := range comms {
		for _, cnt := range counts {
			x, err := upload(c.Device(), make([]byte, 4*cnt))
			if err != nil {
				t.Fatal(err)
			}
			y, err := upload(c.Device(), make([]byte, 4*cnt))
			if err != nil {
				t.Fatal(err)
			}
			bs[r].x, bs[r].y = append(bs[r].x, x), append(bs[r].y, y)
		}
		if ss[r], err = newStream(c.Device()); err != nil {
			t.Fatal(err)
		}
	}
	fill := func(r int, v float32) {
		for i, cnt := range counts {
			b := make([]byte, 4*cnt)
			for j := 0; j < cnt; j++ {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(v+float32(j%5)))
			}
			if err := comms[r].Device().Do(func(x *cuda.Ctx) error { return x.CopyHtoD(bs[r].x[i], b) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(r int, want func(j int) float32, what string) {
		for i, cnt := range counts {
			b, err := download(comms[r].Device(), bs[r].y[i], 4*cnt, ss[r])
			if err != nil {
				t.Fatal(err)
			}
			for j := 0; j < cnt; j++ {
				if g := math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:])); g != want(j) {
					t.Fatalf("%s: rank %d, %d floats, [%d] = %v, want %v", what, r, cnt, j, g, want(j))
				}
			}
		}
	}
	calls := func(ranks []int) []error {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for _, r := range ranks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i, cnt := range counts {
					if err := comms[r].AllReduce(bs[r].x[i], bs[r].y[i], cnt, coll.Float32, coll.Sum, ss[r]); err != nil {
						errs[r] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		return errs
	}
	all := []int{0, 1}
	sum := func(it int) func(j int) float32 {
		return func(j int) float32 { return float32(2*it+1) + 2*float32(j%5) } // (it+0) + (it+1)
	}
	crossBefore := cuda.EmulatorCrossDeviceWaits()
	if emulated {
		for r := range comms {
			fill(r, float32(r))
			if err := cuda.EmulatorSetCapturing(ss[r], true); err != nil {
				t.Fatal(err)
			}
		}
		for r, err := range calls(all) {
			if err != nil {
				t.Fatalf("rank %d, capturing: %v", r, err)
			}
		}
		for r := range comms {
			check(r, sum(0), "flag-ordered launch")
		}
		if got := cuda.EmulatorCrossDeviceWaits() - crossBefore; got != 0 {
			t.Errorf("%d waits on another device's event while capturing", got)
		}
		// Rank 1 not capturing: both fail at the rendezvous.
		if err := cuda.EmulatorSetCapturing(ss[1], false); err != nil {
			t.Fatal(err)
		}
		for r, err := range calls(all) {
			if !errors.Is(err, engine.ErrMismatch) {
				t.Errorf("rank %d, only rank 0 capturing: %v, want ErrMismatch", r, err)
			}
		}
	} else {
		graphs := make([]cuda.GraphExec, n)
		for r, c := range comms {
			if err := c.Device().Do(func(x *cuda.Ctx) error { return x.BeginCapture(ss[r], cuda.CaptureRelaxed) }); err != nil {
				t.Fatal(err)
			}
		}
		errs := calls(all)
		for r, c := range comms {
			err := c.Device().Do(func(x *cuda.Ctx) error {
				g, err := x.EndCapture(ss[r])
				if err != nil {
					return err
				}
				defer x.DestroyGraph(g)
				graphs[r], err = x.Instantiate(g)
				return err
			})
			if errs[r] != nil || err != nil {
				t.Fatalf("rank %d: capture: %v, %v", r, errs[r], err)
			}
		}
		for it := 0; it < 5; it++ {
			for r := range comms {
				fill(r, float32(it+r))
			}
			for r, c := range comms {
				if err := c.Device().Do(func(x *cuda.Ctx) error { return x.LaunchGraph(graphs[r], ss[r]) }); err != nil {
					t.Fatal(err)
				}
			}
			for r := range comms {
				check(r, sum(it), fmt.Sprintf("replay %d", it))
			}
		}
		for r, c := range comms {
			_ = c.Device().Do(func(x *cuda.Ctx) error { return x.DestroyGraphExec(graphs[r]) })
		}
		// Not captured afterwards: interprocess events again, same communicator.
		for r := range comms {
			fill(r, float32(7+r))
		}
		for r, err := range calls(all) {
			if err != nil {
				t.Fatalf("rank %d, after the graphs: %v", r, err)
			}
		}
		for r := range comms {
			check(r, sum(7), "after the graphs")
		}
	}
	for r, c := range comms {
		_ = c.Device().Do(func(x *cuda.Ctx) error {
			for i := range counts {
				_ = x.Free(bs[r].x[i])
				_ = x.Free(bs[r].y[i])
			}
			return x.DestroyStream(ss[r])
		})
		_ = c.Destroy()
	}
}

// eachRank runs fn for every rank at once (as its own process would), reports each rank's error
// and destroys the communicators.
func eachRank(t *testing.T, comms []*engine.Comm, fn func(r int, c *engine.Comm) error) {
	t.Helper()
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(r, c)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	for _, c := range comms {
		_ = c.Destroy()
	}
}

// TestInitRankBackToBackFlags chains flag-ordered launches across processes without
// synchronizing between them (TestBackToBack's a → b, b → a): only the end-of-launch barrier
// keeps a rank from reusing staging slots and flags a peer still needs.
func TestInitRankBackToBackFlags(t *testing.T) {
	const iters, count = 8, 2053
	needDevs(t, 2)
	if emulated {
		defer cuda.SetEmulatorJitter(cuda.SetEmulatorJitter(300 * time.Microsecond))
	}
	n := min(3, len(devs))
	comms, err := initRanks(t, n, engine.Config{SlotBytes: 512, Timeout: time.Minute, DeviceFlags: true})
	if err != nil {
		t.Fatal(err)
	}
	eachRank(t, comms, func(r int, c *engine.Comm) error {
		in := make([]byte, 4*count)
		for i := 0; i < count; i++ {
			coll.Float32.SetValue(in, i, float64(i%7+r))
		}
		a, err := upload(c.Device(), in)
		if err != nil {
			return err
		}
		b, err := upload(c.Device(), in)
		if err != nil {
			return err
		}
		s, err := newStream(c.Device())
		if err != nil {
			return err
		}
		defer c.Device().Do(func(x *cuda.Ctx) error { _ = x.Free(a); _ = x.Free(b); return x.DestroyStream(s) })
		for it := 0; it < iters; it++ {
			src, dst := a, b
			if it%2 == 1 {
				src, dst = b, a
			}
			if err := c.AllReduce(src, dst, count, coll.Float32, coll.Sum, s); err != nil {
				return err
			}
		}
		got, err := download(c.Device(), a, 4*count, s)
		if err != nil {
			return err
		}
		for i := 0; i < count; i++ {
			sum := 0.0
			for q := 0; q < n; q++ {
				sum += float64(i%7 + q)
			}
			want := sum * math.Pow(float64(n), iters-1)
			if g := coll.Float32.Value(got, i); g != want {
				return fmt.Errorf("element %d: %v, want %v", i, g, want)
			}
		}
		return nil
	})
}

// TestInitRankBroadcastChainFlags: back-to-back flag-ordered broadcasts from rank 0, each from
// its own source into its own destination, without synchronizing: the root depends on no one but
// its credits, so without the end-of-launch barrier its next launch would write the slots (and
// raise the ready flags) of messages a receiver has not yet read.
func TestInitRankBroadcastChainFlags(t *testing.T) {
	const iters, count = 12, 2053
	needDevs(t, 2)
	if emulated {
		defer cuda.SetEmulatorJitter(cuda.SetEmulatorJitter(300 * time.Microsecond))
	}
	n := min(3, len(devs))
	for _, proto := range []string{"Simple", "LL"} {
		p, err := protoPlanner(n, 1, proto)
		if err != nil {
			t.Fatal(err)
		}
		comms, err := initRanks(t, n, engine.Config{Planner: p, SlotBytes: 512, Timeout: time.Minute, DeviceFlags: true})
		if err != nil {
			t.Fatal(err)
		}
		eachRank(t, comms, func(r int, c *engine.Comm) error {
			s, err := newStream(c.Device())
			if err != nil {
				return err
			}
			bufs := make([]cuda.DevPtr, iters)
			for it := range bufs {
				in := make([]byte, 4*count)
				if r == 0 {
					for i := 0; i < count; i++ {
						coll.Float32.SetValue(in, i, float64(1000*it+i%97))
					}
				}
				if bufs[it], err = upload(c.Device(), in); err != nil {
					return err
				}
			}
			for it := 0; it < iters; it++ {
				if err := c.Broadcast(bufs[it], bufs[it], count, coll.Float32, 0, s); err != nil {
					return err
				}
			}
			for it := range bufs {
				got, err := download(c.Device(), bufs[it], 4*count, s)
				if err != nil {
					return err
				}
				for i := 0; i < count; i++ {
					if g, want := coll.Float32.Value(got, i), float64(1000*it+i%97); g != want {
						return fmt.Errorf("%s broadcast %d element %d: %v, want %v", proto, it, i, g, want)
					}
				}
			}
			return nil
		})
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
		p, err := protoPlanner(n, 2, "LL,LL128")
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

// TestInitRankAbortReleasesFlags: a stream waiting on a device flag that no peer will raise (as a
// graph replay whose peer died) completes once the rank aborts. Not under -race: the release is a
// memset, which the emulator does not order against the flag's atomic polls.
func TestInitRankAbortReleasesFlags(t *testing.T) {
	needDevs(t, 2)
	if raceOn {
		t.Skip("the release is a plain memset racing the emulated flag poll")
	}
	comms, err := initRanks(t, 2, engine.Config{SlotBytes: 512, Timeout: time.Minute, DeviceFlags: true})
	if err != nil {
		t.Fatal(err)
	}
	d := comms[0].Device()
	s, err := newStream(d)
	if err != nil {
		t.Fatal(err)
	}
	flag := cuda.DevPtr(comms[0].FlagArea()) // the done word of rank 0's barrier: only rank 1 writes it
	if err := d.Do(func(x *cuda.Ctx) error { return x.WaitFlag(s, flag, 1) }); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	// as a user's thread would wait, not on the device's thread
	go func() { done <- d.OnThisThread(func(x *cuda.Ctx) error { return x.StreamSync(s) }) }()
	select {
	case err := <-done:
		t.Fatalf("the stream passed a flag nobody raised: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := comms[0].Abort(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream still waits 10 s after Abort")
	}
	for _, c := range comms {
		_ = c.Destroy()
	}
}
