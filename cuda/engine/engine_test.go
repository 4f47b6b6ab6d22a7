package engine_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/coll/colltest"
	"github.com/simccl/simccl/cuda"
	"github.com/simccl/simccl/cuda/engine"
	"github.com/simccl/simccl/planner"
)

// The tests run on real GPUs where libcuda.so.1 is present (up to 4 of them), else on the
// emulated driver with 4 devices: the same code, the same checks.

var (
	devs     []*cuda.Device
	emulated bool
	// shared: on a machine with fewer than 4 GPUs the tests open them again, round robin, up to
	// 4 ranks (Config.ShareGPUs), so that the multi-rank tests run on one real GPU; ranks on
	// distinct GPUs come first (devs[:n] for n up to the GPU count).
	shared bool
)

// initAll is engine.InitAll with ShareGPUs set when the tests share GPUs, and a planner when cfg
// has none (initAllAlgo).
func initAll(ds []*cuda.Device, cfg *engine.Config) ([]*engine.Comm, error) {
	return initAllAlgo(ds, cfg, "")
}

// cpuPlanner plans for n ranks described by planner.CPUMachine, with NCCL_BUFFSIZE of slot-byte
// slots (0: NCCL's default) and NCCL_MIN_NCHANNELS 2.
func cpuPlanner(t testing.TB, n, slot int) coll.Planner {
	t.Helper()
	var s planner.Settings
	s.Tuning.MinNChannels = 2
	if slot > 0 {
		s.Tuning.BuffSize = int64(coll.NCCLSteps * slot)
	}
	m, err := planner.CPUMachine(n, 1, s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// initAllAlgo is initAll whose planner, when cfg has none, plans with NCCL's rules on
// planner.CPUMachine's description of the ranks (GPUs straight under one CPU, as the emulator and
// shared GPUs are), under NCCL_ALGO algo, NCCL_BUFFSIZE of cfg's slots and NCCL_MIN_NCHANNELS 2.
func initAllAlgo(ds []*cuda.Device, cfg *engine.Config, algo string) ([]*engine.Comm, error) {
	return initAllTuned(ds, cfg, algo, "")
}

// initAllTuned is initAllAlgo under NCCL_PROTO proto as well ("": NCCL's choice).
func initAllTuned(ds []*cuda.Device, cfg *engine.Config, algo, proto string) ([]*engine.Comm, error) {
	c := engine.Config{}
	if cfg != nil {
		c = *cfg
	}
	if shared {
		c.ShareGPUs = true
	}
	if c.Planner == nil {
		var s planner.Settings
		s.Tuning.Algo, s.Tuning.Proto, s.Tuning.MinNChannels = algo, proto, 2
		if algo == "treenodes" { // tree over one rank per node: a node has up to two children
			s.Tuning.Algo = "tree"
		}
		if c.SlotBytes > 0 {
			s.Tuning.BuffSize = int64(coll.NCCLSteps * c.SlotBytes)
		}
		m, err := planner.CPUMachine(len(ds), 1, s)
		if err != nil {
			return nil, err
		}
		if algo == "pat" || algo == "treenodes" {
			// NCCL runs PAT with one rank per node only.
			if m, err = planner.CPUMachine(1, len(ds), s); err != nil {
				return nil, err
			}
		}
		if c.Planner, err = planner.New(m); err != nil {
			return nil, err
		}
	}
	return engine.InitAll(ds, &c)
}

func TestMain(m *testing.M) {
	var err error
	emulated, err = cuda.InitOrEmulate(4)
	if err != nil {
		fmt.Fprintln(os.Stderr, "engine tests:", err)
		os.Exit(1)
	}
	n, err := cuda.DeviceCount()
	if err == nil {
		for i := 0; i < min(n, 4); i++ {
			d, err := cuda.Open(i)
			if err != nil {
				fmt.Fprintln(os.Stderr, "engine tests:", err)
				os.Exit(1)
			}
			devs = append(devs, d)
		}
		if real := len(devs); !emulated && real > 0 && real < 4 {
			for i := real; i < 4; i++ {
				d, err := cuda.Open(devs[i%real].Ordinal)
				if err != nil {
					fmt.Fprintln(os.Stderr, "engine tests:", err)
					os.Exit(1)
				}
				devs = append(devs, d)
			}
			shared = true
			fmt.Fprintf(os.Stderr, "engine tests: %d GPU(s), opened again for up to %d ranks (Config.ShareGPUs)\n", real, len(devs))
		}
	}
	code := m.Run()
	if w := cuda.EmulatorUnrecordedWaits(); emulated && w > 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "engine tests: %d stream waits on events never recorded (a wait enqueued before its record)\n", w)
		code = 1
	}
	for _, d := range devs {
		_ = d.Close()
	}
	os.Exit(code)
}

