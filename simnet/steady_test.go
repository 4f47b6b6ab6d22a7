package simnet

import (
	"math"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/stretchr/testify/require"
)

// NVLSTree, which has no compact executor, is timed by steadySchedule above SteadyAbove: two
// replays at smaller counts and the time per chunk extrapolated. On 2 DGX H100 nodes the exact
// replay of 1 GiB is affordable, so the extrapolation (from 256 and 512 MiB: 128 and 256 chunks
// per channel) is held to it: within 1%. (The 16-node figure of the SteadyMinLoops comment,
// 0.003% at 512 MiB, takes 35 s and 1.4 GB; it was measured with simccl run --exact.)
func TestSteadyScheduleMatchesExact(t *testing.T) {
	m, _ := testMachine(t, "dgx-h100", 2, nil, "", "")
	const size = 1 << 30
	// The symmetric replay (nvls-symmetric, which Run prefers above CompactQuiet) is off here:
	// this test holds steadySchedule, which stands in where channels do not fold, to the schedule.
	defer func(q int64) { CompactQuiet = q }(CompactQuiet)
	CompactQuiet = math.MaxInt64
	exact, _, err := m.Run(coll.AllReduce, size, coll.Float32, coll.Sum, RunOptions{Exact: true})
	require.NoError(t, err)
	require.Equal(t, "NVLSTree", exact.Algo)
	require.Equal(t, "schedule", exact.Mode)

	defer func(a float64) { SteadyAbove = a }(SteadyAbove)
	SteadyAbove = 1000
	steady, _, err := m.Run(coll.AllReduce, size, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(steady.Mode, "schedule-steady"), steady.Mode)
	require.Equal(t, exact.Algo+exact.Proto, steady.Algo+steady.Proto)
	require.Empty(t, steady.NCCL)
	rel := math.Abs(steady.TimeUs/exact.TimeUs - 1)
	t.Logf("exact %.1f µs, %s %.1f µs: %.3f%% apart", exact.TimeUs, steady.Mode, steady.TimeUs, 100*rel)
	require.Less(t, rel, 0.01)

	// A dry run names the mode without simulating; Record keeps the exact replay (its op log is
	// the schedule's).
	dry, _, err := m.Run(coll.AllReduce, size, coll.Float32, coll.Sum, RunOptions{DryRun: true})
	require.NoError(t, err)
	require.Equal(t, steady.Mode, dry.Mode)
	rec, res, err := m.Run(coll.AllReduce, 1<<20, coll.Float32, coll.Sum, RunOptions{Record: true})
	require.NoError(t, err)
	require.Equal(t, "schedule", rec.Mode)
	require.NotEmpty(t, res.Ops)
}

// Where even the smaller replay would fall short of SteadyMinLoops chunks per channel, the
// extrapolation is not tried (no pair of sizes is in the steady state).
func TestSteadyScheduleNeedsChunks(t *testing.T) {
	m, _ := testMachine(t, "dgx-h100", 2, nil, "", "")
	call := coll.TestCall(coll.AllReduce, 8<<20, coll.Float32, coll.Sum, m.NRanks())
	p, err := m.Planner.Plan(call)
	require.NoError(t, err)
	require.Equal(t, coll.NVLSTree, p.Algo)
	tm, err := m.PlanTiming(p)
	require.NoError(t, err)
	res, mode, err := m.steadySchedule(p, tm, 1, false)
	require.NoError(t, err)
	require.Nil(t, res, mode)
}

