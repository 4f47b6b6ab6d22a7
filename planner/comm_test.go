package planner

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/topo/ncclxml"
	"github.com/simccl/simccl/tuning"
)

var reChoice = regexp.MustCompile(`^(\w+): (\d+) Bytes -> Algo \w+ proto \w+ channel\{Lo\.\.Hi\}=\{\d+\.\.\d+\}$`)
var reP2P = regexp.MustCompile(`(\d+) coll channels, \d+ collnet channels, \d+ nvls channels, (\d+) p2p channels, (\d+) p2p channels per peer`)

// End to end: NCCL 2.28.9's topology dump of the 2×H200 machine (and its variants) goes through
// graph, search and the planner; the tuning table must print exactly as NCCL printed it, every
// per-call choice line must be identical, and the p2p channel counts equal.
func TestEndToEndH200(t *testing.T) {
	dir := filepath.Join("..", "testdata", "nccl", "h200x2")
	cases := []struct {
		topo, log string
		nodes     int
	}{
		{"real_topo.xml", "real.677.log", 1}, {"variants/nvl4.xml", "nvl4.741.log", 1},
		{"variants/nvl0.xml", "nvl0.803.log", 1}, {"variants/nvswitch.xml", "nvswitch.869.log", 1},
		{"fakehosts_topo.xml", "fakehosts.931.log", 2}, // two processes NCCL takes for two hosts
	}
	for _, c := range cases {
		t.Run(c.log, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, c.log))
			if err != nil {
				t.Fatal(err)
			}
			var table, choices []string
			var p2p []string
			inTable := false
			for _, l := range strings.Split(string(data), "\n") {
				i := strings.Index(l, "NCCL INFO ")
				if i < 0 {
					continue
				}
				s := l[i+len("NCCL INFO "):]
				head := strings.TrimSpace(strings.SplitN(s, "|", 2)[0])
				_, ferr := coll.ParseFunc(head)
				switch {
				case strings.HasPrefix(s, "  Algorithm   |"):
					inTable = true
				case inTable && !strings.Contains(s, "|"), inTable && head != "Protocol" && head != "Max NThreads" && ferr != nil:
					inTable = false
				}
				if inTable {
					table = append(table, s)
				}
				if reChoice.MatchString(s) {
					choices = append(choices, s)
				}
				if m := reP2P.FindStringSubmatch(s); m != nil && p2p == nil {
					p2p = m[1:]
				}
			}
			no := false
			tb := newTestPlanner(t, filepath.Join(dir, c.topo), c.nodes, Settings{Release: "2.28", NVLS: &no}).Table
			got := tb.Lines()
			if len(got) != len(table) {
				t.Fatalf("%d table lines, NCCL %d", len(got), len(table))
			}
			for i := range got {
				if got[i] != table[i] {
					t.Errorf("table line %d:\n ours %q\n NCCL %q", i+1, got[i], table[i])
				}
			}
			for _, want := range choices {
				m := reChoice.FindStringSubmatch(want)
				f, _ := coll.ParseFunc(m[1])
				n, _ := strconv.ParseInt(m[2], 10, 64)
				ch, err := tb.Select(tuning.Call{Func: f, Count: n / 4, ElemSize: 4})
				if err != nil {
					t.Fatal(err)
				}
				if ch.Line() != want {
					t.Errorf("ours %q\nNCCL %q", ch.Line(), want)
				}
			}
			total, perPeer := tb.P2PChannels()
			if p2p == nil || strconv.Itoa(tb.NChannels) != p2p[0] || strconv.Itoa(total) != p2p[1] || strconv.Itoa(perPeer) != p2p[2] {
				t.Errorf("channels coll/p2p/per peer %d/%d/%d, NCCL %v", tb.NChannels, total, perPeer, p2p)
			}
			t.Logf("%d table lines and %d choice lines identical", len(got), len(choices))
		})
	}
}

