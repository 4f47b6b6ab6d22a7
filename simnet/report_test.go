package simnet

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm/perf"
)

// The trace must be what Perfetto's JSON importer accepts: an object with a traceEvents array whose
// events carry name, ph, ts, pid, tid; complete events ("X") a non-negative dur; metadata events
// ("M") process_name/thread_name with args.name.
func TestTraceIsValidChromeJSON(t *testing.T) {
	m, _ := hgxMachine(t, 1)
	_, res, err := m.Run(coll.AllReduce, 1<<20, coll.Float32, coll.Sum, RunOptions{Record: true})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteTrace(&buf, []Traced{{Label: "all_reduce 1048576", Ops: res.Ops, Names: res.LinkName}}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("trace is not valid JSON: %v", err)
	}
	slices, meta, flows := 0, 0, 0
	for i, ev := range doc.TraceEvents {
		for _, k := range []string{"name", "ph", "pid"} {
			if _, ok := ev[k]; !ok {
				t.Fatalf("event %d lacks %q: %v", i, k, ev)
			}
		}
		switch ev["ph"] {
		case "X":
			slices++
			ts, ok1 := ev["ts"].(float64)
			dur, ok2 := ev["dur"].(float64)
			if !ok1 || !ok2 || ts < 0 || dur < 0 {
				t.Fatalf("bad complete event %v", ev)
			}
			args, _ := ev["args"].(map[string]any)
			keys := []string{"bytes", "peer"}
			send := strings.HasPrefix(ev["name"].(string), "send ")
			if send {
				keys = append(keys, "route") // the receive slice of a message names its sender only
			}
			for _, k := range keys {
				if _, ok := args[k]; !ok {
					t.Fatalf("slice lacks args.%s: %v", k, ev)
				}
			}
			if send && !strings.Contains(args["route"].(string), "NVS") {
				t.Fatalf("route %v does not name the NVSwitch links", args["route"])
			}
		case "s", "f":
			flows++
		case "M":
			meta++
			args, _ := ev["args"].(map[string]any)
			if _, ok := args["name"]; !ok && ev["name"] != "process_sort_index" && ev["name"] != "thread_sort_index" {
				t.Fatalf("metadata without args.name: %v", ev)
			}
		default:
			t.Fatalf("unexpected phase %v", ev["ph"])
		}
	}
	if slices != 2*len(res.Ops) || slices == 0 || meta == 0 || flows != 2*len(res.Ops) {
		t.Fatalf("%d slices and %d flow events for %d ops, %d metadata events", slices, flows, len(res.Ops), meta)
	}
}

