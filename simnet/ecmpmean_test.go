package simnet

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/planner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The ECMP mean model by default (Machine.Run) against the exact replay (RunOptions.Exact) on
// non-blocking fabrics with few hosts per leaf, where ECMP's hash collisions bind: within 1%
// wherever it stands (meanTooFar). Before the backlog check (a link over twice its capacity was
// the only bar) the model stood in every case below: 16 nodes with 2 per leaf −20.3% at 64 MiB,
// 4 per leaf −2.38% at 16 MiB, 32 nodes with 8 per leaf −1.69% at 16 MiB. 16 nodes with 4 per
// leaf at 1 GiB kept the model (−0.27%) until the tree replay's probe (treeWork): the first 32
// chunks of every rank now fit the exact replay's budget there and are extrapolated (+0.00%).
// 32 nodes with 16 per leaf at 1 GiB keep the model (its probe, −0.01%).
func TestECMPMeanWithinOnePercent(t *testing.T) {
	cases := []struct {
		nodes, perLeaf int
		size           int64
		mean           bool // the mean model stands
	}{
		{16, 2, 64 << 20, false},
		{16, 4, 16 << 20, false},
		{32, 8, 16 << 20, false},
		{16, 4, 1 << 30, false},
		{32, 16, 1 << 30, true},
	}
	for _, c := range cases {
		fab := DefaultFabric()
		require.NoError(t, fab.Set("hosts_per_leaf", fmt.Sprint(c.perLeaf)))
		m, _ := testMachine(t, "dgx-h100", c.nodes, fab, "tree", "")
		def, exact := defaultAndExact(t, m, coll.AllReduce, c.size)
		require.Equal(t, "Tree", def.Algo)
		rel := def.TimeUs/exact.TimeUs - 1
		t.Logf("%d nodes, %d per leaf, %d MiB: %s %.2f µs, exact %.2f µs (%+.2f%%)", c.nodes, c.perLeaf, c.size>>20, def.Mode, def.TimeUs, exact.TimeUs, 100*rel)
		require.Equal(t, c.mean, strings.Contains(def.Mode, "ecmp-mean"), "%d nodes, %d per leaf, %d MiB: mode %s", c.nodes, c.perLeaf, c.size>>20, def.Mode)
		require.Less(t, rel, 0.01)
		require.Greater(t, rel, -0.01)
	}
}

// All-to-all where ECMP's hash collisions bind (SimulateP2P) against the exact replay. On 12 DGX
// H100 nodes with 2 per leaf, 2 MiB, a leaf's two uplinks carry what the hash put on them for the
// whole call, more than their busy time in the mean model's replay (W > B): the model alone is
// 2.4% fast and with W − B added (the fallback past coarseWork) 2.3% slow, so every rank is
// replayed with a rate interval (rate-interval-N), which is slow, never fast, and within 1%. On
// 128 one-GPU nodes under the default fabric's 32 uplinks a leaf the overloads come in bursts and
// no link owes anything, yet the model's replay is 1.0% fast at 4 MiB (5.9% at 16 MiB): links over
// their capacity hold back the batches they carry, which the mean leaves out. There twice the
// largest backlog passes 1% of the time, the bar trees and rings keep the model within, and the
// interval replay runs where it fits the budgets (since stop 48; the model stood before).
func TestECMPMeanAllToAll(t *testing.T) {
	cases := []struct {
		nodes, perLeaf, gpus int
		size                 int64
		meanSlow             bool // past coarseWork the model (with W − B) is over 1% slow; else over 1% fast
	}{
		{12, 2, 0, 2 << 20, true},
		{128, 32, 1, 4 << 20, false},
	}
	for _, c := range cases {
		fab := DefaultFabric()
		require.NoError(t, fab.Set("hosts_per_leaf", fmt.Sprint(c.perLeaf)))
		m, _ := settingsMachine(t, "dgx-h100", c.nodes, c.gpus, fab, planner.Settings{})
		// The modes are compared on the GPUs' time: no host floor (an all-to-all on these ranks
		// would otherwise take NCCL's enqueue of its sends and receives in every mode).
		m.Launch = LaunchGraph
		def, exact := defaultAndExact(t, m, coll.AllToAll, c.size)
		require.Equal(t, "p2p-compact", exact.Mode)
		rel := def.TimeUs/exact.TimeUs - 1
		t.Logf("%d nodes (%d GPUs), %d per leaf, %d MiB: %s %.2f µs, exact %.2f µs (%+.2f%%)", c.nodes, c.gpus, c.perLeaf, c.size>>20, def.Mode, def.TimeUs, exact.TimeUs, 100*rel)
		require.Less(t, rel, 0.01)
		require.GreaterOrEqual(t, rel, 0.0) // deferred rate computations only delay
		require.Contains(t, def.Mode, "rate-interval-")
		require.NotContains(t, def.Mode, "ecmp-mean")
		// Past coarseWork the mean model stands, with the work its busiest link owes added: an
		// upper estimate where a link owes work, here over 1% either way.
		var mean Row
		var err error
		withoutCoarseReplay(func() { mean, _, err = m.Run(coll.AllToAll, c.size, coll.Float32, coll.Sum, RunOptions{}) })
		require.NoError(t, err)
		require.Contains(t, mean.Mode, "ecmp-mean")
		t.Logf("  past coarseWork: %s %.2f µs (%+.2f%%)", mean.Mode, mean.TimeUs, 100*(mean.TimeUs/exact.TimeUs-1))
		if c.meanSlow {
			require.Greater(t, mean.TimeUs, exact.TimeUs*(1+0.01))
		} else {
			require.Less(t, mean.TimeUs, exact.TimeUs*(1-0.01))
			// The row says its links were backlogged beyond the bar (Row.MeanBacklog).
			require.Greater(t, mean.MeanBacklog, MaxCoarseError)
		}
		require.Zero(t, def.MeanBacklog)
	}
}

