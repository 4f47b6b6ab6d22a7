package simnet

import (
	"math"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/planner"
)

// The broadcast and reduce pipelines timed from replays on fewer nodes (nodesSteady) against the
// replay of their whole schedule, on clusters small enough to replay: within 1%; the NVLSTree
// all-reduce, extrapolated in log2 of the node count, within 5% of its exact replay (the
// channels' lockstep folded, nvls-symmetric).
func TestNodesSteadyMatchesExact(t *testing.T) {
	for _, c := range []struct {
		topo        string
		gpus, nodes int
		f           coll.Func
		size        int64
	}{
		{"dgx-h100", 2, 8, coll.Broadcast, 32 << 20},
		{"dgx-h100", 2, 16, coll.Reduce, 32 << 20},
		{"dgx-h100", 4, 8, coll.Broadcast, 64 << 20},   // from 2 and 4 nodes
		{"dgx-h100", 4, 16, coll.Broadcast, 64 << 20},  // from 4 and 8 nodes
		{"dgx-h100", 8, 16, coll.AllReduce, 256 << 20}, // NVLSTree, from 4 and 8 nodes
		{"dgx-h100", 8, 16, coll.AllReduce, 1 << 30},
	} {
		m, _ := settingsMachine(t, c.topo, c.nodes, c.gpus, nil, planner.Settings{})
		// nodesSteady times one call: so does the reference (a broadcast or reduce replayed whole
		// is otherwise nccl-tests' loop, whose call time over node counts is not a line: 8 nodes of
		// 2 GPUs, 32 MiB, from 2 and 4 nodes +5.7%).
		m.BackToBack = 1
		m.PlannerAt = func(k int) (coll.Planner, error) {
			_, p := settingsMachine(t, c.topo, k, c.gpus, nil, planner.Settings{})
			return p, nil
		}
		exact, _, err := m.Run(c.f, c.size, coll.Float32, coll.Sum, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bound := 0.01
		if c.f == coll.AllReduce {
			bound = 0.05
		}
		if exact.Mode != "schedule" && exact.Mode != "nvls-symmetric" || exact.NCCL != "" {
			t.Fatalf("%s ×%d %v: the reference ran %s (%s)", c.topo, c.nodes, c.f, exact.Mode, exact.Algo)
		}
		plan, _, err := m.Plan(c.f, c.size, coll.Float32, coll.Sum)
		if err != nil {
			t.Fatal(err)
		}
		res, mode, err := m.nodesSteady(c.f, c.size, coll.Float32, coll.Sum, plan, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res == nil {
			t.Fatalf("%s ×%d %v: no node extrapolation", c.topo, c.nodes, c.f)
		}
		rel := res.Time.Micros()/exact.TimeUs - 1
		t.Logf("%d×%d GPUs %v %d B: %s %.2f µs, %s %.2f µs (%+.3f%%)", c.nodes, c.gpus, c.f, c.size, mode, res.Time.Micros(), exact.Mode, exact.TimeUs, 100*rel)
		if math.Abs(rel) > bound {
			t.Errorf("%d×%d GPUs %v: %s %+.2f%% from the schedule", c.nodes, c.gpus, c.f, mode, 100*rel)
		}
	}
}

// An NVLSTree all-reduce timed from the same call at half and a quarter of its size
// (sizesSteady) against its exact replay (the channels' lockstep folded): within 1%.
func TestSizesSteadyMatchesExact(t *testing.T) {
	for _, c := range []struct {
		nodes, gpus int
		size        int64
	}{
		{4, 8, 1 << 30},
		{8, 8, 1 << 30},
	} {
		m, _ := settingsMachine(t, "dgx-h100", c.nodes, c.gpus, nil, planner.Settings{})
		exact, _, err := m.Run(coll.AllReduce, c.size, coll.Float32, coll.Sum, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if exact.Algo != "NVLSTree" || exact.NCCL != "" || (exact.Mode != "schedule" && exact.Mode != "nvls-symmetric") {
			t.Fatalf("%d×%d: the reference ran %s in mode %s", c.nodes, c.gpus, exact.Algo, exact.Mode)
		}
		plan, _, err := m.Plan(coll.AllReduce, c.size, coll.Float32, coll.Sum)
		if err != nil {
			t.Fatal(err)
		}
		res, mode, err := m.sizesSteady(coll.AllReduce, c.size, coll.Float32, coll.Sum, plan, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res == nil {
			t.Fatalf("%d×%d: no size extrapolation", c.nodes, c.gpus)
		}
		rel := res.Time.Micros()/exact.TimeUs - 1
		t.Logf("%d×%d GPUs %d B: %s %.2f µs, %s %.2f µs (%+.3f%%)", c.nodes, c.gpus, c.size, mode, res.Time.Micros(), exact.Mode, exact.TimeUs, 100*rel)
		if math.Abs(rel) > 0.01 {
			t.Errorf("%d×%d GPUs: %s %+.2f%% from the exact replay", c.nodes, c.gpus, mode, 100*rel)
		}
	}
}
