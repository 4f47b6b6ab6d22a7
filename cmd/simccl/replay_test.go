package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const replayData = "../../testdata/intercept/h200x2/"

func TestReplayCommand(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"replay", "--topo", "h200x2-nvlink", "--json", "--top", "3", "--links", "2",
		replayData + "trace/simccl-trace.rank0.jsonl", replayData + "trace/simccl-trace.rank1.jsonl",
		"--measured", replayData + "shim.rank0.json", "--measured", replayData + "shim.rank1.json"}
	if rc := mainRun(args, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var v struct {
		Ranks    int `json:"ranks"`
		Launches []struct {
			TimeUs float64 `json:"time_us"`
		} `json:"launches"`
		TotalUs float64 `json:"total_us"`
		Slowest []struct {
			TimeUs float64 `json:"time_us"`
		} `json:"slowest"`
		Links []struct {
			Utilisation float64 `json:"utilisation"`
		} `json:"links"`
		Comparison struct {
			RelErr float64 `json:"rel_err"`
		} `json:"comparison"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
	if v.Ranks != 2 || len(v.Launches) != 300 || len(v.Slowest) != 3 || len(v.Links) != 2 || v.TotalUs <= 0 {
		t.Fatalf("report: ranks %d, %d launches, %d slowest, %d links, total %v", v.Ranks, len(v.Launches), len(v.Slowest), len(v.Links), v.TotalUs)
	}
	if v.Slowest[0].TimeUs < v.Slowest[2].TimeUs || math.Abs(v.Comparison.RelErr) > 0.15 {
		t.Errorf("slowest %+v, comparison error %v", v.Slowest, v.Comparison.RelErr)
	}

	// Text output, from the NCCL COLL logs, scaled to 2 DGX H100 nodes.
	out.Reset()
	errb.Reset()
	logs, _ := filepath.Glob(replayData + "coll/*.log")
	args = append([]string{"replay", "--topo", "dgx-h100", "--scale-ranks", "16", "--links", "3", "--calls"}, logs...)
	if rc := mainRun(args, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	for _, want := range []string{"every launch, in trace order", "2 node(s), 16 ranks, 350 launches", "scaled to 16 ranks", "slowest 10 launches", "most utilised links", "total"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestReplayErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"seq":0,"rank":5,"nranks":2,"comm":"c","op":"AllReduce","count":1,"dtype":"float","root":-1,"group":0}`+"\n"), 0o644)
	empty := filepath.Join(dir, "empty.log")
	os.WriteFile(empty, []byte("nothing here\n"), 0o644)
	for _, c := range []struct {
		args []string
		rc   int
		want string
	}{
		{[]string{"replay"}, 2, "want one or more trace files"},
		{[]string{"replay", bad}, 1, "bad.jsonl:1: AllReduce: rank 5 of 2"},
		{[]string{"replay", empty}, 1, "empty.log: neither a trace (JSON lines) nor an NCCL log with COLL lines (1 lines read)"},
		{[]string{"replay", "--scale-ranks", "12", "--topo", "dgx-h100", replayData + "trace/simccl-trace.rank0.jsonl", replayData + "trace/simccl-trace.rank1.jsonl"}, 2, "not a multiple"},
		// A recorded (not virtual) run needs every rank's file, as runccl replay does.
		{[]string{"replay", replayData + "trace/simccl-trace.rank0.jsonl"}, 1, "has 2 ranks but no trace holds rank 1 (missing rank file?)"},
		{[]string{"replay", filepath.Join(dir, "missing")}, 1, "no such file"},
	} {
		var out, errb bytes.Buffer
		rc := mainRun(c.args, &out, &errb)
		if rc != c.rc || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: rc %d, stderr %q; want rc %d and %q", c.args, rc, errb.String(), c.rc, c.want)
		}
	}
}