// NVLSTree channels move their data at most at NCCL's own NVLSTree ceiling (perChMaxNVLSTreeBws:
// on 2 DGX H100 nodes 8 searched channels × 57.7 GB/s of bus bandwidth, shared by the plan's 16
// channels, × 16/30 to algorithm bandwidth): the cap is that figure, and a 1 GiB all-reduce comes
// within 10% under it (the pipeline's fill and gaps), where NVLink alone would let it exceed it.
func TestNVLSTreeChannelCap(t *testing.T) {
	m, _ := testMachine(t, "dgx-h100", 2, nil, "", "")
	call := coll.TestCall(coll.AllReduce, 256<<20, coll.Float32, coll.Sum, m.NRanks())
	p, err := m.Planner.Plan(call)
	require.NoError(t, err)
	require.Equal(t, coll.NVLSTree, p.Algo)
	tm, err := m.PlanTiming(p)
	require.NoError(t, err)
	want := 8 * 57.7 / float64(p.NChannels) * 16 / 30
	require.InDelta(t, float64(GBps(want)), float64(tm.ChannelCap), 1e-9*float64(GBps(want)), "per channel (%d channels)", p.NChannels)

	row, _, err := m.Run(coll.AllReduce, 1<<30, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	bound := want * float64(p.NChannels) // GB/s of algorithm bandwidth
	t.Logf("algbw %.1f GB/s, NCCL's NVLSTree ceiling %.1f", row.AlgBw, bound)
	require.LessOrEqual(t, row.AlgBw, bound*1.001)
	require.Greater(t, row.AlgBw, 0.9*bound)

	// One node: NVLS, no cap.
	m1, _ := testMachine(t, "dgx-h100", 1, nil, "", "")
	p1, err := m1.Planner.Plan(coll.TestCall(coll.AllReduce, 256<<20, coll.Float32, coll.Sum, m1.NRanks()))
	require.NoError(t, err)
	tm1, err := m1.PlanTiming(p1)
	require.NoError(t, err)
	require.Zero(t, tm1.ChannelCap, "%v", p1.Decision())
}

// Broadcast and Reduce past coll's schedule limit (8 GiB on 16 HGX H100 16-NIC nodes: about 8.4 M
// steps) are timed by the steady extrapolation with SteadyMinPipelineLoops chunks per channel
// where they used to be refused; below the limit (4 GiB) they keep the exact schedule. The
// extrapolation's error against the exact replay at 4 GiB (0.31–0.99%, SteadyMinPipelineLoops'
// comment) takes 7 s a replay, so it was measured with simccl run --exact rather than here.
func TestSteadyPipelinePastLimit(t *testing.T) {
	m, _ := testMachine(t, "hgx-h100-16nic", 16, nil, "", "")
	for _, f := range []coll.Func{coll.Broadcast, coll.Reduce} {
		row, _, err := m.Run(f, 8<<30, coll.Float32, coll.Sum, RunOptions{DryRun: true})
		require.NoError(t, err, "%v 8 GiB", f)
		require.True(t, strings.HasPrefix(row.Mode, "schedule-steady"), row.Mode)
		require.Empty(t, row.NCCL)
		row, _, err = m.Run(f, 4<<30, coll.Float32, coll.Sum, RunOptions{DryRun: true})
		require.NoError(t, err)
		require.Equal(t, "schedule", row.Mode, "%v 4 GiB is within coll's limit", f)
	}
}

// A broadcast or reduce timed by the steady extrapolation is, like its schedule replay, a call
// in nccl-tests' loop: the line through two single calls is shifted by the loop's saving,
// measured on the smaller one. On 16 PCIe nodes (Ring/Simple on 2 channels, 128 ranks) a
// single call carries the 128-rank pipeline's fill (256 MiB: 35,594 µs alone, 27,384 in the
// loop); the loop does not, and the extrapolated row matches the exact replay of the loop.
// Before, the steady rows were single calls (on 128 such nodes, 512 MiB: 2.2 times the loop).
func TestSteadyScheduleLoop(t *testing.T) {
	defer func(a, b float64, l int64) { SteadyAbove, SteadyBudget, SteadyMinLoops = a, b, l }(SteadyAbove, SteadyBudget, SteadyMinLoops)
	m, _ := testMachine(t, "pcie-8gpu-2socket", 16, nil, "", "")
	const size = 256 << 20
	exact, _, err := m.Run(coll.Broadcast, size, coll.Float32, coll.Sum, RunOptions{Exact: true})
	require.NoError(t, err)
	require.Equal(t, "schedule back-to-back x3", exact.Mode)
	alone, _, err := m.Run(coll.Broadcast, size, coll.Float32, coll.Sum, RunOptions{Exact: true, BackToBack: 1})
	require.NoError(t, err)
	SteadyAbove, SteadyBudget, SteadyMinLoops = 100_000, 70_000, 32
	for _, f := range []coll.Func{coll.Broadcast, coll.Reduce} {
		want := exact
		if f == coll.Reduce {
			want, _, err = m.Run(f, size, coll.Float32, coll.Sum, RunOptions{Exact: true})
			require.NoError(t, err)
		}
		row, _, err := m.Run(f, size, coll.Float32, coll.Sum, RunOptions{})
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(row.Mode, "schedule-steady") && strings.Contains(row.Mode, "back-to-back x3 (saving from "), row.Mode)
		require.InEpsilon(t, want.TimeUs, row.TimeUs, 0.005, "%v: %s %.1f µs, the loop replayed %.1f", f, row.Mode, row.TimeUs, want.TimeUs)
		dry, _, err := m.Run(f, size, coll.Float32, coll.Sum, RunOptions{DryRun: true})
		require.NoError(t, err)
		require.Equal(t, row.Mode, dry.Mode)
	}
	require.Greater(t, alone.TimeUs, 1.2*exact.TimeUs, "one call alone %.1f µs, in the loop %.1f", alone.TimeUs, exact.TimeUs)
}

