package simnet

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/planner"
	"github.com/stretchr/testify/require"
)

// foldVsFull times an NVLSTree all-reduce of size on nodes DGX H100 nodes joined by fab twice: by
// the node fold and by the channel-folded replay of every node (nvlsSymmetric without the node
// fold; itself the schedule's time, TestNVLSCompactMatchesSchedule). The fold's result is nil where
// its check halted it.
func foldVsFull(t *testing.T, nodes int, fab *Fabric, size int64) (fold, full *Result, nf *nodeFold) {
	t.Helper()
	fold, nf = foldOnly(t, nodes, fab, size)
	m, _ := testMachine(t, foldTopo, nodes, fab, "NVLSTree", "")
	plan, tm, _, _ := nvlsTreeCall(t, m, size)
	old := NVLSNodeFoldMin
	NVLSNodeFoldMin = 1 << 30
	defer func() { NVLSNodeFoldMin = old }()
	if foldJitter > 0 {
		engineHook = func(e *Engine) { jitterLatencies(e, foldJitter, foldJitterSeed) }
		defer func() { engineHook = nil }()
	}
	full, mode, err := m.nvlsSymmetric(plan, tm, RunOptions{})
	require.NoError(t, err)
	require.NotNil(t, full)
	require.True(t, strings.HasPrefix(mode, "nvls-symmetric"), mode)
	return fold, full, nf
}

// foldJitter (SIMCCL_FOLD_JITTER_PS in TestNodeFoldSurvey) perturbs the replay of every node of
// foldVsFull as patJitter does the PAT schedule's (SIMCCL_FOLD_SEED: foldJitterSeed).
var (
	foldJitter     Time
	foldJitterSeed uint64
)

// foldTopo is the embedded topology of foldVsFull and foldOnly (TestNodeFoldSurvey:
// SIMCCL_FOLD_TOPO).
var foldTopo = "dgx-h100"

// foldBound: foldOnly replays the fold with stand-ins for the switch links (switch-bound).
var foldBound bool

// foldOnly is the node-folded replay of foldVsFull (nil where its check halted it; never with
// foldBound).
func foldOnly(t *testing.T, nodes int, fab *Fabric, size int64) (fold *Result, nf *nodeFold) {
	t.Helper()
	m, _ := testMachine(t, foldTopo, nodes, fab, "NVLSTree", "")
	plan, tm, e, cl := nvlsTreeCall(t, m, size)
	f, ok := nvlsFoldOf(plan, cl)
	if !ok {
		f, _, ok = nvlsFoldChecked(plan, cl, e)
	}
	require.True(t, ok, "%d nodes: the channels fold", nodes)
	nf = nodeClassesOf(plan, cl, e) // also where it leaves more than half the nodes
	fold, _, _, err := f.nodeFolded(plan, nf, e, cl, tm, RunOptions{}, foldBound)
	require.NoError(t, err)
	return fold, nf
}

// foldSurveyEnv applies the fold surveys' settings for the rest of the test: SIMCCL_FOLD_BUDGET
// (NVLSBudget, so that the replay of every node runs past the default one) and SIMCCL_FOLD_TOPO
// (foldTopo).
func foldSurveyEnv(t *testing.T) {
	if b := os.Getenv("SIMCCL_FOLD_BUDGET"); b != "" {
		v, err := strconv.ParseFloat(b, 64)
		require.NoError(t, err)
		old := NVLSBudget
		t.Cleanup(func() { NVLSBudget = old })
		NVLSBudget = v
	}
	if topo := os.Getenv("SIMCCL_FOLD_TOPO"); topo != "" {
		foldTopo = topo
		t.Cleanup(func() { foldTopo = "dgx-h100" })
	}
}

// surveyFabric is a survey's fabric: the file $PREFIX_FABRIC (default: the default fabric),
// with the settings "key=value,key=value" of $PREFIX_SET applied.
func surveyFabric(t *testing.T, prefix string) *Fabric {
	t.Helper()
	fab := DefaultFabric()
	if path := os.Getenv(prefix + "_FABRIC"); path != "" {
		fab = fabricFile(t, path)
	}
	if set := os.Getenv(prefix + "_SET"); set != "" {
		for _, kv := range strings.Split(set, ",") {
			k, v, _ := strings.Cut(kv, "=")
			require.NoError(t, fab.Set(k, v))
		}
	}
	return fab
}

