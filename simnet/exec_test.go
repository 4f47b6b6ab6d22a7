package simnet

import (
	"testing"

	"github.com/simccl/simccl/coll"
)

// pairRouter joins rank 0 and rank 1 by one link each way.
type pairRouter struct{ fwd, back LinkID }

func (p pairRouter) NumRanks() int { return 2 }
func (p pairRouter) Route(src, dst, ch int, buf []LinkID) ([]LinkID, LinkClass) {
	if src == 0 {
		return append(buf, p.fwd), ClassNVLink
	}
	return append(buf, p.back), ClassNVLink
}

// byteOp is an operation of n bytes of Uint8 in each buffer, for hand-made schedules.
func byteOp(n int64) coll.Op {
	return coll.Op{Func: coll.SendRecv, DataType: coll.Uint8, Count: n, SendBytes: n, RecvBytes: n}
}

// streamSchedule: rank 0 sends n messages of b bytes to rank 1 on one channel, with NCCL_STEPS
// credits (message k waits until message k-8 was consumed).
func streamSchedule(n int, b int64) *coll.Schedule {
	s := &coll.Schedule{NRanks: 2, NChannels: 1, Ops: []coll.Op{byteOp(int64(n) * b)},
		Conns: []coll.Conn{{ID: 0, Channel: 0, From: 0, To: 1, Messages: n}}}
	p0 := coll.Program{Rank: 0}
	p1 := coll.Program{Rank: 1}
	for k := 0; k < n; k++ {
		var deps []int
		if k > 0 {
			deps = []int{k - 1}
		}
		cred := k - coll.NCCLSteps
		if cred < 0 {
			cred = -1
		}
		at := &coll.BufRef{Offset: int64(k) * b}
		p0.Steps = append(p0.Steps, coll.Step{Index: int32(k), Prim: coll.Send, Deps: deps, Bytes: b, Wire: b, Proto: coll.Simple, Src: at,
			Send: []coll.Xfer{{Conn: 0, Peer: 1, Seq: int32(k), Slot: int32(k % 8), Steps: 1, CreditSeq: int32(cred)}}})
		p1.Steps = append(p1.Steps, coll.Step{Index: int32(k), Prim: coll.Recv, Deps: deps, Bytes: b, Wire: b, Proto: coll.Simple, Dst: at,
			Recv: []coll.Xfer{{Conn: 0, Peer: 0, Seq: int32(k), Slot: int32(k % 8), Steps: 1, CreditSeq: -1}}})
	}
	s.Programs = []coll.Program{p0, p1}
	return s
}

func TestSimulateStreamBandwidthBound(t *testing.T) {
	e := NewEngine(nil)
	r := pairRouter{e.AddLink("0->1", GBps(100), 0), e.AddLink("1->0", GBps(100), 0)}
	var tm Timing
	tm.Launch = 5 * Microsecond
	tm.StepLat[ClassNVLink][coll.Simple] = 1 * Microsecond
	res, err := Simulate(e, r, streamSchedule(64, 1<<20), tm, Options{Record: true})
	if err != nil {
		t.Fatal(err)
	}
	// 64 MiB at 100 GB/s = 671.09 us, plus launch 5 us and the last message's 1 us latency.
	want := 5 + float64(64<<20)/100e3 + 1
	if got := res.Time.Micros(); !near(got, want, 1e-6) {
		t.Fatalf("time %.3f us, want %.3f", got, want)
	}
	if len(res.Ops) != 64 || res.Ops[3].Rank != 0 || res.Ops[3].Peer != 1 || len(res.Ops[3].Route) != 1 {
		t.Fatalf("records %+v", res.Ops[:1])
	}
	// busbw never exceeds the link.
	if bw := float64(64<<20) / res.Time.Seconds() / 1e9; bw > 100 {
		t.Fatalf("bandwidth %v GB/s above the 100 GB/s link", bw)
	}
}