func needDevs(t *testing.T, n int) []*cuda.Device {
	t.Helper()
	if len(devs) < n {
		t.Skipf("needs %d GPUs, this machine has %d", n, len(devs))
	}
	if emulated {
		t.Logf("on the emulated driver (no libcuda.so.1 here)")
	}
	return devs[:n]
}

func upload(d *cuda.Device, data []byte) (cuda.DevPtr, error) {
	var p cuda.DevPtr
	err := d.Do(func(x *cuda.Ctx) error {
		var err error
		if p, err = x.Alloc(max(len(data), 1)); err != nil {
			return err
		}
		return x.CopyHtoD(p, data)
	})
	return p, err
}

func download(d *cuda.Device, p cuda.DevPtr, n int, s cuda.Stream) ([]byte, error) {
	out := make([]byte, n)
	err := d.Do(func(x *cuda.Ctx) error {
		if err := x.StreamSync(s); err != nil {
			return err
		}
		return x.CopyDtoH(out, p)
	})
	return out, err
}

func newStream(d *cuda.Device) (cuda.Stream, error) {
	var s cuda.Stream
	err := d.Do(func(x *cuda.Ctx) error {
		var err error
		s, err = x.NewStream()
		return err
	})
	return s, err
}

// engineWorld is the conformance kit's World on the engine: the communicators of n ranks; each
// call runs from one goroutine per rank, on its own stream, with buffers uploaded before and the
// receive buffer downloaded after.
type engineWorld struct {
	comms  []*engine.Comm
	premul map[float64][]coll.RedOp // PreMulSum ops per scalar, per rank (the engine has no destroy)
}

func (w *engineWorld) Run(c colltest.Call, bufs []colltest.Buffers) error {
	op := make([]coll.RedOp, len(w.comms))
	for r := range op {
		op[r] = c.Op
	}
	if c.Op == coll.PreMulSum {
		if w.premul[c.Scalar] == nil {
			for _, cm := range w.comms { // every rank creates its ops in the same order
				w.premul[c.Scalar] = append(w.premul[c.Scalar], cm.RedOpCreatePreMulSum(c.Scalar))
			}
		}
		op = w.premul[c.Scalar]
	}
	return colltest.EachRank(len(w.comms), func(r int) error { return runRank(w.comms[r], c, op[r], bufs[r]) })
}

func (w *engineWorld) Close() error {
	var errs []error
	for _, c := range w.comms {
		errs = append(errs, c.Destroy())
	}
	return errors.Join(errs...)
}

