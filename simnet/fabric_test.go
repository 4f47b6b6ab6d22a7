package simnet

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/planner"
)

func TestParseFabric(t *testing.T) {
	src := `# rail-optimized, 3 tiers
topology = rail
tiers = 3
hosts_per_leaf = 4
leaves_per_pod = 2
oversubscription = 2
nic_speed = 400Gbps
uplink_speed = 800Gb/s
switch_latency_us = 0.5
routing = rail
`
	f, err := ParseFabric(strings.NewReader(src), "t.fabric")
	if err != nil {
		t.Fatal(err)
	}
	if f.Topology != "rail" || f.Tiers != 3 || f.HostsPerLeaf != 4 || f.Oversub != 2 || f.NICGBps != 50 || f.UplinkGBps != 100 || f.Routing != "rail" {
		t.Fatalf("parsed %+v", f)
	}
	for _, bad := range []string{"tiers = 4\n", "topology = torus\n", "nic_speed = 400\n", "oversubscription = 0.5\n", "bogus = 1\n", "no equals sign\n", "ecmp_seed = -1\n", "ecmp_seed = 1.5\n"} {
		if _, err := ParseFabric(strings.NewReader(bad), "bad.fabric"); err == nil || !strings.Contains(err.Error(), "bad.fabric") {
			t.Errorf("%q: err %v, want an error naming the file", bad, err)
		}
	}
	if _, err := ParseFabric(strings.NewReader("\n\ntiers = x\n"), "f"); err == nil || !strings.Contains(err.Error(), "f:3") {
		t.Errorf("want the line number in %v", err)
	}
}

// ecmp_seed changes which uplink ECMP hashes a flow onto, and nothing else: seed 0 is the
// default hash, another seed moves some flows between a leaf's uplinks, and rail routing ignores it.
func TestECMPSeed(t *testing.T) {
	f, err := ParseFabric(strings.NewReader("hosts_per_leaf = 2\necmp_seed = 7\n"), "s.fabric")
	if err != nil {
		t.Fatal(err)
	}
	if f.ECMPSeed != 7 {
		t.Fatalf("ecmp_seed parsed as %d", f.ECMPSeed)
	}
	node := SwitchedNode("n", 8, 400, 8, 50, 48)
	routes := func(routing string, seed uint64) [][]LinkID {
		fab := DefaultFabric()
		fab.HostsPerLeaf, fab.Routing, fab.ECMPSeed = 2, routing, seed
		c, err := NewCluster(NewEngine(nil), node, 8, fab)
		if err != nil {
			t.Fatal(err)
		}
		var out [][]LinkID
		for src := 0; src < 8; src++ {
			for ch := 0; ch < 4; ch++ {
				r, _ := c.Route(src, 63-src, ch, nil) // node 0 to node 7: different leaves
				out = append(out, r)
			}
		}
		return out
	}
	def, again, other := routes("ecmp", 0), routes("ecmp", 0), routes("ecmp", 7)
	if !reflect.DeepEqual(def, again) {
		t.Fatal("the same seed hashed the same flows differently")
	}
	moved := 0
	for i := range def {
		if len(def[i]) != len(other[i]) {
			t.Fatalf("route %d: %d links with seed 0, %d with seed 7", i, len(def[i]), len(other[i]))
		}
		if !reflect.DeepEqual(def[i], other[i]) {
			moved++
		}
	}
	if moved == 0 || moved == len(def) {
		t.Fatalf("seed 7 moved %d of %d flows to another uplink; want some, not all", moved, len(def))
	}
	if !reflect.DeepEqual(routes("rail", 0), routes("rail", 7)) {
		t.Fatal("rail routing depends on ecmp_seed")
	}
}

