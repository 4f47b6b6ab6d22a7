package simnet

import (
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/stretchr/testify/require"
)

// exactNVLS replays plan's whole schedule (Simulate), the reference of the symmetric replay.
func exactNVLS(t *testing.T, m *Machine, plan coll.Plan, tm Timing) *Result {
	t.Helper()
	s, err := coll.Compile(plan)
	require.NoError(t, err)
	e, cl, err := m.engine()
	require.NoError(t, err)
	res, err := Simulate(e, cl, s, tm, Options{})
	require.NoError(t, err)
	return res
}

// The symmetric NVLS replay gives the full schedule's time: exactly where every channel has the
// same part, within a fraction of a chunk where Compile's split leaves the last channels less.
func TestNVLSCompactMatchesSchedule(t *testing.T) {
	for _, c := range []struct {
		topo  string
		nodes int
		algo  string
		f     coll.Func
		size  int64
	}{
		{"dgx-h100", 1, "NVLS", coll.AllReduce, 64 << 20},
		{"dgx-h100", 1, "NVLS", coll.AllReduce, 3<<20 + 12345*4},
		{"dgx-h100", 1, "NVLS", coll.AllGather, 32 << 20},
		{"dgx-h100", 1, "NVLS", coll.ReduceScatter, 32 << 20},
		{"dgx-h100", 2, "NVLSTree", coll.AllReduce, 64 << 20},
		{"dgx-h100", 4, "NVLSTree", coll.AllReduce, 32 << 20},
		{"gb200-nvl72", 1, "NVLS", coll.AllReduce, 16 << 20},
	} {
		m, _ := testMachine(t, c.topo, c.nodes, nil, c.algo, "")
		plan, note, err := m.Plan(c.f, c.size, coll.Float32, coll.Sum)
		require.NoError(t, err)
		require.Empty(t, note)
		require.Equal(t, c.algo, plan.Algo.String())
		tm, err := m.timing(plan)
		require.NoError(t, err)
		want := exactNVLS(t, m, plan, tm)
		got, mode, err := m.nvlsSymmetric(plan, tm, RunOptions{})
		require.NoError(t, err)
		require.NotNil(t, got, "%s x%d: no fold", c.topo, c.nodes)
		f, _ := nvlsFoldOf(plan, m.tmpl.cl)
		require.Equal(t, "nvls-symmetric", mode)
		rel := (got.Time.Micros() - want.Time.Micros()) / want.Time.Micros()
		period := 1
		if c.nodes > 1 {
			period = 2 // one channel per tree of the double binary tree
		}
		require.Equal(t, period, f.period)
		require.Equal(t, plan.NChannels/period, f.members)
		tol := 1e-9 // every channel in lockstep: the same time but for rounding
		if !f.exact {
			tol = 1e-3
		}
		require.InDelta(t, 0, rel, tol, "%s x%d %v %d B: symmetric %v, schedule %v", c.topo, c.nodes, c.f, c.size, got.Time, want.Time)
		require.Less(t, got.Events*uint64(f.members)/2, want.Events, "the fold should replay about 1/members of the events")
		t.Logf("%s x%d %v %d B, %d ch folded to %d (exact parts %v): %s %.3f µs, schedule %.3f µs (%+.4f%%), events %d vs %d",
			c.topo, c.nodes, c.f, c.size, plan.NChannels, f.period, f.exact, mode, got.Time.Micros(), want.Time.Micros(), 100*rel, got.Events, want.Events)
	}
}