// runRank makes call c (with op, the rank's handle of c.Op) on one rank.
func runRank(cm *engine.Comm, c colltest.Call, op coll.RedOp, b colltest.Buffers) (err error) {
	d := cm.Device()
	n, r := cm.Count(), cm.Rank()
	s, err := newStream(d)
	if err != nil {
		return err
	}
	var allocs []cuda.DevPtr
	defer func() {
		_ = d.Do(func(x *cuda.Ctx) error {
			for _, p := range allocs {
				_ = x.Free(p)
			}
			return x.DestroyStream(s)
		})
	}()
	alloc := func(data []byte) (cuda.DevPtr, error) {
		p, err := upload(d, data)
		if err == nil {
			allocs = append(allocs, p)
		}
		return p, err
	}
	var send, recv cuda.DevPtr
	if c.InPlace {
		p, err := alloc(b.Whole)
		if err != nil {
			return err
		}
		send, recv = p.Add(b.SendOffset), p.Add(b.RecvOffset)
	} else {
		if send, err = alloc(b.Send); err != nil {
			return err
		}
		if recv, err = alloc(b.Recv); err != nil {
			return err
		}
	}
	switch c.Func {
	case coll.AllReduce:
		err = cm.AllReduce(send, recv, c.Count, c.DataType, op, s)
	case coll.Reduce:
		err = cm.Reduce(send, recv, c.Count, c.DataType, op, c.Root, s)
	case coll.ReduceScatter:
		err = cm.ReduceScatter(send, recv, c.Count, c.DataType, op, s)
	case coll.Broadcast:
		err = cm.Broadcast(send, recv, c.Count, c.DataType, c.Root, s)
	case coll.AllGather:
		err = cm.AllGather(send, recv, c.Count, c.DataType, s)
	case coll.AllToAll:
		err = cm.AllToAll(send, recv, c.Count, c.DataType, s)
	case coll.SendRecv:
		cm.GroupStart()
		err = errors.Join(cm.Send(send, c.Count, c.DataType, (r+1)%n, s), cm.Recv(recv, c.Count, c.DataType, (r-1+n)%n, s), cm.GroupEnd())
	default:
		err = fmt.Errorf("no call for %v", c.Func)
	}
	if err != nil {
		return fmt.Errorf("rank %d: %w", r, err)
	}
	out, err := download(d, recv, len(b.Recv), s)
	if err != nil {
		return fmt.Errorf("rank %d: %w", r, err)
	}
	copy(b.Recv, out)
	return nil
}

// executor opens worlds of the first n devices with cfg, planned under NCCL_ALGO algo and
// NCCL_PROTO proto.
func executor(cfg engine.Config, algo, proto string) colltest.Executor {
	return colltest.ExecutorFunc(func(n int) (colltest.World, error) {
		comms, err := initAllTuned(devs[:n], &cfg, algo, proto)
		if err != nil {
			return nil, err
		}
		return &engineWorld{comms: comms, premul: map[float64][]coll.RedOp{}}, nil
	})
}

// conformance runs the kit on the engine with one algorithm, up to 4 ranks on real GPUs and with
// -long; the default emulated run (CI) stops at 3, the smallest odd ring, to keep the package's
// time down. In-place AllToAll and SendRecv are not in-place safe (NCCL's neither).
func conformance(t *testing.T, algo string, short, long colltest.Matrix) {
	conformanceProto(t, algo, "", short, long)
}

// conformanceProto is conformance under NCCL_PROTO proto.
func conformanceProto(t *testing.T, algo, proto string, short, long colltest.Matrix) {
	needDevs(t, 1)
	most := 4
	if emulated && !colltest.Long() {
		most = 3
	}
	short.Ranks, long.Ranks = nil, nil
	for n := 1; n <= most; n++ {
		short.Ranks = append(short.Ranks, n)
		long.Ranks = append(long.Ranks, n)
	}
	if algo == "treenodes" && len(devs) >= 4 {
		// a node with two children needs 4 nodes (NCCL's double binary tree)
		short.Ranks, long.Ranks = []int{4}, []int{4}
	}
	if !emulated {
		short = long
	}
	short.Name, long.Name = algo+proto, algo+proto
	cfg := engine.Config{SlotBytes: 512, Timeout: 30 * time.Second}
	colltest.Run(t, executor(cfg, algo, proto), colltest.Options{Matrix: []colltest.Matrix{short}, Long: []colltest.Matrix{long},
		MaxRanks: len(devs), Skip: colltest.SkipInPlaceP2P})
}

func TestConformanceRing(t *testing.T) {
	short := colltest.Matrix{
		TypeOps: map[coll.DataType][]coll.RedOp{
			coll.Float32:    colltest.AllOps,
			coll.Int32:      colltest.AllOps,
			coll.Float16:    {coll.Sum, coll.Avg},
			coll.Bfloat16:   {coll.Min},
			coll.Float8e5m2: {coll.Sum},
			coll.Uint8:      {coll.Prod},
		},
		Counts: []int{1, 1031},
	}
	long := colltest.Matrix{Counts: []int{1, 13, 1031, 4099}} // every type and op
	conformance(t, "ring", short, long)
}

