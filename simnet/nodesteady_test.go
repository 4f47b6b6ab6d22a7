package simnet

import (
	"math"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/planner"
	"github.com/stretchr/testify/require"
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
		{"dgx-h100", 2, 16, coll.Broadcast, 512 << 10}, // Ring/LL/4 forced on 4 and 8 nodes (NCCL: LL/8 on 8)
		{"dgx-h100", 2, 6, coll.Broadcast, 32 << 20},   // from 2 and 5 nodes: 6 has no halving pair
		{"dgx-h100", 2, 7, coll.Reduce, 32 << 20},      // from 3 and 6 nodes
		{"dgx-h100", 8, 16, coll.AllReduce, 256 << 20}, // NVLSTree, from 4 and 8 nodes
		{"dgx-h100", 8, 16, coll.AllReduce, 1 << 30},
	} {
		m, _ := settingsMachine(t, c.topo, c.nodes, c.gpus, nil, planner.Settings{})
		// nodesSteady times one call: so does the reference (a broadcast or reduce replayed whole
		// is otherwise nccl-tests' loop, whose call time over node counts is not a line: 8 nodes of
		// 2 GPUs, 32 MiB, from 2 and 4 nodes +5.7%).
		m.BackToBack = 1
		m.PlannerAt = plannersOf(t, c.topo, c.gpus)
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
		res, mode := timedBy(t, m, c.f, c.size, m.nodesSteady)
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
		res, mode := timedBy(t, m, coll.AllReduce, c.size, m.sizesSteady)
		if res == nil {
			t.Fatalf("%d×%d: no size extrapolation", c.nodes, c.gpus)
		}
		rel := res.Time.Micros()/exact.TimeUs - 1
		t.Logf("%d×%d GPUs %d B: %s %.2f µs, %s %.2f µs (%+.3f%%)", c.nodes, c.gpus, c.size, mode, res.Time.Micros(), exact.Mode, exact.TimeUs, 100*rel)
		if math.Abs(rel) > 0.01 {
			t.Errorf("%d×%d GPUs: %s %+.2f%% from the exact replay", c.nodes, c.gpus, mode, 100*rel)
		}
		// The line from S/8 and S/4, what sizesSteadyDirect takes where S/2 is a form of its own
		// (since stop 46): a jump of four times the larger size, held to the same bound.
		run := func(s int64) func() (*Result, error) {
			return func() (*Result, error) {
				_, r, err := m.Run(coll.AllReduce, s, coll.Float32, coll.Sum, RunOptions{noSizes: true})
				return r, err
			}
		}
		far, err := extrapolated(c.size/8, c.size/4, c.size, run(c.size/8), run(c.size/4))
		if err != nil {
			t.Fatal(err)
		}
		rel = far.Time.Micros()/exact.TimeUs - 1
		t.Logf("%d×%d GPUs %d B from S/8 and S/4: %.2f µs (%+.3f%%)", c.nodes, c.gpus, c.size, far.Time.Micros(), 100*rel)
		if math.Abs(rel) > 0.01 {
			t.Errorf("%d×%d GPUs: the line from S/8 and S/4 %+.2f%% from the exact replay", c.nodes, c.gpus, 100*rel)
		}
	}
}

// The depth of NCCL's double binary tree over k nodes, both trees, is ⌈log2 k⌉ (nodesDepth): the
// variable of nodesSteady's NVLSTree forms.
func TestNodesDepth(t *testing.T) {
	for k := 2; k <= 1500; k++ {
		for tr := 0; tr < 2; tr++ {
			deepest := 0
			for n := 0; n < k; n++ {
				d := 0
				for x := n; ; d++ {
					up, _, _, _ := coll.Dtree(k, x, tr)
					if up < 0 {
						break
					}
					x = up
				}
				deepest = max(deepest, d)
			}
			if int64(deepest) != nodesDepth(k) {
				t.Fatalf("%d nodes, tree %d: depth %d, nodesDepth %d", k, tr, deepest, nodesDepth(k))
			}
		}
	}
}