func TestWriteJSONRows(t *testing.T) {
	var buf bytes.Buffer
	h := RunHeader{Program: "simccl", Version: "vTEST", Topology: "dgx-h100", Nodes: 2, GPUsPerNode: 8, NRanks: 16, NChannels: 32,
		Fabric: DefaultFabric().Header(), NCCLRelease: "2.28", Collectives: []string{"all_reduce"}, DataType: "float", Op: "sum"}
	err := WriteJSON(&buf, h, []Row{{Coll: "all_reduce", Bytes: 8, Count: 2, TimeUs: 1, AlgBw: 2, BusBw: 3, Algo: "Ring", Proto: "LL", NChannels: 1}}, []string{"n"})
	require.NoError(t, err)
	var doc struct {
		Header map[string]any   `json:"header"`
		Rows   []map[string]any `json:"rows"`
		Notes  []string         `json:"notes"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	for _, k := range []string{"coll", "bytes", "count", "time_us", "algbw", "busbw", "algo", "proto", "nchannels"} {
		require.Contains(t, doc.Rows[0], k)
	}
	require.Equal(t, []string{"n"}, doc.Notes)
	for _, k := range []string{"program", "version", "topology", "nodes", "gpus_per_node", "nranks", "nchannels", "fabric", "nccl_release", "collectives", "datatype", "op"} {
		require.Contains(t, doc.Header, k)
	}
	require.Equal(t, map[string]any{"topology": "rail", "tiers": 2.0, "hosts_per_leaf": 32.0, "oversubscription": 1.0, "routing": "ecmp"}, doc.Header["fabric"])
	// One key style: snake_case (lower case, digits, underscores) in the header, its fabric and the rows.
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	var keys func(v any)
	keys = func(v any) {
		if m, ok := v.(map[string]any); ok {
			for k, x := range m {
				require.Regexp(t, snake, k)
				keys(x)
			}
		}
	}
	keys(doc.Header)
	keys(doc.Rows[0])

	// One node: no fabric.
	buf.Reset()
	h.Nodes, h.Fabric = 1, nil
	require.NoError(t, WriteJSON(&buf, h, nil, nil))
	require.NotContains(t, buf.String(), "fabric")
	require.Contains(t, buf.String(), `"rows": []`)
}

// TestWriteTableAvgBusBw: the average line as nccl-tests prints it ("%g %s\n" with an empty
// %s: 6 significant digits and a trailing space), not Go's shortest %g.
func TestWriteTableAvgBusBw(t *testing.T) {
	var buf bytes.Buffer
	rows := []Row{{Coll: "all_reduce", Bytes: 8, Count: 2, BusBw: 93.01666878329968}, {Coll: "all_reduce", Bytes: 16, Count: 4, BusBw: 93.01666878329968}}
	if err := WriteTable(&buf, RunHeader{}, rows, nil); err != nil {
		t.Fatal(err)
	}
	if want := "\n# Avg bus bandwidth    : 93.0167 \n"; !strings.HasSuffix(buf.String(), want) {
		t.Fatalf("table ends %q, want %q", buf.String()[max(0, buf.Len()-60):], want)
	}
}

// TestWriteTableColumns: nccl-tests' columns first, in its formats (those of runccl's table,
// comm/perf), the simulated time in both placements, #wrong N/A; times of 10 ms and more in
// their 7 characters; then algo, proto, nch, coll, mode.
func TestWriteTableColumns(t *testing.T) {
	rows := []Row{
		{Coll: "all_reduce", Bytes: 1 << 30, Count: 1 << 28, Type: "float", RedOp: "sum", TimeUs: 1234567.891, AlgBw: 0.87, BusBw: 1.52, Algo: "Ring", Proto: "Simple", NChannels: 32, Mode: "ring-compact"},
		{Coll: "broadcast", Bytes: 1024, Count: 256, Type: "float", RedOp: "none", TimeUs: 12.3456, AlgBw: 0.08, BusBw: 0.08, Algo: "Ring", Proto: "LL", NChannels: 2, Mode: "schedule", NCCL: "NVLS/Simple/16"},
	}
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, RunHeader{Program: "simccl", Version: "vTEST", Topology: "dgx-h100", Nodes: 1, GPUsPerNode: 8, NRanks: 8, NChannels: 32, NCCLRelease: "2.28"}, rows, []string{"a note"}))
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	require.Equal(t, "# simccl run: dgx-h100, 1 node(s) x 8 GPUs = 8 ranks, 32 channels, NCCL 2.28 rules", lines[0])
	require.Equal(t, "# note: a note", lines[2])
	var data []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "#") {
			data = append(data, l)
		}
	}
	require.Len(t, data, 2)
	f := strings.Fields(data[0])
	require.Equal(t, []string{"1073741824", "268435456", "float", "sum", "-1", "1234568", "0.87", "1.52", "N/A", "1234568", "0.87", "1.52", "N/A", "Ring", "Simple", "32", "all_reduce", "ring-compact"}, f)
	f = strings.Fields(data[1])
	require.Equal(t, []string{"1024", "256", "float", "none", "0", "12.35", "0.08", "0.08", "N/A", "12.35", "0.08", "0.08", "N/A", "Ring", "LL", "2", "broadcast", "schedule", "NVLS/Simple/16"}, f)
	// nccl-tests' columns line up with runccl's (comm/perf.FormatLine) character for character.
	pr := perf.Row{Bytes: 1 << 30, Count: 1 << 28, Type: "float", RedOp: "sum", Root: -1, TimeUs: 1234567.891, AlgBW: 0.87, BusBW: 1.52, Wrong: -1}
	want := perf.FormatLine(perf.Line{OutOfPlace: pr, InPlace: &pr})
	require.Equal(t, strings.TrimSuffix(want, "\n"), data[0][:len(want)-1])
	for _, us := range []float64{0, 1.234, 99.994, 100, 9999.94, 10000, 123456.7, 9999999} {
		require.Equal(t, perf.FormatTime(us), FormatTime(us))
		require.Len(t, FormatTime(us), 7)
	}
	require.True(t, strings.HasSuffix(buf.String(), "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.8 \n"), buf.String())
}
