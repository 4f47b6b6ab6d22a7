package simnet

import (
	"math"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/tuning"
	"github.com/stretchr/testify/require"
)

// railMachine is bench/sim's cluster: DGX H100 nodes through the graph pipeline on a
// rail-optimized fat tree with destination-mod-k routing.
func railMachine(t testing.TB, nodes int) *Machine {
	t.Helper()
	fab := DefaultFabric()
	fab.Routing = "rail"
	m, _ := testMachine(t, "dgx-h100", nodes, fab, "tree", "simple")
	return m
}

func runTree(t testing.TB, m *Machine, spec TreeSpec) (*TreeResult, *Engine) {
	t.Helper()
	e := NewEngine(nil)
	cl, err := NewCluster(e, m.Node, m.Nodes, m.Fabric)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := TimingFor("", coll.Tree, spec.Proto)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Trees == nil {
		spec.Trees = treesOf(m)
	}
	res, err := SimulateTreeDetail(e, cl, spec, tm)
	if err != nil {
		t.Fatal(err)
	}
	return res, e
}

// sameTree checks that two replays of one all-reduce agree on the time and on every link's bytes
// and busy time, to rel.
func sameTree(t *testing.T, what string, a, b *TreeResult, ea, eb *Engine, rel float64) {
	t.Helper()
	if d := math.Abs(float64(a.Time-b.Time)) / float64(b.Time); d > rel {
		t.Errorf("%s: %v against %v (%.2g apart)", what, a.Time, b.Time, d)
	}
	sameLinks(t, what, ea, eb, rel)
	if ea.Now() != eb.Now() {
		t.Errorf("%s: clocks at %v and %v", what, ea.Now(), eb.Now())
	}
}

// sameLinks checks that two engines' links carried the same bytes for the same busy time, to rel.
func sameLinks(t *testing.T, what string, ea, eb *Engine, rel float64) {
	t.Helper()
	var worstBytes, worstBusy float64
	for l := 0; l < ea.NumLinks(); l++ {
		x, y := ea.LinkBytes(LinkID(l)), eb.LinkBytes(LinkID(l))
		if (x > 0) != (y > 0) {
			t.Fatalf("%s: link %s carried %g bytes against %g", what, ea.LinkName(LinkID(l)), x, y)
		}
		if y > 0 {
			worstBytes = max(worstBytes, math.Abs(x-y)/y)
			bx, by := ea.LinkBusy(LinkID(l)), eb.LinkBusy(LinkID(l))
			worstBusy = max(worstBusy, math.Abs(float64(bx-by))/float64(by))
		}
	}
	if worstBytes > rel || worstBusy > rel {
		t.Errorf("%s: link bytes up to %.2g apart, busy times %.2g", what, worstBytes, worstBusy)
	}
}

