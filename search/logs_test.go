package search

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/simccl/simccl/graph"
)

// NCCL's INFO logs print every graph it searched (ncclTopoPrintGraph): "Pattern …" then one
// line per channel. These tests compare our printout of the same graphs, line for line, with the
// lines the rank printed (rank 0 unless said), for the logs whose NCCL (2.27.7+) prints GPUs as systemId-busid.
var logGoldens = []struct {
	golden
	log string
}{
	{golden{name: "h200x2-real", topo: "nccl/h200x2/real_topo.xml", nodes: 1, nranks: 2}, "nccl/h200x2/real.677.log"},
	{golden{name: "h200x2-nvswitch", topo: "nccl/h200x2/nvswitch_topo.xml", nodes: 1, nranks: 2}, "nccl/h200x2/nvswitch.869.log"},
	{golden{name: "h200x2-nvl4", topo: "nccl/h200x2/nvl4_topo.xml", nodes: 1, nranks: 2}, "nccl/h200x2/nvl4.741.log"},
	{golden{name: "h200x2-nvl0", topo: "nccl/h200x2/nvl0_topo.xml", nodes: 1, nranks: 2}, "nccl/h200x2/nvl0.803.log"},
	{golden{name: "h200x2-fakehosts", topo: "nccl/h200x2/fakehosts_topo.xml", nodes: 2, nranks: 2}, "nccl/h200x2/fakehosts.931.log"},
	{golden{name: "h200x2-pix", topo: "../search/testdata/h200x2/pix_topo.xml", nodes: 1, nranks: 2}, "../search/testdata/h200x2/pix.681.log"},
	{golden{name: "h200x2-sys", topo: "../search/testdata/h200x2/sys_topo.xml", nodes: 1, nranks: 2}, "../search/testdata/h200x2/sys.743.log"},
	{golden{name: "h200x2-amd-phb", topo: "../search/testdata/h200x2/amd_phb_topo.xml", nodes: 1, nranks: 2}, "../search/testdata/h200x2/amd_phb.805.log"},
	{golden{name: "h200x2-amd-sys", topo: "../search/testdata/h200x2/amd_sys_topo.xml", nodes: 1, nranks: 2}, "../search/testdata/h200x2/amd_sys.868.log"},
	{golden{name: "h200x2-p2pdisable", topo: "../search/testdata/h200x2/p2pdisable_topo.xml", nodes: 1, nranks: 2,
		graphO: graph.Options{P2PDisable: true}}, "../search/testdata/h200x2/p2pdisable.930.log"},
	{golden{name: "h200x2-crossnic0-fakehosts", topo: "../search/testdata/h200x2/crossnic0_fakehosts_topo.xml", nodes: 2, nranks: 2},
		"../search/testdata/h200x2/crossnic0_fakehosts.988.log"},
	{golden{name: "h200x2-twonets", topo: "../search/testdata/h200x2/twonets_topo.xml", nodes: 2, nranks: 2},
		"../search/testdata/h200x2/twonets.1174.log"},
	{golden{name: "h200x2-twonets-rank1", topo: "../search/testdata/h200x2/twonets_rank1_topo.xml", nodes: 2, nranks: 2, rank: 1},
		"../search/testdata/h200x2/twonets.1175.log"},
	{golden{name: "h200x2-twonets-crossnic1", topo: "../search/testdata/h200x2/twonets_crossnic1_topo.xml", nodes: 2, nranks: 2, crossNic: intp(1)},
		"../search/testdata/h200x2/twonets_crossnic1.1238.log"},
	{golden{name: "h200x2-twonets-crossnic1-rank1", topo: "../search/testdata/h200x2/twonets_crossnic1_rank1_topo.xml", nodes: 2, nranks: 2, rank: 1, crossNic: intp(1)},
		"../search/testdata/h200x2/twonets_crossnic1.1239.log"},
	{golden{name: "h200x2-twonets-crossnic0", topo: "../search/testdata/h200x2/twonets_crossnic0_topo.xml", nodes: 2, nranks: 2, crossNic: intp(0)},
		"../search/testdata/h200x2/twonets_crossnic0.1302.log"},
	{golden{name: "h200x2-twonets-crossnic0-rank1", topo: "../search/testdata/h200x2/twonets_crossnic0_rank1_topo.xml", nodes: 2, nranks: 2, rank: 1, crossNic: intp(0)},
		"../search/testdata/h200x2/twonets_crossnic0.1303.log"},
	// NCCL 2.27.7; the search rules it used are those of 2.28 for these graphs.
	{golden{name: "a100pcie-nvlink-bridge", topo: "topos/a100pcie-2gpu-nvlink-bridge-dump-normal.xml", nodes: 1, nranks: 2},
		"topos/a100pcie-2gpu-nvlink-bridge-dump-normal-nccl-info.log"},
	{golden{name: "a100pcie-asymmetric-nvlink", topo: "topos/a100pcie-2gpu-nvlink-bridge-dump-FAULT-asym-nvlink.xml", nodes: 1, nranks: 2},
		"topos/a100pcie-2gpu-nvlink-bridge-dump-FAULT-nccl-info.log"},
}

var (
	logRankRe  = regexp.MustCompile(`\[(\d+)\] NCCL INFO (.*)$`)
	logChannel = regexp.MustCompile(`^ ?\d+ : `)
	logSystem  = regexp.MustCompile(`^=== System : `)
)

// rankGraphs returns the System line and the graph lines (Pattern + channels) a rank printed.
func rankGraphs(t *testing.T, path string, rank int) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	inGraph := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := logRankRe.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != strconv.Itoa(rank) {
			continue
		}
		line := m[2]
		switch {
		case logSystem.MatchString(line) && len(out) == 0:
			out = append(out, line)
		case strings.HasPrefix(line, "Pattern "):
			out = append(out, line)
			inGraph = true
		case inGraph && logChannel.MatchString(line):
			out = append(out, line)
		default:
			inGraph = false
		}
	}
	return out
}

func TestGoldenLogs(t *testing.T) {
	for _, c := range logGoldens {
		t.Run(c.name, func(t *testing.T) {
			want := rankGraphs(t, c.log, c.rank)
			if len(want) < 3 {
				t.Fatalf("%s: only %d graph lines found", c.log, len(want))
			}
			top := readTopo(t, c.golden)
			off := false
			res, err := ComputeAll(top, AllOptions{Nodes: c.nodes, NVLS: &off, Options: Options{CrossNic: c.crossNic}})
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := WriteReport(&b, res); err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSpace(b.String()), "\n")
			got = got[:len(got)-1]
			t.Logf("%d lines compared", len(want)) // our channel-count summary line; NCCL prints it differently
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("printout differs from NCCL's (%s):\n--- ours\n%s\n--- NCCL\n%s", c.log, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