// An NVLSTree all-reduce on a node count that is not a power of two, timed by the call on the
// next power of two (nodesAsDeep), against the replay of its own nodes (the channels' lockstep
// folded): within 1% from 128 MiB (docs/cluster.md, "Node counts that are not powers of two").
func TestNodesAsDeep(t *testing.T) {
	for _, c := range []struct {
		nodes int
		size  int64
	}{
		{12, 256 << 20}, // as 16
		{24, 128 << 20}, // as 32
	} {
		m, _ := settingsMachine(t, "dgx-h100", c.nodes, 8, nil, planner.Settings{})
		m.PlannerAt = plannersOf(t, "dgx-h100", 8)
		exact, _, err := m.Run(coll.AllReduce, c.size, coll.Float32, coll.Sum, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if exact.Algo != "NVLSTree" || exact.NCCL != "" || (exact.Mode != "schedule" && exact.Mode != "nvls-symmetric") {
			t.Fatalf("%d nodes: the reference ran %s in mode %s", c.nodes, exact.Algo, exact.Mode)
		}
		res, mode := timedBy(t, m, coll.AllReduce, c.size, m.nodesAsDeep)
		if res == nil {
			t.Fatalf("%d nodes: not timed as deep", c.nodes)
		}
		rel := res.Time.Micros()/exact.TimeUs - 1
		t.Logf("%d nodes %d B: %s %.2f µs, %s %.2f µs (%+.3f%%)", c.nodes, c.size, mode, res.Time.Micros(), exact.Mode, exact.TimeUs, 100*rel)
		if math.Abs(rel) > 0.01 {
			t.Errorf("%d nodes: %s %+.2f%% from the replay of its nodes", c.nodes, mode, 100*rel)
		}
	}
}

// Calls on node counts that are not powers of two, which stop 35 could not time or timed as
// another algorithm (docs/cluster.md, "Any node count"), are planned as NCCL's decision and given a
// mode (dry runs).
func TestAnyNodeCountTimed(t *testing.T) {
	for _, c := range []struct {
		nodes int
		f     coll.Func
		size  int64
		mode  string
	}{
		{300, coll.Broadcast, 32 << 20, "nodes-steady (75, 150 nodes) back-to-back x3 (saving from 2M)"}, // Ring/LL/3; NCCL runs LL/6 on 150
		{300, coll.Reduce, 32 << 20, "nodes-steady (75, 150 nodes) back-to-back x3 (saving from 2M)"},
		{1400, coll.AllReduce, 128 << 20, "nodes-steady (2048 nodes: nvlstree-fold, last resort, as deep)"}, // was Tree
	} {
		m, _ := settingsMachine(t, "dgx-h100", c.nodes, 8, nil, planner.Settings{})
		m.PlannerAt = plannersOf(t, "dgx-h100", 8)
		row, _, err := m.Run(c.f, c.size, coll.Float32, coll.Sum, RunOptions{DryRun: true})
		if err != nil {
			t.Fatalf("%d nodes %v %d B: %v", c.nodes, c.f, c.size, err)
		}
		if row.NCCL != "" || row.Mode != c.mode {
			t.Errorf("%d nodes %v %d B: %s/%s/%d in mode %q (NCCL: %q), want NCCL's decision in mode %q", c.nodes, c.f, c.size, row.Algo, row.Proto, row.NChannels, row.Mode, row.NCCL, c.mode)
		}
	}
}

// plannersOf is a Machine.PlannerAt of topo's nodes with gpus GPUs each (NCCL's defaults).
func plannersOf(t *testing.T, topo string, gpus int) func(int) (coll.Planner, error) {
	return func(k int) (coll.Planner, error) {
		_, p := settingsMachine(t, topo, k, gpus, nil, planner.Settings{})
		return p, nil
	}
}

// timedBy plans an nccl-tests call of f and size on m (float sum) and times it by form (one of
// Run's forms over sizes or node counts): its result, nil where the form does not apply, and mode.
func timedBy(t *testing.T, m *Machine, f coll.Func, size int64, form func(coll.Func, int64, coll.DataType, coll.RedOp, coll.Plan, RunOptions) (*Result, string, error)) (*Result, string) {
	t.Helper()
	plan, _, err := m.Plan(f, size, coll.Float32, coll.Sum)
	if err != nil {
		t.Fatal(err)
	}
	res, mode, err := form(f, size, coll.Float32, coll.Sum, plan, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res, mode
}

// TestP2PSizesSteadyMatchesExact holds a send/recv that the ECMP mean model timed backlogged past
// the replay budgets (4 GB200 NVL72 racks at 1 GiB: two of the four transfers across the fabric
// hashed onto one uplink, the model with its owed work 19% slow) to the line through the two
// smallest halvings in the steady state (64 and 128 MiB), within 0.1% of the exact replay.
func TestP2PSizesSteadyMatchesExact(t *testing.T) {
	m, _ := settingsMachine(t, "gb200-nvl72", 4, 0, nil, planner.Settings{})
	const size = 1 << 30
	model, _, err := m.Run(coll.SendRecv, size, coll.Float32, coll.Sum, RunOptions{noSizes: true})
	if err != nil {
		t.Fatal(err)
	}
	row, _, err := m.Run(coll.SendRecv, size, coll.Float32, coll.Sum, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exact, _, err := m.Run(coll.SendRecv, size, coll.Float32, coll.Sum, RunOptions{Exact: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("model %s %.1f µs (backlog %.3f), default %s %.1f µs, exact %s %.1f µs", model.Mode, model.TimeUs, model.MeanBacklog, row.Mode, row.TimeUs, exact.Mode, exact.TimeUs)
	if !strings.Contains(model.Mode, "ecmp-mean") || model.MeanBacklog == 0 {
		t.Fatalf("the case no longer needs the extrapolation: %s (backlog %.3f)", model.Mode, model.MeanBacklog)
	}
	if !strings.HasPrefix(row.Mode, "sizes-steady (64 MiB: p2p-compact; 128 MiB: p2p-compact") || row.MeanBacklog != 0 {
		t.Errorf("mode %q (backlog %.3f), want sizes-steady from replays of 64 and 128 MiB", row.Mode, row.MeanBacklog)
	}
	if rel := row.TimeUs/exact.TimeUs - 1; math.Abs(rel) > 0.001 {
		t.Errorf("%s %.1f µs, %+.3f%% from the exact replay's %.1f", row.Mode, row.TimeUs, 100*rel, exact.TimeUs)
	}
	if rel := model.TimeUs/exact.TimeUs - 1; rel < 0.1 {
		t.Errorf("the mean model %+.1f%% from the exact replay: the case shows nothing", 100*rel)
	}
}

// p2pSizesSteady replays the larger size of its pair first: where that one stays on the mean
// model the smaller one's replay (here 25 s on the development machine) would be wasted, and the
// row keeps the model. 32 DGX H100 nodes with 4 a leaf, all-to-all of 1 GiB: its pair is 256 and
// 512 MiB, the first replayed with a rate interval, the second on the mean model (its replay
// past the budgets).
func TestP2PSizesSteadyLargerFirst(t *testing.T) {
	fab := DefaultFabric()
	require.NoError(t, fab.Set("hosts_per_leaf", "4"))
	m, _ := settingsMachine(t, "dgx-h100", 32, 0, fab, planner.Settings{})
	row, _, err := m.Run(coll.AllToAll, 1<<30, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	if !strings.Contains(row.Mode, "ecmp-mean") || row.MeanBacklog == 0 {
		t.Fatalf("mode %q (backlog %.3f): the case no longer shows the order", row.Mode, row.MeanBacklog)
	}
	var sizes []int64
	for k, v := range m.tmpl.sizes.m {
		sizes = append(sizes, k.size)
		if k.size == 512<<20 && v.ok {
			t.Fatalf("512 MiB replayed (%s): the case no longer shows the order", v.mode)
		}
	}
	if len(sizes) != 1 || sizes[0] != 512<<20 {
		t.Errorf("sizes timed for the pair %v, want only the larger, 512 MiB", sizes)
	}
}

// A machine of another node count whose dry run says it times a call can find, replaying it, no
// form that does: the dry run of an NVLS replay does not know that its check will halt it. On 6
// GB200 NVL72 racks with a 2:1 fabric and 4 racks a leaf, an all-reduce of 512 MiB (NVLSTree) was
// timed on 8 racks (as deep), whose dry run said nvls-symmetric and whose replay found a switch link
// over its capacity and nothing else to time NVLSTree: the row failed ("no algorithm the simulator
// runs is enabled", as the 8-rack call may only run NVLSTree). The form now gives way to the next
// (sizes-steady from 128 and 256 MiB).
func TestNodesSteadyDryRunWrong(t *testing.T) {
	m, _ := testMachine(t, "gb200-nvl72", 6, fabricOf(t, "oversubscription", "2", "hosts_per_leaf", "4"), "", "")
	m.PlannerAt = plannersOf(t, "gb200-nvl72", 0)
	row, _, err := m.Run(coll.AllReduce, 512<<20, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	t.Logf("%s/%s/%d %.1f µs, %s", row.Algo, row.Proto, row.NChannels, row.TimeUs, row.Mode)
	require.Empty(t, row.NCCL, "NCCL's decision is simulated")
	require.Equal(t, "NVLSTree", row.Algo)
	require.NotContains(t, row.Mode, "nodes-steady")
}
