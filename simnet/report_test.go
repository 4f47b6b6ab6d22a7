package simnet

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
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
	slices, meta := 0, 0
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
			for _, k := range []string{"bytes", "peer", "route"} {
				if _, ok := args[k]; !ok {
					t.Fatalf("slice lacks args.%s: %v", k, ev)
				}
			}
			if !strings.Contains(args["route"].(string), "NVS") {
				t.Fatalf("route %v does not name the NVSwitch links", args["route"])
			}
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
	if slices != len(res.Ops) || slices == 0 || meta == 0 {
		t.Fatalf("%d slices for %d ops, %d metadata events", slices, len(res.Ops), meta)
	}
}

func TestWriteJSONRows(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, []Row{{Coll: "all_reduce", Bytes: 8, Count: 2, TimeUs: 1, AlgBw: 2, BusBw: 3, Algo: "Ring", Proto: "LL", NChannels: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"coll", "bytes", "count", "time_us", "algbw", "busbw", "algo", "proto", "nchannels"} {
		if _, ok := doc.Rows[0][k]; !ok {
			t.Errorf("row lacks %q", k)
		}
	}
}

// TestWriteTableAvgBusBw: the average line as nccl-tests prints it ("%g %s\n" with an empty
// %s: 6 significant digits and a trailing space), not Go's shortest %g.
func TestWriteTableAvgBusBw(t *testing.T) {
	var buf bytes.Buffer
	rows := []Row{{Coll: "all_reduce", Bytes: 8, Count: 2, BusBw: 93.01666878329968}, {Coll: "all_reduce", Bytes: 16, Count: 4, BusBw: 93.01666878329968}}
	if err := WriteTable(&buf, rows); err != nil {
		t.Fatal(err)
	}
	if want := "\n# Avg bus bandwidth    : 93.0167 \n"; !strings.HasSuffix(buf.String(), want) {
		t.Fatalf("table ends %q, want %q", buf.String()[max(0, buf.Len()-60):], want)
	}
}

func TestWritePlot(t *testing.T) {
	rows := []Row{{Coll: "all_reduce", Bytes: 1024, BusBw: 1}, {Coll: "all_reduce", Bytes: 1 << 20, BusBw: 100}}
	for _, f := range []string{"png", "svg"} {
		var buf bytes.Buffer
		if err := WritePlot(&buf, "t", SeriesFromRows(rows, "sim "), f); err != nil {
			t.Fatal(err)
		}
		if buf.Len() < 100 {
			t.Fatalf("%s plot only %d bytes", f, buf.Len())
		}
	}
	if err := WritePlot(&bytes.Buffer{}, "t", nil, "gif"); err == nil {
		t.Fatal("want an error for gif")
	}
}