// A loop of back-to-back calls whose schedule copies would pass LoopBudget is not replayed: its
// saving over one call alone is taken from the loop at a smaller size (loopSaving), and the row
// matches the whole loop's replay. 16 PCIe nodes (Ring/Simple on 2 channels), broadcast and
// reduce of 256 MiB. Exact replays the whole loop whatever LoopBudget says (until stop 55 it took
// the saving too, an approximation --exact did not name).
func TestLoopSaving(t *testing.T) {
	defer func(b float64) { LoopBudget = b }(LoopBudget)
	m, _ := testMachine(t, "pcie-8gpu-2socket", 16, nil, "", "")
	const size = 256 << 20
	for _, f := range []coll.Func{coll.Broadcast, coll.Reduce} {
		LoopBudget = 1e9
		whole, _, err := m.Run(f, size, coll.Float32, coll.Sum, RunOptions{})
		require.NoError(t, err)
		require.Equal(t, "schedule back-to-back x3", whole.Mode)
		LoopBudget = 100_000
		row, _, err := m.Run(f, size, coll.Float32, coll.Sum, RunOptions{})
		require.NoError(t, err)
		require.Equal(t, "schedule back-to-back x3 (saving from 128M)", row.Mode)
		t.Logf("%v: %.2f µs, the whole loop %.2f (%+.4f%%)", f, row.TimeUs, whole.TimeUs, 100*(row.TimeUs/whole.TimeUs-1))
		require.InEpsilon(t, whole.TimeUs, row.TimeUs, 0.001)
		exact, _, err := m.Run(f, size, coll.Float32, coll.Sum, RunOptions{Exact: true})
		require.NoError(t, err)
		require.Equal(t, "schedule back-to-back x3", exact.Mode)
		require.Equal(t, whole.TimeUs, exact.TimeUs)
	}
}

// A result without op records holds no reference to its replay's engine (LinkName, a method of
// the engine, kept the whole replay alive): simccl run keeps every call's result until its
// output, and on 128 DGX-1 V100 nodes `-c all` peaked at 7.0 GB for that, 1.5 GB without.
func TestRunReleasesReplay(t *testing.T) {
	m, _ := testMachine(t, "dgx-h100", 2, nil, "", "")
	_, res, err := m.Run(coll.AllReduce, 1<<20, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Empty(t, res.Ops)
	require.Nil(t, res.LinkName)
	_, res, err = m.Run(coll.AllReduce, 1<<20, coll.Float32, coll.Sum, RunOptions{Record: true})
	require.NoError(t, err)
	require.NotEmpty(t, res.Ops)
	require.NotNil(t, res.LinkName)
	require.NotEmpty(t, res.LinkName(res.Ops[0].Route[0]))
}
