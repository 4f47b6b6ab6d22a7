package search

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/topo/ncclxml"
)

func TestBadInput(t *testing.T) {
	if _, err := Compute(nil, Request{ID: 0, Pattern: PatternRing, MaxChannels: 1}, Options{}); !errors.Is(err, ErrSearch) {
		t.Errorf("nil topology: %v", err)
	}
	if _, err := Compute(NewTopology(), Request{ID: 0, Pattern: PatternRing, MaxChannels: 1}, Options{}); err == nil || !strings.Contains(err.Error(), "no GPU") {
		t.Errorf("empty topology: %v", err)
	}
	top := h200x2(t, true, 0, false)
	if _, err := Compute(top, Request{ID: 0, Pattern: PatternRing, MaxChannels: 65}, Options{}); err == nil {
		t.Error("maxChannels 65 accepted")
	}
	if _, err := ComputeAll(top, AllOptions{Nodes: 2}); err == nil || !strings.Contains(err.Error(), "no NET") {
		t.Errorf("2 nodes without NET: %v", err)
	}
	if _, err := ParamsFor("2.99"); err == nil {
		t.Error("unknown release accepted")
	}

	b := newBuilder()
	g0 := b.t.AddGPU(1, 0, 0, 90)
	g1 := b.t.AddGPU(2, 0, 1, 90)
	if err := b.t.Connect(g0, g1, linkNVL, -1); err == nil {
		t.Error("negative bandwidth accepted")
	}
	if err := b.t.Connect(g0, Handle{KindGPU, 7}, linkNVL, 1); err == nil {
		t.Error("link to a missing node accepted")
	}
	if err := b.t.SetPath(g0, g1, []Handle{g0, g1}, PathNVL, 20); err == nil {
		t.Error("path over a missing link accepted")
	}
	if _, err := ComputeAll(b.bfs(), AllOptions{}); err == nil || !strings.Contains(err.Error(), "rank 0") {
		t.Errorf("two GPUs with rank 0: %v", err)
	}
}

// Two GPUs that cannot reach each other: NCCL falls back to one channel in index order at
// 0.1 GB/s, type SYS (ncclTopoCompute's fallback).
func TestFallback(t *testing.T) {
	b := newBuilder()
	b.t.AddGPU(1, 0, 0, 80)
	b.t.AddGPU(2, 1, 1, 80)
	res, err := ComputeAll(b.bfs(), AllOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkGraph(t, "ring", res.Ring, want{PatternRing, 1, 0.1, 0.1, PathSYS, PathSYS, 1, [][]int{{0, 1}}})
	if res.NChannels != 2 {
		t.Errorf("comm channels %d, want 2", res.NChannels)
	}
}

func TestLoadErrors(t *testing.T) {
	top := h200x2(t, true, 0, true) // with its NETs
	for _, c := range []struct{ xml, want string }{
		{`<graphs version="1"><graph id="0" pattern="4" crossnic="0" nchannels="1" speedintra="1" speedinter="1" typeintra="BOGUS" typeinter="PIX" samechannels="1"/></graphs>`, "typeintra"},
		{`<graphs version="1"><graph id="0" pattern="4" crossnic="0" nchannels="2" speedintra="1" speedinter="1" typeintra="NVL" typeinter="PIX" samechannels="1"><channel><gpu dev="0"/><gpu dev="1"/></channel></graph></graphs>`, "only 1 <channel>"},
		{`<graphs version="1"><graph id="0" pattern="4" crossnic="0" nchannels="1" speedintra="1" speedinter="1" typeintra="NVL" typeinter="PIX" samechannels="1"><channel><gpu dev="0"/></channel></graph></graphs>`, "1 GPUs, the topology has 2"},
		{`<graphs version="1"><graph id="0" pattern="4" crossnic="0" nchannels="99" speedintra="1" speedinter="1" typeintra="NVL" typeinter="PIX" samechannels="1"/></graphs>`, "out of 0..64"},
		// Finding 10 of the input-bounds issue: each of these was accepted.
		{`<graphs version="1"><graph id="0" pattern="4" crossnic="0" nchannels="1" speedintra="-20" speedinter="20" typeintra="NVL" typeinter="PIX" samechannels="1"><channel><gpu dev="0"/><gpu dev="1"/></channel></graph></graphs>`,
			"g.xml:1: <graph id=0>: negative speedintra -20"},
		{"<graphs version=\"1\">\n<graph id=\"0\" pattern=\"4\" crossnic=\"0\" nchannels=\"1\" speedintra=\"20\" speedinter=\"20\" typeintra=\"NVL\" typeinter=\"PIX\" samechannels=\"1\"><channel><gpu dev=\"0\"/><gpu dev=\"0\"/></channel></graph></graphs>",
			"g.xml:2: <graph id=0> channel 0: GPU dev 0x0 appears twice (positions 0 and 1)"},
		{`<graphs version="1"><graph id="0" pattern="4" crossnic="0" nchannels="1" speedintra="20" speedinter="20" typeintra="NVL" typeinter="PIX" samechannels="1"><channel><net dev="0x77"/><gpu dev="0"/><gpu dev="1"/><net dev="0"/></channel></graph></graphs>`,
			"g.xml:1: <graph id=0> channel 0: NET dev 0x77 is not in the topology"},
		{`<graphs version="1"><graph id="0" pattern="99" crossnic="0" nchannels="0" speedintra="20" speedinter="20" typeintra="NVL" typeinter="PIX" samechannels="1"/></graphs>`,
			"g.xml:1: <graph id=0>: pattern 99 (want 1..6, NCCL_TOPO_PATTERN_*)"},
		{"<graphs version=\"1\">\n<graph id=\"1\" pattern=\"1\" crossnic=\"0\" nchannels=\"0\" speedintra=\"20\" speedinter=\"20\" typeintra=\"NVL\" typeinter=\"PIX\" samechannels=\"1\"/>\n<graph id=\"1\" pattern=\"1\" crossnic=\"0\" nchannels=\"0\" speedintra=\"20\" speedinter=\"20\" typeintra=\"NVL\" typeinter=\"PIX\" samechannels=\"1\"/></graphs>",
			"g.xml:3: <graph id=1>: graph id 1 repeated (also on line 2)"},
		{`<graphs version="1"><graph id="9" pattern="4" crossnic="0" nchannels="0" speedintra="20" speedinter="20" typeintra="NVL" typeinter="PIX" samechannels="1"/></graphs>`,
			"graph id 9 (want 0..4)"},
	} {
		gs, err := ncclxml.ParseGraphs([]byte(c.xml), "g.xml")
		if err != nil {
			t.Fatalf("%s: %v", c.xml, err)
		}
		if _, err := Load(top, gs, "g.xml"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.xml, err, c.want)
		}
	}
}