func TestClusterRoutes(t *testing.T) {
	node := SwitchedNode("n", 8, 400, 8, 50, 48)
	f := DefaultFabric()
	f.HostsPerLeaf = 2
	e := NewEngine(nil)
	c, err := NewCluster(e, node, 4, f)
	if err != nil {
		t.Fatal(err)
	}
	if c.NumRanks() != 32 {
		t.Fatalf("ranks %d", c.NumRanks())
	}
	// Same node: NVLink out and in.
	r, cl := c.Route(1, 2, 0, nil)
	if cl != ClassNVLink || len(r) != 2 {
		t.Fatalf("intra route %v %v", r, cl)
	}
	// Nodes 0 and 1 share a leaf (2 hosts per leaf): GPU->PCI->NIC, NIC->leaf, leaf->NIC, NIC->PCI->GPU.
	r, cl = c.Route(7, 8, 0, nil)
	if cl != ClassNet || len(r) != 6 {
		t.Fatalf("same-leaf route %d links %v", len(r), cl)
	}
	// Node 0 to node 2: through a spine (two more links).
	r, _ = c.Route(7, 16, 0, nil)
	if len(r) != 8 {
		t.Fatalf("cross-leaf route has %d links, want 8", len(r))
	}
	seen := map[LinkID]bool{}
	for _, l := range r {
		if seen[l] {
			t.Fatalf("route repeats link %s", e.LinkName(l))
		}
		seen[l] = true
	}
	// Rail-optimized: both ends on the receiving GPU's rail, NIC 0 of both nodes on the leaf of
	// rail 0 (NCCL's rings enter and leave a node on one NET per channel: Cluster.Route).
	if !strings.Contains(e.LinkName(r[2]), "NIC0->leaf") {
		t.Fatalf("unexpected link %s", e.LinkName(r[2]))
	}
	// Oversubscription 2 halves the uplinks: 2 hosts/leaf at 50 GB/s -> 1 uplink.
	f2 := *f
	f2.Oversub = 2
	c2, err := NewCluster(NewEngine(nil), node, 4, &f2)
	if err != nil {
		t.Fatal(err)
	}
	if c.nLeafUp != 2 || c2.nLeafUp != 1 {
		t.Fatalf("uplinks %d and %d, want 2 and 1", c.nLeafUp, c2.nLeafUp)
	}
	// Three tiers: pods of one leaf, so nodes 0 and 2 are in different pods: 2 more links.
	f3 := *f
	f3.Tiers, f3.LeavesPerPod = 3, 1
	e3 := NewEngine(nil)
	c3, err := NewCluster(e3, node, 4, &f3)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := c3.Route(7, 16, 0, nil); len(r) != 10 {
		t.Fatalf("3-tier cross-pod route has %d links, want 10", len(r))
	}
	if _, err := NewCluster(NewEngine(nil), SwitchedNode("nonic", 2, 100, 0, 0, 0), 2, nil); err == nil {
		t.Fatal("want an error joining nodes without NICs")
	}
}

// An oversubscribed fabric slows a cross-leaf all-to-all-like pattern: two flows from two hosts of
// one leaf to another leaf share one uplink.
func TestOversubscriptionShares(t *testing.T) {
	node := SwitchedNode("n", 1, 400, 1, 50, 400)
	f := DefaultFabric()
	f.HostsPerLeaf, f.Oversub, f.Routing = 2, 2, "rail"
	e, h := newRec()
	c, err := NewCluster(e, node, 4, f)
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := c.Route(0, 2, 0, nil)
	r2, _ := c.Route(1, 3, 0, nil)
	e.StartFlow(r1, 50e6, 0, 1)
	e.StartFlow(r2, 50e6, 0, 2)
	if _, err := e.Run(); err != nil {
		t.Fatal(err)
	}
	// One 50 GB/s uplink shared: each flow at 25 GB/s, 2 ms.
	for tag, at := range h.done {
		if !near(at.Seconds(), 2e-3, 1e-9) {
			t.Errorf("flow %d done at %v, want 2ms", tag, at)
		}
	}
}

