package simnet

import (
	"testing"

	"github.com/simccl/simccl/coll"
)

// TestLineStreamChain: with Timing.LineStream an LL128 tree chain forwards a step while it still
// receives it (the forward starts before the received message has arrived whole) and never ahead
// of it (the forward arrives no earlier than what it forwards); without it, each hop waits for the
// whole message. Tree/LL128 at 256 KiB on 2 DGX H100 nodes: one 16 KiB step per channel up a chain
// of 8 GPUs.
func TestLineStreamChain(t *testing.T) {
	run := func(on bool) (Time, map[[3]int]OpRecord) {
		old := LineStream
		LineStream = on
		defer func() { LineStream = old }()
		m, _ := testMachine(t, "dgx-h100", 2, nil, "tree", "ll128")
		row, res, err := m.Run(coll.AllReduce, 256<<10, coll.Float32, coll.Sum, RunOptions{Record: true})
		if err != nil {
			t.Fatal(err)
		}
		if row.Algo != "Tree" || row.Proto != "LL128" {
			t.Fatalf("planned %s/%s, want Tree/LL128", row.Algo, row.Proto)
		}
		first := map[[3]int]OpRecord{} // (rank, peer, channel) → its first message
		for _, o := range res.Ops {
			k := [3]int{o.Rank, o.Peer, o.Channel}
			if f, ok := first[k]; !ok || o.Start < f.Start {
				first[k] = o
			}
		}
		return res.Time, first
	}
	tOff, off := run(false)
	tOn, on := run(true)
	if tOn >= tOff {
		t.Errorf("streamed %v, store-and-forward %v: want faster", tOn, tOff)
	}
	// Node 0's chain on channel 0 runs 7 → 6 → … → 0 (the trees of planner: TestTreeSim*).
	for r := 1; r <= 6; r++ {
		inOn, okIn := on[[3]int{r + 1, r, 0}]
		outOn, okOut := on[[3]int{r, r - 1, 0}]
		if !okIn || !okOut {
			t.Fatalf("no message %d→%d or %d→%d on channel 0", r+1, r, r, r-1)
		}
		if outOn.Class != ClassNVLink || inOn.Class != ClassNVLink {
			t.Fatalf("%d→%d or %d→%d not over NVLink", r+1, r, r, r-1)
		}
		if !(outOn.Start < inOn.End) {
			t.Errorf("streamed: %d→%d starts at %v, after %d→%d arrived at %v", r, r-1, outOn.Start, r+1, r, inOn.End)
		}
		if outOn.End < inOn.End {
			t.Errorf("streamed: %d→%d arrives at %v, before what it forwards (%d→%d, %v)", r, r-1, outOn.End, r+1, r, inOn.End)
		}
		inOff, outOff := off[[3]int{r + 1, r, 0}], off[[3]int{r, r - 1, 0}]
		if outOff.Start < inOff.End {
			t.Errorf("store-and-forward: %d→%d starts at %v, before %d→%d arrived at %v", r, r-1, outOff.Start, r+1, r, inOff.End)
		}
	}
}

// chainRouter joins rank 0 to 1 and 1 to 2 by one link each.
type chainRouter struct{ a, b LinkID }

func (c chainRouter) NumRanks() int { return 3 }
func (c chainRouter) Route(src, dst, ch int, buf []LinkID) ([]LinkID, LinkClass) {
	if src == 0 {
		return append(buf, c.a), ClassNVLink
	}
	return append(buf, c.b), ClassNVLink
}

// TestLineStreamHoldsForwards: rank 1 forwards an LL128 message from a slow link onto a fast one.
// Streamed, it starts forwarding when the first lines arrive, but its last lines leave only once
// the last received ones have arrived: rank 2 has the message one step latency after rank 1, not
// when the fast link alone would have delivered it.
func TestLineStreamHoldsForwards(t *testing.T) {
	const b = 1 << 20
	sched := func() *coll.Schedule {
		s := &coll.Schedule{NRanks: 3, NChannels: 1, Ops: []coll.Op{byteOp(b)},
			Conns: []coll.Conn{{ID: 0, From: 0, To: 1, Messages: 1}, {ID: 1, From: 1, To: 2, Messages: 1}}}
		x := func(conn, peer int) []coll.Xfer {
			return []coll.Xfer{{Conn: int32(conn), Peer: int32(peer), Steps: 1, CreditSeq: -1}}
		}
		at := &coll.BufRef{}
		s.Programs = []coll.Program{
			{Rank: 0, Steps: []coll.Step{{Prim: coll.Send, Bytes: b, Wire: b, Proto: coll.LL128, Src: at, Send: x(0, 1)}}},
			{Rank: 1, Steps: []coll.Step{{Prim: coll.RecvSend, Bytes: b, Wire: b, Proto: coll.LL128, Recv: x(0, 0), Send: x(1, 2)}}},
			{Rank: 2, Steps: []coll.Step{{Prim: coll.Recv, Bytes: b, Wire: b, Proto: coll.LL128, Dst: at, Recv: x(1, 1)}}},
		}
		return s
	}
	for _, on := range []bool{false, true} {
		e := NewEngine(nil)
		r := chainRouter{e.AddLink("0->1", GBps(10), 0), e.AddLink("1->2", GBps(100), 0)}
		var tm Timing
		tm.Launch = 5 * Microsecond
		tm.StepLat[ClassNVLink][coll.LL128] = 2 * Microsecond
		tm.LineStream = on
		res, err := Simulate(e, r, sched(), tm, Options{Record: true})
		if err != nil {
			t.Fatal(err)
		}
		slow, fast := float64(b)/10e3, float64(b)/100e3 // µs
		want := 5 + slow + 2 + fast + 2                 // store and forward
		if on {
			want = 5 + slow + 2 + 2 // the forward's last lines follow the received ones
		}
		if got := res.Time.Micros(); !near(got, want, 1e-6) {
			t.Errorf("line stream %v: %.3f us, want %.3f", on, got, want)
		}
	}
}