// Dump then Load gives back the same graphs.
func TestDumpLoadRoundTrip(t *testing.T) {
	top := h200x2(t, true, 0, true)
	res, err := ComputeAll(top, AllOptions{Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteDump(&buf, top, res.Graphs()); err != nil {
		t.Fatal(err)
	}
	gs, err := ncclxml.ParseGraphs(buf.Bytes(), "dump")
	if err != nil {
		t.Fatal(err)
	}
	back, err := Load(top, gs, "dump")
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range res.Graphs() {
		l := back[i]
		if l.ID != g.ID || l.NChannels != g.NChannels || l.BwIntra != g.BwIntra || l.BwInter != g.BwInter ||
			l.TypeIntra != g.TypeIntra || l.TypeInter != g.TypeInter || len(l.Intra) != len(g.Intra) || len(l.Inter) != len(g.Inter) {
			t.Errorf("graph %d: loaded %+v, dumped %+v", g.ID, l, g)
			continue
		}
		for c := range g.Intra {
			wantOrder := g.Intra[c]
			if g.ID == IDNVLS {
				wantOrder = wantOrder[:1] // NVLS graphs keep only the head GPU in files
			}
			if !equalInts(l.Intra[c], wantOrder) || l.Inter[c] != g.Inter[c] {
				t.Errorf("graph %d channel %d: loaded %v %v, dumped %v %v", g.ID, c, l.Intra[c], l.Inter[c], g.Intra[c], g.Inter[c])
			}
		}
	}
}

// Every topology of the corpus is searched on one node and on two, or fails with an error;
// never a panic, and each within a few seconds.
func TestCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("whole-corpus search (about 10 s on two cores) skipped in -short mode")
	}
	files, err := filepath.Glob(filepath.Join("..", "testdata", "topos", "*.xml"))
	if err != nil {
		t.Fatal(err)
	}
	searched := 0
	for _, f := range files {
		if strings.HasSuffix(f, "-graph.xml") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		data = []byte(strings.NewReplacer("0xHOSTHASH_B", "0x1", "0xHOSTHASH_A", "0x2", "0xREDACTED", "0x1").Replace(string(data)))
		doc, err := ncclxml.ParseBytes(data, f)
		if err != nil {
			continue // the reader's business; it reports the line
		}
		for _, nodes := range []int{1, 2} {
			sys, err := topo.FromXML(doc, graph.Options{LocalRank: 0, NRanks: 1 << 12})
			if nodes == 1 {
				sys, err = topo.FromXML(doc, graph.Options{LocalRank: 0})
			}
			if err != nil {
				continue
			}
			top, err := FromSystem(sys, nodes > 1)
			if err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			res, err := ComputeAll(top, AllOptions{Nodes: nodes})
			if err != nil {
				if nodes > 1 && top.NumNETs() == 0 {
					continue
				}
				t.Errorf("%s (%d nodes): %v", f, nodes, err)
				continue
			}
			if res.Ring.NChannels < 1 || res.NChannels < 2 {
				t.Errorf("%s (%d nodes): ring %d channels, comm %d", f, nodes, res.Ring.NChannels, res.NChannels)
			}
			if err := checkChannels(top, res); err != nil {
				t.Errorf("%s (%d nodes): %v", f, nodes, err)
			}
			searched++
		}
	}
	if searched < 20 {
		t.Errorf("only %d corpus searches ran", searched)
	}
}

