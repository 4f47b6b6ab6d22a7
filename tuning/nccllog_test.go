package tuning

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/graph"
	"github.com/stretchr/testify/require"
)

// ncclLog is what a test needs from one NCCL INFO log of rank 0 (NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING).
type ncclLog struct {
	version       string
	graphs        []GraphInfo // "Pattern …" lines in order (ring, tree, …)
	nRanks        int
	nNodes        int
	collChannels  int
	maxThreads    [coll.NumAlgos][coll.NumProtos]int
	lat, bw       [coll.NumTunedFuncs][coll.NumAlgos][coll.NumProtos]float64
	tableRows     int
	choices       []loggedChoice
	tableLinesRaw []string
	thresholds    string // the "threadThresholds …" line
}

type loggedChoice struct {
	line   int
	f      coll.Func
	bytes  int64
	algo   string
	proto  string
	lo, hi int
}

var (
	rePattern = regexp.MustCompile(`Pattern (\d+), crossNic (\d+), nChannels (\d+), bw ([\d.]+)/([\d.]+), type (\w+)/(\w+), sameChannels (\d)`)
	reComm    = regexp.MustCompile(`nRanks (\d+) nNodes (\d+) localRanks`)
	reColl    = regexp.MustCompile(`(\d+) coll channels`)
	reChoice  = regexp.MustCompile(`(\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}`)
	reVersion = regexp.MustCompile(`NCCL version (\d+\.\d+\.\d+)`)
)

// parseNCCLLog reads the parts of an NCCL INFO log the tuning tests compare against.
func parseNCCLLog(path string) (*ncclLog, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var r io.Reader = fh
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(fh)
		if err != nil {
			return nil, err
		}
		r = zr
	}
	l := &ncclLog{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	block := -1
	ln := 0
	for sc.Scan() {
		ln++
		full := sc.Text()
		i := strings.Index(full, "NCCL INFO ")
		if i < 0 {
			continue
		}
		s := full[i+len("NCCL INFO "):]
		if m := reVersion.FindStringSubmatch(s); m != nil && l.version == "" {
			l.version = m[1]
		}
		if m := rePattern.FindStringSubmatch(s); m != nil {
			g := GraphInfo{}
			g.Pattern, _ = strconv.Atoi(m[1])
			g.CrossNic, _ = strconv.Atoi(m[2])
			g.NChannels, _ = strconv.Atoi(m[3])
			g.BwIntra, _ = strconv.ParseFloat(m[4], 64)
			g.BwInter, _ = strconv.ParseFloat(m[5], 64)
			ti, err1 := graph.ParsePathType(m[6])
			te, err2 := graph.ParsePathType(m[7])
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("%s:%d: bad path types %q/%q", path, ln, m[6], m[7])
			}
			g.TypeIntra, g.TypeInter = ti, te
			g.SameChannels = m[8] == "1"
			l.graphs = append(l.graphs, g)
			continue
		}
		if m := reComm.FindStringSubmatch(s); m != nil && l.nRanks == 0 {
			l.nRanks, _ = strconv.Atoi(m[1])
			l.nNodes, _ = strconv.Atoi(m[2])
		}
		if m := reColl.FindStringSubmatch(s); m != nil && l.collChannels == 0 {
			l.collChannels, _ = strconv.Atoi(m[1])
		}
		if m := reChoice.FindStringSubmatch(s); m != nil {
			f, err := coll.ParseFunc(m[1])
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, ln, err)
			}
			c := loggedChoice{line: ln, f: f, algo: m[3], proto: m[4]}
			c.bytes, _ = strconv.ParseInt(m[2], 10, 64)
			c.lo, _ = strconv.Atoi(m[5])
			c.hi, _ = strconv.Atoi(m[6])
			l.choices = append(l.choices, c)
			continue
		}
		if strings.HasPrefix(s, "threadThresholds ") {
			l.thresholds = s
			continue
		}
		// The TUNING table.
		if strings.HasPrefix(s, "  Algorithm   |") {
			block++
			l.tableLinesRaw = append(l.tableLinesRaw, s)
			continue
		}
		if block < 0 || !strings.Contains(s, "|") {
			continue
		}
		cols := strings.Split(s, "|")
		head := strings.TrimSpace(cols[0])
		switch {
		case head == "Protocol":
			l.tableLinesRaw = append(l.tableLinesRaw, s)
		case head == "Max NThreads":
			l.tableLinesRaw = append(l.tableLinesRaw, s)
			for j, c := range cols[1 : len(cols)-1] {
				a, p := coll.Algo(block*3+j/3), coll.Proto(j%3)
				if a < coll.NumAlgos {
					l.maxThreads[a][p], _ = strconv.Atoi(strings.TrimSpace(c))
				}
			}
		default:
			f, err := coll.ParseFunc(head)
			if err != nil || f >= coll.NumTunedFuncs {
				continue
			}
			l.tableLinesRaw = append(l.tableLinesRaw, s)
			l.tableRows++
			for j, c := range cols[1 : len(cols)-1] {
				a, p := coll.Algo(block*3+j/3), coll.Proto(j%3)
				lb := strings.Split(c, "/")
				if a >= coll.NumAlgos || len(lb) != 2 {
					return nil, fmt.Errorf("%s:%d: bad cell %q", path, ln, c)
				}
				l.lat[f][a][p], _ = strconv.ParseFloat(strings.TrimSpace(lb[0]), 64)
				l.bw[f][a][p], _ = strconv.ParseFloat(strings.TrimSpace(lb[1]), 64)
			}
		}
	}
	return l, sc.Err()
}

