package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simccl/simccl/report"
	"github.com/stretchr/testify/require"
)

func noenv(string) string { return "" }

func envOf(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// Every collective, checked, in nccl-tests' layout: one table per collective between nccl-tests'
// "Collective test starting/concluded" lines, each with its footer; and the JSON document.
func TestRunTableAndJSON(t *testing.T) {
	var out, errb bytes.Buffer
	code := mainRun([]string{"--collective", "all", "-b", "8", "-e", "64K", "-f", "16", "-g", "3", "-n", "2"}, &out, &errb, noenv)
	if code != 0 || errb.Len() != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s := out.String()
	if n := strings.Count(s, "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : "); n != 7 {
		t.Errorf("%d footers, want 7:\n%s", n, s)
	}
	for _, c := range []string{"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv"} {
		if !strings.Contains(s, "# Collective test starting: "+c+"_perf\n#\n#  ") || !strings.Contains(s, "#\n# Collective test concluded: "+c+"_perf\n") {
			t.Errorf("no table of %s:\n%s", c, s)
		}
	}
	if !regexp.MustCompile(`(?m)^        2048           512     float     sum      -1 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 +\S+ +Simple +\d+`).MatchString(s) {
		t.Errorf("no checked all_reduce row of 2 KiB:\n%s", s)
	}
	out.Reset()
	code = mainRun([]string{"all_reduce", "-b", "1K", "-e", "4K", "-f", "2", "-g", "2", "--json", "-d", "bf16", "-o", "avg"}, &out, &errb, noenv)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Header struct {
			Program, Backend, Transport, NCCLRelease string
			NRanks                                   int      `json:"nranks"`
			Collectives                              []string `json:"collectives"`
			Flags                                    struct {
				MinBytes int64  `json:"minbytes"`
				Check    int    `json:"check"`
				DataType string `json:"datatype"`
			} `json:"flags"`
			Devices []struct {
				Rank int    `json:"rank"`
				Bus  string `json:"device_hex"`
			} `json:"devices"`
		} `json:"header"`
		NRanks int `json:"nranks"`
		Rows   []struct {
			Coll    string  `json:"coll"`
			Bytes   int64   `json:"bytes"`
			Type    string  `json:"type"`
			RedOp   string  `json:"redop"`
			InPlace bool    `json:"in_place"`
			TimeUs  float64 `json:"time_us"`
			Wrong   *int64  `json:"wrong"`
			Algo    string  `json:"algo"`
		} `json:"rows"`
		AvgBusBW *float64 `json:"avg_busbw"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	h, r := res.Header, res.Rows
	if h.Program != "runccl" || h.Backend != "cpu" || h.Transport != "inproc" || h.NRanks != 2 || res.NRanks != 2 || fmt.Sprint(h.Collectives) != "[all_reduce]" ||
		h.Flags.MinBytes != 1024 || h.Flags.Check != 1 || h.Flags.DataType != "bf16" || len(h.Devices) != 2 || h.Devices[1].Rank != 1 || h.Devices[1].Bus != "cpu" {
		t.Errorf("header %+v", h)
	}
	if len(r) != 6 || r[0].Coll != "all_reduce" || r[0].Bytes != 1024 || r[5].Bytes != 4096 || !r[5].InPlace || r[0].TimeUs <= 0 ||
		r[0].Type != "bfloat16" || r[0].RedOp != "avg" || r[0].Wrong == nil || *r[0].Wrong != 0 || r[0].Algo == "" || res.AvgBusBW == nil {
		t.Errorf("rows %+v", r)
	}
}

// Point-to-point rows say P2P in both outputs; -c 0 leaves #wrong N/A (null in JSON).
func TestP2PAndUnchecked(t *testing.T) {
	var out, errb bytes.Buffer
	if code := mainRun([]string{"--collective", "sendrecv,alltoall", "-b", "1K", "-e", "1K", "-g", "2", "-n", "1", "-c", "0"}, &out, &errb, noenv); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	rows := regexp.MustCompile(`(?m)^ +1\d\d\d .* N/A +P2P +Simple +\d+`).FindAllString(out.String(), -1)
	if len(rows) != 2 || !strings.Contains(out.String(), "validation: 0 ") {
		t.Errorf("want two unchecked P2P rows:\n%s", out.String())
	}
	out.Reset()
	if code := mainRun([]string{"sendrecv", "-b", "1K", "-e", "1K", "-g", "2", "-n", "1", "-c", "0", "--json"}, &out, &errb, noenv); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if s := out.String(); !strings.Contains(s, `"coll":"sendrecv"`) || !strings.Contains(s, `"wrong":null,"algo":"P2P"`) {
		t.Errorf("JSON:\n%s", s)
	}
}

// runccl's table is read by the repo's nccl-tests reader (report.ReadMeasured, which `simccl
// report --measured` uses) as a real nccl-tests output is: the same rows and ranks as its JSON;
// its header lines are nccl-tests' own, byte for byte.
func TestReadersReadRunccl(t *testing.T) {
	args := []string{"all_reduce_perf", "-b", "8", "-e", "64K", "-f", "8", "-g", "3", "-n", "2"}
	var text, js, errb bytes.Buffer
	if code := mainRun(args, &text, &errb, noenv); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if code := mainRun(append(args, "--json"), &js, &errb, noenv); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	fromText, err := report.ReadMeasured(text.Bytes(), "runccl.txt", "all_reduce")
	if err != nil {
		t.Fatalf("%v\n%s", err, text.String())
	}
	fromJSON, err := report.ReadMeasured(js.Bytes(), "runccl.json", "")
	if err != nil {
		t.Fatalf("%v\n%s", err, js.String())
	}
	if len(fromText) != 5 || len(fromJSON) != 5 {
		t.Fatalf("%d rows from the table, %d from JSON, want 5", len(fromText), len(fromJSON))
	}
	for i := range fromText {
		a, b := fromText[i], fromJSON[i]
		if a.World != 3 || b.World != 3 || a.Coll != "all_reduce" || b.Coll != "all_reduce" || a.Bytes != b.Bytes || a.Bytes != 8<<(3*i) || a.Us <= 0 {
			t.Errorf("row %d: table %+v, JSON %+v", i, a, b)
		}
	}
	// nccl-tests' column header, byte for byte as a real output has it (trailing blanks too).
	fixture, err := os.ReadFile("../../comm/perf/testdata/nccl-tests/oci_a100_2n_nccl2.14.3.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(fixture), "\n") {
		if strings.HasPrefix(l, "#  ") && strings.Contains(l, "in-place") || strings.HasPrefix(l, "#        (B)") || strings.HasPrefix(l, "#       size") {
			if !strings.Contains(text.String(), "\n"+l) {
				t.Errorf("runccl's table lacks nccl-tests' line %q", l)
			}
		}
	}
	// The same reader on real nccl-tests outputs: every row, the ranks from the "#  Rank" lines.
	for _, fx := range []struct {
		file   string
		rows   int
		first  string
		fields string
	}{
		{"oci_a100_2n_nccl2.14.3.txt", 2, "1073741824 11774 91.2 170.99", ""},
		{"nt309_xe9680_2n_nccl2.26.2.txt", 32, "8 68.52 0 0", ""},
	} {
		data, err := os.ReadFile(filepath.Join("../../comm/perf/testdata/nccl-tests", fx.file))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := report.ReadMeasured(data, fx.file, "all_reduce_perf")
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != fx.rows || rows[0].World != 16 || fmt.Sprint(rows[0].Bytes, rows[0].Us, rows[0].AlgBw, rows[0].BusBw) != fx.first {
			t.Errorf("%s: %d rows, first %+v", fx.file, len(rows), rows[0])
		}
	}
}

// runccl --help, -h, help; replay's help three ways; all on stdout with exit 0 and the golden
// text (testdata/help*.golden, -update); the version; an unknown subcommand of help.
func TestHelpAndVersion(t *testing.T) {
	for _, c := range []struct {
		args   [][]string
		golden string
	}{
		{[][]string{{"--help"}, {"-h"}, {"help"}, {"all_reduce_perf", "-b", "8", "--help"}}, "help.golden"},
		{[][]string{{"help", "replay"}, {"replay", "--help"}, {"replay", "-h"}}, "help_replay.golden"},
	} {
		for i, args := range c.args {
			var out, errb bytes.Buffer
			if code := mainRun(args, &out, &errb, noenv); code != 0 || errb.Len() != 0 {
				t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
			}
			if i == 0 {
				golden(t, c.golden, out.String())
			} else if want, _ := os.ReadFile(filepath.Join("testdata", c.golden)); out.String() != string(want) {
				t.Errorf("%v: another help than %v", args, c.args[0])
			}
		}
	}
	help, _ := os.ReadFile(filepath.Join("testdata", "help.golden"))
	for _, want := range []string{"runccl replay", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "WORLD_SIZE", "SIMCCL_COMM_ID", "-c, --check", "--collective"} {
		if !strings.Contains(string(help), want) {
			t.Errorf("help lacks %q", want)
		}
	}
	var out, errb bytes.Buffer
	if code := mainRun([]string{"--version"}, &out, &errb, noenv); code != 0 || !strings.HasPrefix(out.String(), "runccl ") || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("--version: exit %d, %q %q", code, out.String(), errb.String())
	}
	versionString = "v9.9.9"
	defer func() { versionString = "" }()
	out.Reset()
	if mainRun([]string{"--version"}, &out, &errb, noenv); out.String() != "runccl v9.9.9\n" {
		t.Errorf("-ldflags version: %q", out.String())
	}
	out.Reset()
	if code := mainRun([]string{"help", "tune"}, &out, &errb, noenv); code != 2 || out.Len() != 0 || strings.Count(errb.String(), "\n") != 1 {
		t.Errorf("help tune: exit %d, %q %q", code, out.String(), errb.String())
	}
}

// golden compares got with testdata/name, or writes it there with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs (review, then go test -run %s -update):\n--- want\n%s\n--- got\n%s", path, t.Name(), want, got)
	}
}