// checkChannels verifies what every search result must satisfy: ring, tree and CollNet channels
// visit every rank once; NVLS and CollNet direct heads are distinct; multi-node channels start
// and end on NETs of the topology.
func checkChannels(top *Topology, res *Result) error {
	n := top.NumGPUs()
	for _, g := range res.Graphs() {
		if len(g.Intra) != g.NChannels {
			return fmt.Errorf("graph %d: %d orders for %d channels", g.ID, len(g.Intra), g.NChannels)
		}
		heads := map[int]bool{}
		for c, order := range g.Intra {
			seen := map[int]bool{}
			for _, r := range order {
				if top.gpuIndexOfRank(r) < 0 || seen[r] {
					return fmt.Errorf("graph %d channel %d: order %v is not a permutation of the ranks", g.ID, c, order)
				}
				seen[r] = true
			}
			if g.ID == IDNVLS {
				if len(order) != 1 {
					return fmt.Errorf("graph %d channel %d: NVLS channel with %d ranks, want the head only", g.ID, c, len(order))
				}
			} else if len(order) != n {
				return fmt.Errorf("graph %d channel %d: %d ranks, want %d", g.ID, c, len(order), n)
			}
			if g.ID == IDNVLS || g.ID == IDCollNetDirect {
				if heads[order[0]] && g.ID == IDNVLS {
					return fmt.Errorf("graph %d: head rank %d used twice", g.ID, order[0])
				}
				heads[order[0]] = true
			}
			if top.NumNETs() > 0 && g.BwIntra != 0.1 {
				for _, id := range g.Inter[c] {
					if top.netIndexOfID(id) < 0 {
						return fmt.Errorf("graph %d channel %d: NET %#x not in the topology", g.ID, c, id)
					}
				}
			}
		}
	}
	return nil
}