// commFromLog builds the Comm of a 2×H200 run by hand from its graph lines (ring, then tree) and
// its comm line; the rest is the machine: H200 (cc 90), Intel x86, no NVLS (captured with
// NCCL_NVLS_ENABLE=0), no CollNet. NChannels is left 0 so that DeriveNChannels is tested too.
func commFromLog(l *ncclLog) (*Comm, error) {
	if len(l.graphs) < 2 || l.nRanks == 0 {
		return nil, fmt.Errorf("log has %d graph lines and nRanks %d", len(l.graphs), l.nRanks)
	}
	c := &Comm{NRanks: l.nRanks, NNodes: l.nNodes, CCMin: 90, CCMax: 90, CPUArch: "x86", CPUVendor: "intel"}
	c.Graphs[GraphRing] = l.graphs[0]
	c.Graphs[GraphTree] = l.graphs[1]
	return c, nil
}

var h200Logs = []string{"real.677.log", "nvl4.741.log", "nvl0.803.log", "nvswitch.869.log", "fakehosts.931.log"}

func loadH200(t *testing.T, name string) (*ncclLog, *Table) {
	t.Helper()
	path := filepath.Join("..", "testdata", "nccl", "h200x2", name)
	l, err := parseNCCLLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l.version, "2.28") {
		t.Fatalf("%s: NCCL version %q, want 2.28.x", name, l.version)
	}
	c, err := commFromLog(l)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	tb, err := Model(c, &Config{Version: l.version})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return l, tb
}

// TestNCCL228Tables: every cell of NCCL 2.28.9's TUNING table on the 2×H200 machine (real
// topology, three NCCL_TOPO_FILE variants, two fake hosts): latency and bandwidth within 0.1 (the
// log's precision), disabled cells disabled, thread limits equal, and the text identical.
func TestNCCL228Tables(t *testing.T) {
	for _, name := range h200Logs {
		t.Run(name, func(t *testing.T) {
			l, tb := loadH200(t, name)
			if l.tableRows != 3*int(coll.NumTunedFuncs) {
				t.Fatalf("parsed %d table rows, want %d", l.tableRows, 3*coll.NumTunedFuncs)
			}
			if tb.NChannels != l.collChannels {
				t.Errorf("NChannels %d, NCCL logged %d coll channels", tb.NChannels, l.collChannels)
			}
			if tb.MaxThreads != l.maxThreads {
				t.Errorf("MaxThreads %v, NCCL %v", tb.MaxThreads, l.maxThreads)
			}
			for f := coll.Func(0); f < coll.NumTunedFuncs; f++ {
				for a := coll.Algo(0); a < coll.NumAlgos; a++ {
					for p := coll.Proto(0); p < coll.NumProtos; p++ {
						gl, gb := float64(tb.Lat[f][a][p]), float64(tb.Bw[f][a][p])
						wl, wb := l.lat[f][a][p], l.bw[f][a][p]
						if math.Abs(gl-wl) > 0.05+1e-9 || math.Abs(gb-wb) > 0.05+1e-9 {
							t.Errorf("%v %v/%v: %.3f/%.3f, NCCL %.1f/%.1f", f, a, p, gl, gb, wl, wb)
						}
						if (wb == 0) != (gb < 0.05) {
							t.Errorf("%v %v/%v: enabled %v, NCCL %v", f, a, p, gb >= 0.05, wb != 0)
						}
					}
				}
			}
			if got := tb.ThresholdsLine(); l.thresholds == "" || got != l.thresholds {
				t.Errorf("got %q, NCCL %q", got, l.thresholds)
			}
			requireTableLines(t, tb, l)
		})
	}
}