// How a process runs its ranks when launcher variables are in its environment: an explicit -g N
// above 1 wins on rank 0 (a Slurm batch script), with a note; on another rank it is a usage
// error; without -g, or with -g 1, the process is the launcher's rank and needs the bootstrap
// address; runccl's own --procs children ignore -g.
func TestLauncherResolution(t *testing.T) {
	slurm := map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0", "SLURM_JOB_ID": "77"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	run := []string{"-b", "8", "-e", "8", "-n", "1"}
	for _, c := range []struct {
		name    string
		env     map[string]string
		args    []string
		code    int
		stdout  string
		stderr  string
		noteOne bool
	}{
		{"slurm batch -g 4", slurm, []string{"-g", "4"}, 0, "nGpus 4", "note: -g 4 runs 4 ranks in this process; srun's SLURM_PROCID=0 and SLURM_NTASKS=4 are left unused", true},
		{"slurm task 1 -g 4", with(slurm, "SLURM_PROCID", "1"), []string{"-g", "4"}, 2, "", "usage: -g 4: this process is rank 1 of 4 started by srun (SLURM_PROCID, SLURM_NTASKS)", true},
		{"slurm without -g", slurm, nil, 1, "", "srun rank 0: set SIMCCL_COMM_ID=host:port", true},
		{"slurm -g 1", slurm, []string{"-g", "1"}, 1, "", "srun rank 0: set SIMCCL_COMM_ID=host:port", true},
		{"torchrun leftovers -g 2", map[string]string{"RANK": "0", "WORLD_SIZE": "2"}, []string{"-g", "2"}, 0, "nGpus 2", "torchrun's RANK=0 and WORLD_SIZE=2 are left unused", true},
		{"torchrun without an address", map[string]string{"RANK": "0", "WORLD_SIZE": "2"}, nil, 1, "", "SIMCCL_COMM_ID", true},
		{"malformed leftovers -g 2", map[string]string{"RANK": "x", "WORLD_SIZE": "2"}, []string{"-g", "2"}, 0, "nGpus 2", "left unused", true},
		{"runccl child -g 4", map[string]string{"RUNCCL_RANK": "0", "RUNCCL_NRANKS": "4"}, []string{"-g", "4"}, 1, "", "runccl child without RUNCCL_ID", true},
		{"mpirun rank 3 -g 2", map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8"}, []string{"-g", "2"}, 2, "", "rank 3 of 8 started by mpirun", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := mainRun(append(append([]string{}, run...), c.args...), &out, &errb, envOf(c.env))
			if code != c.code || !strings.Contains(out.String(), c.stdout) || !strings.Contains(errb.String(), c.stderr) ||
				(c.noteOne && strings.Count(errb.String(), "\n") != 1) {
				t.Errorf("exit %d (want %d)\nstdout %s\nstderr %q (want %q)", code, c.code, out.String(), errb.String(), c.stderr)
			}
		})
	}
}

// A run killed half way (SIGKILL) keeps the lines it finished, each whole, and they read as
// nccl-tests output; one interrupted (SIGINT) ends its JSON document with the cause.
func TestKilledRunKeepsRows(t *testing.T) {
	bin := buildRunccl(t)
	cmd := exec.Command(bin, "-b", "8", "-e", "1K", "-f", "4", "-g", "2", "-n", "1", "-N", "0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	rd := bufio.NewReader(stdout)
	for rows := 0; rows < 8; {
		l, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("%v after %q", err, got.String())
		}
		got.WriteString(l)
		if !strings.HasPrefix(l, "#") {
			rows++
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(rd) // what was written before the kill
	got.Write(rest)
	_ = cmd.Wait()
	meas, err := report.ReadMeasured(got.Bytes(), "killed.txt", "all_reduce")
	if err != nil || len(meas) < 8 || meas[0].World != 2 || meas[0].Bytes != 8 || meas[1].Bytes != 32 {
		t.Fatalf("%v: %d rows\n%s", err, len(meas), got.String())
	}
	if !strings.HasSuffix(got.String(), "\n") {
		t.Errorf("the output ends in a partial line: %q", got.String()[max(0, got.Len()-200):])
	}
	for _, l := range strings.Split(strings.TrimSpace(got.String()), "\n") {
		if n := len(strings.Fields(l)); !strings.HasPrefix(l, "#") && n != 16 && n != 17 {
			t.Errorf("a partial line: %q", l)
		}
	}

	cmd = exec.Command(bin, "-b", "8", "-e", "8", "-g", "2", "-n", "1", "-N", "0", "--json")
	var js, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &js, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(js.String(), `"in_place":true`) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	err = cmd.Wait()
	var doc struct {
		Rows  []json.RawMessage `json:"rows"`
		Error string            `json:"error"`
	}
	if jerr := json.Unmarshal(js.Bytes(), &doc); jerr != nil || len(doc.Rows) == 0 || doc.Error != "interrupted by interrupt" || err == nil {
		t.Errorf("interrupted JSON run: exit %v, %v, %d rows, error %q; stderr %q", err, jerr, len(doc.Rows), doc.Error, errb.String())
	}
}

// A link named all_gather_perf runs all_gather, as nccl-tests' program of that name, also with
// --procs (its children run as runccl and are handed the collective).
func TestProgramName(t *testing.T) {
	bin := buildRunccl(t)
	link := filepath.Join(t.TempDir(), "all_gather_perf")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"--procs"}} {
		cmd := exec.Command(link, append([]string{"-b", "1K", "-e", "1K", "-g", "2", "-n", "1", "--json"}, extra...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v %v: %v\n%s", link, extra, err, errb.String())
		}
		var doc struct {
			Header struct {
				Collectives []string `json:"collectives"`
				Args        []string `json:"args"`
			} `json:"header"`
			Rows []struct {
				Coll string `json:"coll"`
			} `json:"rows"`
		}
		if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		if fmt.Sprint(doc.Header.Collectives) != "[all_gather]" || len(doc.Rows) != 2 || doc.Rows[0].Coll != "all_gather" || doc.Header.Args[0] != "all_gather_perf" {
			t.Errorf("%v: %+v", extra, doc)
		}
	}
}

// The earlier -c NAME still runs that collective, with one note on stderr.
func TestDeprecatedCollectiveFlag(t *testing.T) {
	var out, errb bytes.Buffer
	code := mainRun([]string{"-c", "allgather", "-b", "1K", "-e", "1K", "-g", "2", "-n", "1"}, &out, &errb, noenv)
	if code != 0 || strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), "--collective allgather") ||
		!strings.Contains(out.String(), "# runccl ") || !strings.Contains(out.String(), ": all_gather on the cpu engine") {
		t.Errorf("exit %d\n%s\nstderr %q", code, out.String(), errb.String())
	}
}