func TestExampleFabricsParse(t *testing.T) {
	files, err := filepath.Glob("../examples/fabrics/*.fabric")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example fabrics (%v)", err)
	}
	for _, fn := range files {
		data, err := os.ReadFile(fn)
		if err != nil {
			t.Fatal(err)
		}
		f, err := ParseFabric(bytes.NewReader(data), fn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewCluster(NewEngine(nil), SwitchedNode("n", 8, 400, 8, 50, 48), 64, f); err != nil {
			t.Fatalf("%s: %v", fn, err)
		}
	}
}

func TestClusterLinkNames(t *testing.T) {
	f := DefaultFabric()
	f.HostsPerLeaf, f.Tiers, f.LeavesPerPod = 1, 3, 1
	e := NewEngine(nil)
	c, err := NewCluster(e, SwitchedNode("n", 2, 100, 2, 50, 48), 3, f)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := c.Route(1, 5, 1, nil)
	var names []string
	for _, l := range r {
		names = append(names, e.LinkName(l))
	}
	got := strings.Join(names, " > ")
	want := "n0.GPU1->PCISW > n0.PCISW->NIC1 > n0.NIC1->leaf3 > leaf3->pod3.agg0 > pod3.agg0->core0.0 > core0.0->pod5.agg0 > pod5.agg0->leaf5 > leaf5->n2.NIC1 > n2.NIC1->PCISW > n2.PCISW->GPU1"
	if got != want {
		t.Fatalf("route names\n got %s\nwant %s", got, want)
	}
}

// Where a node's NICs differ in speed the default fabric stays non-blocking for each of them:
// every leaf's uplinks carry at least its downlinks' bandwidth, and an uplink is as fast as the
// fastest NIC (under rail routing a leaf is sized for the fastest rail; under fattree for the
// NICs' mean). NIC 0 is the slowest here, which used to set both.
func TestHeterogeneousNICsNonBlocking(t *testing.T) {
	node := SwitchedNode("n", 8, 400, 8, 50, 48)
	node.NICs[0].GBps, node.NICs[1].GBps = 12.5, 25 // 100 and 200 Gb/s; the rest 400
	for _, topology := range []string{"rail", "fattree"} {
		f := DefaultFabric()
		f.Topology, f.HostsPerLeaf = topology, 4
		e := NewEngine(nil)
		c, err := NewCluster(e, node, 16, f)
		require.NoError(t, err)
		up := e.LinkCap(c.leafUp[0])
		require.Equal(t, GBps(50), up, "%s: uplink speed", topology)
		want := 4 * 50.0 // rail: 4 hosts at the fastest rail's 400 Gb/s
		if topology == "fattree" {
			want = 4 * (12.5 + 25 + 6*50)
		}
		got := float64(c.nLeafUp) * 50
		require.GreaterOrEqual(t, got, want, "%s: %d uplinks of 50 GB/s", topology, c.nLeafUp)
		require.Less(t, got-want, 50.0, "%s: one uplink more than needed at most", topology)
	}
}

// TestLocalNICs: a GPU's own NIC for channel c (NodeModel.NICOwn: point-to-point connections and
// NVLS heads) is NCCL's (ncclTopoGetLocalNet): where two GPUs and two NICs share a PCIe switch (DGX
// A100, DGX B200, GB200) each GPU keeps its own NIC on every channel; where one GPU has two (the
// 16-NIC HGX H100) it takes them in turn. Until 2026-11-30 NVLS heads took both of a shared pair in
// turn, by channel parity, which is NVLSTree's tree parity: each NIC then carried one tree, and on
// 4 DGX B200 nodes an all-reduce of 1 GiB took 8,710 µs where NCCL's own model says 5,499.
func TestLocalNICs(t *testing.T) {
	for _, c := range []struct {
		topo string
		want [][]int
	}{
		{"dgx-h100", [][]int{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}},
		{"dgx-a100", [][]int{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}},
		{"dgx-b200", [][]int{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}},
		{"hgx-h100-16nic", [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}},
		{"dgx1-v100", [][]int{{0}, {0}, {1}, {1}, {2}, {2}, {3}, {3}}},
	} {
		m, _ := testMachine(t, c.topo, 2, nil, "", "")
		require.Equal(t, c.want, m.Node.NICOwn, c.topo)
	}
	// Rings and trees alternate a GPU's closest NICs by channel, as NCCL's search graph puts
	// their channels on them (a dual-port NIC's two ports in turn).
	m0, _ := testMachine(t, "dgx-b200", 2, nil, "", "")
	require.Equal(t, []int{0, 1}, m0.Node.NICOrder[0])
	m, _ := testMachine(t, "dgx-b200", 4, nil, "", "")
	row, _, err := m.Run(coll.AllReduce, 1<<30, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, "NVLSTree", row.Algo)
	require.Less(t, row.TimeUs, 6000.0, "4 DGX B200 nodes, 1 GiB: NCCL's model says 5,499 µs")
}