// newTestPlanner builds the planner of a topology file or embedded name.
func newTestPlanner(t *testing.T, topoFile string, nodes int, s Settings) *Planner {
	t.Helper()
	name, doc, err := LoadTopology(topoFile, s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Machine{Name: name, Doc: doc, Nodes: nodes, Settings: s})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPipelineErrors(t *testing.T) {
	file := filepath.Join("..", "testdata", "nccl", "h200x2", "variants", "nvl4.xml")
	doc, err := ncclxml.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Machine{Name: file, Doc: doc, Nodes: 0}); err == nil || !strings.Contains(err.Error(), "0 nodes") {
		t.Errorf("0 nodes: %v", err)
	}
	if _, err := New(Machine{Name: file, Nodes: 1}); err == nil {
		t.Error("no topology: want an error")
	}
	// Finding 8 of the input-bounds issue: nodes × GPUs per node over MaxRanks is refused once
	// the node's system is known, before the search or any per-rank structure (2 GPUs a node).
	if _, err := New(Machine{Name: file, Doc: doc, Nodes: MaxRanks/2 + 1}); !errors.Is(err, ErrTooManyRanks) ||
		!strings.Contains(err.Error(), "planner: 65537 nodes × 2 GPUs = 131074 ranks, more ranks than simccl simulates (131072)") {
		t.Errorf("%d nodes: %v", MaxRanks/2+1, err)
	}
	if _, err := New(Machine{Name: file, Doc: doc, Nodes: MaxNodes + 1}); err == nil || !strings.Contains(err.Error(), "want 1..131072") {
		t.Errorf("%d nodes: %v", MaxNodes+1, err)
	}
	if _, err := commOf(nil, nil, commOptions{}); err == nil {
		t.Error("nil inputs: want an error")
	}
	p := newTestPlanner(t, file, 1, Settings{})
	c := p.Table.Comm
	if c.NRanks != 2 || c.NNodes != 1 || c.CCMin != 90 || c.CPUVendor != "intel" || c.CPUArch != "x86" || p.Search == nil || p.System == nil {
		t.Errorf("comm %+v", c)
	}
	if total, perPeer := p.Table.P2PChannels(); total != 8 || perPeer != 8 || c.P2PNChannels != 8 || !c.AllNVLink {
		t.Errorf("p2p %d/%d allNVLink %v, want 8/8 true (NCCL 2.28 log: 8 p2p channels, 8 per peer)", total, perPeer, c.AllNVLink)
	}
}

// TestCPUNames: Comm's CPU arch and vendor are the names of the codes the topology builder sets
// as NCCL 2.28 does (graph.CPUInfo): a vendor NCCL does not know, HygonGenuine included, is "",
// so it takes neither the AMD net overhead nor the AMD LL row.
func TestCPUNames(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "nccl", "h200x2", "variants", "nvl4.xml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ arch, vendor, wantArch, wantVendor string }{
		{"x86_64", "GenuineIntel", "x86", "intel"},
		{"x86_64", "AuthenticAMD", "x86", "amd"},
		{"x86_64", "HygonGenuine", "x86", ""},
		{"x86_64", "CentaurHauls", "x86", "zhaoxin"},
		{"arm64", "", "arm", ""},
		{"ppc64le", "", "power", ""},
	} {
		text := strings.Replace(string(data), `arch="x86_64" vendor="GenuineIntel"`, `arch="`+c.arch+`" vendor="`+c.vendor+`"`, 1)
		doc, err := ncclxml.ParseBytes([]byte(text), "nvl4.xml")
		if err != nil {
			t.Fatal(err)
		}
		p, err := New(Machine{Name: "nvl4.xml", Doc: doc, Nodes: 1})
		if err != nil {
			t.Fatalf("%s %s: %v", c.arch, c.vendor, err)
		}
		comm := p.Table.Comm
		if comm.CPUArch != c.wantArch || comm.CPUVendor != c.wantVendor {
			t.Errorf("%s %q: CPUArch %q CPUVendor %q, want %q %q", c.arch, c.vendor, comm.CPUArch, comm.CPUVendor, c.wantArch, c.wantVendor)
		}
	}
}

