package search

import (
	"bytes"
	"strings"
	"testing"
)

// want is what NCCL printed for one graph.
type want struct {
	pattern      Pattern
	nChannels    int
	bwIntra      float64
	bwInter      float64
	typeIntra    PathType
	typeInter    PathType
	sameChannels int
	orders       [][]int // ranks per channel; nil = not checked
}

func checkGraph(t *testing.T, name string, g *Graph, w want) {
	t.Helper()
	if g.Pattern != w.pattern || g.NChannels != w.nChannels || g.BwIntra != w.bwIntra || g.BwInter != w.bwInter ||
		g.TypeIntra != w.typeIntra || g.TypeInter != w.typeInter || g.SameChannels != w.sameChannels {
		t.Errorf("%s: got pattern %d nChannels %d bw %g/%g type %v/%v sameChannels %d; NCCL: pattern %d nChannels %d bw %g/%g type %v/%v sameChannels %d",
			name, g.Pattern, g.NChannels, g.BwIntra, g.BwInter, g.TypeIntra, g.TypeInter, g.SameChannels,
			w.pattern, w.nChannels, w.bwIntra, w.bwInter, w.typeIntra, w.typeInter, w.sameChannels)
	}
	if w.orders != nil {
		if len(g.Intra) != len(w.orders) {
			t.Errorf("%s: %d channel orders, NCCL %d", name, len(g.Intra), len(w.orders))
			return
		}
		for c := range w.orders {
			if !equalInts(g.Intra[c], w.orders[c]) {
				t.Errorf("%s channel %d: order %v, NCCL %v", name, c, g.Intra[c], w.orders[c])
			}
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func repeat(order []int, n int) [][]int {
	out := make([][]int, n)
	for i := range out {
		out[i] = order
	}
	return out
}

// The 2×H200 machine: NCCL 2.28.9's own INFO logs (testdata/nccl/h200x2/*.log) on hand-built
// copies of its topology. The XML-driven goldens are in golden_test.go.
func TestH200HandBuilt(t *testing.T) {
	cases := []struct {
		name       string
		top        *Topology
		nodes      int
		ring, tree want
		channels   int
	}{
		{"real (NVSwitch, 18 links)", h200x2(t, true, 0, false), 1,
			want{PatternRing, 12, 30, 30, PathNVL, PathPIX, 1, repeat([]int{0, 1}, 12)},
			want{PatternBalancedTree, 12, 60, 60, PathNVL, PathPIX, 0, append(repeat([]int{0, 1}, 6), repeat([]int{1, 0}, 6)...)},
			24},
		{"nvl4 (4 direct NVLinks)", h200x2(t, false, 4, false), 1,
			want{PatternRing, 4, 20, 20, PathNVL, PathPIX, 1, repeat([]int{0, 1}, 4)},
			want{PatternBalancedTree, 4, 40, 40, PathNVL, PathPIX, 0, nil},
			8},
		{"nvl0 (PCIe through the CPU)", h200x2(t, false, 0, false), 1,
			want{PatternRing, 2, 20, 20, PathPHB, PathPIX, 1, repeat([]int{0, 1}, 2)},
			want{PatternBalancedTree, 2, 40, 40, PathPHB, PathPIX, 0, nil},
			4},
		{"fake hosts (one GPU per host, 10 Gb/s NIC)", oneGPU(t, 0), 2,
			want{PatternRing, 1, 1.2, 1.2, PathLOC, PathPHB, 1, [][]int{{0}}},
			want{PatternTree, 1, 2.4, 1.2, PathLOC, PathPHB, 1, [][]int{{0}}},
			2},
	}
	for _, c := range cases {
		res, err := ComputeAll(c.top, AllOptions{Nodes: c.nodes})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		checkGraph(t, c.name+" ring", res.Ring, c.ring)
		checkGraph(t, c.name+" tree", res.Tree, c.tree)
		if res.NChannels != c.channels {
			t.Errorf("%s: comm channels %d, NCCL %d", c.name, res.NChannels, c.channels)
		}
	}
}

func TestFormatLikeNCCL(t *testing.T) {
	top := h200x2(t, true, 0, false)
	res, err := ComputeAll(top, AllOptions{Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	Format(&b, top, res.Ring)
	lines := strings.Split(b.String(), "\n")
	if lines[0] != "Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1" {
		t.Errorf("header %q", lines[0])
	}
	if lines[1] != " 0 : GPU/0-60 GPU/0-70" || lines[11] != "10 : GPU/0-60 GPU/0-70" {
		t.Errorf("channel lines %q / %q", lines[1], lines[11])
	}
}

// Nodes that differ agree as NCCL's AllGather3 (init.cc) makes them: a node with a 25 Gb/s NIC alone
// would run its ring at 3 GB/s, but its peer's 10 Gb/s NIC only allows 1.2: both take 1.2.
func TestComputeNodesReduces(t *testing.T) {
	fast, err := ComputeAll(oneGPUNic(t, 0, 25000), AllOptions{Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	if fast.Ring.BwInter != 3 {
		t.Fatalf("25 Gb/s node alone: ring bwInter %g, want 3", fast.Ring.BwInter)
	}
	res, err := ComputeNodes([]*Topology{oneGPUNic(t, 0, 25000), oneGPU(t, 1)}, AllOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ring.BwInter != 1.2 || res.Ring.BwIntra != 1.2 || res.NRanks != 2 || res.NNodes != 2 {
		t.Errorf("reduced ring bw %g/%g, nRanks %d, nNodes %d", res.Ring.BwIntra, res.Ring.BwInter, res.NRanks, res.NNodes)
	}
	if _, err := ComputeNodes([]*Topology{oneGPU(t, 0), h200x2(t, true, 0, false)}, AllOptions{}); err == nil {
		t.Error("a node without NET accepted in a 2-node communicator")
	}
}

// twoRails: two GPUs joined by NVLink, each beside its own 400G NIC on a PCIe switch; the NICs
// have different guids but share rail 0 (planes as given).
func twoRails(tb testing.TB, plane0, plane1 int) *Topology {
	b := newBuilder()
	cpu := b.t.AddCPU(0, ArchX86, VendorIntel)
	g0 := b.t.AddGPU(0x10, 0, 0, 90)
	g1 := b.t.AddGPU(0x20, 1, 1, 90)
	b.link(tb, g0, g1, linkNVL, 18*20.6)
	for i, g := range []Handle{g0, g1} {
		sw := b.t.AddNode(KindPCI, int64(0x100*(i+1)))
		nic := b.t.AddNode(KindNIC, int64(0x101*(i+1)))
		n := b.t.AddNET(int64(i), NetInfo{Dev: i, Bw: 50, GUID: uint64(0xa0 + i), Port: 1, Rail: 0, Plane: []int{plane0, plane1}[i]})
		b.link(tb, sw, cpu, linkPCI, 48)
		b.link(tb, g, sw, linkPCI, 48)
		b.link(tb, nic, sw, linkPCI, 48)
		b.link(tb, nic, n, linkNET, 50)
	}
	return b.bfs()
}

// With NCCL_CROSS_NIC=0, 2.28 ends a ring on its start NIC (same guid and port), so the ring has
// to accept the PHB path from the last GPU back to it; 2.30.7 also accepts a NIC of the same
// rail, unless it sits on another plane.
func TestRailsAndPlanes(t *testing.T) {
	zero := 0
	p230, err := ParamsFor("2.30")
	if err != nil {
		t.Fatal(err)
	}
	req := Request{ID: IDRing, Pattern: PatternRing, MinChannels: 1, MaxChannels: 32}
	g228, err := Compute(twoRails(t, -1, -1), req, Options{CrossNic: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if g228.TypeInter != PathPHB || g228.Inter[0][0] != g228.Inter[0][1] {
		t.Errorf("2.28: typeInter %v, channel 0 NETs %v; want PHB and the same NET at both ends", g228.TypeInter, g228.Inter[0])
	}
	g230, err := Compute(twoRails(t, -1, -1), req, Options{CrossNic: &zero, Params: p230})
	if err != nil {
		t.Fatal(err)
	}
	if g230.TypeInter != PathPIX || g230.Inter[0][0] == g230.Inter[0][1] {
		t.Errorf("2.30 same rail: typeInter %v, channel 0 NETs %v; want PIX and two NETs", g230.TypeInter, g230.Inter[0])
	}
	gPlanes, err := Compute(twoRails(t, 0, 1), req, Options{CrossNic: &zero, Params: p230})
	if err != nil {
		t.Fatal(err)
	}
	if gPlanes.TypeInter != PathPHB || gPlanes.Inter[0][0] != gPlanes.Inter[0][1] {
		t.Errorf("2.30 two planes: typeInter %v, channel 0 NETs %v; want PHB and one NET", gPlanes.TypeInter, gPlanes.Inter[0])
	}
}

// Two sockets, each with an NVLinked pair of V100s, joined by QPI: NCCL forces at least two ring
// channels so that the tree (which must match the ring's count) gets two (ncclTopoSplitNvLink).
func TestSplitNvLink(t *testing.T) {
	b := newBuilder()
	c0 := b.t.AddCPU(0, ArchX86, VendorIntel)
	c1 := b.t.AddCPU(1, ArchX86, VendorIntel)
	b.link(t, c0, c1, linkSYS, 10)
	var g [4]Handle
	for i := range g {
		g[i] = b.t.AddGPU(int64(0x10*(i+1)), i, i, 70)
		b.link(t, g[i], []Handle{c0, c0, c1, c1}[i], linkPCI, 12)
	}
	b.link(t, g[0], g[1], linkNVL, 40)
	b.link(t, g[2], g[3], linkNVL, 40)
	top := b.bfs()
	if err := top.finish(); err != nil {
		t.Fatal(err)
	}
	if !top.splitNvLink() {
		t.Fatal("two NVLink pairs not seen as split NVLink")
	}
	res, err := ComputeAll(top, AllOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ring.NChannels < 2 || res.Tree.NChannels != res.Ring.NChannels {
		t.Errorf("ring %d channels, tree %d; want ≥ 2 and equal", res.Ring.NChannels, res.Tree.NChannels)
	}
	// One NVLinked pair and two lone GPUs: not split.
	b2 := newBuilder()
	c := b2.t.AddCPU(0, ArchX86, VendorIntel)
	var h [4]Handle
	for i := range h {
		h[i] = b2.t.AddGPU(int64(0x10*(i+1)), i, i, 70)
		b2.link(t, h[i], c, linkPCI, 12)
	}
	b2.link(t, h[0], h[1], linkNVL, 40)
	if top2 := b2.bfs(); top2.splitNvLink() {
		t.Error("one NVLink pair and two lone GPUs seen as split NVLink")
	}
}
