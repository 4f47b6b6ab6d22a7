package perf

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files (testdata/*.golden) with what the code gives")

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
		t.Errorf("%s differs from what the code writes (review, then go test -run %s -update):\n--- want\n%s\n--- got\n%s", path, t.Name(), want, got)
	}
}

// C's printf as nccl-tests calls it (values checked against glibc's printf).
func TestFormatTime(t *testing.T) {
	for _, c := range []struct {
		us   float64
		want string
	}{
		{0, "   0.00"}, {8.968, "   8.97"}, {68.52, "  68.52"}, {99.994, "  99.99"}, {99.996, " 100.00"}, // %7.2f below 100
		{100, "  100.0"}, {132.6, "  132.6"}, {9187.84, " 9187.8"}, {9999.96, "10000.0"}, // %7.1f below 10000
		{10000, "  10000"}, {18289.4, "  18289"}, {111812, " 111812"}, {12345678.9, "12345679"}, // %7.0f
		{math.Inf(1), "    inf"}, {math.NaN(), "    nan"},
	} {
		if got := FormatTime(c.us); got != c.want {
			t.Errorf("FormatTime(%v) = %q, want %q", c.us, got, c.want)
		}
	}
	for _, c := range []struct {
		v    float64
		want string
	}{{93.01666878329968, "93.0167"}, {0, "0"}, {100000, "100000"}, {1234567, "1.23457e+06"}, {0.5, "0.5"}, {1e-5, "1e-05"}} {
		if got := cfmt(c.v, 'g', 6); got != c.want {
			t.Errorf("%%g of %v = %q, want %q", c.v, got, c.want)
		}
	}
}

// fixture is a real nccl-tests output (testdata/nccl-tests); exact when the copy kept the trailing
// blanks nccl-tests prints.
type fixture struct {
	file  string
	exact bool
}

var fixtures = []fixture{{"oci_a100_2n_nccl2.14.3.txt", true}, {"nt309_xe9680_2n_nccl2.26.2.txt", false}}

// TableWriter's lines are nccl-tests' own: each line of two real outputs is rebuilt from the
// values it shows (the parameters, the devices, every row's numbers, the average) and compared
// byte for byte (without the trailing blanks the second copy lost). runccl's plan columns, after
// nccl-tests', are the only difference on the column header.
func TestTableMatchesNcclTests(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "nccl-tests", fx.file))
			if err != nil {
				t.Fatal(err)
			}
			same := func(got, want string) {
				t.Helper()
				if !fx.exact {
					got = strings.TrimRight(got, " ")
				}
				if got != want {
					t.Errorf("\n got %q\nwant %q", got, want)
				}
			}
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			header := ColumnHeader(false)
			hl := strings.Split(strings.TrimSuffix(header, "\n"), "\n")
			rows, checked := 0, 0
			for i, l := range lines {
				switch {
				case strings.HasPrefix(l, "# nThread"):
					var f Flags
					var step int64
					var kind string
					if _, err := fmt.Sscanf(l, "# nThread %d nGpus %d minBytes %d maxBytes %d step: %d(%s warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d",
						&f.NThreads, &f.NGpus, &f.MinBytes, &f.MaxBytes, &step, &kind, &f.WarmupIters, &f.Iters, &f.AggIters, &f.Check, &f.CudaGraph); err != nil {
						t.Fatalf("%q: %v", l, err)
					}
					f.StepFactor, f.StepBytes = 1, step
					if kind == "factor)" {
						f.StepFactor, f.StepBytes = step, 1<<20
					}
					var b bytes.Buffer
					if err := NewTableWriter(&b, Header{Flags: f}).Begin(); err != nil {
						t.Fatal(err)
					}
					same(strings.Split(b.String(), "\n")[1], l)
					checked++
				case strings.HasPrefix(l, "#  Rank"):
					var d Device
					var rest string
					if _, err := fmt.Sscanf(l, "#  Rank %d Group %d Pid %d on %s device %d %s", &d.Rank, &d.Group, &d.Pid, &d.Host, &d.Device, &rest); err != nil {
						t.Fatalf("%q: %v", l, err)
					}
					open, close := strings.Index(l, "["), strings.Index(l, "]")
					d.Bus, d.Name = l[open+1:close], l[close+2:]
					same(strings.TrimSuffix(DeviceLine(d), "\n"), l)
					checked++
				case strings.Contains(l, "out-of-place"):
					same(hl[0], l)
					same(hl[1], lines[i+1]+fmt.Sprintf("  %6s  %6s  %3s", "algo", "proto", "nch"))
					same(hl[2], lines[i+2])
					checked++
				case strings.HasPrefix(l, "# Out of bounds values"):
					var avg float64
					if _, err := fmt.Sscanf(lines[i+1], "# Avg bus bandwidth    : %g", &avg); err != nil {
						t.Fatal(err)
					}
					foot := strings.Split(Footer(0, avg), "\n")
					same(foot[0], l)
					same(foot[1], lines[i+1])
					same(foot[2], lines[i+2])
					checked++
				case l != "" && l[0] != '#' && !strings.HasPrefix(l, "NCCL version"):
					same(strings.TrimSuffix(FormatLine(parseLine(t, l)), "\n"), l)
					rows++
				}
			}
			if rows < 2 || checked < 4 {
				t.Fatalf("%d rows and %d header parts compared", rows, checked)
			}
		})
	}
}

// parseLine reads one nccl-tests row back into a Line with the values it shows.
func parseLine(t *testing.T, l string) Line {
	t.Helper()
	fs := strings.Fields(l)
	if len(fs) != 13 {
		t.Fatalf("%d fields: %q", len(fs), l)
	}
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("%q in %q", s, l)
		}
		return v
	}
	row := func(at int, inPlace bool) Row {
		r := Row{Bytes: int64(num(fs[0])), Count: int64(num(fs[1])), Type: fs[2], RedOp: fs[3], Root: int(num(fs[4])), InPlace: inPlace,
			TimeUs: num(fs[at]), AlgBW: num(fs[at+1]), BusBW: num(fs[at+2]), Wrong: -1}
		if fs[at+3] != "N/A" {
			r.Wrong = int64(num(fs[at+3]))
		}
		return r
	}
	ip := row(9, true)
	return Line{OutOfPlace: row(5, false), InPlace: &ip}
}

// sampleRun is a run of two collectives whose rows exercise every format: times in each of
// nccl-tests' three ranges, a busbw too wide for its column, unchecked and wrong elements, a
// collective without in-place runs, NCCL's decision beside the plan run.
func sampleRun() (Header, []Line) {
	h := Header{Program: "runccl", Version: "v0.0.0-test", Backend: "cpu", NRanks: 2, Transport: "shm", NCCLRelease: "2.28",
		Machine: "planner.CPUMachine", Collectives: []string{"all_reduce", "alltoall"},
		Flags: Flags{NThreads: 1, NGpus: 2, MinBytes: 8, MaxBytes: 1 << 30, StepBytes: 1 << 20, StepFactor: 1 << 10, Iters: 20, AggIters: 1,
			WarmupIters: 1, RunCycles: 1, Check: 1, Op: "sum", DataType: "float", Root: "0", Blocking: 1, Timeout: 10, Average: 1},
		Devices: []Device{{Rank: 0, Pid: 4242, Host: "node-a", Device: 0, Bus: "cpu", Name: "CPU (process rank)"},
			{Rank: 1, Pid: 77, Host: "node-b-with-a-long-name", Device: 0, Bus: "cpu", Name: "CPU (process rank)"}},
		Args: []string{"all_reduce_perf", "-b", "8", "-e", "1G", "-f", "1024", "-z", "1"}}
	ar := func(b int64, us, bw float64, wrong int64, inPlace bool) Row {
		return Row{Coll: "allreduce", Bytes: b, Count: b / 4, Type: "float", RedOp: "sum", Root: -1, InPlace: inPlace, TimeUs: us,
			AlgBW: float64(b) / us / 1e3, BusBW: bw, Wrong: wrong, Algo: "Ring", Proto: "Simple", NChannels: 2, NCCL: "NVLS/Simple/16"}
	}
	i1, i2, i3 := ar(8, 12.345, 0.001, 0, true), ar(8192, 250.06, 0.0655, 3, true), ar(1<<30, 98765.4, 1234.5678, 0, true)
	a2a := Row{Coll: "alltoall", Bytes: 1008, Count: 126, Type: "float", RedOp: "none", Root: -1, TimeUs: 4.5, AlgBW: 0.224, BusBW: 0.112,
		Wrong: -1, Algo: "P2P", Proto: "Simple", NChannels: 1}
	return h, []Line{
		{OutOfPlace: ar(8, 10, 0.0008, 0, false), InPlace: &i1},
		{OutOfPlace: ar(8192, 1e4, 0.0016, 0, false), InPlace: &i2},
		{OutOfPlace: ar(1<<30, 1.5e6, 1.4, 0, false), InPlace: &i3},
		{OutOfPlace: a2a},
		{OutOfPlace: Row{Coll: "alltoall", Bytes: 0, Count: 0, Type: "float", RedOp: "none", Root: -1, TimeUs: 0, AlgBW: math.NaN(), BusBW: math.Inf(1), Wrong: -1}},
	}
}

func writeRun(w Writer, lines []Line, runErr error) error {
	if err := w.Begin(); err != nil {
		return err
	}
	for _, l := range lines {
		if err := w.Line(l); err != nil {
			return err
		}
	}
	return w.End(runErr)
}

// The table and the JSON of a sample run (testdata/*.golden); the JSON is valid and holds every
// row, the tests' sums and the header.
func TestWritersGolden(t *testing.T) {
	h, lines := sampleRun()
	var tb, jb, cb bytes.Buffer
	if err := writeRun(NewTableWriter(&tb, h), lines, nil); err != nil {
		t.Fatal(err)
	}
	golden(t, "table.golden", tb.String())
	h.Flags.ReportCputime = 1
	if err := writeRun(NewTableWriter(&cb, h), lines[:1], nil); err != nil {
		t.Fatal(err)
	}
	golden(t, "table_cputime.golden", cb.String())
	if err := writeRun(NewJSONWriter(&jb, h), lines, errors.New("interrupted by interrupt")); err != nil {
		t.Fatal(err)
	}
	golden(t, "json.golden", jb.String())
	var doc struct {
		Header Header `json:"header"`
		NRanks int    `json:"nranks"`
		Rows   []struct {
			Coll  string `json:"coll"`
			Wrong *int64 `json:"wrong"`
			Algo  string `json:"algo"`
		} `json:"rows"`
		Tests []struct {
			Coll        string `json:"coll"`
			Rows        int    `json:"rows"`
			OutOfBounds int    `json:"out_of_bounds"`
		} `json:"tests"`
		OutOfBounds int    `json:"out_of_bounds"`
		Wrong       int64  `json:"wrong"`
		Error       string `json:"error"`
	}
	if err := json.Unmarshal(jb.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, jb.String())
	}
	if doc.NRanks != 2 || doc.Header.NRanks != 2 || len(doc.Rows) != 8 || doc.Rows[0].Coll != "all_reduce" || doc.Rows[6].Algo != "P2P" ||
		doc.Rows[6].Wrong != nil || len(doc.Tests) != 2 || doc.Tests[0].Rows != 6 || doc.Tests[0].OutOfBounds != 1 || doc.OutOfBounds != 1 ||
		doc.Wrong != 3 || doc.Error != "interrupted by interrupt" || len(doc.Header.Devices) != 2 || doc.Header.Flags.Blocking != 1 {
		t.Errorf("JSON document %+v", doc)
	}
}

// Each line is one write, flushed at once, so that a killed run leaves whole lines; a failed run
// ends the table without a footer; a failing writer stops at once.
func TestTableWriterStreams(t *testing.T) {
	h, lines := sampleRun()
	fw := &flushWriter{}
	w := NewTableWriter(fw, h)
	if err := writeRun(w, lines[:2], errors.New("aborted")); err != nil {
		t.Fatal(err)
	}
	for i, s := range fw.writes {
		if !strings.HasSuffix(s, "\n") || fw.flushes[i] != i+1 {
			t.Errorf("write %d %q (flushes %v)", i, s, fw.flushes)
		}
	}
	if out := strings.Join(fw.writes, ""); strings.Contains(out, "Avg bus bandwidth") || strings.Count(out, "\n           8") != 1 {
		t.Errorf("after a failure:\n%s", out)
	}
	bad := NewTableWriter(errWriter{}, h)
	if err := bad.Begin(); err == nil || bad.Line(lines[0]) == nil || bad.End(nil) == nil {
		t.Errorf("a failing writer's error was not returned")
	}
}

type flushWriter struct {
	writes  []string
	flushes []int
	n       int
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.writes = append(f.writes, string(p))
	return len(p), nil
}
func (f *flushWriter) Flush() error { f.n++; f.flushes = append(f.flushes, f.n); return nil }

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }
