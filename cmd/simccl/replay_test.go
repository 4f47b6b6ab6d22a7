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
	for _, want := range []string{"every call, in log order (launches not known)", "2 node(s), 16 ranks, 350 calls (launches not known", "scaled to 16 ranks", "slowest 10 calls", "most utilised links", "total"} {
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
	if !strings.Contains(out.String(), "# simccl replay: h200x2-nvlink, 1 node(s), 2 ranks, 1 calls in 1 launches") {
		t.Errorf("output:\n%s", out.String())
	}
}

// A trace whose communicators span a whole number of nodes replays at its own scale without
// --nodes or --scale-ranks: 16 ranks on dgx-h100 are 2 nodes, nothing scaled.
func TestReplayAtTraceScale(t *testing.T) {
	files := writeTraces(t, 16, `{"seq":0,"t_ns":1000,"dur_ns":10,"rank":%[1]d,"nranks":16,"comm":"c16","op":"CommInit","root":-1,"group":0,"host":"h","pid":1,"mode":"record"}
{"seq":1,"t_ns":2000,"dur_ns":10,"rank":%[1]d,"nranks":16,"comm":"c16","op":"AllReduce","count":1048576,"dtype":"float","redop":"sum","root":-1,"group":0}
`)
	var out, errb bytes.Buffer
	if rc := mainRun(append([]string{"replay", "--topo", "dgx-h100"}, files...), &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	if !strings.Contains(out.String(), "2 node(s), 16 ranks") || strings.Contains(out.String()+errb.String(), "scaled") {
		t.Errorf("want 2 nodes, 16 ranks, nothing scaled:\n%s\n%s", out.String(), errb.String())
	}
}

// Issue 17: a trace was scaled to another size with only a stderr note. Replay's scaling is now
// asked for or refused: without --nodes or --scale-ranks, a trace whose largest communicators do
// not fill whole nodes (2 ranks, or 12, on 8-GPU DGX H100 nodes) is a usage error that names the
// flags and a size to pass; with one of them, the header of the text and of the JSON says what was
// scaled from how many ranks, and nothing goes to stderr.
func TestReplayScalingExplicit(t *testing.T) {
	two := []string{replayData + "trace/simccl-trace.rank0.jsonl", replayData + "trace/simccl-trace.rank1.jsonl"}
	dir := t.TempDir()
	var twelve []string
	for r := 0; r < 12; r++ {
		f := filepath.Join(dir, fmt.Sprintf("simccl-trace.rank%d.jsonl", r))
		line := fmt.Sprintf(`{"seq":1,"t_ns":2000,"rank":%d,"nranks":12,"comm":"c12","op":"AllReduce","count":1048576,"dtype":"float","redop":"sum","root":-1,"group":0}`+"\n", r)
		require.NoError(t, os.WriteFile(f, []byte(line), 0o644))
		twelve = append(twelve, f)
	}
	for _, c := range []struct {
		files []string
		want  string
	}{
		{two, "simccl replay: usage: the trace's largest communicators have 2 ranks, not a whole number of dgx-h100 nodes of 8 GPUs: pass --scale-ranks N (a multiple of 8, such as 8) to simulate them at N ranks, or --nodes N to replay on N nodes\n"},
		{twelve, "simccl replay: usage: the trace's largest communicators have 12 ranks, not a whole number of dgx-h100 nodes of 8 GPUs: pass --scale-ranks N (a multiple of 8, such as 16) to simulate them at N ranks, or --nodes N to replay on N nodes\n"},
	} {
		for _, format := range [][]string{nil, {"--json"}} {
			var out, errb bytes.Buffer
			rc := mainRun(append(append([]string{"replay", "--topo", "dgx-h100", "--progress", "off"}, format...), c.files...), &out, &errb)
			require.Equal(t, 2, rc)
			require.Equal(t, c.want, errb.String(), "one line on stderr")
			require.Empty(t, out.String())
		}
	}

	// Asked for: --scale-ranks or --nodes. The header says it.
	for _, c := range []struct {
		args        []string
		files       []string
		nodes, from int
		to          int
	}{
		{[]string{"--scale-ranks", "16"}, two, 2, 2, 16},
		{[]string{"--nodes", "1"}, two, 1, 2, 8},
		{[]string{"--nodes", "1"}, twelve, 1, 12, 8},
		{[]string{"--scale-ranks", "16"}, twelve, 2, 12, 16},
	} {
		var out, errb bytes.Buffer
		args := append(append([]string{"replay", "--topo", "dgx-h100", "--progress", "off", "--links", "0"}, c.args...), c.files...)
		require.Equal(t, 0, mainRun(args, &out, &errb), errb.String())
		require.Empty(t, errb.String(), "%v", c.args)
		lines := strings.SplitN(out.String(), "\n", 3)
		require.Regexp(t, fmt.Sprintf(`^# simccl replay: dgx-h100, %d node\(s\), %d ranks, \d+ calls in \d+ launches$`, c.nodes, c.nodes*8), lines[0])
		require.Regexp(t, fmt.Sprintf(`^# scaled: communicator \S+, %d ranks in the trace -> %d ranks$`, c.from, c.to), lines[1])

		out.Reset()
		require.Equal(t, 0, mainRun(append(args, "--json"), &out, &errb), errb.String())
		var v struct {
			Nodes      int            `json:"nodes"`
			Ranks      int            `json:"ranks"`
			TraceRanks int            `json:"trace_ranks"`
			Scaled     map[string]int `json:"scaled"`
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &v))
		require.Equal(t, c.nodes, v.Nodes)
		require.Equal(t, c.nodes*8, v.Ranks)
		require.Equal(t, c.from, v.TraceRanks)
		require.Len(t, v.Scaled, 1)
		for _, n := range v.Scaled {
			require.Equal(t, c.to, n)
		}
	}
}

