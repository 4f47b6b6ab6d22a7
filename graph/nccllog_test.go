package graph_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/topo/ncclxml"
)

const corpus = "../testdata/topos/"

func load(t *testing.T, path string, opt graph.Options) *graph.System {
	t.Helper()
	doc, err := ncclxml.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := topo.FromXML(doc, opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ncclInfo returns the message part of every "NCCL INFO" line of a log, per "[rank]" tag.
func ncclInfo(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	re := regexp.MustCompile(`^\S+:\d+:\d+ \[(\d+)\] NCCL INFO (.*)$`)
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			out[m[1]] = append(out[m[1]], m[2])
		}
	}
	return out
}

// systemBlocks returns each "=== System" block of lines (tree, separator and path lines that
// follow), trailing spaces kept.
func systemBlocks(lines []string) [][]string {
	var blocks [][]string
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "=== System :") {
			continue
		}
		j := i + 1
		for j < len(lines) && !strings.HasPrefix(lines[j], "=====") {
			j++
		}
		j++
		for j < len(lines) && (strings.Contains(lines[j], " :GPU/") || strings.Contains(lines[j], " :NET/") ||
			strings.HasPrefix(lines[j], "Paths from") || strings.HasPrefix(lines[j], "--") || strings.HasPrefix(lines[j], " (")) {
			j++
		}
		blocks = append(blocks, lines[i:j])
		i = j - 1
	}
	return blocks
}

// TestNCCL2277LogsExact compares our printout with NCCL 2.27.7's own log, byte for byte, for the
// 2×A100 PCIe + NVLink bridge machine, in the normal and the asymmetric-NVLink (count 1 one way,
// 12 the other) runs. 2.27.7 prints the tree and path lines exactly as 2.28 does (same format,
// same path numbering since 2.27.7), so the comparison is exact. The run is single-node (2 ranks),
// so NCCL 2.27 removed the NET nodes (the NIC is printed without nets); 2.28.9 keeps them, so
// this test builds with Version V2_27.
func TestNCCL2277LogsExact(t *testing.T) {
	for _, c := range []struct{ xml, log string }{
		{"a100pcie-2gpu-nvlink-bridge-dump-normal.xml", "a100pcie-2gpu-nvlink-bridge-dump-normal-nccl-info.log"},
		{"a100pcie-2gpu-nvlink-bridge-dump-FAULT-asym-nvlink.xml", "a100pcie-2gpu-nvlink-bridge-dump-FAULT-nccl-info.log"},
	} {
		t.Run(c.xml, func(t *testing.T) {
			logs := ncclInfo(t, corpus+c.log)
			for rank, lines := range logs {
				r, _ := strconv.Atoi(rank)
				s := load(t, corpus+c.xml, graph.Options{LocalRank: r, Version: graph.V2_27})
				want := systemBlocks(lines)
				if len(want) == 0 {
					t.Fatalf("no === System block for rank %s", rank)
				}
				got := s.Lines()
				for _, w := range want {
					if strings.Join(w, "\n") != strings.Join(got, "\n") {
						t.Errorf("rank %s:\n got:\n%s\nwant (NCCL 2.27.7):\n%s", rank, strings.Join(got, "\n"), strings.Join(w, "\n"))
					}
				}
			}
		})
	}
}

