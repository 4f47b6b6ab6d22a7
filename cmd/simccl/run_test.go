package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/report"
	"github.com/simccl/simccl/simnet"
)

func TestRunCommand(t *testing.T) {
	dir := t.TempDir()
	trace, ops, plot := filepath.Join(dir, "t.json"), filepath.Join(dir, "ops.csv"), filepath.Join(dir, "p.svg")
	var out, errb bytes.Buffer
	args := []string{"run", "-c", "allreduce", "-b", "1K", "-e", "1M", "-f", "32", "--json", "--trace", trace, "--ops", ops, "--plot", plot}
	if rc := mainRun(args, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var v struct {
		Rows []struct {
			Coll      string  `json:"coll"`
			Bytes     int64   `json:"bytes"`
			Count     int64   `json:"count"`
			TimeUs    float64 `json:"time_us"`
			AlgBw     float64 `json:"algbw"`
			BusBw     float64 `json:"busbw"`
			Algo      string  `json:"algo"`
			Proto     string  `json:"proto"`
			NChannels int     `json:"nchannels"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out.String())
	}
	if len(v.Rows) != 3 || v.Rows[0].Bytes != 1024 || v.Rows[2].Bytes != 1<<20 || v.Rows[2].Count != 1<<18 {
		t.Fatalf("rows %+v", v.Rows)
	}
	for _, r := range v.Rows {
		if r.Coll != "all_reduce" || r.TimeUs <= 0 || r.BusBw <= 0 || r.Algo == "" || r.Proto == "" || r.NChannels < 1 {
			t.Errorf("row %+v", r)
		}
	}
	for _, f := range []string{trace, ops, plot} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s not written (%v)", f, err)
		}
	}
	data, _ := os.ReadFile(trace)
	if !json.Valid(data) {
		t.Errorf("trace is not valid JSON")
	}

	// The table, on two nodes, every collective.
	out.Reset()
	if rc := mainRun([]string{"run", "-c", "all", "-b", "64K", "-e", "64K", "--nodes", "2"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	for _, c := range []string{"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv", "busbw", "2 node(s)"} {
		if !strings.Contains(out.String(), c) {
			t.Errorf("table lacks %q:\n%s", c, out.String())
		}
	}
}

func TestRunCommandErrors(t *testing.T) {
	for _, bad := range [][]string{
		{"run", "-c", "bogus"},
		{"run", "-b", "1G", "-e", "1K"},
		{"run", "--nodes", "0"},
		{"run", "-d", "complex"},
		{"run", "--fabric-set", "tiers=7", "--nodes", "2"},
		{"run", "--plot", "x.gif"},
		{"run", "extra-arg"},
	} {
		var out, errb bytes.Buffer
		if rc := mainRun(bad, &out, &errb); rc != 2 {
			t.Errorf("%v: rc %d, want 2 (usage); stderr %s", bad, rc, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if rc := mainRun([]string{"run", "--topo", filepath.Join(t.TempDir(), "missing.xml")}, &out, &errb); rc != 1 || !strings.Contains(errb.String(), "missing.xml") {
		t.Errorf("missing topology: rc %d, stderr %s", rc, errb.String())
	}
	if rc := mainRun([]string{"run", "--fabric", filepath.Join(t.TempDir(), "missing.fabric")}, &out, &errb); rc != 1 {
		t.Errorf("missing fabric: rc %d", rc)
	}
	// Too many ranks: one clear error, no fallback to the hand-made model.
	errb.Reset()
	if rc := mainRun([]string{"run", "--nodes", "20000"}, &out, &errb); rc != 2 ||
		!strings.Contains(errb.String(), "--nodes: planner: 20000 nodes × 8 GPUs = 160000 ranks, more ranks than simccl simulates (131072)") ||
		strings.Contains(errb.String(), "hand-made") || strings.Count(strings.TrimSpace(errb.String()), "\n") != 0 {
		t.Errorf("20,000 nodes: rc %d, stderr %q", rc, errb.String())
	}
}

// The calls of a run are simulated in parallel; the output must not depend on how many run at
// once or on GOMAXPROCS.
// An NVLSTree call large enough for its compile and its records to take two cores where there
// are two (coll's fork, simnet's record parts) gives the same row with one.
func TestRunNVLSTreeIndependentOfGOMAXPROCS(t *testing.T) {
	args := []string{"run", "--nodes", "16", "-c", "allreduce", "-b", "256M", "-e", "256M", "--json"}
	var want string
	for _, procs := range []int{2, 1} {
		old := runtime.GOMAXPROCS(procs)
		var out, errb bytes.Buffer
		rc := mainRun(args, &out, &errb)
		runtime.GOMAXPROCS(old)
		if rc != 0 {
			t.Fatalf("GOMAXPROCS=%d: rc %d: %s", procs, rc, errb.String())
		}
		if want == "" {
			want = out.String()
			if !strings.Contains(want, `"NVLSTree"`) {
				t.Fatalf("no NVLSTree row:\n%s", want)
			}
			continue
		}
		if out.String() != want {
			t.Fatalf("GOMAXPROCS=%d: output differs:\n%s\nagainst\n%s", procs, out.String(), want)
		}
	}
}

func TestRunIndependentOfGOMAXPROCS(t *testing.T) {
	// NVLS off: NCCL would run NVLSTree here, a schedule replay; the test wants the tree executor.
	// Broadcast has no compact executor: its 64 MiB row is a schedule replay, back to back (send/recv and
	// all-to-all run on the point-to-point executor whenever no op is recorded).
	args := []string{"run", "--nodes", "16", "--nvls", "off", "-c", "allreduce,alltoall,sendrecv,broadcast", "-b", "64M", "-e", "1G", "-f", "16", "--json"}
	var want string
	for _, c := range []struct {
		procs int
		jobs  string
	}{{1, "0"}, {4, "0"}, {2, "3"}} {
		old := runtime.GOMAXPROCS(c.procs)
		var out, errb bytes.Buffer
		rc := mainRun(append(args, "--jobs", c.jobs), &out, &errb)
		runtime.GOMAXPROCS(old)
		if rc != 0 {
			t.Fatalf("GOMAXPROCS=%d --jobs %s: rc %d: %s", c.procs, c.jobs, rc, errb.String())
		}
		if want == "" {
			want = out.String()
			for _, mode := range []string{`"schedule`, `"p2p-compact`, `"tree-`} {
				if !strings.Contains(want, mode) {
					t.Errorf("no %s row: the test should cover the schedule and compact executors\n%s", mode, want)
				}
			}
			continue
		}
		if out.String() != want {
			t.Fatalf("GOMAXPROCS=%d --jobs %s: output differs:\n%s\nagainst\n%s", c.procs, c.jobs, out.String(), want)
		}
	}
}