// TestConformanceLL runs the kit with every collective on the LL protocol (NCCL_PROTO=LL): ring
// and tree; point-to-point takes LL below NCCL's threshold whatever NCCL_PROTO says (every
// SendRecv and AllToAll case here). The messages travel as flagged lines that the receiving
// kernels poll, with no event between sender and receiver. 9001 float64 elements are several
// 32 KiB LL steps per channel.
func TestConformanceLL(t *testing.T) {
	conformanceLines(t, "LL", engine.LLSteps, []int{1, 13, 1031, 9001, 70001})
}

// TestConformanceLL128 runs the kit with every collective on the LL128 protocol
// (NCCL_PROTO=LL128, which enables it whatever the path, as NCCL's explicit setting does): ring
// and tree. The messages travel as 128-byte lines of 120 payload bytes and a flag, polled by the
// receiving kernels; point-to-point stays on LL or Simple (NCCL never runs it on LL128). The
// longest count is past one LL128 slot per channel.
func TestConformanceLL128(t *testing.T) {
	conformanceLines(t, "LL128", engine.LL128Steps, []int{1, 13, 1031, 9001, 200003})
}

// conformanceLines runs the kit on a line protocol (LL, LL128): ring with a choice of types and
// ops (every one with -long, and longCounts on GPUs and -long), then Tree all-reduce on one node
// and across nodes (steps receiving or sending two messages); steps counts the protocol's steps,
// so that the test fails if none ran.
func conformanceLines(t *testing.T, proto string, steps func() int64, longCounts []int) {
	t.Helper()
	before := steps()
	short := colltest.Matrix{
		TypeOps: map[coll.DataType][]coll.RedOp{
			coll.Float32:    colltest.AllOps,
			coll.Int32:      colltest.AllOps,
			coll.Float16:    {coll.Sum, coll.Avg},
			coll.Bfloat16:   {coll.Min},
			coll.Float8e5m2: {coll.Sum},
			coll.Uint8:      {coll.Prod},
			coll.Int64:      {coll.Avg},
			coll.Float64:    {coll.Max},
		},
		Counts: []int{1, 13, 9001},
	}
	long := short
	long.Counts = longCounts
	if colltest.Long() {
		long.TypeOps = nil // every type and op
	}
	conformanceProto(t, "ring", proto, short, long)
	m := colltest.Matrix{
		TypeOps: map[coll.DataType][]coll.RedOp{coll.Float32: colltest.AllOps, coll.Float16: {coll.Sum}, coll.Uint8: {coll.Max}, coll.Int32: {coll.Avg}},
		Counts:  []int{1, 13, 301, 40000},
	}
	m.Funcs = []coll.Func{coll.AllReduce} // NCCL runs Tree for all-reduce only
	conformanceProto(t, "tree", proto, m, m)
	conformanceProto(t, "treenodes", proto, m, m)
	if got := steps() - before; got == 0 {
		t.Fatalf("no %s step ran", proto)
	} else {
		t.Logf("%d %s steps", got, proto)
	}
}

// TestPlannerPicksLL128: with NCCL's decisions on an NVLink machine (the first 4 GPUs of a DGX
// H100, NVSwitch; NVLS excluded as the engine cannot run it), the planner picks LL128 for some
// all-reduce sizes (NCCL enables it on NVLink paths) and the engine runs those calls right: the
// smallest power-of-4 count planned as LL128 (and one a quarter of it, planned otherwise), every
// element checked by the kit.
func TestPlannerPicksLL128(t *testing.T) {
	const n = 4
	needDevs(t, n)
	var s planner.Settings
	s.Tuning.BuffSize = coll.NCCLSteps * 512
	name, doc, err := planner.LoadTopology("", s) // the embedded DGX H100
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.New(planner.Machine{Name: name, Doc: doc, Nodes: 1, GPUs: n, Settings: s})
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for c := 1; c <= 1<<22 && count == 0; c *= 4 {
		pl, err := p.Plan(coll.Call{Func: coll.AllReduce, Count: int64(c), DataType: coll.Float32, Op: coll.Sum, Exclude: engine.Exclude})
		if err != nil {
			t.Fatal(err)
		}
		if pl.Proto == coll.LL128 {
			count = c
			t.Logf("%s, %d GPUs: all-reduce of %d floats planned %v/%v on %d channels", name, n, c, pl.Algo, pl.Proto, pl.NChannels)
		}
	}
	if count == 0 {
		t.Fatal("the planner never picks LL128 for the engine on an NVLink machine")
	}
	before := engine.LL128Steps()
	m := colltest.Matrix{Name: "dgx-h100", Ranks: []int{n}, Funcs: []coll.Func{coll.AllReduce}, Counts: []int{count / 4, count},
		TypeOps: map[coll.DataType][]coll.RedOp{coll.Float32: {coll.Sum}}}
	cfg := engine.Config{Planner: p, SlotBytes: 512, Timeout: 60 * time.Second}
	colltest.Run(t, executor(cfg, "", ""), colltest.Options{Matrix: []colltest.Matrix{m}, MaxRanks: len(devs)})
	if engine.LL128Steps() == before {
		t.Fatal("no LL128 step ran")
	}
}