// TestNodeFoldSurvey prints the node fold's error against the replay of every node for the node
// counts and sizes of SIMCCL_FOLD_SURVEY ("nodes,nodes:sizeMiB,sizeMiB[:rail|ecmp[:perLeaf]]";
// SIMCCL_FOLD_BY_LATENCY set: classes told apart by their routes' latencies too;
// SIMCCL_FOLD_FABRIC: a fabric file instead of the default fabric, SIMCCL_FOLD_SET: settings
// "key=value,key=value" applied to it; SIMCCL_FOLD_TOPO: an embedded topology instead of
// dgx-h100; SIMCCL_FOLD_BUDGET: NVLSBudget, for replays of every node past the default;
// SIMCCL_FOLD_JITTER_PS and SIMCCL_FOLD_SEED: the replay of every node perturbed, foldJitter).
func TestNodeFoldSurvey(t *testing.T) {
	spec := os.Getenv("SIMCCL_FOLD_SURVEY")
	if spec == "" {
		t.Skip("SIMCCL_FOLD_SURVEY not set")
	}
	parts := strings.Split(spec, ":")
	foldSurveyEnv(t)
	fab := surveyFabric(t, "SIMCCL_FOLD")
	if len(parts) > 2 && parts[2] != "" {
		fab.Routing = parts[2]
	}
	if len(parts) > 3 {
		fab.HostsPerLeaf, _ = strconv.Atoi(parts[3])
	}
	surveyJitter(t, "SIMCCL_FOLD", &foldJitter, &foldJitterSeed)
	var act uint64
	nodeFoldSeen = func(q *Engine) { act = q.Activations }
	defer func() { nodeFoldSeen = nil }()
	if os.Getenv("SIMCCL_FOLD_BY_LATENCY") != "" {
		nodeFoldByLatency = true
		defer func() { nodeFoldByLatency = false }()
	}
	for _, ns := range strings.Split(parts[0], ",") {
		nodes, _ := strconv.Atoi(ns)
		for _, ss := range strings.Split(parts[1], ",") {
			mib, _ := strconv.Atoi(ss)
			fold, full, nf := foldVsFull(t, nodes, fab, int64(mib)<<20)
			how := "fold"
			if fold == nil {
				// The check halted the fold: the fold with stand-ins (switch-bound).
				foldBound = true
				fold, _ = foldOnly(t, nodes, fab, int64(mib)<<20)
				foldBound = false
				how = "fold halted by its check; switch-bound"
			}
			t.Logf("%3d nodes %5d MiB %s: %s %.3f µs, full %.3f µs, %+.3f%% (%s; events %d / %d; %d activations in the fold)", nodes, mib, fab.Routing,
				how, fold.Time.Micros(), full.Time.Micros(), 100*(fold.Time.Micros()/full.Time.Micros()-1), nf, fold.Events, full.Events, act)
		}
	}
}

// TestNodeFoldArrivals prints, for the node fold and the replay of every node of one NVLSTree
// call (SIMCCL_FOLD_ARRIVALS="nodes:sizeMiB"; SIMCCL_FOLD_TOPO, SIMCCL_FOLD_BUDGET as in
// TestNodeFoldSurvey), when the messages between nodes arrive, per class of the fold, tree and
// direction (up: from a child, down: from the parent): the mean and the last arrival, the fold's
// beside each member's. It tells where the fold parts from the replay of every node (docs/cluster.md,
// "Where the last-resort fold's error comes from").
func TestNodeFoldArrivals(t *testing.T) {
	spec := os.Getenv("SIMCCL_FOLD_ARRIVALS")
	if spec == "" {
		t.Skip("SIMCCL_FOLD_ARRIVALS not set")
	}
	ns, ms, _ := strings.Cut(spec, ":")
	nodes, err := strconv.Atoi(ns)
	require.NoError(t, err)
	mib, err := strconv.Atoi(ms)
	require.NoError(t, err)
	foldSurveyEnv(t)
	var scheds []*coll.Schedule
	var results []*Result
	replayed = func(s *coll.Schedule, res *Result) { scheds, results = append(scheds, s), append(results, res) }
	defer func() { replayed = nil }()
	fold, full, nf := foldVsFull(t, nodes, DefaultFabric(), int64(mib)<<20)
	require.Len(t, results, 2, "one replay each")
	ppn := scheds[1].NRanks / nodes
	// arrivals: per (node or class, tree, direction) the mean and the last arrival of the
	// messages between nodes that it receives; parent(a, b, t) says a is b's parent in tree t.
	type key struct{ who, tree, dir int }
	arrivals := func(s *coll.Schedule, res *Result, parent func(a, b, t int) bool) map[key][2]float64 {
		sum, n, last := map[key]float64{}, map[key]float64{}, map[key]float64{}
		for _, op := range res.Ops {
			if op.Rank >= s.NRanks || op.Peer >= s.NRanks || op.Rank/ppn == op.Peer/ppn {
				continue
			}
			from, to := op.Rank/ppn, op.Peer/ppn
			k := key{to, op.Channel % 2, 1}
			if parent(to, from, op.Channel%2) {
				k.dir = 0
			}
			sum[k] += op.End.Micros()
			n[k]++
			last[k] = max(last[k], op.End.Micros())
		}
		out := map[key][2]float64{}
		for k := range n {
			out[k] = [2]float64{sum[k] / n[k], last[k]}
		}
		return out
	}
	F := arrivals(scheds[0], results[0], func(a, b, t int) bool { return int(nf.parents[t][b]) == a })
	G := arrivals(scheds[1], results[1], func(a, b, t int) bool { return int(nf.up[t][b]) == a })
	t.Logf("%d nodes, %d MiB: fold %.1f µs, every node %.1f µs (%+.2f%%); arrivals µs, mean / last:", nodes, mib,
		fold.Time.Micros(), full.Time.Micros(), 100*(fold.Time.Micros()/full.Time.Micros()-1))
	for x := range nf.reps {
		for tree := 0; tree < 2; tree++ {
			for dir, name := range []string{"up", "down"} {
				fv, ok := F[key{x, tree, dir}]
				if !ok {
					continue
				}
				line := fmt.Sprintf("class %d (%d) tree %d %-4s fold %.1f / %.1f; members", x, nf.size[x], tree, name, fv[0], fv[1])
				for n, c := range nf.class {
					if int(c) == x {
						g := G[key{n, tree, dir}]
						line += fmt.Sprintf(" %d: %.1f / %.1f", n, g[0], g[1])
					}
				}
				t.Log(line)
			}
		}
	}
}