// TestNCCL218Log compares with NCCL 2.18.1's log of the 8×RTX 3090 two-socket box (2 nodes, 16
// ranks). 2.18 prints differently from 2.28: ids without the system id ("GPU/F000"), NETs as
// "(guid/port/bw)", and with TRACE the paths as link lists "--PCI->PCI/C000--…(bw)" without
// their type. What is compared: maxBw/totalBw, every tree line reduced to (depth, link type,
// bw, remote node), and for every GPU and NET each path's node sequence and bandwidth (the
// sequence fixes the type under our rules). GeForce boards report no PCIe P2P (NVML), which
// sends every GPU pair through the CPU: Options.P2PUnsupported reproduces that. The log's ranks
// on this host are 8..15 and its NIC guid differs from the dump's, so ranks and guids are not
// compared.
func TestNCCL218Log(t *testing.T) {
	s := load(t, corpus+"rtx3090-8gpu-pcie-2socket-ib56g.xml", graph.Options{NRanks: 16, P2PUnsupported: true})
	logs := ncclInfo(t, corpus+"rtx3090-8gpu-pcie-2socket-ib56g-nccl-info.log")
	lines := logs["4"]
	var block []string
	for i, l := range lines {
		if strings.HasPrefix(l, "=== System") {
			block = lines[i:]
			break
		}
	}
	if block == nil {
		t.Fatal("no === System block in the log")
	}
	// Header.
	if got := s.Lines()[0]; got != block[0] {
		t.Errorf("header: got %q, want %q", got, block[0])
	}
	// Tree.
	id218 := regexp.MustCompile(`([A-Z]{3})/(?:[0-9a-f]+-)?([0-9A-Fa-f]+)`)
	norm := func(l string) string {
		l = regexp.MustCompile(` \([^)]*\)$`).ReplaceAllString(l, "") // ranks, cpu codes, pci device, net tuple
		return id218.ReplaceAllStringFunc(l, func(m string) string {
			p := id218.FindStringSubmatch(m)
			return p[1] + "/" + strings.ToUpper(p[2])
		})
	}
	ours := s.Lines()
	i := 1
	for ; !strings.HasPrefix(block[i], "====="); i++ {
		if i >= len(ours) || norm(ours[i]) != norm(block[i]) {
			got := ""
			if i < len(ours) {
				got = ours[i]
			}
			t.Errorf("tree line %d: got %q, want %q (NCCL 2.18.1)", i, got, block[i])
		}
	}
	// Paths: "Paths from X :" then one line per destination in type order GPU, NVS, CPU, NET.
	i++
	hopRe := regexp.MustCompile(`--[A-Z]+->([A-Z]+/[0-9A-F]+)`)
	for _, src := range append(append([]*graph.Node{}, s.Nodes[graph.GPU]...), s.Nodes[graph.NET]...) {
		head := norm("Paths from " + src.Label() + " :")
		if i >= len(block) || block[i] != head {
			t.Fatalf("expected %q at log line %d, got %q", head, i, block[i])
		}
		i++
		for _, dt := range []graph.NodeType{graph.GPU, graph.NVS, graph.CPU, graph.NET} {
			for di := range s.Nodes[dt] {
				l := block[i]
				i++
				p := s.Path(src, s.Nodes[dt][di])
				bw, _ := strconv.ParseFloat(l[strings.LastIndex(l, "(")+1:len(l)-1], 64)
				var want []string
				for _, m := range hopRe.FindAllStringSubmatch(l, -1) {
					want = append(want, m[1])
				}
				var got []string
				for _, lk := range p.Links {
					got = append(got, norm(lk.Remote.Label()))
				}
				if strings.Join(got, " ") != strings.Join(want, " ") || float64(float32(bw)) != p.BW {
					t.Errorf("%s → %s: got %v (%.1f), want %v (%.1f) from %q", src.Label(), s.Nodes[dt][di].Label(), got, p.BW, want, bw, l)
				}
			}
		}
	}
}

