package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simccl/simccl/simnet"
)

func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var out, errb bytes.Buffer
	args := []string{"report", "--topo", "../../testdata/nccl/h200x2/real_topo.xml", "--measured", "../../testdata/nccl/h200x2/nccl_perf.csv",
		"-c", "allreduce,allgather", "-b", "1K", "-e", "16M", "-f", "4", "-o", page, "--json"}
	if rc := mainRun(args, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var v struct {
		Machine struct {
			Ranks int `json:"ranks"`
		} `json:"machine"`
		BusBW []struct {
			Name   string `json:"name"`
			Points []any  `json:"points"`
		} `json:"busbw"`
		Compare []any `json:"compare"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
	if v.Machine.Ranks != 2 || len(v.BusBW) != 4 || len(v.BusBW[0].Points) != 8 || len(v.Compare) != 2*(8+4+3) || len(v.BusBW[2].Points) != 15 {
		t.Errorf("report JSON: %+v", v)
	}
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<svg id="topo"`, `<svg id="tuner"`, `<svg id="busbw"`, `<table id="compare"`, `<svg id="heat"`, `<svg id="timeline"`, `<svg id="memory"`, "measured all_reduce"} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("page lacks %q", want)
		}
	}

	// nccl-tests' own text output.
	text := filepath.Join(dir, "ar.txt")
	os.WriteFile(text, []byte("# ./build/all_reduce_perf -b 1K -e 4K\n#  Rank  0 Group  0 Pid 1 on h device 0\n#  Rank  1 Group  0 Pid 2 on h device 1\n     1024   256  float  sum  -1  12.0  0.09  0.09  0  11.0  0.09  0.09  0\n"), 0o644)
	out.Reset()
	errb.Reset()
	if rc := mainRun([]string{"report", "--topo", "../../testdata/nccl/h200x2/real_topo.xml", "--measured", text, "-b", "1K", "-e", "4K", "-o", page}, &out, &errb); rc != 0 {
		t.Fatalf("nccl-tests text: rc %d: %s", rc, errb.String())
	}
	if !strings.Contains(out.String(), "wrote") {
		t.Errorf("stdout %q", out.String())
	}
}

func TestReportUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		rc   int
		want string
	}{
		{[]string{"report"}, 2, "-o report.html"},
		{[]string{"report", "-o", filepath.Join(dir, "a.html"), "-c", "nope"}, 2, "-c"},
		{[]string{"report", "-o", filepath.Join(dir, "a.html"), "-b", "x"}, 2, "-b"},
		{[]string{"report", "-o", filepath.Join(dir, "a.html"), "--nodes", "0"}, 2, "--nodes"},
		{[]string{"report", "-o", filepath.Join(dir, "a.html"), "--measured", filepath.Join(dir, "missing.csv")}, 1, "missing.csv"},
		{[]string{"report", "-o", filepath.Join(dir, "a.html"), "--measured", "../../testdata/nccl/h200x2/nccl_perf.csv", "-b", "1K", "-e", "1K"}, 1, "ranks"},
		{[]string{"report", "-o", filepath.Join(dir, "a.html"), "--focus-size", "zz"}, 2, "--focus-size"},
	} {
		var out, errb bytes.Buffer
		rc := mainRun(tc.args, &out, &errb)
		if rc != tc.rc || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: rc %d, stderr %q; want rc %d naming %q", tc.args, rc, errb.String(), tc.rc, tc.want)
		}
	}
}

// Every output path and option is checked before the simulation: at 256 nodes, whose sweep
// takes seconds, each of these fails at once.
func TestReportChecksFirst(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "r.html")
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o555)
	for _, tc := range []struct {
		name string
		args []string
		rc   int
		want string
	}{
		{"missing folder", []string{"-o", "/nonexistent/dir/r.html"}, 1, "/nonexistent/dir/r.html"},
		{"folder", []string{"-o", filepath.Join(dir, "sub")}, 2, "a folder"},
		{"parent is a file", []string{"-o", filepath.Join(dir, "file.txt", "r.html")}, 1, "not a folder"},
		{"stdout twice", []string{"-o", "-", "--json"}, 2, "both write to stdout"},
		{"sections", []string{"-o", page, "--sections", "topology,nope"}, 2, `--sections`},
		{"focus", []string{"-o", page, "--focus", "nope"}, 2, "--focus"},
		{"size budget", []string{"-o", page, "--size-budget", "-1s"}, 2, "--size-budget"},
		{"measured unnamed", []string{"-o", page, "--measured", filepath.Join(dir, "ar.txt")}, 1, "--measured-coll"},
		{"measured ranks", []string{"-o", page, "--measured", "../../testdata/nccl/h200x2/nccl_perf.csv", "-b", "1K", "-e", "1K"}, 1, "ranks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.WriteFile(filepath.Join(dir, "file.txt"), nil, 0o644)
			os.WriteFile(filepath.Join(dir, "ar.txt"), []byte("#  Rank  0 Group  0 Pid 1 on h device 0\n     1024   256  float  sum  -1  12.0  0.09  0.09  0  11.0  0.09  0.09  0\n"), 0o644)
			var out, errb bytes.Buffer
			start := time.Now()
			rc := mainRun(append([]string{"report", "--nodes", "256", "--progress", "off"}, tc.args...), &out, &errb)
			if rc != tc.rc || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("rc %d, stderr %q; want rc %d naming %q", rc, errb.String(), tc.rc, tc.want)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("failed after %v: checked after the simulation", d)
			}
		})
	}
	if os.Geteuid() != 0 { // root writes anywhere
		var out, errb bytes.Buffer
		if rc := mainRun([]string{"report", "--nodes", "256", "-o", filepath.Join(ro, "r.html")}, &out, &errb); rc == 0 || !strings.Contains(errb.String(), "cannot write") {
			t.Errorf("read-only folder: rc %d, %q", rc, errb.String())
		}
	}
}