// defaultAndExact is m's row for f of size bytes (float sum) as Run times it by default and with
// Exact.
func defaultAndExact(t *testing.T, m *Machine, f coll.Func, size int64) (def, exact Row) {
	t.Helper()
	def, _, err := m.Run(f, size, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	exact, _, err = m.Run(f, size, coll.Float32, coll.Sum, RunOptions{Exact: true})
	require.NoError(t, err)
	return def, exact
}

// The replay of every rank leaves out the links another implies (p2pPrune): the rates are the
// same max-min allocation, so the times are those of the computation over every link, to
// rounding, with and without a rate interval.
func TestReplayAllPruned(t *testing.T) {
	fab := DefaultFabric()
	require.NoError(t, fab.Set("hosts_per_leaf", "2"))
	m, _ := settingsMachine(t, "dgx-h100", 12, 0, fab, planner.Settings{})
	for _, exact := range []bool{true, false} {
		p2pPrune = true
		pruned, _, err := m.Run(coll.AllToAll, 2<<20, coll.Float32, coll.Sum, RunOptions{Exact: exact})
		require.NoError(t, err)
		p2pPrune = false
		whole, _, err := m.Run(coll.AllToAll, 2<<20, coll.Float32, coll.Sum, RunOptions{Exact: exact})
		p2pPrune = true
		require.NoError(t, err)
		require.Equal(t, whole.Mode, pruned.Mode)
		t.Logf("exact %v: %s %.6f µs pruned, %.6f µs whole", exact, pruned.Mode, pruned.TimeUs, whole.TimeUs)
		require.InDelta(t, whole.TimeUs, pruned.TimeUs, 1e-6*whole.TimeUs)
	}
}

// On 32 DGX H100 nodes with 2 per leaf the mean model with W − B is 1.3% slow at 1 MiB against
// the replay of every rank with a rate interval (+1.3…+3.1% at 1–8 MiB, over the 1% bar): the
// budgets (coarseBound, coarseWork) let that replay run there.
func TestRateIntervalAt32Nodes(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3 s replay")
	}
	fab := DefaultFabric()
	require.NoError(t, fab.Set("hosts_per_leaf", "2"))
	m, _ := settingsMachine(t, "dgx-h100", 32, 0, fab, planner.Settings{})
	// The modes are compared on the GPUs' time: no host floor (an all-to-all on these ranks
	// would otherwise take NCCL's enqueue of its sends and receives in every mode).
	m.Launch = LaunchGraph
	row, _, err := m.Run(coll.AllToAll, 1<<20, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Contains(t, row.Mode, "rate-interval-")
	var mean Row
	withoutCoarseReplay(func() { mean, _, err = m.Run(coll.AllToAll, 1<<20, coll.Float32, coll.Sum, RunOptions{}) })
	require.NoError(t, err)
	require.Contains(t, mean.Mode, "ecmp-mean")
	t.Logf("32 nodes, 2 per leaf, 1 MiB: %s %.2f µs; %s %.2f µs (%+.2f%%)", row.Mode, row.TimeUs, mean.Mode, mean.TimeUs, 100*(mean.TimeUs/row.TimeUs-1))
	require.Greater(t, mean.TimeUs, row.TimeUs*1.01)
}

// A link over twice its capacity for a while whose work still fits its busy time (tiny
// messages, every rank's leaving at once: 192 one-GPU nodes, 32 per leaf, 32 KiB) and whose
// backlog is far within the 1% bar keeps the mean model rather than sending the call to the
// replay of every rank, which took tens of seconds there for a time 0.33% away (97.72 against
// the model's 97.40 µs: docs/cluster.md, "ECMP: the mean model").
func TestECMPMeanAllToAllOverTwiceOwingNothing(t *testing.T) {
	m, _ := settingsMachine(t, "dgx-h100", 192, 1, nil, planner.Settings{})
	row, _, err := m.Run(coll.AllToAll, 32<<10, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, "p2p-compact, latency-mean, ecmp-mean", row.Mode)
	require.Zero(t, row.MeanBacklog, "within the bar: no warning")
}

// Where the mean model is too far to stand (a hashed link over twice its capacity that owes
// work), the replay of every rank with a rate interval runs whatever its work: its alternative is
// the exact replay of every rank, with no bound. 8 nodes of the aws-p5 file (4 EFA NICs a GPU, no
// NVLink), 4 per leaf, 4 MiB: a link at 2.24× its capacity; with coarseWork too small for any try
// the interval replay still stands (0.75 s, +0.11% from the exact replay's 5.6 s), where it
// used to give way to the exact replay (on 24 nodes at 16 MiB that took 404 s; the interval
// replay 10.8 s, +0.17%).
func TestRateIntervalWhereMeanTooFar(t *testing.T) {
	m, _ := settingsMachine(t, "../testdata/topos/aws-p5-48xl-h100-32efa-2026.xml", 8, 0, leafFabric(t, 4), planner.Settings{})
	var row Row
	var err error
	withoutCoarseReplay(func() { row, _, err = m.Run(coll.AllToAll, 4<<20, coll.Float32, coll.Sum, RunOptions{}) }) // a budgeted try would stop at once
	require.NoError(t, err)
	require.Contains(t, row.Mode, "rate-interval-")
	exact, _, err := m.Run(coll.AllToAll, 4<<20, coll.Float32, coll.Sum, RunOptions{Exact: true})
	require.NoError(t, err)
	rel := row.TimeUs/exact.TimeUs - 1
	t.Logf("%s %.3f µs, exact %.3f µs (%+.2f%%)", row.Mode, row.TimeUs, exact.TimeUs, 100*rel)
	require.GreaterOrEqual(t, rel, 0.0) // deferred rate computations only delay
	require.Less(t, rel, 0.01)
}

// leafFabric is the default fabric with perLeaf hosts under a leaf.
func leafFabric(t *testing.T, perLeaf int) *Fabric {
	t.Helper()
	fab := DefaultFabric()
	require.NoError(t, fab.Set("hosts_per_leaf", fmt.Sprint(perLeaf)))
	return fab
}

// pastCheckPairs runs an all-to-all of size on m with checkPairs lowered to 1: every symmetric
// replay past it.
func pastCheckPairs(m *Machine, size int64, opt RunOptions) (Row, error) {
	old := checkPairs
	checkPairs = 1
	defer func() { checkPairs = old }()
	row, _, err := m.Run(coll.AllToAll, size, coll.Float32, coll.Sum, opt)
	return row, err
}

// Past checkPairs the symmetric replay of an all-to-all stands unchecked: its relaxed links are
// not checked, so under ECMP it is the mean model without the work a hashed link may owe
// (P2PResult.Unchecked), where the checked row is the interval replay of every rank. Where no
// link owes anything (128 one-GPU nodes, default fabric, 1 MiB) that leaves out only the batches
// the links over their capacity hold back (until stop 48 the checked row was the mean model
// there too, the same to the bit; −0.66% with one-stage network messages, −1.77% since stop 54's
// two stages, Timing.NetStage, whose NIC stages run uncapped into the links the mean model evens
// out); where the hash collisions bind (12 DGX H100 nodes with 2 per
// leaf, 2 MiB) also the owed work: a few percent fast (docs/cluster.md, "Unchecked").
func TestP2PUncheckedPastCheckPairs(t *testing.T) {
	cases := []struct {
		nodes, perLeaf, gpus int
		size                 int64
		lo, hi               float64 // the unchecked row's error against the checked one
	}{
		{128, 32, 1, 1 << 20, -0.03, 0},
		{12, 2, 0, 2 << 20, -0.05, -0.005},
	}
	for _, c := range cases {
		m, _ := settingsMachine(t, "dgx-h100", c.nodes, c.gpus, leafFabric(t, c.perLeaf), planner.Settings{})
		// The modes are compared on the GPUs' time: no host floor (an all-to-all on these ranks
		// would otherwise take NCCL's enqueue of its sends and receives in every mode).
		m.Launch = LaunchGraph
		checked, _, err := m.Run(coll.AllToAll, c.size, coll.Float32, coll.Sum, RunOptions{})
		require.NoError(t, err)
		require.NotContains(t, checked.Mode, "unchecked")
		unchecked, err := pastCheckPairs(m, c.size, RunOptions{})
		require.NoError(t, err)
		rel := unchecked.TimeUs/checked.TimeUs - 1
		t.Logf("%d nodes, %d per leaf, %d MiB: %s %.3f µs, checked %s %.3f µs (%+.2f%%)", c.nodes, c.perLeaf, c.size>>20, unchecked.Mode, unchecked.TimeUs, checked.Mode, checked.TimeUs, 100*rel)
		require.Equal(t, "p2p-compact, latency-mean, ecmp-mean, unchecked", unchecked.Mode)
		require.Contains(t, checked.Mode, "rate-interval-")
		require.Less(t, rel, c.hi)
		require.Greater(t, rel, c.lo)
	}
}

// On an oversubscribed fabric (its leaves' uplinks kept as stand-ins) the replay past checkPairs
// is, under ECMP, the mean model, which SimulateP2P does not let stand there: the call is refused
// with the way out, unless the mean model is asked for (MeanOversubscribed: the row then says
// ecmp-mean, unchecked) or the replay is Exact. The mean model is 6.7–12.9% fast on the checked
// replay in these cells (2026-11-29; docs/cluster.md, "Unchecked"). Rail routing spreads the
// all-to-all evenly over its uplinks: unchecked is the checked row there, oversubscribed or not.
func TestP2PUncheckedOversubscribed(t *testing.T) {
	cases := []struct {
		nodes, perLeaf int
		over, routing  string
		size           int64
	}{
		{8, 4, "2", "ecmp", 1 << 20},
		{16, 8, "2", "ecmp", 4 << 20},
		{16, 8, "2", "rail", 4 << 20},
	}
	for _, c := range cases {
		fab := leafFabric(t, c.perLeaf)
		require.NoError(t, fab.Set("oversubscription", c.over))
		require.NoError(t, fab.Set("routing", c.routing))
		m, _ := settingsMachine(t, "dgx-h100", c.nodes, 0, fab, planner.Settings{})
		// The modes are compared on the GPUs' time: no host floor (an all-to-all on these ranks
		// would otherwise take NCCL's enqueue of its sends and receives in every mode).
		m.Launch = LaunchGraph
		checked, _, err := m.Run(coll.AllToAll, c.size, coll.Float32, coll.Sum, RunOptions{})
		require.NoError(t, err)
		require.NotContains(t, checked.Mode, "unchecked")
		refused, errRefused := pastCheckPairs(m, c.size, RunOptions{})
		mean, errMean := pastCheckPairs(m, c.size, RunOptions{MeanOversubscribed: true})
		if c.nodes == 8 { // Exact is never unchecked (the replay of every rank: slow on more)
			exact, err := pastCheckPairs(m, c.size, RunOptions{Exact: true})
			require.NoError(t, err)
			require.NotContains(t, exact.Mode, "unchecked")
			// The checked row under ECMP, uplinks over their capacity: every rank with a rate
			// interval, within MaxCoarseError of the exact replay.
			require.Contains(t, checked.Mode, "rate-interval-")
			require.InEpsilon(t, exact.TimeUs, checked.TimeUs, MaxCoarseError)
		}
		require.NoError(t, errMean)
		if c.routing == "rail" {
			require.NoError(t, errRefused)
			require.Contains(t, refused.Mode, "unchecked")
			require.Equal(t, checked.TimeUs, refused.TimeUs)
			continue
		}
		require.Error(t, errRefused, "%s %d nodes: refused past checkPairs", c.routing, c.nodes)
		require.ErrorContains(t, errRefused, "oversubscribed")
		require.ErrorContains(t, errRefused, "simulate fewer ranks")
		// The symmetric replay over kept stand-ins runs with a rate interval (linkBound).
		require.Contains(t, mean.Mode, "p2p-compact, ecmp-mean, unchecked, rate-interval-")
		rel := mean.TimeUs/checked.TimeUs - 1
		t.Logf("%d nodes, %d per leaf, %s:1, %d MiB: mean model unchecked %.3f µs, checked %s %.3f µs (%+.2f%%)", c.nodes, c.perLeaf, c.over, c.size>>20, mean.TimeUs, checked.Mode, checked.TimeUs, 100*rel)
		require.Less(t, rel, -0.05)
	}
}

// A point-to-point call with more connections than maxConnections is refused with the count,
// not walked for hours (an all-to-all on 16,384 DGX H100 nodes: 1.7e10); Exact still runs it.
func TestP2PRefusesPastMaxConnections(t *testing.T) {
	m, _ := settingsMachine(t, "dgx-h100", 2, 0, DefaultFabric(), planner.Settings{})
	old := maxConnections
	maxConnections = 100
	defer func() { maxConnections = old }()
	_, _, err := m.Run(coll.AllToAll, 64<<20, coll.Float32, coll.Sum, RunOptions{})
	require.ErrorContains(t, err, "16 ranks exchange")
	require.ErrorContains(t, err, "simulate fewer ranks")
	row, _, err := m.Run(coll.AllToAll, 64<<20, coll.Float32, coll.Sum, RunOptions{Exact: true})
	require.NoError(t, err)
	require.Greater(t, row.TimeUs, 0.0)
}

// withoutCoarseReplay runs f with the budgeted replay of every rank never tried (coarseWork 1,
// and no growth of the budgets with the backlog), so that the ECMP mean model stands where it
// would stand past the budgets.
func withoutCoarseReplay(f func()) {
	oldWork, oldScale := coarseWork, backlogMaxScale
	coarseWork, backlogMaxScale = 1, 1
	defer func() { coarseWork, backlogMaxScale = oldWork, oldScale }()
	f()
}

// TestBacklogBudget: the replay budgets grow with the square of the backlog over backlogRef, at
// most backlogMaxScale times, and the work budget is then half the replay's own bound.
func TestBacklogBudget(t *testing.T) {
	for _, c := range []struct {
		ratio, bound float64
		limit        float64
		work         uint64
	}{
		{0, 1e8, coarseBound, coarseWork},
		{0.024, 2.13e8, coarseBound, coarseWork}, // 64 DGX H100 nodes, 2 per leaf, 1 MiB: the model stands
		{0.05, 2e8, coarseBound, coarseWork},
		{0.069, 6.7e9, 0.069 * 0.069 / 0.0025 * coarseBound, 3350e6}, // 128 DGX H100 nodes, 1 GiB, two channels a network peer (limit 305 M)
		{0.125, 6.71e9, 6.25 * coarseBound, 3355e6},                  // the same, NCCL 2.28's one: the model stands (limit 1.0 G)
		{0.10, 3e8, 4 * coarseBound, 150e6},
		{0.169, 2.1e8, 8 * coarseBound, 105e6},    // 128 one-GPU nodes, 256 MiB
		{0.181, 8.39e8, 8 * coarseBound, 419.5e6}, // 128 one-GPU nodes, 1 GiB: replayed since stop 53
		{0.5, 1e7, 8 * coarseBound, coarseWork},   // a small replay keeps coarseWork
		{0.9, 8.4e8, 8 * coarseBound, 420e6},
	} {
		limit, work := backlogBudget(c.ratio, c.bound)
		require.InDelta(t, c.limit, limit, 1, "ratio %.3f", c.ratio)
		require.Equal(t, c.work, work, "ratio %.3f", c.ratio)
	}
}

// TestAllToAllBackloggedReplay: 128 one-GPU nodes on the default fabric, all-to-all of 256 MiB,
// whose ECMP mean model is backlogged (twice the largest backlog 17% of its time at stop 49) and
// was 11.2% fast: its work bound is past coarseBound, within the backlog's budget, so every rank
// is replayed with a rate interval within 1% of the exact replay: `simccl run --gpus 1 --nodes
// 128 -c alltoall -b 256M -e 256M --exact`, 6,880.87 µs in 7 s on this project's 2-core machine
// (stop 54, network messages in two stages, Timing.NetStage; 6,710.19 µs in 6 min 25 s at stop
// 53 with one stage, 6,609.99 at stop 49 with two channels a network peer).
func TestAllToAllBackloggedReplay(t *testing.T) {
	m, _ := settingsMachine(t, "dgx-h100", 128, 1, nil, planner.Settings{})
	row, _, err := m.Run(coll.AllToAll, 256<<20, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Contains(t, row.Mode, "rate-interval-")
	require.Zero(t, row.MeanBacklog)
	require.InEpsilon(t, 6880.87, row.TimeUs, 0.01)
}

// A host-bound all-to-all keeps the ECMP mean model (P2PSpec.HostFloor): where the model's time
// with its owed work, times hostBoundMargin, is under the host floor, the replay of every rank
// would refine a GPU time the row does not show. The row is the floor either way; its GPU time is
// the model's, within 1% of the replay of every rank here, and Exact still replays every rank.
// On an oversubscribed fabric under ECMP the model is the replay over the kept stand-ins (since
// stop 66; before, every rank was replayed there). Under rail routing, where the fixed routes put
// a relaxed link over its capacity (18 nodes, 4 a leaf: the last leaf half empty), the model is the
// replay over the stand-ins with the work those links owe (rail-owed, since stop 68; before, every
// rank was replayed, which at 100 nodes took minutes).
func TestP2PHostBoundKeepsMeanModel(t *testing.T) {
	cases := []struct {
		name    string
		nodes   int
		fab     *Fabric
		size    int64
		mode    string // the row's
		gpuMode string // a part of the GPU time's mode (the replay of every rank)
	}{
		{"16 nodes, 2 a leaf", 16, leafFabric(t, 2), 256 << 10, "p2p-compact, latency-mean, ecmp-mean", "rate-interval-"},
		{"16 nodes, 4 a leaf, 2:1", 16, fabricOf(t, "oversubscription", "2", "hosts_per_leaf", "4"), 64 << 10, "p2p-compact, ecmp-mean, rate-interval-6ns", "rate-interval-"},
		{"18 nodes, 4 a leaf, rail", 18, fabricOf(t, "routing", "rail", "hosts_per_leaf", "4"), 64 << 10, "p2p-compact, latency-mean, rail-owed", "rate-interval-"},
	}
	for _, c := range cases {
		m, _ := settingsMachine(t, "dgx-h100", c.nodes, 0, c.fab, planner.Settings{})
		row, _, err := m.Run(coll.AllToAll, c.size, coll.Float32, coll.Sum, RunOptions{})
		require.NoError(t, err)
		require.True(t, row.HostBound, c.name)
		require.Equal(t, c.mode, row.Mode, c.name)
		require.Less(t, hostBoundMargin*row.DeviceUs, row.TimeUs, c.name)
		gpu, _, err := m.Run(coll.AllToAll, c.size, coll.Float32, coll.Sum, RunOptions{GPUTime: true})
		require.NoError(t, err)
		require.NotContains(t, gpu.Mode, "ecmp-mean", c.name) // no floor: the replay of every rank
		require.NotContains(t, gpu.Mode, "rail-owed", c.name)
		require.Contains(t, gpu.Mode, c.gpuMode, c.name)
		t.Logf("%s: floor %.2f µs; GPU time: model %.3f µs, replay of every rank %.3f µs (%s)", c.name, row.TimeUs, row.DeviceUs, gpu.TimeUs, gpu.Mode)
		require.InEpsilon(t, gpu.TimeUs, row.DeviceUs, 0.01, c.name)
		exact, _, err := m.Run(coll.AllToAll, c.size, coll.Float32, coll.Sum, RunOptions{Exact: true})
		require.NoError(t, err)
		require.Equal(t, "p2p-compact", exact.Mode, c.name)
		require.Equal(t, row.TimeUs, exact.TimeUs, c.name)
	}
}

// A replay of every rank projected past P2PDeferWork (a quarter of it before a quarter of the
// symmetric replay's time) gives way to two smaller sizes, where a pair at most an eighth of the
// size exists (since stop 66): on 4 DGX H100 nodes under a 2:1 fat tree (the kept stand-ins' replay,
// then every rank with a rate interval) the all-to-all of 1 GiB comes from 64 and 128 MiB within
// 0.1% of that replay; at 256 MiB no pair is small enough and the replay runs whatever it costs.
func TestP2PDeferWork(t *testing.T) {
	m, _ := settingsMachine(t, "dgx-h100", 4, 0, fabricOf(t, "topology", "fattree", "hosts_per_leaf", "2", "oversubscription", "2"), planner.Settings{})
	defer func(w uint64) { P2PDeferWork = w }(P2PDeferWork)
	run := func(size int64, work uint64) Row {
		P2PDeferWork = work
		row, _, err := m.Run(coll.AllToAll, size, coll.Float32, coll.Sum, RunOptions{GPUTime: true})
		require.NoError(t, err)
		return row
	}
	full := run(1<<30, 1<<62)
	require.Contains(t, full.Mode, "rate-interval-")
	deferred := run(1<<30, 4_000_000)
	require.True(t, strings.HasPrefix(deferred.Mode, "sizes-steady (64 MiB"), deferred.Mode)
	rel := deferred.TimeUs/full.TimeUs - 1
	t.Logf("1 GiB: every rank %.3f µs (%s), deferred %.3f µs (%s), %+.4f%%", full.TimeUs, full.Mode, deferred.TimeUs, deferred.Mode, 100*rel)
	require.Less(t, math.Abs(rel), 0.001)
	small := run(256<<20, 4)
	require.Equal(t, run(256<<20, 1<<62), small)
	require.Contains(t, small.Mode, "rate-interval-")
}

// The replay of one rank per orbit past symWork goes on with a rate interval (Engine.pastWork):
// within MaxCoarseError/2 of the same replay run exactly, and the row names the interval. The
// budget is lowered here so that a small cluster passes it; GB200 NVL72 all-to-alls pass the
// real one from about 4 racks (docs/cluster.md). The interval can hide a relaxed link's brief
// overload that the exact replay sees (GB200 ×2 at 256 MiB: ecmp-mean exactly, not with the
// interval; the times 0.007% apart).
func TestSymmetricPastSymWork(t *testing.T) {
	cases := []struct {
		topo  string
		nodes int
		size  int64
	}{
		{"dgx-h100", 16, 64 << 20},
		{"gb200-nvl72", 2, 256 << 20},
		{"dgx-a100", 8, 256 << 20},
	}
	for _, c := range cases {
		m, _ := settingsMachine(t, c.topo, c.nodes, 0, nil, planner.Settings{})
		old := symWork
		symWork = 1 << 62
		exact, _, err := m.Run(coll.AllToAll, c.size, coll.Float32, coll.Sum, RunOptions{})
		symWork = 10_000
		past, _, err2 := m.Run(coll.AllToAll, c.size, coll.Float32, coll.Sum, RunOptions{})
		symWork = old
		require.NoError(t, err)
		require.NoError(t, err2)
		rel := past.TimeUs/exact.TimeUs - 1
		t.Logf("%s ×%d, %d MiB: %s %.6f µs, exactly %s %.6f µs (%+.4f%%)", c.topo, c.nodes, c.size>>20, past.Mode, past.TimeUs, exact.Mode, exact.TimeUs, 100*rel)
		require.NotContains(t, exact.Mode, "rate-interval")
		require.Contains(t, past.Mode, "rate-interval")
		if math.Abs(rel) > MaxCoarseError/2 {
			t.Errorf("%s ×%d: %+.3f%% from the exact replay, past MaxCoarseError/2", c.topo, c.nodes, 100*rel)
		}
	}
}

// A tree all-reduce whose ECMP mean model is too far to stand replays every rank, which can take
// minutes at thousands of nodes: a progress bar follows that replay against the symmetric
// replay's time for the same chunks (ReplayProgress), and the replay gives the bar up when done.
func TestTreeReplayProgress(t *testing.T) {
	fab := DefaultFabric()
	require.NoError(t, fab.Set("hosts_per_leaf", "2"))
	m, _ := testMachine(t, "dgx-h100", 16, fab, "tree", "")
	row, _, _ := followedAllReduce(t, m)
	require.Equal(t, "Tree", row.Algo)
	require.NotContains(t, row.Mode, "ecmp-mean", "the mean model must be too far here (docs/cluster.md: 37.6%% fast)")
}

// followedAllReduce runs a 1 GiB all-reduce on m while watching ReplayProgress: it requires that
// a replay was followed, advanced, and gave the bar up when done, and returns the row, the
// expectation the bar was given and how far it saw the replay go.
func followedAllReduce(t *testing.T, m *Machine) (row Row, expect, most Time) {
	t.Helper()
	done := make(chan Row)
	go func() {
		row, _, err := m.Run(coll.AllReduce, 1<<30, coll.Float32, coll.Sum, RunOptions{})
		assert.NoError(t, err)
		done <- row
	}()
	for {
		select {
		case row := <-done:
			require.Positive(t, expect, "the replay of every rank was never followed")
			require.Positive(t, most, "the followed replay never advanced")
			p, ok := ReplayProgress()
			require.False(t, ok, "the replay kept the progress bar after it ended: %+v", p)
			return row, expect, most
		default:
			if p, ok := ReplayProgress(); ok && !p.Steps {
				expect, most = Time(p.Expect), max(most, Time(p.Done))
			}
			runtime.Gosched()
		}
	}
}

// Where the ECMP mean model of a tree all-reduce is too far to stand, the replay of every rank
// runs unless it would be past farMessages or farWork (guessed before, or counted as it runs):
// then the mean model stands, as --ecmp-mean would time it, with its backlog on the row. On 16
// DGX H100 nodes with 2 a leaf at 1 GiB the model is 5.5% fast (8,266.9 against 8,750.4 µs), so
// the budgets are lowered here to see it; they keep every replay measured up to 2,048 nodes.
func TestTreeFarPastBudgets(t *testing.T) {
	fab := DefaultFabric()
	require.NoError(t, fab.Set("hosts_per_leaf", "2"))
	m, _ := testMachine(t, "dgx-h100", 16, fab, "tree", "")
	run := treeAllReduce(t, m)
	replay := run(RunOptions{})
	require.NotContains(t, replay.Mode, "ecmp-mean")
	require.Zero(t, replay.MeanBacklog)
	mean := run(RunOptions{MeanOversubscribed: true})
	require.Contains(t, mean.Mode, "ecmp-mean")
	require.Less(t, mean.TimeUs, 0.97*replay.TimeUs, "the model is far off here")

	defer func(m int64, w uint64, g float64) { farMessages, farWork, farGuess = m, w, g }(farMessages, farWork, farGuess)
	for _, c := range []struct {
		name     string
		messages int64
		work     uint64
		guess    float64
	}{
		{"past farMessages", 1, farWork, farGuess},
		{"past farWork, guessed", farMessages, 1, farGuess},
		{"past farWork as it runs", farMessages, 1, 0}, // no guess: the replay starts and stops
	} {
		farMessages, farWork, farGuess = c.messages, c.work, c.guess
		row := run(RunOptions{})
		t.Logf("%s: %s %.3f µs, backlog %.3f (replay %.3f, mean %.3f)", c.name, row.Mode, row.TimeUs, row.MeanBacklog, replay.TimeUs, mean.TimeUs)
		require.Equal(t, mean.Mode, row.Mode, c.name)
		require.InDelta(t, mean.TimeUs, row.TimeUs, 1e-9*mean.TimeUs, c.name)
		require.Greater(t, row.MeanBacklog, MaxCoarseError, "%s: the row carries the backlog that judged the model too far", c.name)
	}
}

// A point-to-point call whose ECMP mean model is too far to stand (a link over twice its capacity
// owing work) replays every rank with a rate interval unless that replay would be past
// farMessages or runs past farP2PWork: then the model stands with the work its links owe, backlogged,
// and Machine.Run times the row from two smaller sizes where their replays fit (p2pSizesSteady),
// below SizesMin if need be. 24 GB200 NVL72 racks, send/recv of 64 MiB (four uplinks carry three
// of the 24 transfers across the fabric): the interval replay takes about a second; the budgets
// are lowered here to see the rest.
func TestP2PFarPastBudgets(t *testing.T) {
	m, _ := testMachine(t, "gb200-nvl72", 24, DefaultFabric(), "", "")
	run := func(noSizes bool) Row {
		m.tmpl.sizes = p2pSizesCache{} // the smaller sizes' rows are replayed again
		row, _, err := m.Run(coll.SendRecv, 64<<20, coll.Float32, coll.Sum, RunOptions{noSizes: noSizes})
		require.NoError(t, err)
		return row
	}
	replay := run(false)
	require.Contains(t, replay.Mode, "rate-interval", "every rank replayed with a rate interval")
	require.Zero(t, replay.MeanBacklog)

	defer func(m int64, w uint64) { farMessages, farP2PWork = m, w }(farMessages, farP2PWork)
	for _, c := range []struct {
		name     string
		messages int64
		work     uint64
	}{
		{"past farMessages", 1, farP2PWork},
		{"past farP2PWork as it runs", farMessages, 1},
	} {
		farMessages, farP2PWork = c.messages, c.work
		row := run(true) // the model, as where no smaller pair fits the budgets
		t.Logf("%s: %s %.3f µs, backlog %.3f (replay %.3f µs)", c.name, row.Mode, row.TimeUs, row.MeanBacklog, replay.TimeUs)
		require.Contains(t, row.Mode, "ecmp-mean", c.name)
		require.Greater(t, row.MeanBacklog, MaxCoarseError, c.name)
		require.Greater(t, row.TimeUs, replay.TimeUs, "%s: the model with its owed work is the upper estimate here", c.name)
		// With the smaller sizes, whose replays fit: the line through 16 and 32 MiB (under
		// SizesMin), where the interval replay of 64 MiB is.
		row = run(false)
		t.Logf("%s, smaller sizes: %s %.3f µs", c.name, row.Mode, row.TimeUs)
		require.True(t, strings.HasPrefix(row.Mode, "sizes-steady (16 MiB: "), "%s: %s", c.name, row.Mode)
		require.InDelta(t, replay.TimeUs, row.TimeUs, 1e-3*replay.TimeUs, c.name)
	}
}

// farProjection stops the replay that SimulateP2P tries where the mean model is too far to stand
// once it has visited half its work, if it has not yet simulated a third of the expected time by
// then; a replay that has decides once and runs on to its budget.
func TestFarProjection(t *testing.T) {
	for _, c := range []struct {
		name string
		now  Time // simulated when the visits reach half the work
		want error
	}{
		{"a third simulated: runs on", 100 * Nanosecond, nil},
		{"under a third: stops", 99 * Nanosecond, errBudget},
	} {
		e := NewEngine(nil)
		var chained int
		e.abort = func() error { chained++; return nil }
		stop := farProjection(e, 1000, 300*Nanosecond)
		e.CompVisited, e.now = 499, 10*Nanosecond
		require.NoError(t, stop(), "%s: before half the work nothing is decided", c.name)
		e.CompVisited, e.now = 500, c.now
		require.Equal(t, c.want, stop(), c.name)
		e.CompVisited, e.now = 900, c.now+Nanosecond
		require.NoError(t, stop(), "%s: decided once", c.name)
		require.Equal(t, 3, chained, "%s: the abort the engine had is still asked", c.name)
	}
}

// A replay of every rank past P2PDeferMessages gives way to two smaller sizes (p2pSizesSteady),
// whose line is that replay's time; where no pair of smaller sizes has the call's plan in its
// steady state the full-size replay runs after all. 16 DGX-1 V100 nodes, send/recv: every rank is
// replayed (hashed uplinks collide), about 130 K messages at 256 MiB.
func TestP2PDeferredToSmallerSizes(t *testing.T) {
	m, _ := testMachine(t, "dgx1-v100", 16, DefaultFabric(), "", "")
	var messages int
	run := func(size int64) Row {
		m.tmpl.sizes = p2pSizesCache{}
		row, res, err := m.Run(coll.SendRecv, size, coll.Float32, coll.Sum, RunOptions{})
		require.NoError(t, err)
		messages = res.Messages
		return row
	}
	full := run(256 << 20)
	require.Equal(t, "p2p-compact", full.Mode, "every rank replayed, under the deferral bar")
	small := run(1 << 20)
	require.Greater(t, messages, 1000, "the 1 MiB replay is past the lowered bar below")

	defer func(d int64) { P2PDeferMessages = d }(P2PDeferMessages)
	P2PDeferMessages = 1000
	row := run(256 << 20)
	require.True(t, strings.HasPrefix(row.Mode, "sizes-steady ("), row.Mode)
	require.InDelta(t, full.TimeUs, row.TimeUs, 1e-9*full.TimeUs, "the line through two smaller sizes is the replay's time")
	// 1 MiB: no smaller size has its plan with chains of NCCL_STEPS messages, so the replay runs.
	again := run(1 << 20)
	require.Equal(t, small.Mode, again.Mode)
	require.Equal(t, small.TimeUs, again.TimeUs)
}

// Rail routing whose fixed routes put a relaxed link over its capacity (a leaf left partly empty)
// replays every rank with the symmetric replay's rate interval, as an oversubscribed fabric does
// (since stop 68; before, exactly): within MaxCoarseError/2 of the exact replay.
func TestRailOverCapacityInterval(t *testing.T) {
	cases := []struct {
		topo         string
		nodes, perLf int
		size         int64
	}{
		{"dgx-h100", 18, 4, 8 << 20},
		{"dgx-a100", 20, 8, 1 << 20},
	}
	for _, c := range cases {
		fab := fabricOf(t, "routing", "rail", "hosts_per_leaf", strconv.Itoa(c.perLf))
		m, _ := settingsMachine(t, c.topo, c.nodes, 0, fab, planner.Settings{})
		row, _, err := m.Run(coll.AllToAll, c.size, coll.Float32, coll.Sum, RunOptions{GPUTime: true})
		require.NoError(t, err)
		exact, _, err := m.Run(coll.AllToAll, c.size, coll.Float32, coll.Sum, RunOptions{Exact: true, GPUTime: true})
		require.NoError(t, err)
		rel := row.TimeUs/exact.TimeUs - 1
		t.Logf("%s ×%d, %d a leaf, %d KiB: %s %.3f µs, exactly %.3f µs (%+.3f%%)", c.topo, c.nodes, c.perLf, c.size>>10, row.Mode, row.TimeUs, exact.TimeUs, 100*rel)
		require.Contains(t, row.Mode, "rate-interval-")
		require.Equal(t, "p2p-compact", exact.Mode)
		require.Less(t, math.Abs(rel), MaxCoarseError/2)
	}
}
