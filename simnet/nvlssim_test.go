package simnet

import (
	"os"
	"sync"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/stretchr/testify/require"
)

// exactNVLS replays plan's whole schedule (Simulate) on the cluster Run replays it on
// (engineFor), the reference of the symmetric replay.
func exactNVLS(t *testing.T, m *Machine, plan coll.Plan, tm Timing) *Result {
	t.Helper()
	s, err := coll.Compile(plan)
	require.NoError(t, err)
	e, cl, err := m.engineFor(plan.Algo)
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
		tm, err := m.PlanTiming(plan)
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

// Past NVLSBudget the symmetric replay extrapolates from two replays of whole loops, keeping the
// call's last, partial loop: on 4 DGX H100 nodes (NVLSTree, 16 channels, 128 loops of 8 chunks
// at 1 GiB) from 16 and 32 loops, against the folded replay of every loop (the schedule's time,
// TestNVLSCompactMatchesSchedule). Exact refuses the extrapolation.
func TestNVLSSymmetricSteady(t *testing.T) {
	m, _ := testMachine(t, "dgx-h100", 4, nil, "", "")
	plan, _, err := m.Plan(coll.AllReduce, 1<<30, coll.Float32, coll.Sum)
	require.NoError(t, err)
	require.Equal(t, coll.NVLSTree, plan.Algo)
	tm, err := m.PlanTiming(plan)
	require.NoError(t, err)
	whole, mode, err := m.nvlsSymmetric(plan, tm, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, "nvls-symmetric", mode)

	defer func(b float64) { NVLSBudget = b }(NVLSBudget)
	_, cl, err := m.engine()
	require.NoError(t, err)
	f, ok := nvlsFoldOf(plan, cl)
	require.True(t, ok)
	p32 := f.withLoops(plan, 32).plan(plan)
	NVLSBudget = p32.EstimatedSteps()
	l1, l2, ok := f.steadyPair(plan, NVLSBudget, NVLSMinLoops, NVLSMinChunks)
	require.True(t, ok)
	require.Equal(t, [2]int64{16, 32}, [2]int64{l1, l2})
	got, mode, err := m.nvlsSymmetric(plan, tm, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, "nvls-symmetric-steady (128M, 256M)", mode)
	rel := got.Time.Micros()/whole.Time.Micros() - 1
	t.Logf("%s %.2f µs, every loop %.2f µs: %+.4f%%", mode, got.Time.Micros(), whole.Time.Micros(), 100*rel)
	require.InDelta(t, 0, rel, 0.005) // the issue allows 1%; measured +0.10%
	dry, dmode, err := m.nvlsSymmetric(plan, tm, RunOptions{DryRun: true})
	require.NoError(t, err)
	require.NotNil(t, dry)
	require.Equal(t, mode, dmode)

	ex, _, err := m.nvlsSymmetric(plan, tm, RunOptions{Exact: true})
	require.NoError(t, err)
	require.Nil(t, ex, "Exact: no extrapolation")
	// Too few loops for a steady pair: none.
	NVLSBudget = 1000
	none, _, err := m.nvlsSymmetric(plan, tm, RunOptions{})
	require.NoError(t, err)
	require.Nil(t, none)
}

// chanRouter routes every message between nodes over a link that depends on the channel (mod
// period): channels fold only onto representatives that take the same links.
type chanRouter struct{ n, period int }

func (r chanRouter) NumRanks() int { return r.n }
func (r chanRouter) Route(src, dst, ch int, buf []LinkID) ([]LinkID, LinkClass) {
	return append(buf, LinkID(ch%r.period)), ClassNet
}

func TestNVLSFoldNeedsSameLinks(t *testing.T) {
	p := coll.Plan{Func: coll.AllReduce, Algo: coll.NVLSTree, Proto: coll.Simple, NRanks: 32, NNodes: 4,
		NChannels: 16, Count: 1 << 20, DataType: coll.Float32}
	for _, c := range []struct{ period, want int }{{1, 2}, {2, 2}, {4, 4}, {8, 8}, {16, 0}, {3, 0}} {
		f, ok := nvlsFoldOf(p, chanRouter{32, c.period})
		require.Equal(t, c.want > 0, ok, "period %d", c.period)
		if ok {
			require.Equal(t, c.want, f.period)
			require.Equal(t, 16/c.want, f.members)
			require.True(t, f.exact)
		}
	}
	// One node: nothing crosses the network, every channel folds onto one.
	p.Algo, p.NRanks, p.NNodes = coll.NVLS, 8, 1
	f, ok := nvlsFoldOf(p, chanRouter{8, 16})
	require.True(t, ok)
	require.Equal(t, 1, f.period)
}

// Machine.Run replays NVLS and NVLSTree calls above CompactQuiet symmetrically (mode
// nvls-symmetric, NCCL's decision, the schedule's time), a dry run names the mode, and Record
// keeps the schedule.
func TestNVLSSymmetricRun(t *testing.T) {
	m, _ := testMachine(t, "dgx-h100", 2, nil, "", "")
	const size = 256 << 20
	sched, _, err := m.Run(coll.AllReduce, size, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, "schedule", sched.Mode)
	defer func(q int64) { CompactQuiet = q }(CompactQuiet)
	CompactQuiet = 1000
	row, _, err := m.Run(coll.AllReduce, size, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, "nvls-symmetric", row.Mode)
	require.Equal(t, "NVLSTree", row.Algo)
	require.Empty(t, row.NCCL)
	require.InDelta(t, sched.TimeUs, row.TimeUs, sched.TimeUs*1e-9)
	dry, _, err := m.Run(coll.AllReduce, size, coll.Float32, coll.Sum, RunOptions{DryRun: true})
	require.NoError(t, err)
	require.Equal(t, row.Mode, dry.Mode)
	rec, res, err := m.Run(coll.AllReduce, 1<<20, coll.Float32, coll.Sum, RunOptions{Record: true})
	require.NoError(t, err)
	require.Equal(t, "schedule", rec.Mode)
	require.NotEmpty(t, res.Ops)
}

// Back-to-back timing (RunOptions.BackToBack) replays the schedule while it fits: the symmetric
// replay times one call.
func TestNVLSSymmetricKeepsBackToBack(t *testing.T) {
	m, _ := testMachine(t, "dgx-h100", 1, nil, "", "")
	defer func(q int64) { CompactQuiet = q }(CompactQuiet)
	CompactQuiet = 1000
	row, _, err := m.Run(coll.AllReduce, 16<<20, coll.Float32, coll.Sum, RunOptions{BackToBack: 3})
	require.NoError(t, err)
	require.Equal(t, "NVLS", row.Algo)
	require.Equal(t, "schedule back-to-back x3", row.Mode)
	row, _, err = m.Run(coll.AllReduce, 16<<20, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, "nvls-symmetric", row.Mode)
}

// Under ECMP the channels of an NVLSTree call cross the spine on uplinks of their own, so no
// two take the same links and the same-link fold finds nothing; the checked fold (nvlsecmp.go)
// folds them by leaf and latency, leaves the switch links out and checks every real one. Where
// none goes over its capacity it is the schedule's time; where one does it stops and the call
// is timed without it.
func TestNVLSCheckedFoldMatchesSchedule(t *testing.T) {
	for _, c := range []struct {
		nodes, perLeaf int
		oversub        float64
		size           int64
		folds          bool
	}{
		{8, 4, 1, 32 << 20, true}, // two leaves per rail, four uplinks each
		{16, 8, 1, 16 << 20, true},
		{16, 8, 4, 16 << 20, false}, // 4:1 oversubscribed leaves: uplinks over their capacity
	} {
		fab := DefaultFabric()
		fab.HostsPerLeaf, fab.Oversub = c.perLeaf, c.oversub
		m, _ := testMachine(t, "dgx-h100", c.nodes, fab, "NVLSTree", "")
		plan, tm, e, cl := nvlsTreeCall(t, m, c.size)
		_, same := nvlsFoldOf(plan, cl)
		require.False(t, same, "%d nodes: ECMP spreads the channels over the spine", c.nodes)
		f, _, ok := nvlsFoldChecked(plan, cl, e)
		require.True(t, ok)
		require.Equal(t, 2, f.period)
		want := exactNVLS(t, m, plan, tm)
		got, mode, err := m.nvlsSymmetric(plan, tm, RunOptions{})
		require.NoError(t, err)
		if !c.folds {
			require.Nil(t, got, "%d nodes, %g:1: a relaxed link over its capacity", c.nodes, c.oversub)
			continue
		}
		require.NotNil(t, got)
		require.Equal(t, "nvls-symmetric", mode)
		rel := got.Time.Micros()/want.Time.Micros() - 1
		t.Logf("%d nodes, %d per leaf: %.6f µs, schedule %.6f µs (%+.2e), events %d / %d", c.nodes, c.perLeaf,
			got.Time.Micros(), want.Time.Micros(), rel, got.Events, want.Events)
		require.InDelta(t, 0, rel, 1e-8) // the same rates: a few picoseconds of rounding
		require.Less(t, got.Events, want.Events/4)
	}
}

// Leaving out the links whose constraint another link implies (Options.prune) changes no rate:
// the same time, and the same bytes and busy time on every link, with fewer links in the rate
// computations (the PCIe links between a GPU and its NIC, under the NIC's port).
func TestPruneImpliedSameReplay(t *testing.T) {
	m, _ := testMachine(t, "dgx-h100", 4, nil, "NVLSTree", "")
	_, tm, s := scheduleOf(t, m, coll.AllReduce, 32<<20)
	var res [2]*Result
	var engines [2]*Engine
	for i, prune := range []bool{false, true} {
		e, cl, err := m.engine()
		require.NoError(t, err)
		res[i], err = Simulate(e, cl, s, tm, Options{prune: prune})
		require.NoError(t, err)
		engines[i] = e
	}
	pruned := 0
	for l := range engines[1].links {
		if lk := &engines[1].links[l]; lk.lazy && !lk.relaxed {
			pruned++
		}
	}
	require.Positive(t, pruned)
	require.InDelta(t, res[0].Time.Micros(), res[1].Time.Micros(), res[0].Time.Micros()*1e-7) // rounding: picoseconds
	for l := 0; l < engines[0].NumLinks(); l++ {
		b0, b1 := engines[0].LinkBytes(LinkID(l)), engines[1].LinkBytes(LinkID(l))
		require.InDelta(t, b0, b1, 1+b0*1e-9, "link %s", engines[0].LinkName(LinkID(l)))
		require.InDelta(t, float64(engines[0].LinkBusy(LinkID(l))), float64(engines[1].LinkBusy(LinkID(l))), 1e3, "link %d", l)
	}
	t.Logf("%d links pruned; %.6f / %.6f µs; recomputed flows %d -> %d", pruned, res[0].Time.Micros(), res[1].Time.Micros(),
		engines[0].CompVisited, engines[1].CompVisited)
}

// The steady-state extrapolation of the checked fold on 128 DGX H100 nodes (default fabric,
// ECMP) against the folded replay of every loop (exact: the checked fold is the schedule's time)
// at 768 MiB (96 loops of 64 KiB chunks), the largest size whose whole folded plan coll compiles.
// From 40 and 80 loops (the pair NVLSBudget gives 768 MiB and 1 GiB) it must be within 1%; the
// pairs 24/48 (48 loops extrapolated, as the 1 GiB row does from 80) and 20/40 are logged. A few
// minutes and 2 GB: SIMCCL_LONG=1.
func TestNVLSSteady128Long(t *testing.T) {
	if os.Getenv("SIMCCL_LONG") == "" {
		t.Skip("SIMCCL_LONG=1: minutes and 2 GB")
	}
	m, _ := testMachine(t, "dgx-h100", 128, nil, "", "")
	plan, tm, e, cl := nvlsTreeCall(t, m, 768<<20)
	f, _, ok := nvlsFoldChecked(plan, cl, e)
	require.True(t, ok)
	defer func(b float64) { NVLSBudget = b }(NVLSBudget)
	NVLSBudget = 4_999_999
	whole, wmode, err := m.nvlsSymmetric(plan, tm, RunOptions{})
	require.NoError(t, err)
	require.NotNil(t, whole)
	require.Equal(t, "nvls-symmetric", wmode)
	for _, l2 := range []int64{80, 48, 40} {
		p2 := f.withLoops(plan, l2).plan(plan)
		NVLSBudget = p2.EstimatedSteps()
		steady, mode, err := m.nvlsSymmetric(plan, tm, RunOptions{})
		require.NoError(t, err)
		require.NotNil(t, steady)
		rel := steady.Time.Micros()/whole.Time.Micros() - 1
		t.Logf("%s %.3f µs, every loop %.3f µs: %+.4f%%", mode, steady.Time.Micros(), whole.Time.Micros(), 100*rel)
		if l2 == 80 {
			require.InDelta(t, 0, rel, 0.01)
		}
	}
}

// nvlsTreeCall is NCCL's plan of an all-reduce of size bytes on m, which must be NVLSTree and not
// substituted, with its timing and the engine and cluster Run replays it on (engineFor: the heads' own NICs).
func nvlsTreeCall(t *testing.T, m *Machine, size int64) (coll.Plan, Timing, *Engine, *Cluster) {
	t.Helper()
	plan, note, err := m.Plan(coll.AllReduce, size, coll.Float32, coll.Sum)
	require.NoError(t, err)
	require.Empty(t, note)
	require.Equal(t, coll.NVLSTree, plan.Algo)
	tm, err := m.PlanTiming(plan)
	require.NoError(t, err)
	e, cl, err := m.engineFor(plan.Algo)
	require.NoError(t, err)
	return plan, tm, e, cl
}

// A checked fold's replay that halts is known to halt from a replay of its first loops
// (nvlsCheck.halts): that replay halts at the same instant, after the same events, as the
// replay of every loop; a probe whose prefix ends before the halt tells nothing, and neither does
// one of a fold that never halts.
func TestNVLSCheckProbe(t *testing.T) {
	type end struct {
		now    Time
		events uint64
		err    error
	}
	var seen []end
	nvlsCheckSeen = func(q *Engine, err error) { seen = append(seen, end{q.Now(), q.Events, err}) }
	defer func() { nvlsCheckSeen = nil }()
	fatTree := func() *Fabric { // examples/fabrics/fattree-3tier-2to1.fabric
		return &Fabric{Topology: "fattree", Tiers: 3, HostsPerLeaf: 4, LeavesPerPod: 16, Oversub: 2, Oversub2: 1,
			UplinkGBps: 100, SwitchLatUs: 0.5, Routing: "ecmp"}
	}
	for _, c := range []struct {
		fab     *Fabric // nil: the default with 8 nodes per leaf and oversub:1 leaves
		oversub float64
		loops   int64 // the probe's
		halts   bool
	}{
		{nil, 4, 16, true},
		{nil, 4, 1, false}, // diverges before the check halts
		{nil, 1, 16, false},
		{fatTree(), 2, 16, true},
	} {
		fab := c.fab
		if fab == nil {
			fab = DefaultFabric()
			fab.HostsPerLeaf, fab.Oversub = 8, c.oversub
		}
		m, _ := testMachine(t, "dgx-h100", 16, fab, "NVLSTree", "")
		plan, tm, e, cl := nvlsTreeCall(t, m, 256<<20)
		f, check, ok := nvlsFoldChecked(plan, cl, e)
		require.True(t, ok)
		require.Equal(t, int64(32), f.wholeLoops(plan))
		seen = seen[:0]
		h, err := check.halts(e, cl, plan, f, tm, c.loops)
		require.NoError(t, err)
		require.Equal(t, c.halts, h, "%g:1, %d loops", c.oversub, c.loops)
		require.Len(t, seen, 1)
		require.ErrorIs(t, seen[0].err, errHalted) // by the check, or at the prefix's end
		if !c.halts {
			continue
		}
		s, err := coll.Compile(f.plan(plan))
		require.NoError(t, err)
		_, err = check.simulate(e, cl, s, tm)
		require.ErrorIs(t, err, errHalted)
		require.Len(t, seen, 2)
		t.Logf("%g:1: the probe of %d loops and the replay of %d halt at %v after %d and %d events", c.oversub, c.loops,
			f.wholeLoops(plan), seen[1].now, seen[0].events, seen[1].events)
		require.Equal(t, seen[1], seen[0])
	}
}

// The probe that follows the node fold's halt (haltProbe), started beside the fold's replay when
// that replay goes on switch-bound (32 nodes of the three-tier 2:1 fat tree, 256 MiB), is the probe
// started after it: one probe, the same halt, the same instant and events.
func TestHaltProbeAhead(t *testing.T) {
	fab := fabricFile(t, "../examples/fabrics/fattree-3tier-2to1.fabric")
	type end struct {
		now    Time
		events uint64
		err    error
	}
	var mu sync.Mutex
	var seen []end
	nvlsCheckSeen = func(q *Engine, err error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, end{q.Now(), q.Events, err})
	}
	defer func() { nvlsCheckSeen, haltProbeAhead = nil, true }()
	m, _ := testMachine(t, "dgx-h100", 32, fab, "NVLSTree", "")
	plan, tm, _, _ := nvlsTreeCall(t, m, 256<<20)
	var ends [2][]end
	for i, ahead := range []bool{false, true} {
		haltProbeAhead = ahead
		seen = nil
		res, mode, err := m.nvlsSymmetric(plan, tm, RunOptions{folds: &foldScheds{}})
		require.NoError(t, err)
		require.Nil(t, res, "the node fold and the probe halt (%s)", mode)
		ends[i] = seen
	}
	require.Len(t, ends[0], 1)
	require.ErrorIs(t, ends[0][0].err, errHalted)
	require.Equal(t, ends[0], ends[1])
}