// TestNCCL228Choices: NCCL's per-call choice (algorithm, protocol, channel range) for every logged
// call (5 collectives × 29 sizes, float32, one call per group) equals ours.
func TestNCCL228Choices(t *testing.T) {
	for _, name := range h200Logs {
		t.Run(name, func(t *testing.T) {
			l, tb := loadH200(t, name)
			if len(l.choices) < 100 {
				t.Fatalf("only %d choice lines", len(l.choices))
			}
			bad := checkChoices(t, tb, l.choices)
			t.Logf("%d/%d choices equal", len(l.choices)-bad, len(l.choices))
		})
	}
}

// TestNCCL229Release: NCCL 2.29.7 (Debian's libnccl2 2.29.7-1-1 build, testdata/nccl/releasescan.sh)
// on the 2×H200 machine printed this TUNING table and these choices; release 2.29's constants give
// the same text and the same (algorithm, protocol, channel range) for every logged all-reduce.
// Release 2.28 gives the same here too: the two differ only on Blackwell and in the NVLSTree NET
// latency, which a one-node machine of Hopper GPUs does not reach.
func TestNCCL229Release(t *testing.T) {
	path := filepath.Join("..", "testdata", "nccl", "h200x2", "releasescan-2.29.7-rank0.log.gz")
	l, err := parseNCCLLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if l.version != "2.29.7" {
		t.Fatalf("NCCL version %q, want 2.29.7", l.version)
	}
	c, err := commFromLog(l)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := Model(c, &Config{Version: l.version})
	if err != nil {
		t.Fatal(err)
	}
	if tb.K.Release != "2.29" {
		t.Fatalf("release %q, want 2.29", tb.K.Release)
	}
	requireTableLines(t, tb, l)
	if len(l.choices) < 24 {
		t.Fatalf("only %d choice lines", len(l.choices))
	}
	checkChoices(t, tb, l.choices)
	sizes := map[int64]bool{}
	for _, lc := range l.choices {
		sizes[lc.bytes] = true
	}
	if len(sizes) != 26 {
		t.Errorf("%d sizes logged, want 26 (8 B to 256 MiB)", len(sizes))
	}
}

// TestRelease229Constants: 2.29 is 2.30's table but for the two rules the release history
// records between them and 2.30's maxP2pPeers halving.
func TestRelease229Constants(t *testing.T) {
	k229, err := ConstantsFor("2.29")
	require.NoError(t, err)
	k230, err := ConstantsFor("2.30")
	require.NoError(t, err)
	require.Equal(t, [3]float64{34.5, 34.6, 34.5}, k229.PerChMaxRingLL128Bws[ccBlackwell])
	require.False(t, k229.LL128AnyCCAtLeast90)
	require.False(t, k229.PeersHalving)
	require.True(t, k229.NetPeerByBw)
	k229.PerChMaxRingLL128Bws, k229.LL128AnyCCAtLeast90, k229.Release = k230.PerChMaxRingLL128Bws, k230.LL128AnyCCAtLeast90, k230.Release
	k229.PeersHalving = k230.PeersHalving
	require.Equal(t, *k230, *k229)
}

// requireTableLines checks that tb prints NCCL's TUNING table lines of l, text for text.
func requireTableLines(t *testing.T, tb *Table, l *ncclLog) {
	t.Helper()
	got := tb.Lines()
	if len(got) != len(l.tableLinesRaw) {
		t.Fatalf("%d table lines, NCCL %d", len(got), len(l.tableLinesRaw))
	}
	for i := range got {
		if got[i] != l.tableLinesRaw[i] {
			t.Errorf("table line %d:\n got %q\nNCCL %q", i+1, got[i], l.tableLinesRaw[i])
		}
	}
}

// checkChoices reports every logged float32 call whose (algorithm, protocol, channel range) tb
// selects otherwise, and returns how many.
func checkChoices(t *testing.T, tb *Table, choices []loggedChoice) (bad int) {
	t.Helper()
	for _, lc := range choices {
		ch, err := tb.Select(Call{Func: lc.f, Count: lc.bytes / 4, ElemSize: 4, DataType: 7})
		if err != nil {
			t.Fatal(err)
		}
		if ch.Algo.LogName() != lc.algo || ch.Proto.LogName() != lc.proto || ch.ChannelLo != lc.lo || ch.ChannelHi != lc.hi {
			bad++
			t.Errorf("line %d %v %d B: ours %s, NCCL %s %s {%d..%d}", lc.line, lc.f, lc.bytes, ch.Line(), lc.algo, lc.proto, lc.lo, lc.hi)
		}
	}
	return bad
}