// mask replaces what changes from run to run in runccl's output (the times and bandwidths, pids,
// the host, the average) with fixed words of the same widths, so that the layout of a real run is a golden
// file: nccl-tests' columns are fixed widths ("%12li  %12li  %8s  %6s  %6i" then, per placement,
// "  %7s  %6.2f  %6.2f  %5g").
func mask(out string, jsonDoc bool) string {
	if jsonDoc {
		for _, key := range []string{"time_us", "algbw", "busbw", "avg_busbw"} {
			out = regexp.MustCompile(`"`+key+`": ?[-+0-9.e]+`).ReplaceAllString(out, `"`+key+`":0`)
		}
		out = regexp.MustCompile(`"pid": \d+`).ReplaceAllString(out, `"pid": 1`)
		return regexp.MustCompile(`"hostname": "[^"]*"`).ReplaceAllString(out, `"hostname": "HOST"`)
	}
	out = regexp.MustCompile(`Pid +\d+ on +\S+`).ReplaceAllString(out, "Pid    PID on       HOST")
	out = regexp.MustCompile(`(# Avg bus bandwidth    : )\S+ `).ReplaceAllString(out, "${1}AVG ")
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if l == "" || l[0] == '#' {
			continue
		}
		b := []byte(l)
		for p := 0; p < 2; p++ {
			base := 52 + 32*p
			if len(b) < base+32 || strings.TrimSpace(string(b[base:base+9])) == "N/A" {
				continue
			}
			copy(b[base+2:], fmt.Sprintf("%7s  %6s  %6s", "T", "A", "B"))
		}
		lines[i] = string(b)
	}
	return strings.Join(lines, "\n")
}