// --focus none and --sections; an all_gather log is plotted as all_gather without -c naming it
// (its command line says so).
func TestReportSectionsAndFocusNone(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "r.html")
	ag := filepath.Join(dir, "ag.txt")
	os.WriteFile(ag, []byte("# mpirun -np 2 ./build/all_gather_perf -b 1K -e 4K -f 4 -g 1\n#  Rank  0 Group  0 Pid 1 on h device 0\n#  Rank  1 Group  0 Pid 2 on h device 1\n     1024   128  float  none  -1  12.0  0.09  0.04  0  11.0  0.09  0.04  0\n     4096   512  float  none  -1  13.0  0.32  0.16  0  12.0  0.34  0.17  0\n"), 0o644)
	for _, tc := range []struct {
		name    string
		args    []string
		has     []string
		hasNot  []string
		stdoutJ bool
	}{
		{"focus none", []string{"--focus", "none"}, []string{`id="skip-time"`, `<svg id="busbw"`, `<svg id="topo"`}, []string{`<svg id="heat"`}, false},
		{"sections", []string{"--sections", "busbw,memory"}, []string{`id="skip-topology"`, `id="skip-tuner"`, `id="skip-time"`, `<svg id="busbw"`, `<svg id="memory"`}, []string{`<svg id="topo"`, `<svg id="tuner"`, `<svg id="heat"`}, false},
		{"all_gather log", []string{"-c", "allreduce,allgather", "--measured", ag, "--sections", "busbw"}, []string{`data-series="measured all_gather"`}, []string{"measured all_reduce"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"report", "--topo", "../../testdata/nccl/h200x2/real_topo.xml", "-b", "1K", "-e", "4K", "-f", "4", "--progress", "off", "-o", page}, tc.args...)
			if rc := mainRun(args, &out, &errb); rc != 0 {
				t.Fatalf("rc %d: %s", rc, errb.String())
			}
			data, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.has {
				if !bytes.Contains(data, []byte(s)) {
					t.Errorf("page lacks %q", s)
				}
			}
			for _, s := range tc.hasNot {
				if bytes.Contains(data, []byte(s)) {
					t.Errorf("page has %q", s)
				}
			}
		})
	}
	// -c alone does not name a log's collective: an unnamed log is refused.
	os.WriteFile(ag, []byte("#  Rank  0 Group  0 Pid 1 on h device 0\n#  Rank  1 Group  0 Pid 2 on h device 1\n     1024   128  float  none  -1  12.0  0.09  0.04  0  11.0  0.09  0.04  0\n"), 0o644)
	var out, errb bytes.Buffer
	if rc := mainRun([]string{"report", "--topo", "../../testdata/nccl/h200x2/real_topo.xml", "-c", "allgather", "--measured", ag, "-o", page}, &out, &errb); rc != 1 || !strings.Contains(errb.String(), "does not name its collective") {
		t.Errorf("unnamed log: rc %d, %q", rc, errb.String())
	}
	// The help names the sections.
	out.Reset()
	errb.Reset()
	mainRun([]string{"report", "--help"}, &out, &errb)
	if help := out.String() + errb.String(); !strings.Contains(help, "--sections") || !strings.Contains(help, "topology,tuner,busbw,time,memory") || !strings.Contains(help, "none: no such section") {
		t.Errorf("help: %s", help)
	}
}