// Where every class is one node (node counts whose trees tell every node apart: 3, 5, 6, 12) the
// fold's quotient is the whole tree, with every weight 1: the fold must then be the replay of
// every node, to rounding — under rail routing and ECMP, with leaves of 2 nodes so that the
// switch links are left out and checked (one uplink per leaf and rail, as fast as the leaf's two
// NICs, so that none can be over its capacity).
func TestNodeFoldExactOnSingletons(t *testing.T) {
	for _, routing := range []string{"rail", "ecmp"} {
		for _, nodes := range []int{3, 5, 6, 12} {
			fab := DefaultFabric()
			fab.Routing, fab.HostsPerLeaf, fab.UplinkGBps = routing, 2, 100
			fold, full, nf := foldVsFull(t, nodes, fab, 16<<20)
			require.Len(t, nf.reps, nodes, "%d nodes: every node its own class", nodes)
			require.NotNil(t, fold, "%d nodes %s: the check halted a non-blocking fabric", nodes, routing)
			rel := fold.Time.Micros()/full.Time.Micros() - 1
			t.Logf("%2d nodes %s: fold %.6f µs, full %.6f µs (%+.1e)", nodes, routing, fold.Time.Micros(), full.Time.Micros(), rel)
			require.InDelta(t, 0, rel, 1e-6, "%d nodes %s", nodes, routing)
		}
	}
}

// nodeFoldBound is the largest error of the node fold against the replay of every node that
// docs/cluster.md reports where nvlsSymmetric uses it (NVLSNodeFoldMin nodes and
// NVLSNodeFoldMinLoops loops per channel and more).
const nodeFoldBound = 0.01

// The fold of 32 and 48 nodes (10 and 24 classes; with leaves of 16 nodes, members of a class
// whose routes to their parents cross the spine or not, which take their mean latency) against
// the replay of every node, under rail routing and ECMP, at 16 MiB (two loops per channel: not used by default, the same time here) and at
// 256 MiB (32 loops, where nvlsSymmetric starts to use it).
func TestNodeFoldClose(t *testing.T) {
	for _, c := range []struct {
		nodes   int
		routing string
		mib     int64
		perLeaf int
	}{
		{32, "ecmp", 16, 32}, {32, "rail", 256, 16}, {48, "ecmp", 256, 16},
	} {
		fab := DefaultFabric()
		fab.Routing, fab.HostsPerLeaf = c.routing, c.perLeaf
		fold, full, nf := foldVsFull(t, c.nodes, fab, c.mib<<20)
		require.Less(t, 2*len(nf.reps), c.nodes+1, "%d nodes fold", c.nodes)
		require.NotNil(t, fold)
		rel := fold.Time.Micros()/full.Time.Micros() - 1
		t.Logf("%d nodes %s %d MiB: fold %.3f µs, full %.3f µs (%+.3f%%; %s)", c.nodes, c.routing, c.mib,
			fold.Time.Micros(), full.Time.Micros(), 100*rel, nf)
		require.InDelta(t, 0, rel, nodeFoldBound, "%d nodes %s %d MiB", c.nodes, c.routing, c.mib)
		if c.mib == 16 {
			require.InDelta(t, 0, rel, 1e-9, "two loops per channel: the same time")
		}
	}
}