// A real run's table and JSON (testdata/output*.golden, -update), with mask's words in place of
// what changes from run to run: the header lines, the device lines, two collectives' tables with
// their plan columns, the footers; the JSON's keys and values.
func TestOutputGolden(t *testing.T) {
	versionString = "vTEST"
	defer func() { versionString = "" }()
	args := []string{"--collective", "all_reduce,sendrecv", "-b", "8", "-e", "1K", "-f", "32", "-g", "2", "-n", "1", "-o", "mulsum"}
	for _, c := range []struct {
		golden string
		json   bool
	}{{"output.golden", false}, {"output_json.golden", true}} {
		a := args
		if c.json {
			a = append(a, "--json")
		}
		var out, errb bytes.Buffer
		if code := mainRun(a, &out, &errb, noenv); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		golden(t, c.golden, mask(out.String(), c.json))
	}
}

// The README's "four jobs" block: its CPU bin/runccl lines run as written (paths from the
// repository root); the --backend cuda line needs a GPU and is only parsed here (a GPU-less machine
// gives one clear error, exit 1).
func TestREADMEJobs(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(data)
	start := strings.Index(text, "<!-- jobs:")
	require.GreaterOrEqual(t, start, 0, "README has no jobs block")
	block := text[start:]
	block = block[strings.Index(block, "```sh")+5:]
	block = block[:strings.Index(block, "```")]
	ran := 0
	for _, line := range strings.Split(block, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "bin/runccl" {
			continue
		}
		var args []string
		for _, f := range fields[1:] {
			if strings.HasPrefix(f, "testdata/") {
				f = "../../" + f
			}
			args = append(args, f)
		}
		var out, errb bytes.Buffer
		rc := mainRun(args, &out, &errb, func(string) string { return "" })
		if strings.Contains(line, "--backend cuda") {
			if rc != 0 {
				require.Equal(t, 1, rc, "%s: %s", line, errb.String())
				require.Contains(t, errb.String(), "cuda", line)
			}
		} else {
			require.Equal(t, 0, rc, "%s: stderr %q", line, errb.String())
			require.NotContains(t, out.String(), "FAIL", line)
		}
		ran++
	}
	require.GreaterOrEqual(t, ran, 3, "bin/runccl lines run from the jobs block")
}