// Speeds in bits or bytes a second, G or T; anything else (no unit, Mb/s, zero, negative,
// infinite) is refused.
func TestParseSpeed(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64 // GB/s; 0: an error
	}{
		{"400Gbps", 50}, {"400Gb/s", 50}, {"50GBps", 50}, {" 50GB/s ", 50},
		{"1.6Tbps", 200}, {"800Tb/s", 100000}, {"2TB/s", 2000}, {"1TBps", 1000},
		{"400", 0}, {"400Mbps", 0}, {"0Gbps", 0}, {"-1Gbps", 0}, {"InfGbps", 0}, {"NaNTbps", 0},
	} {
		got, err := ParseSpeed(tc.in)
		if tc.want == 0 {
			if err == nil {
				t.Errorf("%q: %g GB/s, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %g GB/s, %v; want %g", tc.in, got, err, tc.want)
		}
	}
}

// Adaptive routing (Fabric.Routing "adaptive") spreads every flow over all of a tier's equal-cost
// links: a leaf's uplinks act as one link of their summed capacity, and a pattern that ECMP's hash
// may put on one uplink moves at the NIC's speed. Two hosts a leaf, one 50 GB/s NIC each,
// non-blocking (two uplinks, merged into one of 100 GB/s under adaptive routing): two flows from
// one leaf to the other take 1 ms under adaptive and rail routing, 2 ms where ECMP hashes both
// onto one uplink.
func TestAdaptiveRouting(t *testing.T) {
	f, err := ParseFabric(strings.NewReader("routing = adaptive\nhosts_per_leaf = 2\ntiers = 3\nleaves_per_pod = 2\n"), "test")
	require.NoError(t, err)
	require.Equal(t, "adaptive", f.Routing)
	_, err = ParseFabric(strings.NewReader("routing = spray\n"), "test")
	require.ErrorContains(t, err, "want ecmp, rail or adaptive")

	node := SwitchedNode("n", 1, 400, 1, 50, 400)
	e := NewEngine(nil)
	c, err := NewCluster(e, node, 8, f)
	require.NoError(t, err)
	// 3 tiers, 4 leaves in 2 pods: one leaf uplink of 2 × 50 GB/s and one pod uplink of 2 × 2 ×
	// 50 (two aggregation switches, two core uplinks each).
	require.Equal(t, 1, c.nLeafUp)
	require.Equal(t, 1, c.nAggUp)
	require.Equal(t, GBps(100), e.LinkCap(c.leafUp[0]))
	require.Equal(t, GBps(200), e.LinkCap(c.aggUp[0]))
	r, _ := c.Route(0, 7, 0, nil)
	var names []string
	for _, l := range r {
		names = append(names, e.LinkName(l))
	}
	require.Contains(t, strings.Join(names, " > "), "leaf0->pod0.agg* > pod0.agg*->core*.* > core*.*->pod1.agg* > pod1.agg*->leaf3")

	for _, tc := range []struct {
		routing string
		seed    uint64
		want    float64 // ms for both flows
	}{
		{"adaptive", 0, 1},
		{"rail", 0, 1}, // destination-mod-k: nodes 2 and 3 on uplinks 0 and 1
	} {
		g := DefaultFabric()
		g.HostsPerLeaf, g.Routing, g.ECMPSeed = 2, tc.routing, tc.seed
		e, h := newRec()
		c, err := NewCluster(e, node, 4, g)
		require.NoError(t, err)
		r1, _ := c.Route(0, 2, 0, nil)
		r2, _ := c.Route(1, 3, 0, nil)
		e.StartFlow(r1, 50e6, 0, 1)
		e.StartFlow(r2, 50e6, 0, 2)
		_, err = e.Run()
		require.NoError(t, err)
		for tag, at := range h.done {
			require.InDelta(t, tc.want, at.Seconds()*1e3, 1e-6, "%s: flow %d", tc.routing, tag)
		}
	}
	// ECMP: some seed hashes both flows onto one uplink (2 ms); adaptive routing never does.
	collided := false
	for seed := uint64(0); seed < 64 && !collided; seed++ {
		g := DefaultFabric()
		g.HostsPerLeaf, g.ECMPSeed = 2, seed
		c, err := NewCluster(NewEngine(nil), node, 4, g)
		require.NoError(t, err)
		r1, _ := c.Route(0, 2, 0, nil)
		r2, _ := c.Route(1, 3, 0, nil)
		collided = r1[len(r1)/2-1] == r2[len(r2)/2-1] // the leaf uplink
	}
	require.True(t, collided, "no seed of 64 put both flows on one uplink")
}

