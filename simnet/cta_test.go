package simnet

import (
	"math"
	"testing"

	"github.com/simccl/simccl/coll"
)

// runPair simulates plan on two ranks joined by one link of linkGB each way, with the given CTA
// rate and no latency, and returns the time in µs.
func runPair(t *testing.T, plan coll.Plan, linkGB, ctaGB float64) float64 {
	t.Helper()
	s, err := coll.Compile(plan)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(nil)
	r := pairRouter{e.AddLink("0->1", GBps(linkGB), 0), e.AddLink("1->0", GBps(linkGB), 0)}
	res, err := Simulate(e, r, s, Timing{CTARate: GBps(ctaGB)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Time.Micros()
}

// A 2-rank ring all-gather moves the same bytes per direction as a broadcast of one rank's block,
// but each channel's CTA must also copy the received block into the output before its next send:
// it is slower than the broadcast by the local copy time (one block at the CTA rate), while without
// the CTA model both take the link time.
func TestCTAAllGatherSlowerThanBroadcastByCopy(t *testing.T) {
	const link, cta = 20.0, 50.0 // GB/s: the link is the bottleneck of a send
	const block = 64 << 20       // bytes each rank contributes
	ag := coll.Plan{Func: coll.AllGather, Count: block / 4, DataType: coll.Float32, NRanks: 2, NChannels: 1,
		Algo: coll.Ring, Proto: coll.Simple}
	bc := coll.Plan{Func: coll.Broadcast, Count: block / 4, DataType: coll.Float32, NRanks: 2, NChannels: 1,
		Algo: coll.Ring, Proto: coll.Simple}
	linkUs := float64(block) / (link * 1e3)
	copyUs := float64(block) / (cta * 1e3)

	agOff, bcOff := runPair(t, ag, link, 0), runPair(t, bc, link, 0)
	if !near(agOff, linkUs, 0.02) || !near(bcOff, linkUs, 0.02) {
		t.Fatalf("without the CTA: all-gather %.1f us, broadcast %.1f us, want both about the link time %.1f us", agOff, bcOff, linkUs)
	}
	agOn, bcOn := runPair(t, ag, link, cta), runPair(t, bc, link, cta)
	// Broadcast: the receiver's copy overlaps the next slices on the link; only the last one shows.
	if !near(bcOn, linkUs, 0.03) {
		t.Errorf("broadcast with the CTA %.1f us, want about the link time %.1f us", bcOn, linkUs)
	}
	if d := agOn - bcOn; !near(d, copyUs, 0.05) {
		t.Errorf("all-gather %.1f us - broadcast %.1f us = %.1f us, want the local copy time %.1f us", agOn, bcOn, d, copyUs)
	}
}

// localSchedule: rank 0 runs, in program order on one lane, a Recv of b bytes then a Send of b
// bytes; rank 1 sends the first message and receives the second.
func localSchedule(b int64, lanes int) *coll.Schedule {
	s := &coll.Schedule{NRanks: 2, NChannels: 1, Ops: []coll.Op{byteOp(b)},
		Conns: []coll.Conn{{ID: 0, From: 1, To: 0, Messages: 1}, {ID: 1, From: 0, To: 1, Messages: 1}}}
	p0 := coll.Program{Rank: 0, Steps: []coll.Step{
		{Index: 0, Prim: coll.Recv, Bytes: b, Wire: b, Proto: coll.Simple, Dst: &coll.BufRef{Buf: coll.BufRecv}, Recv: []coll.Xfer{{Conn: 0, Peer: 1, CreditSeq: -1}}},
		{Index: 1, Prim: coll.Send, Deps: []int{0}, Bytes: b, Wire: b, Proto: coll.Simple, Src: &coll.BufRef{Buf: coll.BufRecv}, Send: []coll.Xfer{{Conn: 1, Peer: 1, CreditSeq: -1}}},
	}}
	p1 := coll.Program{Rank: 1, Steps: []coll.Step{
		{Index: 0, Prim: coll.Send, Bytes: b, Wire: b, Proto: coll.Simple, Src: &coll.BufRef{}, Send: []coll.Xfer{{Conn: 0, Peer: 0, CreditSeq: -1}}},
		{Index: 1, Prim: coll.Recv, Deps: []int{0}, Lane: int32(lanes - 1), Bytes: b, Wire: b, Proto: coll.Simple, Dst: &coll.BufRef{Buf: coll.BufRecv}, Recv: []coll.Xfer{{Conn: 1, Peer: 0, CreditSeq: -1}}},
	}}
	s.Programs = []coll.Program{p0, p1}
	return s
}

// A channel's steps run in program order: rank 0's send starts only once its receive has copied
// its bytes at the CTA rate; the receive of the last message also costs its copy. A second lane
// (rank 1's receive on its own thread group) halves that lane's rate.
func TestCTAProgramOrder(t *testing.T) {
	const b = 1 << 20
	for _, lanes := range []int{1, 2} {
		e := NewEngine(nil)
		r := pairRouter{e.AddLink("0->1", GBps(100), 0), e.AddLink("1->0", GBps(100), 0)}
		res, err := Simulate(e, r, localSchedule(b, lanes), Timing{CTARate: GBps(25)}, Options{Record: true})
		if err != nil {
			t.Fatal(err)
		}
		// Rank 1's send: capped by its lane (25 GB/s over its lanes), not by the 100 GB/s link.
		lane1 := 25.0 / float64(lanes)
		first := float64(b) / (lane1 * 1e3)
		var send0 OpRecord
		for _, op := range res.Ops {
			if op.Rank == 0 {
				send0 = op
			}
		}
		copyUs := float64(b) / 25e3
		if got := send0.Start.Micros(); !near(got, first+copyUs, 1e-6) {
			t.Errorf("lanes %d: rank 0 sends at %.3f us, want after the first message (%.3f us) and its copy (%.3f us)", lanes, got, first, copyUs)
		}
		want := first + copyUs + float64(b)/25e3 + float64(b)/(lane1*1e3)
		if got := res.Time.Micros(); !near(got, want, 1e-6) {
			t.Errorf("lanes %d: total %.3f us, want %.3f", lanes, got, want)
		}
	}
}

// The compact ring executor charges the same local work as the schedule replay: a 2-rank
// all-gather and all-reduce agree with the exact replay within a few percent, and both respect
// the link (busbw never above it).
func TestCTARingSimMatchesSchedule(t *testing.T) {
	const link, cta = 40.0, 30.0
	for _, f := range []coll.Func{coll.AllGather, coll.AllReduce, coll.ReduceScatter} {
		const total = 96 << 20
		count := int64(total / 4)
		if f != coll.AllReduce {
			count /= 2
		}
		plan := coll.Plan{Func: f, Count: count, DataType: coll.Float32, NRanks: 2, NChannels: 2,
			Algo: coll.Ring, Proto: coll.Simple, ChunkSize: 2 << 20}
		exact := runPair(t, plan, link, cta)
		e := NewEngine(nil)
		r := pairRouter{e.AddLink("0->1", GBps(link), 0), e.AddLink("1->0", GBps(link), 0)}
		rr, err := SimulateRing(e, r, RingSpec{Func: f, Bytes: total, Proto: coll.Simple, Rings: [][]int{{0, 1}, {0, 1}}, Chunk: 2 << 20, Merge: 1},
			Timing{CTARate: GBps(cta)})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: schedule %.1f us, compact %.1f us", f, exact, rr.Time.Micros())
		if rel := math.Abs(rr.Time.Micros()-exact) / exact; rel > 0.05 {
			t.Errorf("%v: compact %.1f us vs schedule %.1f us (%.1f%% apart)", f, rr.Time.Micros(), exact, 100*rel)
		}
		// Each direction carries total/2 (AllGather, ReduceScatter) or total (AllReduce) bytes.
		perDir := float64(total) / 2
		if f == coll.AllReduce {
			perDir = total
		}
		if bw := perDir / (exact * 1e3); bw > link {
			t.Errorf("%v: %.1f GB/s per direction above the %v GB/s link", f, bw, link)
		}
	}
}

func TestGPUModelFor(t *testing.T) {
	m, err := GPUModelFor("2.28", 90)
	if err != nil {
		t.Fatal(err)
	}
	// NCCL 2.28's Hopper single-node per-channel ceiling (tuning.cc perChMaxTreeBws).
	if got := m.CTARate.GBps(); math.Abs(got-38.7) > 1e-9 {
		t.Errorf("Hopper CTA rate %v GB/s, want 38.7", got)
	}
	if b, _ := GPUModelFor("2.28", 100); b.CTARate <= m.CTARate {
		t.Errorf("Blackwell CTA rate %v not above Hopper's %v", b.CTARate.GBps(), m.CTARate.GBps())
	}
	if _, err := GPUModelFor("2.28", 0); err == nil {
		t.Error("want an error for compute capability 0")
	}
	if _, err := GPUModelFor("9.99", 90); err == nil {
		t.Error("want an error for an unknown release")
	}
}