// Where a switch link goes over its capacity (4:1 oversubscribed leaves of 8 nodes) the fold's
// check halts it, and nvlsSymmetric falls back to what it ran without the fold.
func TestNodeFoldFallsBack(t *testing.T) {
	fab := DefaultFabric()
	fab.HostsPerLeaf, fab.Oversub = 8, 4
	fold, nf := foldOnly(t, 32, fab, 16<<20)
	require.NotNil(t, nf)
	require.Nil(t, fold, "an uplink over its capacity halts the fold")
	m, _ := testMachine(t, "dgx-h100", 32, fab, "NVLSTree", "")
	old := NVLSNodeFoldMin
	oldLoops := NVLSNodeFoldMinLoops
	NVLSNodeFoldMin, NVLSNodeFoldMinLoops = 2, 0
	defer func() { NVLSNodeFoldMin, NVLSNodeFoldMinLoops = old, oldLoops }()
	row, _, err := m.Run(coll.AllReduce, 16<<20, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.NotContains(t, row.Mode, nodeFoldMode)
	// Non-blocking, the same call folds.
	fab.Oversub = 1
	fold, _ = foldOnly(t, 32, fab, 16<<20)
	require.NotNil(t, fold)
}

// Where the fabric's switch links bind, the fold's check halts it; the switch-bound fold gives
// the quotient stand-ins for them, enforced once over their capacity: rail routing, 48 nodes, 16
// per leaf (non-blocking: the uplink picked by destination takes two members' connections), and
// 32 nodes under 8:1 oversubscribed leaves of 8 (one uplink per leaf and rail: the switch links
// slow the replay of every node by over 10%). A fold whose stand-ins were not enforced would be as
// fast as on a non-blocking fabric there. Both within nodeFoldBound of the replay of every node.
func TestNodeFoldSwitchBound(t *testing.T) {
	for _, c := range []struct{ nodes, perLeaf, oversub int }{{48, 16, 1}, {32, 8, 8}} {
		fab := DefaultFabric()
		fab.Routing, fab.HostsPerLeaf, fab.Oversub = "rail", c.perLeaf, float64(c.oversub)
		fold, full, nf := foldVsFull(t, c.nodes, fab, 256<<20)
		require.Nil(t, fold, "%d nodes: the check halts the fold", c.nodes)
		foldBound = true
		fold, _ = foldOnly(t, c.nodes, fab, 256<<20)
		foldBound = false
		require.NotNil(t, fold)
		rel := fold.Time.Micros()/full.Time.Micros() - 1
		t.Logf("%d nodes rail %d per leaf %d:1, 256 MiB: switch-bound fold %.3f µs, full %.3f µs (%+.3f%%; %s)",
			c.nodes, c.perLeaf, c.oversub, fold.Time.Micros(), full.Time.Micros(), 100*rel, nf)
		require.InDelta(t, 0, rel, nodeFoldBound)
		if c.oversub > 1 {
			free := DefaultFabric()
			free.Routing, free.HostsPerLeaf = "rail", c.perLeaf
			_, fullFree, _ := foldVsFull(t, c.nodes, free, 256<<20)
			require.Greater(t, full.Time.Micros(), 1.1*fullFree.Time.Micros(), "the switch links bind")
		}
	}
}

// Where no switch link binds, the stand-ins change nothing: the switch-bound fold is the fold, to
// rounding (the switch-bound replay leaves the unbounded switch links out of its rate
// computations, the checked one keeps them in: the same rates, summed in another order).
func TestNodeFoldStandInsIdle(t *testing.T) {
	fab := DefaultFabric()
	fab.HostsPerLeaf = 16
	without, _ := foldOnly(t, 32, fab, 256<<20)
	foldBound = true
	with, _ := foldOnly(t, 32, fab, 256<<20)
	foldBound = false
	require.NotNil(t, with)
	require.NotNil(t, without)
	rel := with.Time.Micros()/without.Time.Micros() - 1
	t.Logf("switch-bound %.6f µs, fold %.6f µs (%+.1e)", with.Time.Micros(), without.Time.Micros(), rel)
	require.InDelta(t, 0, rel, 1e-5)
}

// The classes of the power-of-two trees: depth, children and parents' classes in both trees.
func TestNodeClasses(t *testing.T) {
	for nodes, want := range map[int]int{8: 6, 16: 8, 32: 10, 128: 14, 2048: 22, 12: 12} {
		nf := nodeClasses(nodes, func(n, t int) Time { return 0 })
		require.Len(t, nf.reps, want, "%d nodes", nodes)
		for n, x := range nf.class {
			for tr := 0; tr < 2; tr++ {
				if u := nf.up[tr][n]; u >= 0 {
					require.Equal(t, nf.parents[tr][x], nf.class[u], "node %d tree %d: parent's class", n, tr)
				}
			}
		}
		for tr := 0; tr < 2; tr++ {
			ct := nf.tree(tr)
			roots := 0
			for x, u := range ct.Up {
				if u < 0 {
					roots++
					continue
				}
				require.Contains(t, ct.Down[u], x)
			}
			require.Equal(t, 1, roots)
			for x := range ct.Loose {
				for _, y := range ct.Loose[x] {
					require.True(t, slices.Contains(ct.Down[x], y))
				}
			}
		}
	}
}

// nvlsSwitchBound, Run's last resort before Tree, is the fold with stand-ins and says so.
func TestNVLSSwitchBoundMode(t *testing.T) {
	fab := DefaultFabric()
	fab.Routing, fab.HostsPerLeaf, fab.Oversub = "rail", 8, 8
	foldBound = true
	want, _ := foldOnly(t, 32, fab, 256<<20)
	foldBound = false
	require.NotNil(t, want)
	m, _ := testMachine(t, "dgx-h100", 32, fab, "NVLSTree", "")
	requireLateFold(t, m, m.nvlsSwitchBound, 256<<20, want, nodeFoldMode+", "+switchBoundMode)
}

// TestFoldSchedsReuse: a call's quotient compiled once is handed back for an equal plan (the
// switch-bound replay after the checked one), and a different plan is compiled anew.
func TestFoldSchedsReuse(t *testing.T) {
	p := coll.Plan{Func: coll.AllGather, Count: 1 << 16, DataType: coll.Float32, NRanks: 2, NChannels: 1, Algo: coll.Ring, Proto: coll.Simple}
	m := &foldScheds{}
	s1, ix1, err := m.compile(p)
	if err != nil {
		t.Fatal(err)
	}
	s2, ix2, err := m.compile(p)
	if err != nil {
		t.Fatal(err)
	}
	if s1 != s2 || ix1 != ix2 {
		t.Error("an equal plan was compiled again")
	}
	q := p
	q.Count *= 2
	if s3, _, err := m.compile(q); err != nil || s3 == s1 {
		t.Errorf("another plan: %v, same schedule %v", err, s3 == s1)
	}
	var none *foldScheds
	if s4, ix4, err := none.compile(p); err != nil || s4 == nil || ix4 == nil || s4 == s1 {
		t.Errorf("no memo: %v", err)
	}
}

// The quotient's relaxed node links that carry only a strict link's flows are made strict and the
// links another implies are left out (tighten): on DGX H100 a head's PCIe links to its NIC
// (48 GB/s) carry the NIC port's flows (50 GB/s), so they are made strict and the port, which
// they imply, is left out. The rates are those without it (relaxation and pruning change none):
// the time moves only by the floating-point order of the rate computations, far under the
// fold's error, and no PCIe link is left to be found over its capacity and enforced.
func TestNodeFoldTighten(t *testing.T) {
	fab := DefaultFabric()
	var seen *Engine
	nodeFoldSeen = func(q *Engine) { seen = q }
	defer func() { nodeFoldSeen = nil }()
	tight, nf := foldOnly(t, 32, fab, 256<<20)
	qt := seen
	nodeFoldTighten = false
	loose, _ := foldOnly(t, 32, fab, 256<<20)
	nodeFoldTighten = true
	ql := seen
	require.NotNil(t, tight)
	require.NotNil(t, loose)
	rel := tight.Time.Micros()/loose.Time.Micros() - 1
	t.Logf("%s: tightened %.3f µs, %d activations, %d rate computations; without %.3f µs, %d activations, %d (%+.2e)",
		nf, tight.Time.Micros(), qt.Activations, qt.Recomputes, loose.Time.Micros(), ql.Activations, ql.Recomputes, rel)
	require.InDelta(t, 0, rel, 1e-3)
	require.Zero(t, qt.Activations, "no relaxed PCIe link left to enforce")
	require.NotZero(t, ql.Activations)
	m, _ := testMachine(t, "dgx-h100", 32, fab, "NVLSTree", "")
	_, cl, err := m.engine()
	require.NoError(t, err)
	pci := -1
	for i, l := range cl.Node.Links {
		if l.Name == "GPU/0->PCI/0(PCI)" {
			pci = i
		}
	}
	require.GreaterOrEqual(t, pci, 0)
	rep := nf.reps[0] // a representative: its links carry the quotient's flows
	require.True(t, ql.links[cl.nodeLink(rep, pci)].relaxed)
	require.False(t, qt.links[cl.nodeLink(rep, pci)].relaxed, "its GPU's PCIe link made strict")
	require.False(t, ql.links[cl.nicUp[rep*cl.nics]].lazy)
	require.True(t, qt.links[cl.nicUp[rep*cl.nics]].lazy, "its NIC port, which the PCIe links imply, left out")
}

// The switch-bound replay's partial rate computations (nodeFoldPartial, Engine.partial) give its
// time to rounding: the fold with and without them on the three-tier fat tree of examples/fabrics
// (32 nodes, 4 and 2 hosts per leaf, ECMP: docs/cluster.md's table holds the fold to the replay
// of every node), and they were used. Under rail routing every stand-in carries one GPU's
// connections and they are not tried (TestNodeFoldSwitchBound's 8:1 case).
func TestNodeFoldPartial(t *testing.T) {
	tree := fabricFile(t, "../examples/fabrics/fattree-3tier-2to1.fabric")
	two := *tree
	two.HostsPerLeaf = 2
	rail := DefaultFabric()
	rail.Routing, rail.HostsPerLeaf, rail.Oversub = "rail", 8, 8
	var q *Engine
	nodeFoldSeen = func(e *Engine) { q = e }
	defer func() { nodeFoldSeen, nodeFoldPartial, foldBound = nil, true, false }()
	foldBound = true
	for _, fab := range []*Fabric{tree, &two, rail} {
		nodeFoldPartial = false
		whole, _ := foldOnly(t, 32, fab, 256<<20)
		require.Zero(t, q.Partials)
		visited := q.CompVisited
		nodeFoldPartial = true
		part, _ := foldOnly(t, 32, fab, 256<<20)
		rel := part.Time.Micros()/whole.Time.Micros() - 1
		t.Logf("%s fabric, %s routing, %d per leaf: %.3f µs with partial computations (%d kept, %d not), %.3f µs without (%+.1e); %d flows visited against %d",
			fab.Topology, fab.Routing, fab.HostsPerLeaf, part.Time.Micros(), q.Partials, q.PartialsOff, whole.Time.Micros(), rel, q.CompVisited, visited)
		if fab.Routing == "rail" {
			require.Zero(t, q.Partials+q.PartialsOff, "not tried")
			require.Equal(t, whole.Time, part.Time)
			continue
		}
		require.Greater(t, q.Partials, uint64(1000))
		require.Less(t, q.CompVisited, visited)
		require.InDelta(t, 0, rel, 1e-4)
	}
}

// Where the switch-bound replay takes partial rate computations, the checked replay is the
// switch-bound one (nodeFoldAhead): bit for bit the checked replay's time where no switch link
// goes over its capacity (the fat tree of examples/fabrics made non-blocking); where one does, the
// check's halt, and the switch-bound result kept for nvlsSwitchBound, which equals the
// switch-bound replay's to rounding (its first instants computed with the unbounded switch links
// in the rate computations, as the checked replay has them).
func TestNodeFoldAhead(t *testing.T) {
	tree := fabricFile(t, "../examples/fabrics/fattree-3tier-2to1.fabric")
	free := *tree
	free.Oversub = 1
	var q *Engine
	nodeFoldSeen = func(e *Engine) { q = e }
	defer func() { nodeFoldSeen, nodeFoldAhead = nil, true }()
	for _, fab := range []*Fabric{&free, tree} {
		m, _ := testMachine(t, "dgx-h100", 32, fab, "NVLSTree", "")
		plan, tm, e, cl := nvlsTreeCall(t, m, 256<<20)
		fo, _, ok := nvlsFoldChecked(plan, cl, e)
		require.True(t, ok)
		nf := nodeClassesOf(plan, cl, e)
		var res [2]*Result
		var halted [2]bool
		for i, ahead := range []bool{false, true} {
			nodeFoldAhead = ahead
			var err error
			res[i], _, halted[i], err = fo.nodeFolded(plan, nf, e, cl, tm, RunOptions{folds: &foldScheds{}}, false)
			require.NoError(t, err)
			require.Equal(t, ahead, len(q.lazyAtStandIn) > 0, "ahead %v", ahead)
		}
		require.Equal(t, halted[0], halted[1])
		if !halted[0] {
			require.Equal(t, res[0].Time, res[1].Time, "no switch link over its capacity: the checked replay's time")
			require.Zero(t, q.StandInActs)
			continue
		}
		// Halted: the switch-bound result, replayed ahead and kept, against the one replayed anew.
		memo := &foldScheds{}
		_, _, h, err := fo.nodeFolded(plan, nf, e, cl, tm, RunOptions{folds: memo}, false)
		require.NoError(t, err)
		require.True(t, h)
		q = nil
		kept, _, _, err := fo.nodeFolded(plan, nf, e, cl, tm, RunOptions{folds: memo}, true)
		require.NoError(t, err)
		require.Nil(t, q, "no replay: the kept result")
		nodeFoldAhead = false
		anew, _, _, err := fo.nodeFolded(plan, nf, e, cl, tm, RunOptions{folds: &foldScheds{}}, true)
		require.NoError(t, err)
		rel := kept.Time.Micros()/anew.Time.Micros() - 1
		t.Logf("switch-bound, replayed ahead %.3f µs, anew %.3f µs (%+.1e)", kept.Time.Micros(), anew.Time.Micros(), rel)
		require.InDelta(t, 0, rel, 1e-4)
	}
}

// Outside its bounds (fewer than NVLSNodeFoldMin nodes, fewer than NVLSNodeFoldMinLoops loops) the
// node fold is Run's last resort for NVLSTree, before the extrapolation over node counts: its
// result is the fold's, under a mode that says so, and Run reaches it where nothing else replays
// the call (GB200 NVL72 x16 at 2 GiB: the channel fold past NVLSBudget with too few loops for a
// steady pair, the schedule past coll's limit).
func TestNodeFoldLastResort(t *testing.T) {
	fold, _ := foldOnly(t, 16, DefaultFabric(), 64<<20)
	m, _ := testMachine(t, "dgx-h100", 16, nil, "NVLSTree", "")
	requireLateFold(t, m, m.nvlsFoldLastResort, 64<<20, fold, nodeFoldMode+", "+lastResortMode)

	gb, _ := testMachine(t, "gb200-nvl72", 16, nil, "", "")
	row, _, err := gb.Run(coll.AllReduce, 2<<30, coll.Float32, coll.Sum, RunOptions{DryRun: true})
	require.NoError(t, err)
	require.Equal(t, nodeFoldMode+", "+lastResortMode, row.Mode)

	// 32 racks at 2 GiB: a quotient of 4.9 M steps, past NVLSBudget and within lastResortBudget
	// (coll's limit), so the last-resort fold rather than the log2 form (4.8% off there).
	gb32, _ := settingsMachine(t, "gb200-nvl72", 32, 0, nil, planner.Settings{})
	gb32.PlannerAt = func(k int) (coll.Planner, error) { // as simccl run has it: nodesSteady may run
		_, p := settingsMachine(t, "gb200-nvl72", k, 0, nil, planner.Settings{})
		return p, nil
	}
	row, _, err = gb32.Run(coll.AllReduce, 2<<30, coll.Float32, coll.Sum, RunOptions{DryRun: true})
	require.NoError(t, err)
	require.Equal(t, nodeFoldMode+", "+lastResortMode, row.Mode)
	// At 4 and 8 GiB the fold's own pair of shorter replays (since stop 47, 32 NVLS heads a rack:
	// a loop is 32 chunks, not 72, so these calls have the loops foldSteadyPair needs); until
	// then sizesSteadyDirect's line through the 1 and 2 GiB rows.
	for _, size := range []int64{4 << 30, 8 << 30} {
		row, _, err = gb32.Run(coll.AllReduce, size, coll.Float32, coll.Sum, RunOptions{DryRun: true})
		require.NoError(t, err)
		require.Equal(t, nodeFoldMode+"-steady (1088M, 2240M), "+lastResortMode, row.Mode, "%d bytes", size)
	}
	// 64 racks from 2 GiB: the line through the largest halvings both timed directly (stop 46),
	// 512 MiB and 1 GiB, whatever the size (2 and 4 GiB are forms of their own).
	gb64, _ := settingsMachine(t, "gb200-nvl72", 64, 0, nil, planner.Settings{})
	gb64.PlannerAt = func(k int) (coll.Planner, error) {
		_, p := settingsMachine(t, "gb200-nvl72", k, 0, nil, planner.Settings{})
		return p, nil
	}
	lr := nodeFoldMode + ", " + lastResortMode
	for _, size := range []int64{2 << 30, 8 << 30} {
		row, _, err = gb64.Run(coll.AllReduce, size, coll.Float32, coll.Sum, RunOptions{DryRun: true})
		require.NoError(t, err)
		require.Equal(t, "sizes-steady (512 MiB: "+lr+"; 1 GiB: "+lr+")", row.Mode, "%d bytes", size)
	}
}

// requireLateFold checks one of Run's late node folds (nvlsSwitchBound, nvlsFoldLastResort) on m's
// NVLSTree all-reduce of size bytes: want's time under mode, and nothing with Exact.
func requireLateFold(t *testing.T, m *Machine, late func(coll.Plan, Timing, RunOptions) (*Result, string, error), size int64, want *Result, mode string) {
	t.Helper()
	plan, tm, _, _ := nvlsTreeCall(t, m, size)
	res, got, err := late(plan, tm, RunOptions{})
	require.NoError(t, err)
	require.NotNil(t, res)
	require.Equal(t, mode, got)
	require.Equal(t, want.Time, res.Time)
	res, _, err = late(plan, tm, RunOptions{Exact: true})
	require.NoError(t, err)
	require.Nil(t, res, "never with Exact")
}

// fabricFile is the fabric of the file at path.
func fabricFile(t testing.TB, path string) *Fabric {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fab, err := ParseFabric(f, filepath.Base(path))
	require.NoError(t, err)
	return fab
}

// A call of many loops per channel is timed by the node fold from two shorter replays
// (foldSteadyPair): half and a quarter of its loops, where the quarter is at least
// max(NVLSNodeFoldMinLoops, nodes/4); on 32 DGX H100 nodes at 1 GiB (128 loops: 32 and 64) within
// 0.1% of the fold's replay of every loop (+0.035% measured).
func TestNodeFoldSteady(t *testing.T) {
	m, _ := testMachine(t, "dgx-h100", 32, nil, "", "")
	for _, c := range []struct {
		size   int64
		l1, l2 int64 // 0: the whole replay
	}{
		{768 << 20, 0, 0},   // 96 loops: 24 and 48, too few to extrapolate from
		{1 << 30, 32, 64},   // 128 loops
		{4 << 30, 128, 256}, // 512 loops
	} {
		plan, _, e, cl := nvlsTreeCall(t, m, c.size)
		f, _, ok := nvlsFoldChecked(plan, cl, e)
		require.True(t, ok)
		l1, l2, ok := f.foldSteadyPair(plan, NVLSBudget)
		require.Equal(t, c.l2 > 0, ok, "%d MiB", c.size>>20)
		require.Equal(t, c.l1, l1, "%d MiB", c.size>>20)
		require.Equal(t, c.l2, l2, "%d MiB", c.size>>20)
		_, _, ok = f.foldSteadyPair(plan, 1000) // no room for the longer replay
		require.False(t, ok)
	}
	steady, _, err := m.Run(coll.AllReduce, 1<<30, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, nodeFoldMode+"-steady (256M, 512M)", steady.Mode)
	nodeFoldSteady = false
	defer func() { nodeFoldSteady = true }()
	whole, _, err := m.Run(coll.AllReduce, 1<<30, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, nodeFoldMode, whole.Mode)
	rel := steady.TimeUs/whole.TimeUs - 1
	t.Logf("steady %.3f µs, every loop %.3f µs: %+.3f%%", steady.TimeUs, whole.TimeUs, 100*rel)
	require.InDelta(t, 0, rel, 0.001)
}

// Where the node fold's check halts and a leaf has SwitchBoundMinHosts hosts or more, Run takes
// the switch-bound fold rather than a long channel fold (SwitchBoundAbove, lowered here so that
// 256 MiB is long), within 1% of it; with 2 hosts per leaf the channel fold stays.
func TestSwitchBoundFirst(t *testing.T) {
	old := SwitchBoundAbove
	SwitchBoundAbove = 0
	defer func() { SwitchBoundAbove = old }()
	for _, c := range []struct {
		nodes, perLeaf int
		oversub        float64
		bound          bool
	}{{48, 16, 1, true}, {32, 2, 4, false}} {
		fab := DefaultFabric()
		fab.Routing, fab.HostsPerLeaf, fab.Oversub = "rail", c.perLeaf, c.oversub
		m, _ := settingsMachine(t, "dgx-h100", c.nodes, 0, fab, planner.Settings{})
		row, _, err := m.Run(coll.AllReduce, 256<<20, coll.Float32, coll.Sum, RunOptions{})
		require.NoError(t, err)
		switchBoundFirst = false
		chans, _, err := m.Run(coll.AllReduce, 256<<20, coll.Float32, coll.Sum, RunOptions{})
		switchBoundFirst = true
		require.NoError(t, err)
		require.Equal(t, "nvls-symmetric", chans.Mode)
		rel := row.TimeUs/chans.TimeUs - 1
		t.Logf("%d nodes, rail, %d per leaf %g:1, 256 MiB: %s %.3f µs, %s %.3f µs (%+.3f%%)", c.nodes, c.perLeaf, c.oversub, row.Mode, row.TimeUs, chans.Mode, chans.TimeUs, 100*rel)
		if !c.bound {
			require.Equal(t, chans, row)
			continue
		}
		require.Contains(t, row.Mode, switchBoundMode)
		require.InDelta(t, 0, rel, 0.01)
	}
}
