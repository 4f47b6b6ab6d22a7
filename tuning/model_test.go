package tuning

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
)

// workedExample is a hand-computed case of NCCL 2.28's ncclTopoTuneModel: 8 ranks on one Hopper
// node, ring and tree graphs of 12 channels at 30 GB/s over NVLink, balanced tree; NVLS, CollNet
// and PAT excluded.
func workedExample() *Comm {
	g := GraphInfo{NChannels: 12, BwIntra: 30, BwInter: 30, TypeIntra: PathNVL, TypeInter: PathPIX, SameChannels: true}
	c := &Comm{NRanks: 8, NNodes: 1, CCMin: 90, CCMax: 90, CPUArch: "x86", CPUVendor: "intel", NChannels: 24}
	c.Graphs[GraphRing] = g
	c.Graphs[GraphRing].Pattern = PatternRing
	c.Graphs[GraphTree] = g
	c.Graphs[GraphTree].Pattern = PatternBalancedTree
	return c
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestWorkedExample(t *testing.T) {
	// The sheet's figures hold for both releases: none of the constants the example uses changed
	// between 2.28 and 2.30.
	for _, v := range []string{"2.28", "2.30"} {
		t.Run(v, func(t *testing.T) { testWorkedExample(t, v) })
	}
}

func testWorkedExample(t *testing.T, version string) {
	tb, err := Model(workedExample(), &Config{Version: version})
	if err != nil {
		t.Fatal(err)
	}
	cells := []struct {
		a       coll.Algo
		p       coll.Proto
		bw, lat float64
	}{
		{coll.Ring, coll.LL, 80.57, 15.0}, {coll.Ring, coll.LL128, 189.26, 40.6}, {coll.Ring, coll.Simple, 205.71, 56.0},
		{coll.Tree, coll.LL, 43.58, 15.2}, {coll.Tree, coll.LL128, 128.8, 31.5}, {coll.Tree, coll.Simple, 165.6, 64.4},
	}
	for _, c := range cells {
		bw, lat := float64(tb.Bw[coll.AllReduce][c.a][c.p]), float64(tb.Lat[coll.AllReduce][c.a][c.p])
		if !near(bw, c.bw, 0.01) || !near(lat, c.lat, 0.01) {
			t.Errorf("AllReduce %v/%v: bw %.3f lat %.3f, want %.2f / %.2f", c.a, c.p, bw, lat, c.bw, c.lat)
		}
	}
	for _, a := range []coll.Algo{coll.CollNetDirect, coll.CollNetChain, coll.NVLS, coll.NVLSTree, coll.PAT} {
		for p := coll.Proto(0); p < coll.NumProtos; p++ {
			if tb.Enabled(coll.AllReduce, a, p) {
				t.Errorf("%v/%v enabled, want disabled", a, p)
			}
		}
	}
	times := []struct {
		n      int64
		a      coll.Algo
		p      coll.Proto
		us     float64
		others map[[2]int]float64
	}{
		{1 << 10, coll.Ring, coll.LL, 15.01, nil},
		{64 << 10, coll.Ring, coll.LL, 15.81, nil},
		{1 << 20, coll.Ring, coll.LL, 28.01, map[[2]int]float64{{int(coll.Tree), int(coll.LL128)}: 45.07, {int(coll.Ring), int(coll.LL128)}: 46.14}},
		{16 << 20, coll.Ring, coll.LL128, 129.25, map[[2]int]float64{{int(coll.Ring), int(coll.Simple)}: 137.56}},
		{256 << 20, coll.Ring, coll.Simple, 1360.89, map[[2]int]float64{{int(coll.Ring), int(coll.LL128)}: 1458.96}},
	}
	for _, c := range times {
		ch, err := tb.SelectBytes(coll.AllReduce, c.n)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Algo != c.a || ch.Proto != c.p || !near(float64(ch.TimeUs), c.us, 0.01) {
			t.Errorf("%d B: %v/%v %.3f µs, want %v/%v %.2f", c.n, ch.Algo, ch.Proto, ch.TimeUs, c.a, c.p, c.us)
		}
		for k, us := range c.others {
			if got := float64(tb.Time(coll.AllReduce, coll.Algo(k[0]), coll.Proto(k[1]), c.n, 1)); !near(got, us, 0.01) {
				t.Errorf("%d B: %v/%v %.3f µs, want %.2f", c.n, coll.Algo(k[0]), coll.Proto(k[1]), got, us)
			}
		}
	}
}

// publicLog229 is a 2-rank, 2-"node" NCCL 2.29.7 run (RTX 5090, cc 120, socket network, one GPU
// per host id) published with its TUNING table; the Comm below is read off its numbers: ring 2
// channels at 1.2 GB/s, tree 2 channels at 2.4 GB/s with pattern TREE, NET paths, latencyInter 0.
func publicLog229() *Comm {
	c := &Comm{NRanks: 2, NNodes: 2, CCMin: 120, CCMax: 120, CPUArch: "x86", CPUVendor: "intel"}
	c.Graphs[GraphRing] = GraphInfo{Pattern: PatternRing, NChannels: 2, BwIntra: 1.2, BwInter: 1.2, TypeIntra: PathLOC, TypeInter: PathNET, SameChannels: true}
	c.Graphs[GraphTree] = GraphInfo{Pattern: PatternTree, NChannels: 2, BwIntra: 2.4, BwInter: 2.4, TypeIntra: PathLOC, TypeInter: PathNET, SameChannels: true}
	return c
}

// publicLog229Table is the log's table, rows after "NCCL INFO " (2.29 prints the 2.28 format).
const publicLog229Table = `  Algorithm   |                            Tree                  |                            Ring                  |                   CollNetDirect                  |
  Protocol    |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |
 Max NThreads |            512 |            640 |            512 |            512 |            640 |            256 |              0 |              0 |            640 |
    Broadcast |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     9.3/   1.2 |    18.0/   0.0 |    22.4/   2.4 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |
       Reduce |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     9.3/   1.2 |    18.0/   0.0 |    22.4/   2.4 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |
    AllGather |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |    11.6/   2.4 |    22.5/   0.0 |    22.4/   4.8 |     5.0/   0.0 |     8.5/   0.0 |    14.0/   0.0 |
ReduceScatter |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |    11.6/   2.4 |    22.5/   0.0 |    22.4/   4.8 |     5.0/   0.0 |     8.5/   0.0 |    14.0/   0.0 |
    AllReduce |    16.8/   0.5 |    31.0/   0.0 |    36.4/   1.9 |    16.6/   1.2 |    31.0/   0.0 |    36.4/   2.4 |     5.0/   0.0 |     8.5/   0.0 |    14.0/   0.0 |
  Algorithm   |                    CollNetChain                  |                            NVLS                  |                        NVLSTree                  |
  Protocol    |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |
 Max NThreads |              0 |              0 |            640 |              0 |              0 |            640 |              0 |              0 |            640 |
    Broadcast |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |
       Reduce |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |
    AllGather |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |
ReduceScatter |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |
    AllReduce |     5.0/   0.0 |     8.5/   0.0 |    14.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |
  Algorithm   |                             PAT                  |
  Protocol    |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |
 Max NThreads |              0 |              0 |              0 |
    Broadcast |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |
       Reduce |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |
    AllGather |     0.0/   0.0 |     0.0/   0.0 |    17.6/   3.6 |
ReduceScatter |     0.0/   0.0 |     0.0/   0.0 |    17.6/   3.6 |
    AllReduce |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |`

func TestPublicLog229TableByteExact(t *testing.T) {
	tb, err := Model(publicLog229(), &Config{Version: "2.29"})
	if err != nil {
		t.Fatal(err)
	}
	got := tb.Lines()
	want := strings.Split(publicLog229Table, "\n")
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\n got %q\nwant %q", i+1, got[i], want[i])
		}
	}
}