// A virtual-mode trace names its topology: replay uses it when --topo is not given.
func TestReplayVirtualTopo(t *testing.T) {
	p := filepath.Join(t.TempDir(), "v.jsonl")
	trace := `{"seq":0,"t_ns":1,"rank":0,"nranks":2,"comm":"u1","op":"CommInit","root":-1,"group":0,"mode":"virtual","topo":"h200x2-nvlink"}
{"seq":1,"t_ns":2,"rank":0,"nranks":2,"comm":"u1","op":"AllReduce","count":1048576,"dtype":"bfloat16","redop":"sum","root":-1,"group":0}
`
	if err := os.WriteFile(p, []byte(trace), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if rc := mainRun([]string{"replay", p}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	if !strings.Contains(out.String(), "# simccl replay: h200x2-nvlink, 1 node(s), 2 ranks, 1 launches") {
		t.Errorf("output:\n%s", out.String())
	}
}

// A trace whose communicators span a whole number of nodes replays at its own scale without
// --nodes or --scale-ranks: 16 ranks on dgx-h100 are 2 nodes, nothing scaled.
func TestReplayAtTraceScale(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for r := 0; r < 16; r++ {
		f := filepath.Join(dir, fmt.Sprintf("simccl-trace.rank%d.jsonl", r))
		lines := fmt.Sprintf(`{"seq":0,"t_ns":1000,"dur_ns":10,"rank":%d,"nranks":16,"comm":"c16","op":"CommInit","root":-1,"group":0,"host":"h","pid":1,"mode":"record"}
{"seq":1,"t_ns":2000,"dur_ns":10,"rank":%d,"nranks":16,"comm":"c16","op":"AllReduce","count":1048576,"dtype":"float","redop":"sum","root":-1,"group":0}
`, r, r)
		if err := os.WriteFile(f, []byte(lines), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	var out, errb bytes.Buffer
	if rc := mainRun(append([]string{"replay", "--topo", "dgx-h100"}, files...), &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	if !strings.Contains(out.String(), "2 node(s), 16 ranks") || strings.Contains(out.String()+errb.String(), "scaled") {
		t.Errorf("want 2 nodes, 16 ranks, nothing scaled:\n%s\n%s", out.String(), errb.String())
	}
}

// The same 2×H200 run, replayed from its shim trace and from its NCCL COLL logs (issue 17: 300
// against 350 launches). The collectives agree launch for launch and byte for byte; the logs have
// 50 launches more because NCCL prints no group boundaries: each batch_isend_irecv exchange (a
// Send and a Recv in one group on each rank) is one launch in the trace and two in the logs, and
// the text output says so. The bytes column is in bytes, every row alike (it mixed 41947392
// and 8K).
func TestReplayLogAgainstTrace(t *testing.T) {
	type byOp struct {
		Ops      string `json:"ops"`
		Launches int    `json:"launches"`
		Bytes    int64  `json:"bytes"`
	}
	replay := func(glob string) (map[string]byOp, []string, int) {
		files, err := filepath.Glob(replayData + glob)
		require.NoError(t, err)
		require.Len(t, files, 2)
		var out, errb bytes.Buffer
		require.Equal(t, 0, mainRun(append([]string{"replay", "--topo", "h200x2-nvlink", "--json", "--progress", "off"}, files...), &out, &errb), errb.String())
		var v struct {
			Launches []json.RawMessage `json:"launches"`
			ByOp     []byOp            `json:"by_op"`
			Notes    []string          `json:"notes"`
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &v))
		m := map[string]byOp{}
		for _, o := range v.ByOp {
			m[o.Ops] = o
		}
		return m, v.Notes, len(v.Launches)
	}
	trace, traceNotes, nTrace := replay("trace/*.jsonl")
	logs, logNotes, nLog := replay("coll/*.log")
	require.Equal(t, 300, nTrace)
	require.Equal(t, 350, nLog)
	for _, c := range []string{"AllReduce", "AllGather", "ReduceScatter", "Broadcast"} {
		require.Equal(t, trace[c], logs[c], c)
		require.Equal(t, 50, trace[c].Launches, c)
	}
	// 50 torch send/recv (one launch either way) and 50 exchanges (one launch, or two).
	require.Equal(t, 100, trace["SendRecv"].Launches)
	require.Equal(t, 150, logs["SendRecv"].Launches)
	require.Empty(t, traceNotes)
	require.Len(t, logNotes, 1)
	require.Contains(t, logNotes[0], "prints no group boundaries")

	var out, errb bytes.Buffer
	files, _ := filepath.Glob(replayData + "coll/*.log")
	require.Equal(t, 0, mainRun(append([]string{"replay", "--topo", "h200x2-nvlink", "--progress", "off", "--calls", "--links", "3"}, files...), &out, &errb), errb.String())
	col := -1
	rows := 0
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		switch {
		case strings.HasPrefix(l, "#") || len(f) == 0:
			col = -1
		case col < 0:
			col = slices.Index(f, "bytes")
		case f[0] != "total":
			require.Regexp(t, `^[0-9]+$`, f[col], "bytes column of %q", l)
			rows++
		}
	}
	require.Greater(t, rows, 350, "rows read")
}