// TestConformanceSimpleSmall runs small counts on the Simple protocol (NCCL_PROTO=Simple), which
// NCCL's tuning would otherwise run as LL.
func TestConformanceSimpleSmall(t *testing.T) {
	m := colltest.Matrix{
		TypeOps: map[coll.DataType][]coll.RedOp{coll.Float32: colltest.AllOps, coll.Int32: {coll.Avg}, coll.Uint8: {coll.Max}},
		Counts:  []int{1, 13, 1031},
	}
	conformanceProto(t, "", "Simple", m, m)
}

func TestConformanceTreeAndPAT(t *testing.T) {
	m := colltest.Matrix{
		TypeOps: map[coll.DataType][]coll.RedOp{coll.Float32: colltest.AllOps, coll.Float16: {coll.Sum}, coll.Uint8: {coll.Max}},
		Counts:  []int{1, 13, 301},
	}
	m.Funcs = []coll.Func{coll.AllReduce}
	conformance(t, "tree", m, m)
	// PAT ReduceScatter has no Avg or PreMulSum (NCCL 2.28 updateCollCostTable): NCCL_ALGO=pat
	// leaves no algorithm for them.
	m.Funcs = []coll.Func{coll.AllGather, coll.ReduceScatter}
	m.TypeOps = map[coll.DataType][]coll.RedOp{coll.Float32: {coll.Sum, coll.Prod, coll.Max, coll.Min}, coll.Float16: {coll.Sum}, coll.Uint8: {coll.Max}}
	conformance(t, "pat", m, m)
}