func TestPublicLog229Choices(t *testing.T) {
	tb, err := Model(publicLog229(), &Config{Version: "2.29"})
	if err != nil {
		t.Fatal(err)
	}
	if tb.NChannels != 4 {
		t.Fatalf("NChannels %d, want 4 (2 search channels, postset twin)", tb.NChannels)
	}
	// Broadcast lines of the log, count×4 bytes (float).
	want := map[int64]string{
		1024: "LL 0..0", 2048: "LL 0..0", 4096: "LL 0..0", 8192: "LL 0..0", 16384: "LL 0..1",
		32768: "SIMPLE 0..0", 65536: "SIMPLE 0..1", 131072: "SIMPLE 0..3", 262144: "SIMPLE 0..3",
		1 << 20: "SIMPLE 0..3", 128 << 20: "SIMPLE 0..3",
	}
	for n, w := range want {
		ch, err := tb.SelectBytes(coll.Broadcast, n)
		if err != nil {
			t.Fatal(err)
		}
		got := ch.Proto.LogName() + " " + strconv.Itoa(ch.ChannelLo) + ".." + strconv.Itoa(ch.ChannelHi)
		if ch.Algo != coll.Ring || got != w {
			t.Errorf("Broadcast %d: %s %s, want RING %s (%s)", n, ch.Algo.LogName(), got, w, ch.Line())
		}
	}
}