// The same 2×H200 run, replayed from its shim trace and from its NCCL COLL logs (issue 17: 300
// against 350 launches). Both hold the same 350 calls: 200 collectives and 150 messages (50 torch
// sends, 50 batch_isend_irecv exchanges of two messages), and both say so, per kind of call and
// with the same bytes. Launches are what only the trace can tell: NCCL prints no group boundaries
// (every COLL line says opCount 0), so the logs' replay counts none (launches_known false, "-" in
// the table, a note) and simulates each call as a launch of its own, which takes longer than the
// trace's 300 launches (an exchange is one launch there, two calls here). The bytes column is in
// bytes, every row alike (it mixed 41947392 and 8K).
func TestReplayLogAgainstTrace(t *testing.T) {
	type byOp struct {
		Ops      string `json:"ops"`
		Launches int    `json:"launches"`
		Calls    int    `json:"calls"`
		Bytes    int64  `json:"bytes"`
	}
	type report struct {
		Calls         int               `json:"calls"`
		LaunchesKnown bool              `json:"launches_known"`
		Launches      []json.RawMessage `json:"launches"`
		ByOp          []byOp            `json:"by_op"`
		TotalUs       float64           `json:"total_us"`
		Notes         []string          `json:"notes"`
	}
	replay := func(glob string) (report, map[string]byOp, string) {
		files, err := filepath.Glob(replayData + glob)
		require.NoError(t, err)
		require.Len(t, files, 2)
		var out, errb bytes.Buffer
		require.Equal(t, 0, mainRun(append([]string{"replay", "--topo", "h200x2-nvlink", "--json", "--progress", "off"}, files...), &out, &errb), errb.String())
		require.Empty(t, errb.String())
		var v report
		require.NoError(t, json.Unmarshal(out.Bytes(), &v))
		m := map[string]byOp{}
		for _, o := range v.ByOp {
			m[o.Ops] = o
		}
		require.NotContains(t, out.String(), `"launches": 0`, "a launch count where none is known")
		return v, m, out.String()
	}
	trace, traceOps, traceJSON := replay("trace/*.jsonl")
	logs, logOps, _ := replay("coll/*.log")
	// Point-to-point launches say P2P, not Ring (issue 17), as simccl mem and run say.
	var launches struct {
		Launches []struct {
			Ops  string `json:"ops"`
			Algo string `json:"algo"`
		} `json:"launches"`
	}
	require.NoError(t, json.Unmarshal([]byte(traceJSON), &launches))
	p2p := 0
	for _, l := range launches.Launches {
		if l.Ops == "SendRecv" {
			require.Equal(t, "P2P", l.Algo)
			p2p++
		}
	}
	require.Equal(t, 100, p2p)
	require.Equal(t, 350, trace.Calls)
	require.Equal(t, 350, logs.Calls)
	require.True(t, trace.LaunchesKnown)
	require.False(t, logs.LaunchesKnown)
	require.Len(t, trace.Launches, 300)
	require.Len(t, logs.Launches, 350, "one entry a call")
	for _, c := range []string{"AllReduce", "AllGather", "ReduceScatter", "Broadcast"} {
		require.Equal(t, byOp{c, 50, 50, traceOps[c].Bytes}, traceOps[c], c)
		require.Equal(t, byOp{c, 0, 50, traceOps[c].Bytes}, logOps[c], c)
	}
	require.Equal(t, byOp{"SendRecv", 100, 150, traceOps["SendRecv"].Bytes}, traceOps["SendRecv"])
	require.Equal(t, byOp{"SendRecv", 0, 150, traceOps["SendRecv"].Bytes}, logOps["SendRecv"], "the same messages and bytes")
	require.Greater(t, logs.TotalUs, trace.TotalUs, "a launch a call takes longer than the trace's groups")
	require.Empty(t, trace.Notes)
	require.Len(t, logs.Notes, 2)
	require.Contains(t, logs.Notes[0], "print no group boundaries")
	require.Equal(t, "the calls are planned under NCCL 2.28's rules, the release the logs name (2.28.9); --nccl-version picks another", logs.Notes[1])
	require.Contains(t, logs.Notes[0], "each of the 350 calls is simulated as a launch of its own")

	// The text says the same: calls in both, launches where the trace has them.
	text := func(glob string) string {
		files, _ := filepath.Glob(replayData + glob)
		var out, errb bytes.Buffer
		require.Equal(t, 0, mainRun(append([]string{"replay", "--topo", "h200x2-nvlink", "--progress", "off", "--calls", "--links", "3"}, files...), &out, &errb), errb.String())
		return out.String()
	}
	require.Contains(t, text("trace/*.jsonl"), "# simccl replay: h200x2-nvlink, 1 node(s), 2 ranks, 350 calls in 300 launches\n")
	logText := text("coll/*.log")
	require.Contains(t, logText, "# simccl replay: h200x2-nvlink, 1 node(s), 2 ranks, 350 calls (launches not known: see the note)\n# note: NCCL's COLL logs print no group boundaries")
	require.Regexp(t, `\n\s+SendRecv\s+-\s+150\s+[0-9]+\s`, logText)
	require.Regexp(t, `\n\s+total\s+-\s+350\s`, logText)
	col := -1
	rows := 0
	for _, l := range strings.Split(logText, "\n") {
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

// Stop 36: replay records messages for its per-link table, and a call too large to record (a 32
// MiB broadcast on 300 DGX H100 nodes) fell back to NCCL's cost model, one the recorded replay
// could time only as another algorithm (a 32 MiB NVLSTree all-reduce there, timed as Tree). Both
// are now timed as simccl run times them, without records.
func TestReplayLargeCallsAsRun(t *testing.T) {
	files := writeTraces(t, 2, `{"seq":0,"t_ns":1,"dur_ns":1,"rank":%[1]d,"nranks":2,"comm":"u1","op":"CommInit","root":-1,"group":0,"host":"h","pid":1,"mode":"record"}
{"seq":1,"t_ns":10,"dur_ns":1,"rank":%[1]d,"nranks":2,"comm":"u1","op":"Broadcast","count":8388608,"dtype":"float","root":0,"group":0}
{"seq":2,"t_ns":20,"dur_ns":1,"rank":%[1]d,"nranks":2,"comm":"u1","op":"AllReduce","count":8388608,"dtype":"float","redop":"sum","root":-1,"group":0}
`)
	var out, errb bytes.Buffer
	if rc := mainRun(append([]string{"replay", "--topo", "dgx-h100", "--nodes", "300", "--json"}, files...), &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var rep struct {
		Launches []struct {
			Ops, Algo, Mode, NCCL string
		} `json:"launches"`
		Notes []string `json:"notes"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Broadcast": "Ring", "AllReduce": "NVLSTree"}
	for _, l := range rep.Launches {
		if l.Algo != want[l.Ops] || l.NCCL != "" || (l.Ops == "Broadcast" && !strings.HasPrefix(l.Mode, "nodes-steady")) {
			t.Errorf("%s: %s in mode %q (NCCL %q), want %s (a broadcast timed from other node counts)", l.Ops, l.Algo, l.Mode, l.NCCL, want[l.Ops])
		}
	}
	if len(rep.Launches) != 2 || strings.Contains(strings.Join(rep.Notes, "\n"), "cost model (tuning)") {
		t.Errorf("launches %+v, notes %q", rep.Launches, rep.Notes)
	}
}

// writeTraces writes one trace file per rank (simccl-trace.rankR.jsonl in a temporary directory),
// each the lines of format with the rank for %[1]d, and returns their paths.
func writeTraces(t *testing.T, ranks int, format string) []string {
	t.Helper()
	dir := t.TempDir()
	var files []string
	for r := 0; r < ranks; r++ {
		f := filepath.Join(dir, fmt.Sprintf("simccl-trace.rank%d.jsonl", r))
		if err := os.WriteFile(f, []byte(fmt.Sprintf(format, r)), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// TestReplayLogRelease: a replay of NCCL logs plans under the release their "NCCL version" line
// names where simccl's tuning model has it, says so, and says otherwise where it does not, where
// the logs disagree, or where --nccl-version overrides; a shim trace (no version) says nothing.
func TestReplayLogRelease(t *testing.T) {
	logs, err := filepath.Glob(replayData + "coll/*.log")
	require.NoError(t, err)
	require.Len(t, logs, 2)
	// withVersion copies the two logs, the i-th naming version vs[i] in place of 2.28.9.
	withVersion := func(vs ...string) []string {
		dir := t.TempDir()
		var out []string
		for i, f := range logs {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			require.Contains(t, string(b), "NCCL version 2.28.9+cuda13.0")
			p := filepath.Join(dir, filepath.Base(f))
			require.NoError(t, os.WriteFile(p, []byte(strings.ReplaceAll(string(b), "NCCL version 2.28.9", "NCCL version "+vs[i])), 0o644))
			out = append(out, p)
		}
		return out
	}
	type result struct {
		Release string   `json:"nccl_release"`
		Notes   []string `json:"notes"`
		TotalUs float64  `json:"total_us"`
	}
	replay := func(extra []string, files []string) result {
		var out, errb bytes.Buffer
		args := append(append([]string{"replay", "--topo", "h200x2-nvlink", "--json", "--progress", "off"}, extra...), files...)
		require.Equal(t, 0, mainRun(args, &out, &errb), errb.String())
		var r result
		require.NoError(t, json.Unmarshal(out.Bytes(), &r))
		return r
	}
	last := func(r result) string { return r.Notes[len(r.Notes)-1] }
	for _, c := range []struct {
		name     string
		versions []string
		extra    []string
		release  string
		note     string
	}{
		{"a release the model has", []string{"2.29.7", "2.29.7"}, nil, "2.29",
			"the calls are planned under NCCL 2.29's rules, the release the logs name (2.29.7); --nccl-version picks another"},
		{"one it lacks", []string{"2.22.3", "2.22.3"}, nil, "2.28",
			"the logs name NCCL 2.22.3, a release simccl's tuning model does not have (it has 2.26, 2.28, 2.29, 2.30): the calls are planned under 2.28's rules"},
		{"logs that disagree", []string{"2.26.2", "2.29.7"}, nil, "2.28",
			"the logs name NCCL 2.26.2, 2.29.7: the calls are planned under the default, 2.28's rules (--nccl-version picks another)"},
		{"--nccl-version over the logs", []string{"2.29.7", "2.29.7"}, []string{"--nccl-version", "2.30"}, "2.30",
			"the logs name NCCL 2.29.7; the calls are planned under 2.30's rules, as --nccl-version asks"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := replay(c.extra, withVersion(c.versions...))
			require.Equal(t, c.release, r.Release)
			require.Equal(t, c.note, last(r))
			require.Positive(t, r.TotalUs)
		})
	}
	// --nccl-version naming the logs' own release: no note beside the group-boundary one.
	r := replay([]string{"--nccl-version", "2.28"}, logs)
	require.Equal(t, "2.28", r.Release)
	require.Len(t, r.Notes, 1)
	// A shim trace names no release: the default plans it, and nothing is said.
	traces, err := filepath.Glob(replayData + "trace/*.jsonl")
	require.NoError(t, err)
	r = replay(nil, traces)
	require.Equal(t, "2.28", r.Release)
	require.Empty(t, r.Notes)
}