// TestBackToBack chains launches without synchronizing between them: a → b, b → a, … so that a
// launch's staging slots and buffers are reused while peers may still be finishing the previous
// one; only the engine's stream ordering keeps the values right.
func TestBackToBack(t *testing.T) {
	const iters, count = 8, 2053
	if emulated { // wider timing spread between the emulated streams
		defer cuda.SetEmulatorJitter(cuda.SetEmulatorJitter(300 * time.Microsecond))
	}
	for n := 2; n <= min(4, len(devs)); n++ {
		comms, err := initAll(needDevs(t, n), &engine.Config{SlotBytes: 512})
		if err != nil {
			t.Fatal(err)
		}
		a := make([]cuda.DevPtr, n)
		b := make([]cuda.DevPtr, n)
		ss := make([]cuda.Stream, n)
		for r, c := range comms {
			in := make([]byte, 4*count)
			for i := 0; i < count; i++ {
				coll.Float32.SetValue(in, i, float64(i%7+r))
			}
			if a[r], err = upload(c.Device(), in); err != nil {
				t.Fatal(err)
			}
			if b[r], err = upload(c.Device(), in); err != nil {
				t.Fatal(err)
			}
			if ss[r], err = newStream(c.Device()); err != nil {
				t.Fatal(err)
			}
		}
		engine.GroupStart() // one goroutine drives every rank: each launch in a process-wide group
		for it := 0; it < iters; it++ {
			for r, c := range comms {
				src, dst := a[r], b[r]
				if it%2 == 1 {
					src, dst = b[r], a[r]
				}
				if err := c.AllReduce(src, dst, count, coll.Float32, coll.Sum, ss[r]); err != nil {
					t.Fatal(err)
				}
			}
			if err := engine.GroupEnd(); err != nil {
				t.Fatal(err)
			}
			if it+1 < iters {
				engine.GroupStart()
			}
		}
		for r, c := range comms {
			got, err := download(c.Device(), a[r], 4*count, ss[r]) // iters is even: the result is in a
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < count; i++ {
				sum := 0.0
				for q := 0; q < n; q++ {
					sum += float64(i%7 + q)
				}
				want := sum * math.Pow(float64(n), iters-1)
				if g := coll.Float32.Value(got, i); g != want {
					t.Fatalf("%d ranks: rank %d element %d: %v, want %v", n, r, i, g, want)
				}
			}
			_ = c.Device().Do(func(x *cuda.Ctx) error { _ = x.Free(a[r]); _ = x.Free(b[r]); return x.DestroyStream(ss[r]) })
			if err := c.Destroy(); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestLLReceivesWithoutEvents: an LL launch's receiving steps do not wait on the sending steps'
// events (the flags order them). The same 2-rank ring all-gather of 8 floats on one channel, on
// Simple and on LL: LL's only cross-device stream waits are the end-of-launch join's (each rank
// waits for the other's last step: 2), Simple's add one per message received.
func TestLLReceivesWithoutEvents(t *testing.T) {
	if !emulated {
		t.Skip("counts the emulated driver's stream waits")
	}
	ds := needDevs(t, 2)
	const count = 8
	waits := map[string]int64{}
	for _, proto := range []string{"Simple", "LL"} {
		var s planner.Settings
		s.Tuning.Algo, s.Tuning.Proto, s.Tuning.MinNChannels, s.Tuning.MaxNChannels = "ring", proto, 1, 1
		s.Tuning.BuffSize = coll.NCCLSteps * 512
		m, err := planner.CPUMachine(2, 1, s)
		if err != nil {
			t.Fatal(err)
		}
		p, err := planner.New(m)
		if err != nil {
			t.Fatal(err)
		}
		comms, err := engine.InitAll(ds, &engine.Config{Planner: p, SlotBytes: 512})
		if err != nil {
			t.Fatal(err)
		}
		send, recv := make([]cuda.DevPtr, 2), make([]cuda.DevPtr, 2)
		ss := make([]cuda.Stream, 2)
		for r, c := range comms {
			in := make([]byte, 4*count)
			for i := 0; i < count; i++ {
				coll.Float32.SetValue(in, i, float64(10*r+i))
			}
			if send[r], err = upload(c.Device(), in); err != nil {
				t.Fatal(err)
			}
			if recv[r], err = upload(c.Device(), make([]byte, 8*count)); err != nil {
				t.Fatal(err)
			}
			if ss[r], err = newStream(c.Device()); err != nil {
				t.Fatal(err)
			}
		}
		before := cuda.EmulatorCrossDeviceWaits()
		err = colltest.EachRank(2, func(r int) error { return comms[r].AllGather(send[r], recv[r], count, coll.Float32, ss[r]) })
		if err != nil {
			t.Fatal(err)
		}
		for r, c := range comms {
			got, err := download(c.Device(), recv[r], 8*count, ss[r])
			if err != nil {
				t.Fatal(err)
			}
			for q := 0; q < 2; q++ {
				for i := 0; i < count; i++ {
					if v := coll.Float32.Value(got, q*count+i); v != float64(10*q+i) {
						t.Fatalf("%s: rank %d block %d element %d: %v", proto, r, q, i, v)
					}
				}
			}
			_ = c.Device().Do(func(x *cuda.Ctx) error { _ = x.Free(send[r]); _ = x.Free(recv[r]); return x.DestroyStream(ss[r]) })
		}
		waits[proto] = cuda.EmulatorCrossDeviceWaits() - before
		for _, c := range comms {
			if err := c.Destroy(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("cross-device stream waits: Simple %d, LL %d", waits["Simple"], waits["LL"])
	if waits["LL"] != 2 || waits["Simple"] <= 2 {
		t.Fatalf("cross-device waits: LL %d (want 2, the join's), Simple %d (want more)", waits["LL"], waits["Simple"])
	}
}
