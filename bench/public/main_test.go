package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The committed table reads whole, one run per source in file order, and every row's out-of-place
// time agrees with the bus bandwidth the source printed beside it (the check on the copy that
// testdata/public/gb200-coreweave/README.md names).
func TestReadCommittedTable(t *testing.T) {
	path := "../../testdata/public/gb200-coreweave/allreduce.csv"
	rows, err := readRows(path)
	require.NoError(t, err)
	require.Len(t, rows, 17)
	g := groups(rows)
	require.Len(t, g, 3)
	require.Equal(t, []int{1, 2, 20}, []int{g[0][0].Nodes, g[1][0].Nodes, g[2][0].Nodes})
	require.Equal(t, []int{5, 6, 6}, []int{len(g[0]), len(g[1]), len(g[2])})
	busbw := map[int64]float64{536870912: 586.06, 8589934592: 834.57} // one rack, from the source
	for _, r := range g[0] {
		if want, ok := busbw[r.Bytes]; ok {
			n := float64(r.Ranks)
			require.InDelta(t, want, float64(r.Bytes)/r.TimeUs/1e3*2*(n-1)/n, want*0.002)
		}
	}
}

func TestReadRowsRejects(t *testing.T) {
	dir := t.TempDir()
	head := "source,topo,nodes,ranks,nccl,coll,bytes,time_oop_us,busbw_oop,time_ip_us,busbw_ip\n"
	for name, body := range map[string]string{
		"no rows":       head,
		"bad time":      head + "a,gb200-nvl72,1,72,2.26.2,all_reduce,1024,-1,0,0,0\n",
		"bad nodes":     head + "a,gb200-nvl72,0,72,2.26.2,all_reduce,1024,10,0,0,0\n",
		"other coll":    head + "a,gb200-nvl72,1,72,2.26.2,all_gather,1024,10,0,0,0\n",
		"missing field": "source,topo,nodes\na,b,1\n",
	} {
		p := filepath.Join(dir, "t.csv")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		_, err := readRows(p)
		require.Error(t, err, name)
	}
	_, err := envOf("ALGO=Ring")
	require.Error(t, err)
	kv, err := envOf("NCCL_ALGO=NVLSTree,NCCL_PROTO=Simple")
	require.NoError(t, err)
	require.Equal(t, []string{"NCCL_ALGO=NVLSTree", "NCCL_PROTO=Simple"}, kv)
}

func TestSummaryMedians(t *testing.T) {
	pts := []point{
		{Source: "a", SimErr: -0.1, TuneErr: 0.2},
		{Source: "a", SimErr: 0.3, TuneErr: -0.4},
		{Source: "b", SimErr: 0.05, TuneErr: 0.01},
	}
	s := summarize(pts)
	require.Len(t, s, 3)
	require.Equal(t, "a", s[0].Source)
	require.InDelta(t, 0.2, float64(s[0].SimMed), 1e-12)
	require.InDelta(t, 0.3, float64(s[0].TuneMed), 1e-12)
	require.Equal(t, "all", s[2].Source)
	require.InDelta(t, 0.1, float64(s[2].SimMed), 1e-12)
}

// The Azure table publishes in-place bus bandwidth only: each row's time is what that busbw
// stands for, and each run carries its set-up (launch mode, NCCL settings) from the CSV.
func TestReadBusbwOnlyTableWithSetUp(t *testing.T) {
	rows, err := readRows("../../testdata/public/azure-nd/allreduce.csv")
	require.NoError(t, err)
	require.Len(t, rows, 72)
	g := groups(rows)
	require.Len(t, g, 3)
	r := g[0][0] // ND H100 v5, 1 KiB at 0.07 GB/s of busbw: 1024 × 2 × 7/8 / 0.07 GB/s
	require.Equal(t, int64(1024), r.Bytes)
	require.InDelta(t, 25.6, r.TimeUs, 1e-9)
	require.Equal(t, "per-node", r.Launch)
	require.Equal(t, []string{"NCCL_ALGO=NVLS"}, r.Env)
	require.Empty(t, g[2][0].Env, "ND A100 v4: the algorithm it ran is not known")
	require.Equal(t, "dgx-h200", g[1][0].Topo)
}

func TestSummarySplitsAtOneMiB(t *testing.T) {
	s := summaryOf("a", []point{{Bytes: 1 << 19, SimErr: 0.5, TuneErr: 0.1}, {Bytes: 1 << 20, SimErr: -0.02, TuneErr: 0.3}, {Bytes: 1 << 30, SimErr: 0.04, TuneErr: 0.2}})
	require.InDelta(t, 0.03, float64(s.SimMedLarge), 1e-12)
	require.InDelta(t, 0.5, float64(s.SimMedSmall), 1e-12)
	require.InDelta(t, 0.25, float64(s.TuneMedLarge), 1e-12)
	require.InDelta(t, 0.1, float64(s.TuneMedSmall), 1e-12)
	none := summaryOf("b", []point{{Bytes: 1 << 30}})
	require.True(t, math.IsNaN(float64(none.SimMedSmall)), "no point below 1 MiB")
	// JSON has no NaN: a median of no points is null (a run of sizes all ≥ 1 MiB encoded to an
	// error until stop 48).
	b, err := json.Marshal(none)
	require.NoError(t, err)
	require.Contains(t, string(b), `"sim_median_abs_err_below_1mib":null`)
}

// TestReleaseOf: -nccl-version csv takes a run's own release where simccl's tuning model has it
// (2.26.2 → 2.26), and simccl's default where not (2.18.5, unknown); a release given plans every run.
func TestReleaseOf(t *testing.T) {
	for _, c := range []struct{ flag, measured, want string }{
		{"", "2.26.2", "2.28"},
		{"csv", "2.26.2", "2.26"},
		{"csv", "2.30.7", "2.30"},
		{"csv", "2.18.5", "2.28"},
		{"csv", "unknown", "2.28"},
		{"2.26", "2.18.5", "2.26"},
	} {
		require.Equal(t, c.want, releaseOf(c.flag, c.measured), "%s %s", c.flag, c.measured)
	}
	require.Error(t, run("bin/simccl", "x.csv", "", "", "2.99", false, nil))
}