// TestNCCL223Dump compares with the 4×RTX A6000 run of NCCL 2.23.4 (msccl-executor fork), whose
// patched debug dump prints, for every node and destination type, the path to the first node of
// that type: hop count, bandwidth, type (PATH_*) and each hop's link type, bandwidth and remote
// node. The dump's node ids are busids ("0000:3b:00.0"; CPUs and the CPU-attached NIC by local
// id). Single-node run (4 ranks): NETs were removed, so NICs show no NET. 2.23 used the ≤2.25
// link numbering, where LINK_PCI was printed as PATH_PIX; we print link types by name, so a hop
// "PATH_PIX" is our PCI link and "PATH_SYS" our SYS link.
func TestNCCL223Dump(t *testing.T) {
	s := load(t, corpus+"rtxa6000-4gpu-pcie-2socket-vnics.xml", graph.Options{})
	f, err := os.Open(corpus + "rtxa6000-4gpu-pcie-2socket-vnics-nccl-info.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	nodeRe := regexp.MustCompile(`\[3\] NCCL INFO Node Type: (\w+), ID: ([0-9a-f:.]+)`)
	destRe := regexp.MustCompile(`\[3\] NCCL INFO   -> Dest Type: (\w+)`)
	totRe := regexp.MustCompile(`\[3\] NCCL INFO      Total Paths: (\d+), BW: ([0-9.]+) GB/s, Type: PATH_(\w+)`)
	hopRe := regexp.MustCompile(`\[3\] NCCL INFO      Hop \d+: Type=PATH_(\w+), BW=([0-9.]+) GB/s, RemNodeType=(\w+), id ([0-9a-f:.]+)`)
	busID := func(n *graph.Node) string {
		v := n.LocalID()
		return strconv.FormatInt(v>>20&0xffff+0x10000, 16)[1:] + ":" + strconv.FormatInt(v>>12&0xff+0x100, 16)[1:] + ":" +
			strconv.FormatInt(v>>4&0xff+0x100, 16)[1:] + "." + strconv.FormatInt(v&0xf, 16)
	}
	typeOf := map[string]graph.NodeType{"GPU": graph.GPU, "PCI": graph.PCI, "NVS": graph.NVS, "CPU": graph.CPU, "NIC": graph.NIC, "NET": graph.NET}
	find := func(tn, id string) *graph.Node {
		for _, n := range s.Nodes[typeOf[tn]] {
			if busID(n) == id {
				return n
			}
		}
		return nil
	}
	var src *graph.Node
	var path *graph.Path
	hop, checked := 0, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	seen := map[string]bool{}
	var key string
	for sc.Scan() {
		l := sc.Text()
		if m := nodeRe.FindStringSubmatch(l); m != nil {
			src = find(m[1], m[2])
			if src == nil {
				t.Errorf("dump node %s %s not in our system", m[1], m[2])
			}
			continue
		}
		if src == nil {
			continue
		}
		if m := destRe.FindStringSubmatch(l); m != nil {
			dt := typeOf[m[1]]
			path = nil
			if len(s.Nodes[dt]) > 0 {
				path = s.Path(src, s.Nodes[dt][0])
			}
			key = busID(src) + src.Type.String() + "->" + m[1]
			if path == nil {
				t.Errorf("%s %s: no path to %s[0]", src.Type, busID(src), m[1])
			}
			hop = 0
			continue
		}
		if path == nil || seen[key+strconv.Itoa(hop)] {
			continue
		}
		if m := totRe.FindStringSubmatch(l); m != nil {
			seen[key+strconv.Itoa(hop)] = true
			n, _ := strconv.Atoi(m[1])
			bw, _ := strconv.ParseFloat(m[2], 64)
			if n != path.Hops() || bw != roundTo(path.BW, 2) || m[3] != path.Type.String() {
				t.Errorf("%s: got %d/%.2f/%s, want %s/%s/%s", key, path.Hops(), path.BW, path.Type, m[1], m[2], m[3])
			}
			checked++
			continue
		}
		if m := hopRe.FindStringSubmatch(l); m != nil {
			seen[key+strconv.Itoa(hop)] = true
			if hop >= len(path.Links) {
				t.Errorf("%s: more hops in the dump than ours", key)
				continue
			}
			lk := path.Links[hop]
			hop++
			bw, _ := strconv.ParseFloat(m[2], 64)
			wantType := map[string]graph.LinkType{"PIX": graph.LinkPCI, "SYS": graph.LinkSYS, "LOC": graph.LinkLOC, "NVL": graph.LinkNVL}[m[1]]
			if lk.Type != wantType || roundTo(lk.BW, 2) != bw || lk.Remote.Type.String() != m[3] || busID(lk.Remote) != m[4] {
				t.Errorf("%s hop %d: got %s %.2f %s %s, want %s", key, hop, lk.Type, lk.BW, lk.Remote.Type, busID(lk.Remote), l)
			}
		}
	}
	// 4 GPUs, 2 CPUs and 2 NICs, each with a path to GPU[0] and to CPU[0].
	if checked != 16 {
		t.Fatalf("%d paths checked, want 16; the dump parser is broken", checked)
	}
}

func roundTo(x float64, d int) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', d, 64), 64)
	return v
}

const h200 = "../testdata/nccl/h200x2/"