// The report models the measured run's launch from nccl-tests' header: one thread driving both
// GPUs (-g 2) pays two host enqueues a call, a process per GPU one, CUDA graphs (-G) none (the
// page says which); an explicit --launch wins, and a bad one is a usage error.
func TestReportLaunchFromMeasured(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "r.html")
	rows := "#  Rank  0 Group  0 Pid 1 on h device 0\n#  Rank  1 Group  0 Pid 1 on h device 1\n     1024   256  float  sum  -1  12.0  0.09  0.09  0  11.0  0.09  0.09  0\n"
	smallest := func(header string, extra ...string) (float64, string) {
		t.Helper()
		text := filepath.Join(dir, "ar.txt")
		os.WriteFile(text, []byte("# ./build/all_reduce_perf -b 1K -e 1K\n"+header+rows), 0o644)
		var out, errb bytes.Buffer
		args := append([]string{"report", "--topo", "h200x2-nvlink", "--measured", text, "-b", "1K", "-e", "1K", "--sections", "busbw", "-o", page, "--json"}, extra...)
		if rc := mainRun(args, &out, &errb); rc != 0 {
			t.Fatalf("%q: rc %d: %s", header, rc, errb.String())
		}
		var v struct {
			Notes []string `json:"notes"`
			BusBW []struct {
				Points []struct {
					TimeUs float64 `json:"time_us"`
				} `json:"points"`
			} `json:"busbw"`
		}
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		return v.BusBW[0].Points[0].TimeUs, strings.Join(v.Notes, "\n")
	}
	perGPU, _ := smallest("# nThread 1 nGpus 1 minBytes 1024 maxBytes 1024 graph: 0\n")
	perNode, note := smallest("# nThread 1 nGpus 2 minBytes 1024 maxBytes 1024 graph: 0\n")
	graph, gnote := smallest("# nThread 1 nGpus 2 minBytes 1024 maxBytes 1024 graph: 1\n")
	forced, _ := smallest("# nThread 1 nGpus 2 minBytes 1024 maxBytes 1024 graph: 0\n", "--launch", "per-gpu")
	if perNode < (simnet.HostEnqueue+simnet.HostPerRank).Micros() || perNode <= perGPU || !strings.Contains(note, "one thread drives the 2 GPUs") {
		t.Errorf("-g 2: %.2f µs (a process per GPU %.2f), note %q", perNode, perGPU, note)
	}
	// Graphs lift the host's floor, which a 1 KiB all-reduce on 2 GPUs does not reach; one process
	// replaying both GPUs' graphs (nGpus 2) pays GraphPerNodeCall a call more.
	graph1, gnote1 := smallest("# nThread 1 nGpus 1 minBytes 1024 maxBytes 1024 graph: 1\n")
	if graph1 > perGPU || !strings.Contains(gnote1, "CUDA graphs") {
		t.Errorf("-g 1 -G: %.2f µs (a process per GPU %.2f), note %q", graph1, perGPU, gnote1)
	}
	if math.Abs(graph-graph1-simnet.GraphPerNodeCall.Micros()) > 1e-6 || !strings.Contains(gnote, "one process replays CUDA graphs on 2 GPUs") {
		t.Errorf("-g 2 -G: %.2f µs (-g 1 -G %.2f), note %q", graph, graph1, gnote)
	}
	if forced != perGPU {
		t.Errorf("--launch per-gpu over a -g 2 header: %.2f µs, want %.2f", forced, perGPU)
	}
	var out, errb bytes.Buffer
	if rc := mainRun([]string{"report", "-o", page, "--launch", "sometimes"}, &out, &errb); rc != 2 || !strings.Contains(errb.String(), "--launch") {
		t.Errorf("--launch sometimes: rc %d, %q", rc, errb.String())
	}
}

// The report times what simccl run times: a broadcast past coll's schedule limit (128 DGX H100
// nodes, 1 GiB) from the same call on fewer nodes, which needs the smaller communicators. Until
// 2026-11-29 the report's machine had none and `simccl report --nodes 128 -c all` failed with
// "schedule would have about 7.77e+06 steps".
func TestReportNodesSteady(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"report", "--nodes", "128", "-c", "broadcast", "-b", "1G", "-e", "1G", "--sections", "busbw", "-o", filepath.Join(t.TempDir(), "r.html"), "--json", "--progress", "off"}
	if rc := mainRun(args, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var v struct {
		BusBW []struct {
			Points []struct {
				TimeUs float64 `json:"time_us"`
				Label  string  `json:"label"`
			} `json:"points"`
		} `json:"busbw"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
	// simccl run --nodes 128 -c broadcast -b 1G -e 1G: 9,441.7 µs, Ring/LL128/16, nodes-steady.
	if len(v.BusBW) != 1 || len(v.BusBW[0].Points) != 1 || v.BusBW[0].Points[0].Label != "Ring/LL128/16 ch" ||
		v.BusBW[0].Points[0].TimeUs < 9000 || v.BusBW[0].Points[0].TimeUs > 10000 {
		t.Errorf("busbw: %+v", v.BusBW)
	}
}
