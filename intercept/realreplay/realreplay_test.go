package realreplay

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/simccl/simccl/intercept"
	"github.com/simccl/simccl/planner"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
)

// The checker finds what is wrong: a correct buffer passes, one changed element, a block left
// unwritten (poison) or a block from the wrong rank does not.
func TestRealCheckFindsWrongElements(t *testing.T) {
	for _, tc := range []struct {
		op    string
		dt    string
		redop string
		n     int
		rank  int
		root  int
	}{
		{intercept.OpAllReduce, "float", "sum", 3, 1, -1},
		{intercept.OpAllReduce, "bfloat16", "avg", 4, 0, -1},
		{intercept.OpAllReduce, "int32", "avg", 3, 2, -1},
		{intercept.OpReduce, "half", "prod", 2, 1, 1},
		{intercept.OpReduceScatter, "double", "max", 4, 3, -1},
		{intercept.OpAllGather, "int8", "", 3, 0, -1},
		{intercept.OpAllToAll, "uint64", "", 2, 1, -1},
		{intercept.OpBroadcast, "f8e4m3", "", 3, 2, 1},
		{intercept.OpRecv, "float", "", 2, 0, 1},
	} {
		t.Run(tc.op+"/"+tc.dt, func(t *testing.T) {
			dt, _ := coll.ParseDataType(tc.dt)
			op := coll.Sum
			if tc.redop != "" {
				op, _ = coll.ParseRedOp(tc.redop)
			}
			const cnt = 20000 // more than one compared chunk, not a multiple of the period
			c := &Call{Rec: intercept.Record{Op: tc.op, Count: cnt, Dtype: tc.dt, RedOp: tc.redop, Rank: tc.rank, NRanks: tc.n, Root: tc.root}, dt: dt, op: op, n: tc.n, seed: 5}
			_, rsize := c.sizes()
			buf := make([]byte, rsize)
			// The right answer, element by element from the definition.
			elt := dt.Size()
			for i := 0; i < int(rsize)/elt; i++ {
				q, j := i/cnt, int64(i%cnt)
				var v float64
				switch tc.op {
				case intercept.OpAllReduce, intercept.OpReduce:
					v = fold(dt, op, tc.n, func(p int) float64 { return inputValue(5, p, j) })
				case intercept.OpReduceScatter:
					v = fold(dt, op, tc.n, func(p int) float64 { return inputValue(5, p, int64(tc.rank)*cnt+j) })
				case intercept.OpAllGather:
					v = inputValue(5, q, j)
				case intercept.OpAllToAll:
					v = inputValue(5, q, int64(tc.rank)*cnt+j)
				case intercept.OpBroadcast, intercept.OpRecv:
					v = inputValue(5, tc.root, j)
				}
				comm.SetElement(dt, buf, i, v)
			}
			if n, w := checkCall(c, buf); w != 0 || n != rsize/int64(elt) {
				t.Fatalf("correct buffer: %d checked, %d wrong", n, w)
			}
			i := int(rsize)/elt - 3
			comm.SetElement(dt, buf, i, comm.Element(dt, buf, i)+16)
			if _, w := checkCall(c, buf); w != 1 {
				t.Fatalf("one element changed: %d wrong", w)
			}
			poison(buf[:cnt*elt])
			if _, w := checkCall(c, buf); w < cnt/2 {
				t.Fatalf("first block unwritten: %d wrong", w)
			}
		})
	}
	// A non-root rank's Reduce output is not defined: nothing is checked.
	c := &Call{Rec: intercept.Record{Op: intercept.OpReduce, Count: 8, Rank: 0, Root: 1}, dt: coll.Float32, n: 2}
	if n, w := checkCall(c, make([]byte, 32)); n != 0 || w != 0 {
		t.Fatalf("non-root reduce: %d checked, %d wrong", n, w)
	}
}

// NCCL logs carry no group marks: consecutive Send/Recv of one communicator are one launch, so a
// batched exchange (both ranks send first) does not deadlock; collectives stay alone.
func TestPlanRealFromLogs(t *testing.T) {
	paths, _ := filepath.Glob("../../testdata/intercept/h200x2/coll/*.log")
	if len(paths) != 2 {
		t.Fatalf("logs %v", paths)
	}
	var ts []RankTrace
	for _, p := range paths {
		rt, err := ReadRankTrace(p)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, rt)
	}
	prog, err := NewProgram(ts)
	if err != nil {
		t.Fatal(err)
	}
	if len(prog.Actors) != 2 || len(prog.Comms) != 1 || prog.Comms[0].Size != 2 {
		t.Fatalf("actors %d comms %+v", len(prog.Actors), prog.Comms)
	}
	for a, act := range prog.Actors {
		// 50 iterations of: 4 collectives, then the send/recv and the batched exchange (one launch).
		if len(act.Launches) != 250 {
			t.Fatalf("%s: %d launches", act.Name, len(act.Launches))
		}
		for _, l := range act.Launches {
			p2p := 0
			for _, c := range l.Calls {
				if c.Rec.Op == intercept.OpSend || c.Rec.Op == intercept.OpRecv {
					p2p++
				}
			}
			if p2p != len(l.Calls) && len(l.Calls) != 1 || p2p > 0 && p2p != 3 {
				t.Fatalf("actor %d: launch %s has %d calls, %d send/recv", a, l.Key, len(l.Calls), p2p)
			}
		}
	}
	// The first iteration's all-reduce, all-gather and merged send/recv group run (its 16 and
	// 128 MiB reduce-scatter and broadcast left out on both ranks, to keep the test short).
	for a := range prog.Actors {
		l := prog.Actors[a].Launches
		prog.Actors[a].Launches = []Launch{l[0], l[1], l[4]}
	}
	rep, err := RunInProcess(prog, &comm.Config{Transport: "inproc", Planners: planner.CPU{}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Wrong != 0 || rep.Checked == 0 || len(rep.Launches) != 3 {
		t.Fatalf("launches %d, checked %d, wrong %d", len(rep.Launches), rep.Checked, rep.Wrong)
	}
	if l := rep.Launches[2]; l.Ops != "Send+Recv" || l.Ranks != 2 || l.Calls != 6 || l.Key != "log1.n2#p0>1.0" {
		t.Fatalf("send/recv launch %+v", l)
	}
}

// fold is the exact reduction of the n values v(p), the inputs being small integers.
func fold(dt coll.DataType, op coll.RedOp, n int, v func(p int) float64) float64 {
	acc := v(0)
	for p := 1; p < n; p++ {
		switch x := v(p); op {
		case coll.Prod:
			acc *= x
		case coll.Max:
			acc = max(acc, x)
		case coll.Min:
			acc = min(acc, x)
		default:
			acc += x
		}
	}
	if op == coll.Avg {
		acc /= float64(n)
		if !dt.IsFloat() {
			acc = math.Trunc(acc)
		}
	}
	return acc
}