// NCCL_MIN_CTAS raises the communicator's channels and comm->nvlsChannels as NCCL's config minCTAs
// does (the gj-aion runs of nccl-tests#309 set NCCL_MIN_CTAS=24): 2 DGX H100 nodes plan 24
// channels for NVLSTree at 1 GiB and for Ring (NCCL_ALGO=Ring) at 8 GiB, where the default gives 16.
func TestMinCTAsPlans(t *testing.T) {
	for _, minCTAs := range []string{"", "24"} {
		want := 16
		if minCTAs != "" {
			want = 24
		}
		for _, c := range []struct {
			algo  string
			want  coll.Algo
			bytes int64
		}{{"", coll.NVLSTree, 1 << 30}, {"ring", coll.Ring, 8 << 30}} {
			env := map[string]string{"NCCL_MIN_CTAS": minCTAs, "NCCL_ALGO": c.algo}
			s, err := SettingsFromEnv(func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			p := newTestPlanner(t, "dgx-h100", 2, s)
			if p.Channels() != want {
				t.Errorf("%v: %d channels, want %d", env, p.Channels(), want)
			}
			plan, err := p.Plan(coll.Call{Func: coll.AllReduce, Count: c.bytes / 4, DataType: coll.Float32, Op: coll.Sum})
			if err != nil {
				t.Fatal(err)
			}
			if plan.Algo != c.want || plan.NChannels != want {
				t.Errorf("%v, %d B: %v on %d channels, want %v on %d", env, c.bytes, plan.Algo, plan.NChannels, c.want, want)
			}
		}
	}
}

// NVLS heads are the NVLS graph's channels' first GPUs (NCCL 2.28 connectNvls): on a 72-GPU
// GB200 NVL72 rack, 32 of them, every rack alike; on an 8-GPU node every GPU, in order (nil).
func TestNVLSHeads(t *testing.T) {
	for _, tc := range []struct {
		topo  string
		nodes int
		algo  coll.Algo
		heads int // 0: nil
	}{
		{"gb200-nvl72", 1, coll.NVLS, 32},
		{"gb200-nvl72", 4, coll.NVLSTree, 32},
		{"dgx-h100", 1, coll.NVLS, 0},
		{"dgx-h100", 4, coll.NVLSTree, 0},
	} {
		p := newTestPlanner(t, tc.topo, tc.nodes, Settings{})
		d, err := p.Decide(coll.Call{Func: coll.AllReduce, Count: 1 << 28, DataType: coll.Float32, Op: coll.Sum})
		if err != nil {
			t.Fatal(err)
		}
		if d.Plan.Algo != tc.algo {
			t.Fatalf("%s × %d: %v, want %v", tc.topo, tc.nodes, d.Plan.Algo, tc.algo)
		}
		if len(d.Plan.NVLSHeads) != tc.heads {
			t.Fatalf("%s × %d: heads %v, want %d", tc.topo, tc.nodes, d.Plan.NVLSHeads, tc.heads)
		}
		if want := p.Search.NVLS.NChannels; tc.heads > 0 && want != tc.heads {
			t.Fatalf("%s: %d heads, NVLS graph %d channels", tc.topo, tc.heads, want)
		}
		if _, err := coll.Compile(coll.Plan{Func: coll.AllReduce, Algo: tc.algo, Proto: coll.Simple, NRanks: d.Plan.NRanks,
			NNodes: d.Plan.NNodes, Count: 1 << 12, DataType: coll.Float32, NChannels: 1, NVLSHeads: d.Plan.NVLSHeads}); err != nil {
			t.Fatalf("%s: %v", tc.topo, err)
		}
	}
}