var update = flag.Bool("update", false, "rewrite the golden files (testdata/*.golden) with what the code gives")

// runTableArgs is the run of testdata/run_table.golden: two nodes (the fabric line), a rooted
// and an unrooted collective, times from tens of µs to ms.
var runTableArgs = []string{"run", "--nodes", "2", "-c", "allreduce,broadcast", "-b", "1K", "-e", "1G", "-f", "1024", "--progress", "off"}

// TestRunTableGolden: simccl run's table as a whole (testdata/run_table.golden; -update rewrites
// it): the header lines, nccl-tests' columns and simccl's, the footer.
func TestRunTableGolden(t *testing.T) {
	versionString = "vTEST"
	defer func() { versionString = "" }()
	var out, errb bytes.Buffer
	require.Equal(t, 0, mainRun(runTableArgs, &out, &errb), errb.String())
	golden := filepath.Join("testdata", "run_table.golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, out.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), out.String())
}

// TestRunTableReadsAsNCCLTests: the repository's nccl-tests parser (report.ReadMeasured, what
// simccl report --measured reads) takes simccl run's table: each collective's rows, with the
// run's ranks and the times, algbw and busbw of --json as the table rounds them.
func TestRunTableReadsAsNCCLTests(t *testing.T) {
	var table, js, errb bytes.Buffer
	require.Equal(t, 0, mainRun(runTableArgs, &table, &errb), errb.String())
	require.Equal(t, 0, mainRun(append(runTableArgs, "--json"), &js, &errb), errb.String())
	var doc struct {
		Header simnet.RunHeader `json:"header"`
		Rows   []simnet.Row     `json:"rows"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &doc))
	for _, c := range []string{"all_reduce", "broadcast"} {
		got, err := report.ReadMeasured(table.Bytes(), "run.txt", c)
		require.NoError(t, err)
		var want []simnet.Row
		for _, r := range doc.Rows {
			if r.Coll == c {
				want = append(want, r)
			}
		}
		require.Len(t, got, len(want), c)
		for i, m := range got {
			require.Equal(t, c, m.Coll)
			require.Equal(t, 16, m.World)
			require.Equal(t, want[i].Bytes, m.Bytes)
			require.InDelta(t, want[i].TimeUs, m.Us, 0.5, "%s %d", c, m.Bytes)
			require.InDelta(t, want[i].AlgBw, m.AlgBw, 0.005)
			require.InDelta(t, want[i].BusBw, m.BusBw, 0.005)
		}
	}
	// And through the command.
	dir := t.TempDir()
	meas := filepath.Join(dir, "run.txt")
	require.NoError(t, os.WriteFile(meas, table.Bytes(), 0o644))
	var out bytes.Buffer
	errb.Reset()
	html := filepath.Join(dir, "r.html")
	rc := mainRun([]string{"report", "--nodes", "2", "-c", "broadcast", "-b", "1K", "-e", "1G", "-f", "1024", "--measured", meas, "-o", html}, &out, &errb)
	require.Equal(t, 0, rc, errb.String())
	require.FileExists(t, html)
}

// TestRunJSONHeader: simccl run --json's header says what was simulated, in snake_case keys.
func TestRunJSONHeader(t *testing.T) {
	versionString = "vTEST"
	defer func() { versionString = "" }()
	var out, errb bytes.Buffer
	require.Equal(t, 0, mainRun(append(runTableArgs, "--json", "-d", "half", "-o", "max"), &out, &errb), errb.String())
	var doc struct {
		Header map[string]any `json:"header"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	require.Equal(t, map[string]any{
		"program": "simccl", "version": "vTEST", "topology": "dgx-h100", "nodes": 2.0, "gpus_per_node": 8.0, "host_enqueue_us": 10.12, "launch": "per-gpu", "nranks": 16.0,
		"nchannels": doc.Header["nchannels"], "nccl_release": "2.28", "collectives": []any{"all_reduce", "broadcast"}, "datatype": "half", "op": "max",
		"fabric": map[string]any{"topology": "rail", "tiers": 2.0, "hosts_per_leaf": 32.0, "oversubscription": 1.0, "routing": "ecmp"},
	}, doc.Header)
	require.Greater(t, doc.Header["nchannels"], 0.0)

	out.Reset()
	require.Equal(t, 0, mainRun([]string{"--version"}, &out, &errb))
	require.Equal(t, "simccl vTEST\n", out.String())
}

// TestRunHostBound: on 2 H200 the kernels of small calls are shorter than NCCL's host enqueue, so
// those rows take the host's floor, say so in the JSON (host_bound) and share one note naming the
// sizes; a large call is not bound, and from CUDA graphs (no host floor) no row is.
func TestRunHostBound(t *testing.T) {
	run := func(launch string) (rows []map[string]any, notes []string) {
		var out, errb bytes.Buffer
		args := []string{"run", "--topo", "h200x2-nvlink", "-c", "allreduce", "-b", "8", "-e", "16M", "-f", "64", "--launch", launch, "--json", "--progress", "off"}
		require.Equal(t, 0, mainRun(args, &out, &errb), errb.String())
		var doc struct {
			Rows  []map[string]any `json:"rows"`
			Notes []string         `json:"notes"`
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
		return doc.Rows, doc.Notes
	}
	rows, notes := run("per-gpu")
	require.Len(t, rows, 4) // 8 B, 512 B, 32 KiB, 2 MiB
	require.Equal(t, true, rows[0]["host_bound"])
	require.InDelta(t, simnet.HostEnqueue.Micros(), rows[0]["time_us"], 1e-9)
	require.Greater(t, rows[0]["device_us"], 0.0)
	require.Less(t, rows[0]["device_us"], simnet.HostEnqueue.Micros())
	require.Nil(t, rows[3]["host_bound"], "2 MiB outlasts the enqueue")
	require.Greater(t, rows[3]["time_us"], simnet.HostEnqueue.Micros())
	var hb []string
	for _, n := range notes {
		if strings.HasPrefix(n, "host-bound") {
			hb = append(hb, n)
		}
	}
	require.Len(t, hb, 1)
	require.Contains(t, hb[0], "all_reduce 8–")
	require.Contains(t, hb[0], fmt.Sprintf("%.2f µs on one channel and %.3f µs for each further channel", simnet.HostEnqueue.Micros(), simnet.HostPerChannel.Micros()))
	require.Contains(t, hb[0], "took 7.8–10.7 µs, the host's fast and slow modes")

	// One rank: the note names the one-rank floor its rows take, not the enqueue of a call on
	// several ranks.
	var out, errb bytes.Buffer
	require.Equal(t, 0, mainRun([]string{"run", "--gpus", "1", "-b", "1K", "-e", "1K", "--progress", "off"}, &out, &errb), errb.String())
	require.Contains(t, out.String(), fmt.Sprintf("one-rank call, a device copy: %.2f µs", simnet.OneRankHost.Micros()))
	require.NotContains(t, out.String(), fmt.Sprintf("%.2f µs", simnet.HostEnqueue.Micros()))

	graphRows, notes := run("graph")
	for _, r := range graphRows {
		require.Nil(t, r["host_bound"])
		require.Nil(t, r["device_us"])
	}
	require.InDelta(t, rows[0]["device_us"].(float64)-simnet.GraphSaving.Micros(), graphRows[0]["time_us"], 1e-9, "the GPUs' time less a graph's saving")
	require.Less(t, graphRows[0]["time_us"], simnet.HostEnqueue.Micros())
	for _, n := range notes {
		require.NotContains(t, n, "host-bound")
	}
}

// TestRunStreamsRows: simccl run writes each row of its table once the row's call is simulated, as
// nccl-tests does (issue 17: the table came out when the whole sweep had ended, so a stopped run
// lost every finished size). stdout is a pipe the test reads: after two rows, the progress bar on
// stderr has not reached the sweep's end (the run waits on the pipe), and what was read so far is
// a table report --measured reads, two rows of it. Then the rest comes, with the footer last. One
// call at a time (-j 1) and in parallel (-j 2: calls are handed out in order for the table).
func TestRunStreamsRows(t *testing.T) {
	for _, jobs := range []string{"1", "2"} {
		pr, pw := io.Pipe()
		var errb safeBuffer
		rc := make(chan int, 1)
		args := []string{"run", "-c", "allreduce,allgather", "-b", "1K", "-e", "16M", "-f", "4", "-j", jobs, "--progress", "on"}
		go func() {
			code := mainRun(args, pw, &errb)
			pw.Close()
			rc <- code
		}()
		rd := bufio.NewReader(pr)
		var got bytes.Buffer
		for rows := 0; rows < 2; {
			l, err := rd.ReadString('\n')
			require.NoError(t, err, "-j %s after %q", jobs, got.String())
			got.WriteString(l)
			if !strings.HasPrefix(l, "#") {
				rows++
			}
		}
		require.NotContains(t, errb.String(), "16/16", "-j %s: the sweep ended before its second row was read", jobs)
		meas, err := report.ReadMeasured(got.Bytes(), "stopped.txt", "all_reduce")
		require.NoError(t, err)
		require.Len(t, meas, 2)
		require.Equal(t, []int64{1024, 4096}, []int64{meas[0].Bytes, meas[1].Bytes})
		require.Equal(t, 8, meas[0].World)

		rest, err := io.ReadAll(rd)
		require.NoError(t, err)
		require.Equal(t, 0, <-rc, errb.String())
		require.Contains(t, errb.String(), "16/16")
		all := got.String() + string(rest)
		lines := strings.Split(strings.TrimSuffix(all, "\n"), "\n")
		require.True(t, strings.HasPrefix(lines[len(lines)-1], "# Avg bus bandwidth"), "-j %s: footer last:\n%s", jobs, all)
		rows := 0
		for _, l := range lines {
			if !strings.HasPrefix(l, "#") {
				rows++
			}
		}
		require.Equal(t, 16, rows, all)

		// The same table as --json's rows, in the same order.
		var js, jerr bytes.Buffer
		require.Equal(t, 0, mainRun(append(args[:len(args)-2], "--progress", "off", "--json"), &js, &jerr), jerr.String())
		var doc struct {
			Rows []simnet.Row `json:"rows"`
		}
		require.NoError(t, json.Unmarshal(js.Bytes(), &doc))
		i := 0
		for _, l := range lines {
			if !strings.HasPrefix(l, "#") {
				r := doc.Rows[i]
				require.True(t, strings.HasPrefix(strings.TrimSpace(l), fmt.Sprintf("%d ", r.Bytes)) && strings.Contains(l, r.Coll), "row %d %q, JSON %s %d", i, l, r.Coll, r.Bytes)
				i++
			}
		}
	}
}

// The workers take the largest calls first: all of them for the JSON, the largest of each
// worker but one for the streamed table, whose other calls go in order.
func TestCallOrder(t *testing.T) {
	var calls []runCall
	for _, f := range []coll.Func{coll.AllReduce, coll.AllGather} {
		for _, s := range []int64{8, 1 << 10, 1 << 20} {
			calls = append(calls, runCall{f: f, size: s})
		}
	}
	require.Equal(t, []int{5, 2, 4, 1, 3, 0}, callOrder(calls, 2, true))
	require.Equal(t, []int{5, 0, 1, 2, 3, 4}, callOrder(calls, 2, false))
	require.Equal(t, []int{5, 2, 0, 1, 3, 4}, callOrder(calls, 3, false))
	require.Equal(t, []int{0, 1, 2, 3, 4, 5}, callOrder(calls, 1, false))
}

// The P2P read-mode note stands where NCCL reads (A100s over NVLink) and a row is Simple, and
// nowhere else: not on Hopper, which writes, nor on A100 rows of LL alone.
func TestReadModeNote(t *testing.T) {
	for _, c := range []struct {
		topo, b, e string
		want       bool
	}{
		{"dgx-a100", "1G", "1G", true},
		{"dgx-a100", "1K", "1K", false}, // Ring/LL
		{"dgx-h100", "1G", "1G", false},
		{"pcie-8gpu-2socket", "1G", "1G", false}, // no NVLink
	} {
		var doc struct {
			Notes []string `json:"notes"`
		}
		require.NoError(t, json.Unmarshal(mustRun(t, "run", "--topo", c.topo, "-b", c.b, "-e", c.e, "--json", "--progress", "off"), &doc))
		got := false
		for _, n := range doc.Notes {
			if strings.Contains(n, "P2P read mode") {
				got = true
				require.Contains(t, n, "Simple rows (all_reduce)", c.topo)
			}
		}
		require.Equal(t, c.want, got, "%s %s: notes %q", c.topo, c.b, doc.Notes)
	}
}

// A one-rank collective shows as NCCL runs it — a memcpy, no protocol, no channel — in run's rows
// and tune's choices; a one-rank all-to-all stays a point-to-point plan (NCCL runs its copy to self
// on the p2p channels).
func TestOneRankShownAsMemcpy(t *testing.T) {
	var rj struct {
		Rows []struct {
			Coll      string `json:"coll"`
			Algo      string `json:"algo"`
			Proto     string `json:"proto"`
			NChannels int    `json:"nchannels"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal(mustRun(t, "run", "--gpus", "1", "-c", "allreduce,alltoall", "-b", "1M", "-e", "1M", "--json", "--progress", "off"), &rj))
	require.Len(t, rj.Rows, 2)
	for _, r := range rj.Rows {
		if r.Coll == "alltoall" {
			require.Equal(t, "P2P", r.Algo)
			require.Positive(t, r.NChannels)
			continue
		}
		require.Equal(t, []any{"Memcpy", "none", 0}, []any{r.Algo, r.Proto, r.NChannels}, r.Coll)
	}
	var tj struct {
		Choices []struct {
			Algo      string `json:"algo"`
			Proto     string `json:"proto"`
			NChannels int    `json:"nchannels"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(mustRun(t, "tune", "--gpus", "1", "-c", "allreduce", "-b", "1M", "-e", "1M", "--json"), &tj))
	require.Len(t, tj.Choices, 1)
	require.Equal(t, []any{"Memcpy", "none", 0}, []any{tj.Choices[0].Algo, tj.Choices[0].Proto, tj.Choices[0].NChannels})
	// Two ranks: the model's choice as ever.
	require.NoError(t, json.Unmarshal(mustRun(t, "tune", "--gpus", "2", "-c", "allreduce", "-b", "1M", "-e", "1M", "--json"), &tj))
	require.NotEqual(t, "Memcpy", tj.Choices[0].Algo)
}

// A row that simulates another algorithm than NCCL's where planning did not foresee it (with
// --exact, an NVLSTree call no exact replay fits) says why in a note, in the table and the JSON;
// without --exact the same call is timed as NVLSTree by an approximate mode and has no such note.
func TestExactSubstitutionNote(t *testing.T) {
	for _, exact := range []bool{true, false} {
		args := []string{"run", "--nodes", "32", "-b", "4G", "-e", "4G", "--json", "--progress", "off"}
		if exact {
			args = append(args, "--exact")
		}
		var doc struct {
			Rows []struct {
				Algo string `json:"algo"`
				NCCL string `json:"nccl"`
			} `json:"rows"`
			Notes []string `json:"notes"`
		}
		require.NoError(t, json.Unmarshal(mustRun(t, args...), &doc))
		require.Len(t, doc.Rows, 1)
		var note string
		for _, n := range doc.Notes {
			if strings.Contains(n, "NCCL runs NVLSTree") {
				note = n
			}
		}
		if !exact {
			require.Equal(t, "NVLSTree", doc.Rows[0].Algo)
			require.Empty(t, note, "notes %q", doc.Notes)
			continue
		}
		require.Equal(t, "Ring", doc.Rows[0].Algo)
		require.Equal(t, "NVLSTree/Simple/16", doc.Rows[0].NCCL)
		require.Contains(t, note, "--exact cannot replay it at this size")
		require.Contains(t, note, "simulates Ring/Simple/16 instead")
	}
	table := string(mustRun(t, "run", "--nodes", "32", "-b", "4G", "-e", "4G", "--exact", "--progress", "off"))
	require.Contains(t, table, "# note: all_reduce from 4294967296 bytes: NCCL runs NVLSTree/Simple/16, but --exact")
	require.Contains(t, table, "nccl runs", "the header names the column the row fills")
}

func TestSubstNote(t *testing.T) {
	row := simnet.Row{Coll: "all_reduce", Bytes: 1 << 30, Algo: "Tree", Proto: "Simple", NChannels: 16, NCCL: "NVLSTree/Simple/32"}
	require.Contains(t, substNote(row, "", false), "no replay of it fits this call; the row simulates Tree/Simple/16 instead")
	require.Contains(t, substNote(row, "", true), "--exact cannot replay it")
	require.Empty(t, substNote(row, "NVLS is off", false), "planning's own note explains it")
	row.NCCL = ""
	require.Empty(t, substNote(row, "", true), "NCCL's own choice simulated")
}

// The size column is what nccl-tests prints: the bytes of the count it moves (count × element,
// base × ranks × element for all-gather), not the size asked for: -b 1001 of float is 1,000 bytes,
// -b 3 is 0.
func TestRunSizeColumnAsNCCLTests(t *testing.T) {
	for _, tc := range []struct {
		c          string
		size, want int64
	}{{"allreduce", 1001, 1000}, {"allreduce", 3, 0}, {"sendrecv", 1001, 1000}, {"allgather", 1001, 896}} {
		var out, errb bytes.Buffer
		args := []string{"run", "-c", tc.c, "-b", fmt.Sprint(tc.size), "-e", fmt.Sprint(tc.size), "--json", "--progress", "off"}
		require.Equal(t, 0, mainRun(args, &out, &errb), errb.String())
		var doc struct {
			Rows []struct {
				Bytes int64 `json:"bytes"`
			} `json:"rows"`
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
		require.Len(t, doc.Rows, 1)
		require.Equal(t, tc.want, doc.Rows[0].Bytes, "%s -b %d", tc.c, tc.size)
	}
}

// --host-enqueue takes Go's durations or a bare number of microseconds, and refuses what no host
// takes: nothing, a negative or unbounded time, text, or past simnet.MaxHostEnqueue.
func TestParseHostEnqueue(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64 // µs; 0: an error containing err
		err  string
	}{
		{"6.2us", 6.2, ""}, {"6.2µs", 6.2, ""}, {"6200ns", 6.2, ""}, {"0.0062ms", 6.2, ""}, {"7", 7, ""}, {"1000", 1000, ""},
		{"0", 0, "above 0"}, {"-3us", 0, "above 0"}, {"NaN", 0, "above 0"}, {"Inf", 0, "at most"}, {"2ms", 0, "at most"},
		{"1e-9", 0, "rounds to nothing"}, {"soon", 0, "want a duration"}, {"6.2 us", 0, "want a duration"},
	} {
		got, err := parseHostEnqueue(c.in)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		require.InDelta(t, c.want, got.Micros(), 1e-9, c.in)
	}
}

// simccl run --host-enqueue: the JSON header carries the host's enqueue, a host-bound row takes it,
// and under --launch graph a note says the flag changes nothing.
func TestRunHostEnqueue(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 0, mainRun([]string{"run", "-b", "8", "-e", "8", "--host-enqueue", "25us", "--json"}, &out, &errb), errb.String())
	var d struct {
		Header struct {
			HostEnqueueUs float64 `json:"host_enqueue_us"`
		} `json:"header"`
		Rows []struct {
			TimeUs    float64 `json:"time_us"`
			HostBound bool    `json:"host_bound"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &d))
	require.Equal(t, 25.0, d.Header.HostEnqueueUs)
	require.Len(t, d.Rows, 1)
	require.True(t, d.Rows[0].HostBound)
	require.InDelta(t, 25.0, d.Rows[0].TimeUs, 1e-9)

	out.Reset()
	errb.Reset()
	require.Equal(t, 0, mainRun([]string{"run", "-b", "8", "-e", "8", "--launch", "graph", "--host-enqueue", "25"}, &out, &errb), errb.String())
	require.Contains(t, out.String(), "--host-enqueue changes nothing under --launch graph")

	errb.Reset()
	require.Equal(t, 2, mainRun([]string{"run", "-b", "8", "-e", "8", "--host-enqueue", "0"}, &out, &errb))
	require.Contains(t, errb.String(), "--host-enqueue \"0\": want a time above 0")
}

// FuzzParseHostEnqueue: any text gives a time within (0, simnet.MaxHostEnqueue] or an error, never
// a panic.
func FuzzParseHostEnqueue(f *testing.F) {
	for _, s := range []string{"6.2us", "10", "0", "-1", "1e308", "NaN", "2ms", "1h", "µs", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseHostEnqueue(s)
		if err != nil {
			return
		}
		if got <= 0 || got > simnet.MaxHostEnqueue {
			t.Fatalf("%q: %v µs, outside (0, %v]", s, got.Micros(), simnet.MaxHostEnqueue.Micros())
		}
	})
}

// A PAT reduce-scatter folded with its members' mean latency (300 one-GPU nodes: the last leaf
// part full, no rotation keeps the latencies) carries a note on how far that fold parts from the
// schedule; one folded over a leaf's representatives (320 nodes) and an all-gather do not.
func TestRunPATMeanReduceScatterNote(t *testing.T) {
	run := func(nodes string, colls string) []string {
		var out, errb bytes.Buffer
		args := []string{"run", "--topo", "gh200-c2c", "--nodes", nodes, "--fabric-set", "routing=adaptive", "-c", colls, "-b", "64K", "-e", "64K", "--json", "--progress", "off"}
		require.Equal(t, 0, mainRun(args, &out, &errb), errb.String())
		var doc struct {
			Rows  []map[string]any `json:"rows"`
			Notes []string         `json:"notes"`
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
		var got []string
		for _, r := range doc.Rows {
			got = append(got, fmt.Sprint(r["coll"], ": ", r["mode"]))
		}
		for _, n := range doc.Notes {
			if strings.Contains(n, "members' mean latency") {
				got = append(got, "note "+n[:strings.Index(n, " ")])
			}
		}
		return got
	}
	require.Equal(t, []string{"all_gather: pat-fold, latency-mean", "reduce_scatter: pat-fold, latency-mean", "note reduce_scatter"}, run("300", "allgather,reducescatter"))
	require.Equal(t, []string{"reduce_scatter: pat-fold"}, run("320", "reducescatter"))
}

// A PAT reduce-scatter, folded or replayed whole, at a length where the replay of its whole
// schedule is not robust (patRobustUs) says so once, from its first such row; an all-gather, whose
// replay is robust, does not.
func TestRunPATLongReduceScatterNote(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"run", "--nodes", "320", "--gpus", "1", "--algo", "pat", "--fabric-set", "routing=rail", "-c", "allgather,reducescatter", "-b", "64M", "-e", "1G", "-f", "16", "--json", "--progress", "off"}
	require.Equal(t, 0, mainRun(args, &out, &errb), errb.String())
	var doc struct {
		Rows []struct {
			Coll   string  `json:"coll"`
			Bytes  int64   `json:"bytes"`
			Mode   string  `json:"mode"`
			TimeUs float64 `json:"time_us"`
		} `json:"rows"`
		Notes []string `json:"notes"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	var folds []string
	for _, r := range doc.Rows {
		folds = append(folds, fmt.Sprint(r.Coll, " ", r.Bytes, " ", strings.HasPrefix(r.Mode, "pat-fold"), " ", r.TimeUs >= patRobustUs))
	}
	// 320 nodes: 64 MiB (about 2 ms, under patRobustUs) and 1 GiB (about 26 ms) of each collective,
	// folded.
	require.Equal(t, []string{"all_gather 67107840 true false", "all_gather 1073740800 true true",
		"reduce_scatter 67107840 true false", "reduce_scatter 1073740800 true true"}, folds)
	var got []string
	for _, n := range doc.Notes {
		if strings.Contains(n, "not robust") {
			got = append(got, n[:strings.Index(n, ":")])
		}
	}
	require.Equal(t, []string{"reduce_scatter from 1073740800 bytes"}, got)

	// 100 nodes: the whole schedule replayed at 1 GiB (28 ms) has the note too.
	out.Reset()
	args = []string{"run", "--nodes", "100", "--gpus", "1", "--algo", "pat", "--fabric-set", "routing=rail", "-c", "reducescatter", "-b", "1G", "-e", "1G", "--progress", "off"}
	require.Equal(t, 0, mainRun(args, &out, &errb), errb.String())
	require.Contains(t, out.String(), " schedule\n")
	require.Contains(t, out.String(), "is not robust in the replay of its whole schedule")
}