// CollNet and NVLS across nodes on the H800 box (8 NICs with CollNet support, NVSwitch): the
// CollNet direct heads are the NICs' local GPUs, NVLS heads are distinct, every graph passes
// checkChannels.
func TestCollNetNVLS(t *testing.T) {
	top := readTopo(t, golden{name: "h800", topo: "topos/h800-8gpu-nvswitch-8x400g-ib.xml", nodes: 2, nranks: 16})
	res, err := ComputeAll(top, AllOptions{Nodes: 2, CollNet: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkChannels(top, res); err != nil {
		t.Fatal(err)
	}
	if res.CollNetDirect.NChannels == 0 || res.CollNetChain.NChannels == 0 || res.NVLS.NChannels == 0 {
		t.Fatalf("CollNet direct %d, chain %d, NVLS %d channels", res.CollNetDirect.NChannels, res.CollNetChain.NChannels, res.NVLS.NChannels)
	}
	for c, order := range res.CollNetDirect.Intra {
		head, err := top.LocalGPU(res.CollNetDirect.Inter[c][0])
		if err != nil || head != order[0] {
			t.Errorf("CollNet direct channel %d: head %d, NET %#x's local GPU %d (%v)", c, order[0], res.CollNetDirect.Inter[c][0], head, err)
		}
	}
	if res.CollNetChain.Pattern != PatternTree || res.CollNetDirect.Pattern != PatternCollNetDirect || res.NVLS.Pattern != PatternNVLS {
		t.Errorf("patterns %v %v %v", res.CollNetChain.Pattern, res.CollNetDirect.Pattern, res.NVLS.Pattern)
	}
}

// FuzzLoad feeds arbitrary graph files to the loader: an error or graphs, never a panic.
func FuzzLoad(f *testing.F) {
	for _, p := range []string{"topos/rtx3090-8gpu-pcie-2socket-ib56g-graph.xml", "nccl/h200x2/real_graph.xml", "topos/azure-ncv4-a100pcie-graph.xml"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	top := h200x2(f, true, 0, true)
	f.Fuzz(func(t *testing.T, data []byte) {
		gs, err := ncclxml.ParseGraphs(data, "fuzz.xml")
		if err != nil {
			return
		}
		gr, err := Load(top, gs, "fuzz.xml")
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := WriteDump(&buf, top, gr); err != nil {
			t.Fatalf("loaded graphs do not dump: %v", err)
		}
	})
}

// FuzzSearch builds small random machines (GPUs of random compute capability on one or two
// CPUs, random NVLinks, an optional NVSwitch, NICs with random speeds) and searches them on one
// and two nodes: never a panic, always channels that pass checkChannels.
func FuzzSearch(f *testing.F) {
	f.Add([]byte{3, 1, 0, 2, 4, 9, 1, 7, 3, 3, 200, 17})
	f.Add([]byte{8, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 5, 5})
	f.Add([]byte{1, 2, 90, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() int {
			if len(data) == 0 {
				return 0
			}
			v := int(data[0])
			data = data[1:]
			return v
		}
		b := newBuilder()
		ngpus := next()%8 + 1
		cpus := []Handle{b.t.AddCPU(0, ArchX86, []int{VendorIntel, VendorAMD}[next()%2])}
		if next()%2 == 1 {
			cpus = append(cpus, b.t.AddCPU(1, ArchX86, VendorIntel))
			b.link(t, cpus[0], cpus[1], linkSYS, float64(next()%40+1))
		}
		ccs := []int{70, 80, 86, 90, 100}
		cc := ccs[next()%len(ccs)]
		var gpus []Handle
		for i := 0; i < ngpus; i++ {
			g := b.t.AddGPU(int64(0x1000*(i+1)), i, i, cc)
			gpus = append(gpus, g)
			b.link(t, g, cpus[i%len(cpus)], linkPCI, float64(next()%48+1))
		}
		if next()%3 == 0 {
			sw := b.t.AddNode(KindNVS, 0)
			for _, g := range gpus {
				b.link(t, g, sw, linkNVL, float64(next()%18+1)*20.6)
			}
		} else {
			for i := 0; i < ngpus; i++ {
				for j := i + 1; j < ngpus; j++ {
					if n := next() % 4; n > 0 {
						b.link(t, gpus[i], gpus[j], linkNVL, float64(n)*20)
					}
				}
			}
		}
		nnets := next() % 4
		for i := 0; i < nnets; i++ {
			nic := b.t.AddNode(KindNIC, int64(0x9000+i))
			speed := float64(next()%50+1) * 8000 / 8000 * 1
			n := b.t.AddNET(int64(i), NetInfo{Dev: i, Bw: speed, GUID: uint64(next() % 2), Port: i, Rail: -1, Plane: -1, Coll: true})
			b.link(t, nic, cpus[i%len(cpus)], linkPCI, 24)
			b.link(t, nic, n, linkNET, speed)
		}
		top := b.bfs()
		for _, nodes := range []int{1, 2} {
			if nodes == 2 && nnets == 0 {
				continue
			}
			var res *Result
			var err error
			if nodes == 1 {
				// single node: the NETs stay out of the search, as FromSystem(sys, false) leaves them
				res, err = ComputeAll(withoutNets(t, top), AllOptions{Nodes: 1, CollNet: true})
			} else {
				res, err = ComputeAll(top, AllOptions{Nodes: 2, CollNet: true})
			}
			if err != nil {
				t.Fatal(err)
			}
			tt := top
			if nodes == 1 {
				tt = res.Topology()
			}
			if err := checkChannels(tt, res); err != nil {
				t.Fatalf("%d nodes: %v", nodes, err)
			}
		}
	})
}

// withoutNets copies a hand-built topology without its NET nodes.
func withoutNets(tb testing.TB, t *Topology) *Topology {
	c := NewTopology()
	m := map[*node]Handle{}
	for _, n := range t.all {
		if n.kind == KindNET {
			continue
		}
		switch n.kind {
		case KindGPU:
			m[n] = c.AddGPU(n.id, n.rank, n.dev, n.cc)
		case KindCPU:
			m[n] = c.AddCPU(n.id, n.arch, n.vendor)
		default:
			m[n] = c.AddNode(n.kind, n.id)
		}
	}
	for _, n := range t.all {
		for _, l := range n.links {
			if _, ok := m[l.rem]; !ok {
				continue
			}
			if _, ok := m[n]; !ok {
				continue
			}
			if err := c.Connect(m[n], m[l.rem], l.kind, float64(l.bw)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	b := &builder{t: c}
	return b.bfs()
}

// subRound must agree with C's roundf((a-b)*1000)/1000 in float32, halves included.
func TestSubRound(t *testing.T) {
	for _, c := range []struct{ a, b, want float32 }{
		{370.8, 60, 310.8}, {20, 0.0005, 20}, {0.0015, 0, 0.002}, {0, 0.0015, -0.002}, {1.25, 1.2, 0.05}, {48, 57.6, -9.6}, {0.0025, 0, 0.003}, {0, 0.0025, -0.003},
	} {
		want := float32(math.Round(float64((c.a-c.b)*1000))) / 1000
		if got := subRound(c.a, c.b); got != want || got != c.want {
			t.Errorf("subRound(%g, %g) = %g, roundf gives %g, want %g", c.a, c.b, got, want, c.want)
		}
	}
}

// TestCPUCodes: FromSystem hands the search the CPU codes the topology builder set as NCCL 2.28
// does (graph.CPUInfo.ArchID, VendorID; HygonGenuine is unknown), which are search's codes.
func TestCPUCodes(t *testing.T) {
	for _, c := range []struct {
		arch, vendor         string
		wantArch, wantVendor int
	}{
		{"x86_64", "GenuineIntel", ArchX86, VendorIntel},
		{"x86_64", "AuthenticAMD", ArchX86, VendorAMD},
		{"x86_64", "HygonGenuine", ArchX86, VendorUnknown},
		{"x86_64", "CentaurHauls", ArchX86, VendorZhaoxin},
		{"arm64", "", ArchARM, VendorUnknown},
		{"ppc64le", "", ArchPower, VendorUnknown},
	} {
		text := `<system version="1"><cpu numaid="0" arch="` + c.arch + `" vendor="` + c.vendor + `" familyid="25" modelid="1">` +
			`<pci busid="0000:01:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"><gpu dev="0" sm="90" rank="0"/></pci></cpu></system>`
		doc, err := ncclxml.ParseBytes([]byte(text), "t.xml")
		if err != nil {
			t.Fatal(err)
		}
		sys, err := topo.FromXML(doc, graph.Options{})
		if err != nil {
			t.Fatal(err)
		}
		top, err := FromSystem(sys, false)
		if err != nil {
			t.Fatal(err)
		}
		if a, v := top.cpuType(); a != c.wantArch || v != c.wantVendor {
			t.Errorf("%s %q: arch %d vendor %d, want %d %d", c.arch, c.vendor, a, v, c.wantArch, c.wantVendor)
		}
	}
}

// TestSpeedArraysByRelease: Blackwell's speed arrays by release (search.cc of each): 2.25–2.26
// intra without 18 and the sm90 inter array, 2.28 its own inter array from 96, 2.18 the sm90 ones.
func TestSpeedArraysByRelease(t *testing.T) {
	for _, c := range []struct {
		release      string
		intra, inter []float32
	}{
		{"2.26", []float32{90, 80, 70, 60, 50, 40, 30, 24, 20, 19}, sm90Inter228},
		{"2.28", sm100Intra228, sm100Inter228},
		{"2.18", sm90Intra218, sm90Inter218},
	} {
		p, err := ParamsFor(c.release)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(p.speeds.sm100Intra, c.intra) || !slices.Equal(p.speeds.sm100Inter, c.inter) {
			t.Errorf("%s: sm100 %v / %v, want %v / %v", c.release, p.speeds.sm100Intra, p.speeds.sm100Inter, c.intra, c.inter)
		}
	}
}