// Under adaptive routing the all-to-all's symmetric replay is the replay of every rank (the
// merged uplinks leave nothing to hash), and the ECMP mean model, whose links are those merged
// uplinks, times the same call within its latency mean where no hashed link owes work.
func TestAdaptiveAllToAll(t *testing.T) {
	fab := leafFabric(t, 2)
	require.NoError(t, fab.Set("routing", "adaptive"))
	m, _ := settingsMachine(t, "dgx-h100", 16, 0, fab, planner.Settings{})
	m.Launch = LaunchGraph
	row, _, err := m.Run(coll.AllToAll, 16<<20, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, "p2p-compact, latency-mean", row.Mode)
	exact, _, err := m.Run(coll.AllToAll, 16<<20, coll.Float32, coll.Sum, RunOptions{Exact: true})
	require.NoError(t, err)
	require.Equal(t, "p2p-compact", exact.Mode)
	t.Logf("adaptive: %.3f µs, exact %.3f µs (%+.3f%%)", row.TimeUs, exact.TimeUs, 100*(row.TimeUs/exact.TimeUs-1))
	require.InEpsilon(t, exact.TimeUs, row.TimeUs, 2e-3)
	// The same call under ECMP, every rank replayed: hash collisions only slow it.
	ecmp, _ := settingsMachine(t, "dgx-h100", 16, 0, leafFabric(t, 2), planner.Settings{})
	ecmp.Launch = LaunchGraph
	hashed, _, err := ecmp.Run(coll.AllToAll, 16<<20, coll.Float32, coll.Sum, RunOptions{Exact: true})
	require.NoError(t, err)
	t.Logf("ECMP exact: %.3f µs", hashed.TimeUs)
	require.Greater(t, hashed.TimeUs, 1.02*exact.TimeUs)

	// Where the ECMP mean model stands with nothing owed (48 nodes, the default fabric: two
	// leaves a rail, 64 MiB) its time is adaptive routing's to the ps: the model's links are the
	// merged ones.
	for _, routing := range []string{"ecmp", "adaptive"} {
		fab := DefaultFabric()
		require.NoError(t, fab.Set("routing", routing))
		m, _ := settingsMachine(t, "dgx-h100", 48, 0, fab, planner.Settings{})
		m.Launch = LaunchGraph
		r, _, err := m.Run(coll.AllToAll, 64<<20, coll.Float32, coll.Sum, RunOptions{})
		require.NoError(t, err)
		if routing == "ecmp" {
			require.Equal(t, "p2p-compact, latency-mean, ecmp-mean", r.Mode)
			exact = r
			continue
		}
		require.Equal(t, "p2p-compact, latency-mean", r.Mode)
		require.Equal(t, exact.TimeUs, r.TimeUs)
	}
}