// TestNCCL228H200Exact compares our printout with NCCL 2.28.9's own INFO log on the lent 2×H200
// machine, byte for byte, for every rank: the real topology and the three NCCL_TOPO_FILE
// variants (4 NVLinks, 0 NVLinks, 18 NVLinks to an NVSwitch), and the "fakehosts" run where
// NCCL_HOSTID made the two ranks two hosts (1 GPU each, nRanks 2: inter-node, maxBw = GPU→NET).
func TestNCCL228H200Exact(t *testing.T) {
	cases := []struct {
		topo, logGlob string
		nranks        int
		ranks         []string // ranks whose log matches this topology
	}{
		{"real_topo.xml", "real.*.log", 0, []string{"0", "1"}},
		{"variants/nvl4.xml", "nvl4.*.log", 0, []string{"0", "1"}},
		{"variants/nvl0.xml", "nvl0.*.log", 0, []string{"0", "1"}},
		{"variants/nvswitch.xml", "nvswitch.*.log", 0, []string{"0", "1"}},
		// Rank 0's own host only (the dump is rank 0's view); rank 1 sees the other GPU.
		{"fakehosts_topo.xml", "fakehosts.*.log", 2, []string{"0"}},
	}
	for _, c := range cases {
		t.Run(c.topo, func(t *testing.T) {
			logs, _ := filepath.Glob(h200 + c.logGlob)
			if len(logs) == 0 {
				t.Fatalf("no log %s", c.logGlob)
			}
			matched := 0
			for _, lf := range logs {
				for rank, lines := range ncclInfo(t, lf) {
					if !slices.Contains(c.ranks, rank) {
						continue
					}
					r, _ := strconv.Atoi(rank)
					s := load(t, h200+c.topo, graph.Options{LocalRank: r, NRanks: c.nranks})
					got := strings.Join(s.Lines(), "\n")
					for _, w := range systemBlocks(lines) {
						matched++
						if want := strings.Join(w, "\n"); got != want {
							t.Errorf("%s rank %s:\n got:\n%s\nwant (NCCL 2.28.9):\n%s", filepath.Base(lf), rank, got, want)
						}
					}
				}
			}
			if matched == 0 {
				t.Fatal("no === System block compared")
			}
		})
	}
}

// TestNCCL228Variants compares, byte for byte, our printout with NCCL 2.28.9's log on the 2×H200
// machine for the NCCL_TOPO_FILE variants of testdata/nccl228/variants.py, which put the
// machine's network device behind PCIe switches (captured by testdata/nccl228/capture.sh): PIX,
// PXB, PXN, SYS paths, Broadcom switch flattening, and the env knobs NCCL_NET_GDR_LEVEL,
// NCCL_PXN_DISABLE, NCCL_P2P_DISABLE. Both ranks of each run are compared, building from the
// variant NCCL was given and from NCCL's own dump (NCCL_TOPO_DUMP_FILE) of that run.
func TestNCCL228Variants(t *testing.T) {
	const dir = "testdata/nccl228/"
	cases := []struct {
		name, topo string
		opt        graph.Options
	}{
		{"pxn", "pxn", graph.Options{}},
		{"pxn_nogdr", "pxn_nogdr", graph.Options{}},
		{"pxb", "pxb", graph.Options{}},
		{"pxb_gdrpix", "pxb", graph.Options{NetGDRLevel: "PIX"}},
		{"sys", "sys", graph.Options{}},
		{"bcm", "bcm", graph.Options{}},
		{"pxn_pxnoff", "pxn", graph.Options{PXNDisable: true}},
		{"pxn_p2poff", "pxn", graph.Options{P2PDisable: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			logs, _ := filepath.Glob(dir + c.name + ".*.log")
			if len(logs) == 0 {
				t.Fatalf("no log %s.*.log", c.name)
			}
			compared := 0
			for _, lf := range logs {
				for rank, lines := range ncclInfo(t, lf) {
					r, _ := strconv.Atoi(rank)
					opt := c.opt
					opt.LocalRank = r
					// The file NCCL was given, and NCCL's own dump of what it built from it.
					for _, in := range []string{dir + "variants/" + c.topo + ".xml", dir + c.name + "_topo.xml"} {
						s := load(t, in, opt)
						got := strings.Join(s.Lines(), "\n")
						for _, w := range systemBlocks(lines) {
							compared++
							if want := strings.Join(w, "\n"); got != want {
								t.Errorf("%s from %s rank %s:\n got:\n%s\nwant (NCCL 2.28.9):\n%s", filepath.Base(lf), in, rank, got, want)
							}
						}
					}
				}
			}
			if compared == 0 {
				t.Fatal("no === System block compared")
			}
		})
	}
}