// The symmetric replay (one representative per class) gives the per-rank replay's time and link
// statistics on bench/sim's cluster, at several sizes.
func TestTreeSymmetricMatchesPerRank(t *testing.T) {
	cases := []struct {
		nodes int
		bytes int64
	}{{8, 1 << 20}, {8, 64 << 20}, {8, 1 << 30}, {16, 256 << 20}}
	for _, c := range cases {
		m := railMachine(t, c.nodes)
		ch, err := tableOf(m).Select(tuning.Call{Func: coll.AllReduce, Count: c.bytes / 4, ElemSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		spec := TreeSpec{Bytes: c.bytes, Proto: coll.Simple, Trees: treesOf(m)[:ch.NChannels], Chunk: ch.ChunkSize}
		a, ea := runTree(t, m, spec)
		spec.PerRank = true
		b, eb := runTree(t, m, spec)
		if !a.Symmetric || b.Symmetric {
			t.Fatalf("%d nodes: symmetric flags %v and %v", c.nodes, a.Symmetric, b.Symmetric)
		}
		if n := ch.NChannels * m.NRanks(); a.Groups*2 > n || b.Groups != n {
			t.Errorf("%d nodes: %d classes and %d per-rank vertices for %d pairs", c.nodes, a.Groups, b.Groups, n)
		}
		t.Logf("%d nodes %d B: %v, %d classes, %d messages against %d (%.2f ps apart)", c.nodes, c.bytes, a.Time, a.Groups,
			a.Messages, b.Messages, math.Abs(float64(a.Time-b.Time)))
		sameTree(t, "symmetric vs per-rank", a, b, ea, eb, 1e-6)
	}
}

// On the hand-made HGX model every pair of channels 0..7 and 8..15 is identical (same trees,
// same routes): those classes carry two connections per link. With ECMP across leaves (64 nodes,
// two leaves) symmetry may be partial or absent; either way the time is the per-rank one.
func TestTreeSymmetricHGX(t *testing.T) {
	for _, c := range []struct {
		nodes   int
		routing string
	}{{8, "rail"}, {64, "ecmp"}} {
		fab := DefaultFabric()
		fab.Routing = c.routing
		m, _ := testMachine(t, "dgx-h100", c.nodes, fab, "tree", "")
		spec := TreeSpec{Bytes: 32 << 20, Proto: coll.Simple}
		a, ea := runTree(t, m, spec)
		spec.PerRank = true
		b, eb := runTree(t, m, spec)
		t.Logf("%d nodes %s: %v symmetric=%v (%d vertices), per-rank %v", c.nodes, c.routing, a.Time, a.Symmetric, a.Groups, b.Time)
		sameTree(t, c.routing, a, b, ea, eb, 1e-6)
	}
}

// Steady-state extrapolation: simulating 32 of 128 chunks and adding one period per further chunk
// stays within 0.5% of simulating them all.
func TestTreeSteadyClose(t *testing.T) {
	m := railMachine(t, 64)
	spec := TreeSpec{Bytes: 1 << 30, Proto: coll.Simple, Chunk: 512 << 10, Trees: treesOf(m)}
	exact, _ := runTree(t, m, spec)
	spec.MaxMessages = 1 // as few chunks as allowed
	steady, es := runTree(t, m, spec)
	if exact.Chunks != 128 || exact.Period != 0 || steady.Chunks != minSteadyChunks || steady.Period <= 0 {
		t.Fatalf("chunks %d/%d, periods %v/%v", exact.Chunks, steady.Chunks, exact.Period, steady.Period)
	}
	rel := float64(steady.Time-exact.Time) / float64(exact.Time)
	t.Logf("exact %v, %d chunks + %d × %v = %v (%+.3f%%)", exact.Time, steady.Chunks, 128-steady.Chunks, steady.Period, steady.Time, 100*rel)
	if math.Abs(rel) > 0.005 {
		t.Errorf("extrapolated %v against %v (%+.2f%%)", steady.Time, exact.Time, 100*rel)
	}
	if es.Now() != steady.Time {
		t.Errorf("engine clock %v, time %v", es.Now(), steady.Time)
	}
	// Bytes stay exact: every connection carries every chunk.
	_, ee := runTree(t, m, TreeSpec{Bytes: 1 << 30, Proto: coll.Simple, Chunk: 512 << 10, Trees: treesOf(m)})
	for l := 0; l < ee.NumLinks(); l++ {
		if x, y := es.LinkBytes(LinkID(l)), ee.LinkBytes(LinkID(l)); math.Abs(x-y) > 1e-6*y {
			t.Fatalf("link %s: %g bytes extrapolated, %g simulated", ee.LinkName(LinkID(l)), x, y)
		}
	}
}

func TestTreeBadInput(t *testing.T) {
	m := railMachine(t, 2)
	e := NewEngine(nil)
	cl, err := NewCluster(e, m.Node, m.Nodes, m.Fabric)
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := TimingFor("", coll.Tree, coll.Simple)
	short := coll.ChannelTree{Up: []int{-1, 0}, Down: [][]int{{1}, nil}}
	cyc := coll.ChannelTree{Up: make([]int, m.NRanks()), Down: make([][]int, m.NRanks())}
	for _, c := range []struct {
		name string
		spec TreeSpec
	}{
		{"no trees", TreeSpec{Bytes: 1 << 20}},
		{"short tree", TreeSpec{Bytes: 1 << 20, Trees: []coll.ChannelTree{short}}},
		{"no root", TreeSpec{Bytes: 1 << 20, Trees: []coll.ChannelTree{cyc}}},
		{"negative merge", TreeSpec{Bytes: 1 << 20, Trees: treesOf(m), Merge: -1}},
		{"bad protocol", TreeSpec{Bytes: 1 << 20, Trees: treesOf(m), Proto: coll.NumProtos}},
	} {
		if _, err := SimulateTree(e, cl, c.spec, tm); err == nil {
			t.Errorf("%s: no error", c.name)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
}

// Where the tree replay's probe (its first minSteadyChunks chunks) costs too much to go on
// (treeWork), the probe is extrapolated (tree-steady-32) instead of replaying every chunk the
// message budget allows: 0.000% from the whole replay here (16 DGX H100 nodes, 1 GiB, 128
// chunks a channel), and on 128 PCIe nodes at 128 MiB +0.10% in 2 s instead of 27.
func TestTreeProbe(t *testing.T) {
	defer func(w uint64) { treeWork = w }(treeWork)
	m, _ := testMachine(t, "dgx-h100", 16, nil, "tree", "simple")
	whole, _, err := m.Run(coll.AllReduce, 1<<30, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, "tree-compact", whole.Mode)
	treeWork = 1
	probe, _, err := m.Run(coll.AllReduce, 1<<30, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, "tree-steady-32", probe.Mode)
	t.Logf("probe %.2f µs, whole %.2f (%+.3f%%)", probe.TimeUs, whole.TimeUs, 100*(probe.TimeUs/whole.TimeUs-1))
	require.InEpsilon(t, whole.TimeUs, probe.TimeUs, 0.002, "probe %.2f µs, whole %.2f", probe.TimeUs, whole.TimeUs)
	exact, _, err := m.Run(coll.AllReduce, 1<<30, coll.Float32, coll.Sum, RunOptions{Exact: true})
	require.NoError(t, err)
	require.Equal(t, "tree-compact", exact.Mode, "Exact replays every chunk")
	require.Equal(t, whole.TimeUs, exact.TimeUs)
}

// Where the trees have no symmetry to fold (NCCL's double binary tree on a node count that is not
// a power of two) every rank is replayed, and that replay stops at its probe too where the whole
// would cost too much (treeWork): 11 PCIe nodes, 256 MiB, within 0.5% of every chunk's replay.
// (Until stop 38 it replayed every chunk: 100 pcie-8gpu-2socket nodes at 256 MiB took 376 s,
// now 8 s, −0.05%.)
func TestTreeProbeWithoutSymmetry(t *testing.T) {
	defer func(w uint64) { treeWork = w }(treeWork)
	m, _ := testMachine(t, "pcie-8gpu-2socket", 11, nil, "tree", "simple")
	spec := TreeSpec{Bytes: 256 << 20, Proto: coll.Simple}
	treeWork = 1
	probe, _ := runTree(t, m, spec)
	spec.Exact = true
	whole, _ := runTree(t, m, spec)
	t.Logf("probe %v (%d of %d chunks, %d vertices), every chunk %v (%+.3f%%)", probe.Time, probe.Chunks, probe.Loops,
		probe.Groups, whole.Time, 100*(float64(probe.Time)/float64(whole.Time)-1))
	require.False(t, probe.Symmetric)
	require.Equal(t, minSteadyChunks, probe.Chunks)
	require.Equal(t, whole.Loops, whole.Chunks)
	require.InEpsilon(t, float64(whole.Time), float64(probe.Time), 0.005)
}

// A tree replay past symWork flow visits goes on with a rate interval (treeSim.interval) where
// its rate computations visit at least intervalVisits flows an event, and stays within
// MaxCoarseError/2 of the exact replay. 16 PCIe nodes of 8 GPUs (one NIC: both trees' connections
// of a node share it), 1 GiB under ECMP, with symWork lowered so that the interval starts early in
// the call and intervalVisits so that it is taken (such computations are large only from a few
// hundred of these nodes); with intervalVisits as it is, the replay stays exact.
func TestTreeIntervalPastSymWork(t *testing.T) {
	defer func(w uint64, v, b float64) { symWork, intervalVisits, intervalBlockVisits = w, v, b }(symWork, intervalVisits, intervalBlockVisits)
	// The judgement at symWork alone (TestTreeIntervalFromLaterBlock has the later blocks', which
	// blocks of symWork lowered to 2,000 visits would reach).
	intervalBlockVisits = math.Inf(1)
	m, _ := testMachine(t, "pcie-8gpu-2socket", 16, DefaultFabric(), "tree", "")
	run := treeAllReduce(t, m)
	before := run(RunOptions{})
	require.NotContains(t, before.Mode, "rate-interval")
	exact := run(RunOptions{Exact: true})
	symWork = 2_000
	small := run(RunOptions{})
	require.Equal(t, before.Mode, small.Mode, "few flows an event: exact past symWork")
	require.InDelta(t, before.TimeUs, small.TimeUs, 1e-9*before.TimeUs)
	intervalVisits = 0
	row := run(RunOptions{})
	t.Logf("%s %.3f µs; %s %.3f µs; exact %.3f µs", before.Mode, before.TimeUs, row.Mode, row.TimeUs, exact.TimeUs)
	require.Contains(t, row.Mode, "rate-interval")
	require.NotEqual(t, before.TimeUs, row.TimeUs, "the interval changes the replay")
	require.InEpsilon(t, exact.TimeUs, row.TimeUs, MaxCoarseError/2)
}

// treeAllReduce returns a run of m's all-reduce of 1 GiB with the given options, checked to be Tree.
func treeAllReduce(t *testing.T, m *Machine) func(RunOptions) Row {
	return func(opt RunOptions) Row {
		t.Helper()
		row, _, err := m.Run(coll.AllReduce, 1<<30, coll.Float32, coll.Sum, opt)
		require.NoError(t, err)
		require.Equal(t, "Tree", row.Algo)
		return row
	}
}

// prunedAndWhole replays spec on m with the implied links left out (treePrune) and without.
func prunedAndWhole(t *testing.T, m *Machine, spec TreeSpec) (pruned, whole *TreeResult, ep, ew *Engine) {
	t.Helper()
	defer func(v bool) { treePrune = v }(treePrune)
	treePrune = true
	pruned, ep = runTree(t, m, spec)
	treePrune = false
	whole, ew = runTree(t, m, spec)
	return pruned, whole, ep, ew
}

// The replay of every rank leaves out the links another implies (treePrune; Engine.pruneImplied):
// the same max-min allocation, so the same time and the same bytes and busy time on every link, to
// rounding, with fewer links in its computations. 11 PCIe nodes of 8 GPUs and one NIC (no
// symmetry: every rank replayed).
func TestTreeReplayPruned(t *testing.T) {
	m, _ := testMachine(t, "pcie-8gpu-2socket", 11, nil, "tree", "simple")
	pruned, whole, ep, ew := prunedAndWhole(t, m, TreeSpec{Bytes: 256 << 20, Proto: coll.Simple})
	t.Logf("pruned %v (%d links, %d flows visited), whole %v (%d, %d)", pruned.Time, pruned.LinkVisits, pruned.Visits,
		whole.Time, whole.LinkVisits, whole.Visits)
	require.False(t, whole.Symmetric)
	require.Equal(t, whole.Mode(), pruned.Mode())
	require.Equal(t, whole.Events, pruned.Events)
	require.Less(t, float64(pruned.LinkVisits), 0.8*float64(whole.LinkVisits))
	require.InEpsilon(t, float64(whole.Time), float64(pruned.Time), 1e-6)
	sameLinks(t, "pruned", ep, ew, 1e-6)
	require.Equal(t, ep.Now()-ew.Now(), pruned.Time-whole.Time, "clocks advanced by the times")
}

// A symmetric tree replay that went on exactly at symWork is judged again on each further block of
// symWork visits: it takes the rate interval from a block that visited intervalBlockVisits flows
// an event (the symmetric replay of 2,048 PCIe nodes: 14.9 flows an event up to symWork, then 270,
// exactly for more than 8 minutes before). 16 PCIe nodes under rail routing (symmetric), 1 GiB,
// with symWork lowered: the first judgement refused (intervalVisits out of reach), a later block's
// taken where intervalBlockVisits allows it, within MaxCoarseError/2 of the exact replay; refused
// again where it does not, and the row is the exact one.
func TestTreeIntervalFromLaterBlock(t *testing.T) {
	defer func(w uint64, v, b float64) { symWork, intervalVisits, intervalBlockVisits = w, v, b }(symWork, intervalVisits, intervalBlockVisits)
	fab := DefaultFabric()
	require.NoError(t, fab.Set("routing", "rail"))
	m, _ := testMachine(t, "pcie-8gpu-2socket", 16, fab, "tree", "")
	run := treeAllReduce(t, m)
	exact := run(RunOptions{Exact: true})
	symWork, intervalVisits = 2_000, 1e9
	intervalBlockVisits = 1e9
	refused := run(RunOptions{})
	require.NotContains(t, refused.Mode, "rate-interval")
	intervalBlockVisits = 0
	later := run(RunOptions{})
	t.Logf("exact %.3f µs; refused %s %.3f µs; later block %s %.3f µs", exact.TimeUs, refused.Mode, refused.TimeUs, later.Mode, later.TimeUs)
	require.Contains(t, later.Mode, "rate-interval")
	require.NotEqual(t, refused.TimeUs, later.TimeUs)
	require.InEpsilon(t, exact.TimeUs, later.TimeUs, MaxCoarseError/2)
}

// On the 2:1 fat tree with 2 queue pairs a connection (TestQPsCompactMatchesExact's cluster) the
// pruned replay of every rank is the unpruned one's to rounding: 981.305 against 981.302 µs, the
// largest difference pruning made in this package's tree cases, and the same link statistics.
func TestTreeReplayPrunedOversubscribed(t *testing.T) {
	f := fabricOf(t, "topology", "fattree", "hosts_per_leaf", "2", "oversubscription", "2")
	f.QPs = 2
	m, _ := testMachine(t, "dgx-h100", 8, f, "tree", "simple")
	pruned, whole, ep, ew := prunedAndWhole(t, m, TreeSpec{Bytes: 64 << 20, Proto: coll.Simple})
	t.Logf("pruned %v (%d links), whole %v (%d links), %.2g apart", pruned.Time, pruned.LinkVisits, whole.Time, whole.LinkVisits,
		math.Abs(float64(pruned.Time-whole.Time))/float64(whole.Time))
	require.False(t, whole.Symmetric)
	require.Equal(t, whole.Mode(), pruned.Mode())
	require.InEpsilon(t, float64(whole.Time), float64(pruned.Time), 1e-5)
	sameLinks(t, "pruned", ep, ew, 1e-5)
}

// Where the quotient keeps half the vertices (the two trees' mirror alone: nodes whose one NIC
// carries both trees), the ECMP mean model's replay runs within treeWork; past it the replay of
// every rank runs and is the row where it fits its budgets, and past those the mean model's
// replay runs whole and stands. 16 PCIe nodes of 8 GPUs and one NIC, 4 a leaf, 1 GiB: the mean
// model's replay is cheap there and stands; with treeWork lowered it is not.
func TestTreeLittleSymmetryRanksFirst(t *testing.T) {
	defer func(s float64, w, tw uint64) { littleSymmetry, farWork, treeWork = s, w, tw }(littleSymmetry, farWork, treeWork)
	m, _ := testMachine(t, "pcie-8gpu-2socket", 16, fabricOf(t, "hosts_per_leaf", "4"), "tree", "")
	run := treeAllReduce(t, m)
	cheap := run(RunOptions{})
	treeWork = 1
	first := run(RunOptions{})
	littleSymmetry = math.Inf(1)
	meanFirst := run(RunOptions{})
	littleSymmetry = 0.5
	farWork = 1
	past := run(RunOptions{})
	t.Logf("cheap %s %.3f µs; every rank %s %.3f µs; mean model %s %.3f µs; past farWork %s %.3f µs", cheap.Mode, cheap.TimeUs,
		first.Mode, first.TimeUs, meanFirst.Mode, meanFirst.TimeUs, past.Mode, past.TimeUs)
	require.Contains(t, cheap.Mode, "ecmp-mean")
	require.NotContains(t, first.Mode, "ecmp-mean")
	require.Contains(t, meanFirst.Mode, "ecmp-mean")
	require.Equal(t, meanFirst.Mode, past.Mode)
	require.Equal(t, meanFirst.TimeUs, past.TimeUs)
	require.InEpsilon(t, first.TimeUs, meanFirst.TimeUs, MaxCoarseError)
}

// A replay of at most twice the probe's chunks runs whole where its work stays within treeWork,
// and is stopped past it, the probe then standing (tree-steady-32), as a longer call's would: 1,024
// PCIe nodes at 1 GiB (56 chunks a connection under the message budget) 93 → 22 s, +0.009%. 11
// PCIe nodes (no symmetry), 64 MiB (64 chunks a connection).
func TestTreeProbeWithinTwice(t *testing.T) {
	defer func(w uint64) { treeWork = w }(treeWork)
	m, _ := testMachine(t, "pcie-8gpu-2socket", 11, nil, "tree", "simple")
	spec := TreeSpec{Bytes: 64 << 20, Proto: coll.Simple}
	whole, _ := runTree(t, m, spec)
	treeWork = 1
	probe, _ := runTree(t, m, spec)
	t.Logf("whole %v (%d of %d chunks), stopped %v (%d chunks), %+.3f%%", whole.Time, whole.Chunks, whole.Loops,
		probe.Time, probe.Chunks, 100*(float64(probe.Time)/float64(whole.Time)-1))
	require.Greater(t, whole.Chunks, minSteadyChunks)
	require.LessOrEqual(t, whole.Chunks, 2*minSteadyChunks)
	require.Equal(t, whole.Loops, whole.Chunks)
	require.Equal(t, minSteadyChunks, probe.Chunks)
	require.InEpsilon(t, float64(whole.Time), float64(probe.Time), 0.005)
}

// The replay of every rank that a quotient with little symmetry gives way to (treeWork passed in
// the mean model's replay) has a progress bar as the one after a mean model too far to stand:
// without it `simccl run` showed events alone for the minutes 2,048 PCIe nodes take. 64 PCIe nodes
// with 4 a leaf at 1 GiB, treeWork lowered to send the call there.
func TestTreeLittleSymmetryProgress(t *testing.T) {
	defer func(tw uint64) { treeWork = tw }(treeWork)
	m, _ := testMachine(t, "pcie-8gpu-2socket", 64, fabricOf(t, "hosts_per_leaf", "4"), "tree", "")
	treeWork = 100_000 // a few of the mean model's steps, then past it
	row, expect, most := followedAllReduce(t, m)
	require.NotContains(t, row.Mode, "ecmp-mean", "the replay of every rank must have run")
	t.Logf("%s %.3f µs; bar seen at %v of ~%v", row.Mode, row.TimeUs, most, expect)
}