func TestSimulateSlotsLimitInflight(t *testing.T) {
	// With a large per-step latency, only NCCL_STEPS messages can be in flight: each group of 8
	// waits for the previous group to be consumed.
	e := NewEngine(nil)
	r := pairRouter{e.AddLink("0->1", GBps(1000), 0), e.AddLink("1->0", GBps(1000), 0)}
	var tm Timing
	tm.StepLat[ClassNVLink][coll.Simple] = 100 * Microsecond
	res, err := Simulate(e, r, streamSchedule(32, 1000), tm, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 32 messages, 8 slots: 4 rounds of ~100 us.
	if got := res.Time.Micros(); got < 400 || got > 401 {
		t.Fatalf("time %.3f us, want about 400 (4 rounds of the 100 us step latency)", got)
	}
}

func TestSimulateRejectsBadSchedule(t *testing.T) {
	e := NewEngine(nil)
	r := pairRouter{e.AddLink("0->1", GBps(1), 0), e.AddLink("1->0", GBps(1), 0)}
	s := streamSchedule(2, 10)
	s.Programs[1].Steps[1].Recv[0].Seq = 0 // received twice
	if _, err := Simulate(e, r, s, Timing{}, Options{}); err == nil {
		t.Fatal("want an error for a message received twice")
	}
}

// Back-to-back calls (Options.OpsPerKernel): each rank's next kernel starts one launch after its
// own part of the previous one. A one-way broadcast overlaps the receiver's copy of call k with
// the sender's call k+1, so a call costs less than an isolated one; a symmetric all-gather, whose
// ranks both end by receiving, gains nothing.
func TestBackToBackKernels(t *testing.T) {
	const link, cta = 20.0, 10.0 // GB/s: the receiver's copy is slower than the link
	const block = 4 << 20
	tm := Timing{Launch: 5 * Microsecond, CTARate: GBps(cta)}
	tm.StepLat[ClassNVLink][coll.Simple] = 2 * Microsecond
	run := func(p coll.Plan, k int) float64 {
		plans := make([]coll.Plan, k)
		for i := range plans {
			plans[i] = p
		}
		s, err := coll.Compile(plans...)
		if err != nil {
			t.Fatal(err)
		}
		e := NewEngine(nil)
		r := pairRouter{e.AddLink("0->1", GBps(link), 0), e.AddLink("1->0", GBps(link), 0)}
		res, err := Simulate(e, r, s, tm, Options{OpsPerKernel: 1})
		if err != nil {
			t.Fatal(err)
		}
		return res.Time.Micros()
	}
	bc := coll.Plan{Func: coll.Broadcast, Count: block / 4, DataType: coll.Float32, NRanks: 2, NChannels: 1, Algo: coll.Ring, Proto: coll.Simple}
	one, three := run(bc, 1), run(bc, 3)
	perCall := (three - one) / 2
	// The receiver is the bottleneck: one launch plus its copy of the block per call, less than an
	// isolated call (launch, send, latency, copy of the last slice).
	recvBusy := 5 + float64(block)/(cta*1e3)
	if perCall >= one || perCall < recvBusy-1e-6 {
		t.Errorf("broadcast: %.2f us per back-to-back call, isolated %.2f us; want in [%.2f, isolated)", perCall, one, recvBusy)
	}
	ag := coll.Plan{Func: coll.AllGather, Count: block / 4, DataType: coll.Float32, NRanks: 2, NChannels: 1, Algo: coll.Ring, Proto: coll.Simple}
	one, three = run(ag, 1), run(ag, 3)
	if perCall := (three - one) / 2; !near(perCall, one, 1e-6) {
		t.Errorf("all-gather: %.2f us per back-to-back call, want the isolated %.2f us", perCall, one)
	}
	// One group of three operations (no kernel boundaries) pays the launch once.
	s, err := coll.Compile(bc, bc, bc)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(nil)
	r := pairRouter{e.AddLink("0->1", GBps(link), 0), e.AddLink("1->0", GBps(link), 0)}
	res, err := Simulate(e, r, s, tm, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g := res.Time.Micros(); g >= three {
		t.Errorf("a group of 3 broadcasts %.2f us, not below 3 back-to-back kernels %.2f us", g, three)
	}
}

// Run times a broadcast or reduce as nccl-tests' loop does by default (NCCLTestsLoop calls back
// to back), where the chain's ranks overlap consecutive calls, and the other collectives as one
// call; Machine.BackToBack 1 asks for one call of every collective.
func TestNCCLTestsLoopDefault(t *testing.T) {
	m, _ := testMachine(t, "dgx-h100", 1, nil, "", "")
	alone, _ := testMachine(t, "dgx-h100", 1, nil, "", "")
	alone.BackToBack = 1
	for _, c := range []struct {
		f    coll.Func
		loop bool
	}{{coll.Broadcast, true}, {coll.Reduce, true}, {coll.AllReduce, false}, {coll.AllGather, false}} {
		row, _, err := m.Run(c.f, 16<<20, coll.Float32, coll.Sum, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		one, _, err := alone.Run(c.f, 16<<20, coll.Float32, coll.Sum, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		looped, _, err := alone.Run(c.f, 16<<20, coll.Float32, coll.Sum, RunOptions{BackToBack: NCCLTestsLoop})
		if err != nil {
			t.Fatal(err)
		}
		want := one
		if c.loop {
			want = looped
			// The chain of 8 ranks: one call alone waits for the whole chain, the loop's call
			// for a rank's own part (292 against 59 µs at 16 MiB).
			if looped.TimeUs > one.TimeUs/2 {
				t.Errorf("%v: a call in the loop %.2f µs, alone %.2f µs: the loop overlaps nothing", c.f, looped.TimeUs, one.TimeUs)
			}
		}
		if row.TimeUs != want.TimeUs || row.Mode != want.Mode {
			t.Errorf("%v: default %.3f µs (%s), want %.3f µs (%s)", c.f, row.TimeUs, row.Mode, want.TimeUs, want.Mode)
		}
	}
}

// The loop's schedule holds k copies of the call's, bounded by coll's limit as one is: a loop
// asked for that does not fit is an error (a --back-to-back of 100,000 on a 1 GiB broadcast took
// 6 GB and crashed), the default loop shrinks to what fits, down to one call.
func TestLoopFits(t *testing.T) {
	lim := coll.MaxSteps
	for _, c := range []struct {
		k, n  int
		asked bool
		want  int
		fails bool
	}{
		{1, lim, true, 1, false},
		{3, 1000, false, 3, false},
		{3, lim / 3, true, 3, false},
		{3, lim/3 + 1, true, 0, true},
		{3, lim/3 + 1, false, 2, false},
		{3, lim/2 + 1, false, 1, false},
		{100000, 30720, true, 0, true},
	} {
		got, err := loopFits(c.k, c.n, c.asked)
		if (err != nil) != c.fails || got != c.want {
			t.Errorf("loopFits(%d, %d, %v) = %d, %v; want %d (error: %v)", c.k, c.n, c.asked, got, err, c.want, c.fails)
		}
	}
}

// A ring broadcast or reduce streams its LL and LL128 lines along the chain (chainStreams): a
// rank passes a step on while it still arrives, so each further rank of the chain costs about a
// hop's latency, not a step's copy. On 2 and 4 DGX H100 nodes (LL128, 16 channels, one 256 KiB
// step a channel at 4 MiB) the 16 ranks more cost 61.5 µs (88.3 while network receives waited for
// the whole step); forwarding each step whole, 15.3 µs an
// NVLink hop and 17.4 a network hop, they cost 249 µs. The other ring collectives, trees and
// point-to-point stay store-and-forward.
func TestChainStreams(t *testing.T) {
	var us [2]float64
	for i, nodes := range []int{2, 4} {
		m, _ := testMachine(t, "dgx-h100", nodes, nil, "", "")
		m.BackToBack = 1
		row, _, err := m.Run(coll.Broadcast, 4<<20, coll.Float32, coll.Sum, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if row.Algo != "Ring" || row.Proto != "LL128" {
			t.Fatalf("%d nodes: %s/%s, want Ring/LL128", nodes, row.Algo, row.Proto)
		}
		us[i] = row.TimeUs
	}
	if d := us[1] - us[0]; d > 16*8 {
		t.Errorf("16 more ranks of the chain cost %.1f µs (%.1f → %.1f): more than 8 µs a rank, steps forwarded whole", d, us[0], us[1])
	}
	// A network send stays a whole step: the proxy posts it once the GPU has written all of it,
	// so the rank that streams a step in over NVLink sends it on over the network only once the
	// step has arrived.
	m2, _ := testMachine(t, "dgx-h100", 2, nil, "", "")
	m2.BackToBack = 1
	_, res, err := m2.Run(coll.Broadcast, 4<<20, coll.Float32, coll.Sum, RunOptions{Record: true})
	if err != nil {
		t.Fatal(err)
	}
	arrived := map[[2]int]Time{} // (rank, channel) → when its NVLink message of chunk 0 arrived
	for _, o := range res.Ops {
		if o.Class != ClassNet && o.Chunk == 0 {
			arrived[[2]int{o.Peer, o.Channel}] = o.End
		}
	}
	nets := 0
	for _, o := range res.Ops {
		if o.Class != ClassNet || o.Chunk != 0 {
			continue
		}
		nets++
		if in, ok := arrived[[2]int{o.Rank, o.Channel}]; ok && o.Start < in {
			t.Errorf("channel %d: rank %d sends over the network at %v, before its step arrived at %v", o.Channel, o.Rank, o.Start, in)
		}
	}
	if nets == 0 {
		t.Error("no network message recorded")
	}
	// The receiver of a network step streams it: NCCL's LL and LL128 receivers poll the flags of
	// the lines in their buffer, which the NIC writes, not the proxy's tail, so a rank forwards
	// a step that comes in over the network over NVLink before the step has arrived whole.
	netEnd := map[[2]int]Time{} // (receiving rank, channel) → when its network message of chunk 0 arrived
	for _, o := range res.Ops {
		if o.Class == ClassNet && o.Chunk == 0 {
			netEnd[[2]int{o.Peer, o.Channel}] = o.End
		}
	}
	early := 0
	for _, o := range res.Ops {
		if o.Class == ClassNet || o.Chunk != 0 {
			continue
		}
		if in, ok := netEnd[[2]int{o.Rank, o.Channel}]; ok {
			if o.Start >= in {
				t.Errorf("channel %d: rank %d forwards over NVLink at %v, once its network step arrived whole (%v)", o.Channel, o.Rank, o.Start, in)
			}
			early++
		}
	}
	if early == 0 {
		t.Error("no rank forwards a step received over the network")
	}
	m, _ := testMachine(t, "dgx-h100", 1, nil, "", "")
	for _, c := range []struct {
		f      coll.Func
		algo   string
		stream bool
	}{{coll.Broadcast, "", true}, {coll.Reduce, "", true}, {coll.AllReduce, "ring", false}, {coll.AllGather, "", false}, {coll.AllReduce, "tree", false}} {
		mm := m
		if c.algo != "" {
			mm, _ = testMachine(t, "dgx-h100", 1, nil, c.algo, "")
		}
		call := coll.TestCall(c.f, 64<<10, coll.Float32, coll.Sum, mm.NRanks())
		p, err := mm.Planner.Plan(call)
		if err != nil {
			t.Fatal(err)
		}
		tm, err := mm.PlanTiming(p)
		if err != nil {
			t.Fatal(err)
		}
		if tm.LineStream != c.stream {
			t.Errorf("%v %v/%v: LineStream %v, want %v", c.f, p.Algo, p.Proto, tm.LineStream, c.stream)
		}
		if c.stream && tm.CTAMem[coll.LL] != mm.GPU.MemLL {
			t.Errorf("%v: LL rate %v, want the GPU's streamed LL rate %v", c.f, tm.CTAMem[coll.LL], mm.GPU.MemLL)
		}
		if !c.stream && tm.CTAMem[coll.LL] != 0 {
			t.Errorf("%v %v: LL rate %v where steps move whole", c.f, p.Algo, tm.CTAMem[coll.LL])
		}
	}
	if m.GPU.MemLL <= 0 {
		t.Errorf("Hopper's streamed LL rate: %v", m.GPU.MemLL)
	}
}
