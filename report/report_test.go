package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/internal/input"
	"github.com/simccl/simccl/simnet"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/topo/ncclxml"
	"github.com/stretchr/testify/require"
)

func sweep(lo, hi int64) []int64 {
	var s []int64
	for v := lo; v <= hi; v *= 4 {
		s = append(s, v)
	}
	return s
}

// defaultSystem builds the embedded default topology's graph independently of the report.
func defaultSystem(t *testing.T) *graph.System {
	t.Helper()
	name, data := topos.Default()
	doc, err := ncclxml.ParseBytes(data, name)
	if err != nil {
		t.Fatal(err)
	}
	sys, err := topo.FromXML(doc, graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return sys
}

// undirectedLinks counts the distinct {node, node, type} pairs of a system.
func undirectedLinks(sys *graph.System) int {
	type k struct {
		a, b *graph.Node
		t    graph.LinkType
	}
	seen := map[k]bool{}
	for ty := range sys.Nodes {
		for _, n := range sys.Nodes[ty] {
			for _, l := range n.Links {
				if l.Remote != n && !seen[k{l.Remote, n, l.Type}] {
					seen[k{n, l.Remote, l.Type}] = true
				}
			}
		}
	}
	return len(seen)
}

func buildHTML(t *testing.T, opt Options) (*Report, string) {
	t.Helper()
	r, err := Build(opt)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	return r, b.String()
}

// svgBlock returns the <svg id="id"> element of a page.
func svgBlock(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `<svg id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no <svg id=%q>", id)
	}
	j := strings.Index(page[i:], "</svg>")
	return page[i : i+j+len("</svg>")]
}

func TestDefaultReport(t *testing.T) {
	sizes := sweep(8, 64<<20)
	r, page := buildHTML(t, Options{Funcs: []coll.Func{coll.AllReduce, coll.AllGather}, Sizes: sizes})
	sys := defaultSystem(t)

	topo := svgBlock(t, page, "topo")
	if got, want := strings.Count(topo, "data-gpu="), len(sys.GPUs()); got != want {
		t.Errorf("topology: %d GPU elements, want %d", got, want)
	}
	if got, want := strings.Count(topo, `class="link"`), undirectedLinks(sys); got != want {
		t.Errorf("topology: %d link elements, want %d", got, want)
	}
	for _, g := range sys.GPUs() {
		if ps := r.Topology.Paths[g.Name()]; len(ps) != len(sys.GPUs())-1 {
			t.Errorf("%s: %d paths, want %d", g.Name(), len(ps), len(sys.GPUs())-1)
		}
	}
	if !strings.Contains(topo, `data-tip="GPU/0 ↔ NVS/0: NVL`) && !strings.Contains(topo, `data-tip="NVS/0 ↔ GPU/0: NVL`) {
		t.Errorf("topology: no NVLink GPU/0–NVSwitch link with its type in the tooltip")
	}

	plot := svgBlock(t, page, "busbw")
	cells := 0
	for _, f := range []coll.Func{coll.AllReduce, coll.AllGather} {
		// One point per size that holds at least one element (8 B of all-gather on 8 ranks is none).
		want := 0
		for _, s := range sizes {
			if n, _ := coll.TestCount(f, s, 4, len(sys.GPUs())); n > 0 {
				want++
			}
		}
		cells += want
		coll := coll.TestName(f)
		re := regexp.MustCompile(`(?s)<g class="series" data-series="sim ` + coll + `">.*?</g>`)
		g := re.FindString(plot)
		if got := strings.Count(g, `<circle class="pt"`); got != want || want < len(sizes)-2 {
			t.Errorf("busbw %s: %d points, want one per size (%d)", coll, got, want)
		}
	}

	tuner := svgBlock(t, page, "tuner")
	if got := strings.Count(tuner, `class="cell"`); got != cells {
		t.Errorf("tuner map: %d cells, want %d", got, cells)
	}
	for _, row := range r.Tuner {
		for _, p := range row.Points {
			if len(p.Candidates) == 0 {
				t.Fatalf("%s %d: no candidate", row.Coll, p.Bytes)
			}
			for i := 1; i < len(p.Candidates); i++ {
				if p.Candidates[i].TimeUs < p.Candidates[i-1].TimeUs {
					t.Fatalf("%s %d: candidates not fastest first", row.Coll, p.Bytes)
				}
			}
			// The tuner picks the cheapest candidate (no override here).
			if c := p.Candidates[0]; c.TimeUs != p.TimeUs {
				t.Errorf("%s %d: chosen %s/%s %.3f µs, cheapest %s/%s %.3f µs", row.Coll, p.Bytes, p.Algo, p.Proto, p.TimeUs, c.Algo, c.Proto, c.TimeUs)
			}
		}
	}

	// Where time goes: the busiest links first, utilisations within [0, 1].
	f := r.Focus
	if f == nil || len(f.Links) == 0 || f.Messages == 0 {
		t.Fatalf("focus: %+v", f)
	}
	for i, l := range f.Links {
		if i > 0 && l.Bytes > f.Links[i-1].Bytes {
			t.Errorf("busiest links not sorted at %d", i)
		}
		sum := 0.0
		for _, u := range l.Bins {
			if u < 0 || u > 1 {
				t.Errorf("%s: utilisation %g", l.Name, u)
			}
			sum += u
		}
		if sum == 0 || l.Util <= 0 || l.Util > 1.0001 {
			t.Errorf("%s: no utilisation (bins %g, mean %g)", l.Name, sum, l.Util)
		}
	}
	if got := strings.Count(svgBlock(t, page, "timeline"), `class="op"`); got != f.OpsShown || got == 0 {
		t.Errorf("timeline: %d ops drawn, report says %d", got, f.OpsShown)
	}

	// Every SVG is well-formed XML.
	for _, id := range []string{"topo", "tuner", "busbw", "heat", "timeline", "memory"} {
		d := xml.NewDecoder(strings.NewReader(svgBlock(t, page, id)))
		d.Strict = true
		for {
			if _, err := d.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("svg %s: %v", id, err)
			}
		}
	}

	// Offline: nothing loaded from elsewhere.
	for _, bad := range []string{"<link ", " src=", "@import", "url(http"} {
		if strings.Contains(page, bad) {
			t.Errorf("page loads an external resource (%q)", bad)
		}
	}
}

func TestMemory(t *testing.T) {
	r, page := buildHTML(t, Options{Funcs: []coll.Func{coll.AllReduce}, Sizes: []int64{1 << 10, 1 << 20, 1 << 30}})
	lz, eg := r.Memory.Lazy, r.Memory.Eager
	if lz == nil || eg == nil || len(lz.PerRank) != r.Machine.Ranks || len(eg.PerRank) != r.Machine.Ranks {
		t.Fatalf("memory %+v", r.Memory)
	}
	for i := range lz.PerRank {
		if lz.PerRank[i].GPU > eg.PerRank[i].GPU {
			t.Errorf("rank %d: lazy %d > eager %d", i, lz.PerRank[i].GPU, eg.PerRank[i].GPU)
		}
	}
	// Lazy connects what tuning picked for the swept sizes: the tuner map's algorithms.
	picked := map[string]bool{}
	for _, p := range r.Tuner[0].Points {
		picked[p.Algo] = true
	}
	for a := range picked {
		if !slices.Contains(lz.Connected, a) {
			t.Errorf("tuner picks %s, memory connects %v", a, lz.Connected)
		}
	}
	// The default topology (DGX H100) has an NVSwitch: eager holds NVLS buffers, and the page
	// shows them.
	if !slices.Contains(eg.Connected, "NVLS") || lz.Buffers.NVLSHeads == 0 {
		t.Errorf("eager connects %v, NVLS heads %d", eg.Connected, lz.Buffers.NVLSHeads)
	}
	for _, s := range []string{`id="memtable"`, `id="memalgo"`, `id="memkind"`, "<td>NVLS</td>", "<td>P2P</td>"} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %s", s)
		}
	}
}

func TestMeasuredFormats(t *testing.T) {
	csv := "tag,coll,world,bytes,us,algbw,busbw\ndefault,all_reduce,2,1024,10.5,0.1,0.1\n"
	text := `# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20
#
# Using devices
#  Rank  0 Group  0 Pid 1 on h device  0 [0x1b] NVIDIA H200
#  Rank  1 Group  0 Pid 2 on h device  1 [0x2b] NVIDIA H200
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    12.95    0.00    0.00      0    12.10    0.00    0.00      0
          16             4     float     sum      -1    11.86    0.00    0.00      0    11.50    0.00    0.00      0
# Avg bus bandwidth    : 0.001
`
	js := `{"nranks":4,"transport":"shm","rows":[{"coll":"allreduce","bytes":64,"time_us":3.5,"algbw":0.1,"busbw":0.2,"in_place":false},{"coll":"allreduce","bytes":64,"time_us":3,"in_place":true}]}`
	for _, tc := range []struct {
		name, data string
		world, n   int
		us         float64
	}{{"a.csv", csv, 2, 1, 10.5}, {"a.txt", text, 2, 2, 12.95}, {"a.json", js, 4, 1, 3.5}} {
		rows, err := ReadMeasured([]byte(tc.data), tc.name, "all_reduce")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(rows) != tc.n || rows[0].World != tc.world || rows[0].Us != tc.us || rows[0].Coll != "all_reduce" {
			t.Errorf("%s: %+v", tc.name, rows)
		}
	}
	for _, tc := range []struct{ name, data, want string }{
		{"e.csv", "tag,coll,world,bytes,us,algbw,busbw\ndefault,all_reduce,x,1,1,1,1\n", "e.csv:2"},
		{"e.txt", "           8             2     float     sum      -1    12.95    0.00    0.00      0\n", "Rank"},
		{"e.txt", "hello\n", "no data row"},
		{"e.txt", "#  Rank  0 Group\n 8 2 float sum -1 abc 0.00 0.00 0\n", "e.txt:2"},
		{"e.json", `{"nranks":2,"rows":[{"coll":"nope","bytes":1,"time_us":1}]}`, "rows[0]"},
		{"e.json", `{"rows":[]}`, "nranks"},
		{"e.json", `{"nranks":`, "e.json"},
		{"empty", "  ", "empty"},
	} {
		_, err := ReadMeasured([]byte(tc.data), tc.name, "all_reduce")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: error %v, want one naming %q", tc.name, tc.data, err, tc.want)
		}
	}
}

// TestMeasuredBounds: findings 6 and 10 of the input-bounds issue, in every form report reads:
// NaN and infinities in any column, sizes over units.MaxSize, more rows than
// simnet.MaxMeasuredRows (streamed, for JSON), lines and inputs over internal/input's bounds.
func TestMeasuredBounds(t *testing.T) {
	rank := "#  Rank  0 Group  0 Pid 1 on h device  0 [0x1b] NVIDIA H200\n"
	manyJSON := `{"nranks":2,"rows":[` + strings.Repeat(`{},`, simnet.MaxMeasuredRows) + `{}]}`
	for _, tc := range []struct{ name, data, want string }{
		{"n.csv", "tag,coll,world,bytes,us,algbw,busbw\ndefault,all_reduce,2,1024,10.5,NaN,0.1\n", "n.csv:2: algbw NaN"},
		{"n.txt", rank + "  8 2 float sum -1 12.95 NaN 0.00 0\n", "n.txt:2: algbw NaN"},
		{"n.txt", rank + "  8 2 float sum -1 12.95 0.0 inf 0\n", "n.txt:2: busbw +Inf"},
		{"n.txt", rank + "  4611686018427387904 2 float sum -1 12.95 0.0 0.0 0\n", "n.txt:2: bytes: 4611686018427387904 bytes, more than 1 TiB"},
		{"n.txt", rank + strings.Repeat("x", input.MaxLine+1) + "\n", "n.txt:2: input too large (a line longer than 1 MiB)"},
		{"n.json", `{"nranks":2,"rows":[{"coll":"allreduce","bytes":64,"time_us":3.5,"busbw":-1}]}`, "n.json: rows[0]: busbw -1"},
		{"n.json", `{"nranks":2,"rows":[{"coll":"allreduce","bytes":4611686018427387904,"time_us":3.5}]}`, "more than 1 TiB"},
		{"n.json", manyJSON, "n.json: runccl JSON: more than 10000 rows"},
		{"n.json", `{"nranks":2,"rows":{}}`, `"rows" is not an array`},
		{"big", strings.Repeat(" ", input.MaxBytes+1), "big: input too large (more than 64 MiB)"},
	} {
		_, err := ReadMeasured([]byte(tc.data), tc.name, "all_reduce")
		require.ErrorContains(t, err, tc.want, tc.name)
		require.ErrorIs(t, err, ErrInput)
		require.NotContains(t, err.Error(), "\n")
	}
}

func TestMeasuredCompare(t *testing.T) {
	data, err := os.ReadFile("../testdata/nccl/h200x2/nccl_perf.csv")
	if err != nil {
		t.Fatal(err)
	}
	meas, err := ReadMeasured(data, "nccl_perf.csv", "")
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, m := range meas {
		if m.Tag == "default" && m.Coll == "all_reduce" && m.Bytes >= 8 && m.Bytes <= 1<<19 { // sweep(8, 1M) ends at 512K
			want++
		}
	}
	r, page := buildHTML(t, Options{Planner: testPlanner(t, "../testdata/nccl/h200x2/real_topo.xml", 1), Funcs: []coll.Func{coll.AllReduce}, Sizes: sweep(8, 1<<20),
		Measured: meas, MeasuredName: "nccl_perf.csv"})
	if len(r.Compare) != want || want == 0 {
		t.Fatalf("%d compared sizes, want %d", len(r.Compare), want)
	}
	if got := strings.Count(page, "<tr><td>all_reduce</td>"); got != want {
		t.Errorf("error table: %d rows, want %d", got, want)
	}
	re := regexp.MustCompile(`(?s)<g class="series" data-series="measured all_reduce">.*?</g>`)
	if got := strings.Count(re.FindString(svgBlock(t, page, "busbw")), `<circle class="pt"`); got != want {
		t.Errorf("measured series: %d points, want %d", got, want)
	}
	for _, c := range r.Compare {
		if c.SimUs <= 0 || c.MeasUs <= 0 {
			t.Errorf("%+v", c)
		}
	}
	// A measurement on another communicator size is an error naming the file.
	_, err = Build(Options{Funcs: []coll.Func{coll.AllReduce}, Sizes: []int64{1024}, Measured: meas, MeasuredName: "nccl_perf.csv"})
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "nccl_perf.csv") {
		t.Errorf("world mismatch: %v", err)
	}
}

func TestClusterReport(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster simulation")
	}
	r, page := buildHTML(t, Options{Planner: testPlanner(t, "", 4), Funcs: []coll.Func{coll.AllReduce}, Sizes: sweep(1024, 1<<20)})
	f := r.Fabric
	if f == nil || f.Nodes != 4 || f.Rails != 8 || f.Leaves != 8 || f.NICLinks != 32 {
		t.Fatalf("fabric summary %+v", f)
	}
	if !strings.Contains(page, `<svg id="fabric"`) {
		t.Error("no fabric drawing")
	}
	if !strings.Contains(page, "routing ecmp</td>") {
		t.Error("the default hash's routing is not named as plain ecmp")
	}
	if got := simnet.RoutingName("ecmp", 3); got != "ecmp (seed 3)" {
		t.Errorf("routing with seed 3: %q", got)
	}
	// NCCL_IB_QPS_PER_CONNECTION (here on the fabric itself) is named with the routing it spreads.
	fq := simnet.DefaultFabric()
	fq.QPs = 4
	rq, pq := buildHTML(t, Options{Planner: testPlanner(t, "", 4), Fabric: fq, Funcs: []coll.Func{coll.AllReduce}, Sizes: []int64{1024}})
	if rq.Fabric == nil || rq.Fabric.QPs != 4 || !strings.Contains(pq, "routing ecmp, 4 queue pairs a connection</td>") {
		t.Errorf("queue pairs: summary %+v", rq.Fabric)
	}
	if len(r.Memory.Eager.PerRank) != 32 {
		t.Errorf("%d ranks in memory", len(r.Memory.Eager.PerRank))
	}
	net := 0
	for _, rk := range r.Memory.Eager.PerRank {
		for _, k := range rk.Kinds {
			if k.Kind == "NET" {
				net += k.Conns
			}
		}
	}
	if net == 0 {
		t.Error("4 nodes: no connection over NET")
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back["fabric"] == nil || back["memory"] == nil {
		t.Errorf("JSON: %v %v", err, back["fabric"])
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		opt  Options
		want string
	}{
		{Options{Sizes: []int64{-5}}, "size"},
		{Options{FocusColl: "nope"}, "focus"},
	} {
		if _, err := Build(tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %q", tc.opt, err, tc.want)
		}
	}
}

// A focus size whose schedule is too large to record: the timeline moves to a smaller size and
// the compact executor gives the link totals at the size asked for.
func TestFocusCompact(t *testing.T) {
	r, page := buildHTML(t, Options{Planner: testPlanner(t, "", 4), Funcs: []coll.Func{coll.AllReduce}, Sizes: []int64{1 << 20}, FocusSize: 1 << 20, FocusMaxSteps: 2000})
	f := r.Focus
	if f.Size >= 1<<20 || f.Compact == nil || f.Compact.Size != 1<<20 || len(f.Compact.Links) == 0 {
		t.Fatalf("focus %d, compact %+v", f.Size, f.Compact)
	}
	nic := false
	for _, c := range f.Compact.Classes {
		if c.Class == "NIC ↔ leaf" && c.Used > 0 && c.MaxUtil > 0 {
			nic = true
		}
		if c.Used > c.Links || c.MaxUtil > 1.0001 {
			t.Errorf("class %+v", c)
		}
	}
	if !nic {
		t.Errorf("4 nodes: no NIC link carries bytes: %+v", f.Compact.Classes)
	}
	if !strings.Contains(page, `<table id="busiest-compact">`) || !strings.Contains(strings.Join(r.Notes, "\n"), "too large to record") {
		t.Error("compact totals or the note missing from the page")
	}
	// The section says it is downsized before its first figure.
	sec := page[strings.Index(page, `id="s-time"`):]
	if f.Asked != 1<<20 || !strings.Contains(sec, `id="focus-downsized"`) || strings.Index(sec, `id="focus-downsized"`) > strings.Index(sec, "<svg") {
		t.Errorf("downsizing not stated first in section 4 (asked %d)", f.Asked)
	}
}

// A focus whose schedule is too large to record even where each rank has one element says so;
// it does not halve the size below that and fail (until 2026-11-29 an all-gather on 1,024
// one-GPU nodes, or 256 DGX H100 nodes, failed the report with "no element at this size").
func TestFocusFloorHasAnElement(t *testing.T) {
	r, _ := buildHTML(t, Options{Planner: testPlanner(t, "", 4), Funcs: []coll.Func{coll.AllGather}, Sizes: []int64{1 << 20}, FocusSize: 1 << 20, FocusMaxSteps: 500})
	// 32 ranks: nccl-tests' smallest all-gather with an element per rank is 4 floats each (its
	// 16-byte alignment), 512 bytes.
	if r.Focus == nil || !strings.Contains(r.Focus.Unrecorded, "even at 512 bytes") {
		t.Fatalf("focus %+v", r.Focus)
	}
}

// FuzzReadMeasured: any input is read or refused with an error, never a panic.
func FuzzReadMeasured(f *testing.F) {
	f.Add([]byte("tag,coll,world,bytes,us,algbw,busbw\ndefault,all_reduce,2,1024,10.5,0.1,0.1\n"))
	f.Add([]byte("#  Rank  0 Group\n 8 2 float sum -1 12.95 0.00 0.00 0 12.1 0 0 0\n"))
	f.Add([]byte(`{"nranks":2,"rows":[{"coll":"allreduce","bytes":64,"time_us":3.5}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := ReadMeasured(data, "fuzz", "all_reduce")
		if err == nil {
			for _, r := range rows {
				if r.World < 1 || !(r.Us > 0) || r.Bytes < 0 {
					t.Fatalf("accepted %+v", r)
				}
			}
		}
	})
}

// The "where time goes" replay times the call as the busbw table does: the same plan, timed as
// simccl run times it (simnet.Machine.PlanTiming: the GPU model, the channel skew of one node's
// rings, a send/recv's launch). Until 2026-11-29 it took NCCL's latencies alone and showed another
// time for the same call (DGX H100, all-reduce of 1 MiB: 25.73 µs beside the table's 24.80).
func TestFocusTimeIsRowTime(t *testing.T) {
	for _, c := range []struct {
		nodes int
		f     coll.Func
		size  int64
	}{
		{1, coll.AllReduce, 1 << 20},
		{1, coll.AllGather, 4 << 20},
		{1, coll.SendRecv, 64 << 10},
		{2, coll.AllReduce, 4 << 20},
		{2, coll.AllToAll, 1 << 20},
	} {
		r, err := Build(Options{Planner: testPlanner(t, "", c.nodes), Funcs: []coll.Func{c.f}, Sizes: []int64{c.size}, Sections: []string{"busbw", "time"}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Focus == nil || r.Focus.Size != c.size || len(r.BusBW) == 0 || len(r.BusBW[0].Points) != 1 {
			t.Fatalf("%d node(s) %v %d B: focus %+v, busbw %+v", c.nodes, c.f, c.size, r.Focus, r.BusBW)
		}
		if row, got := r.BusBW[0].Points[0].TimeUs, r.Focus.TimeUs; math.Abs(got-row) > 1e-6*row {
			t.Errorf("%d node(s) %v %d B: where time goes %.4f µs, the busbw table %.4f µs", c.nodes, c.f, c.size, got, row)
		}
	}
	// A broadcast's row is one call in nccl-tests' loop, its timeline one call alone: the page
	// says so, and the timeline's time is one call's.
	p := testPlanner(t, "", 1)
	r, err := Build(Options{Planner: p, Funcs: []coll.Func{coll.Broadcast}, Sizes: []int64{1 << 20}, Sections: []string{"busbw", "time"}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := simnet.NewMachine(p.System, 1, nil, p, p.Settings.Release)
	if err != nil {
		t.Fatal(err)
	}
	m.BackToBack = 1
	alone, _, err := m.Run(coll.Broadcast, 1<<20, coll.Float32, coll.Sum, simnet.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Focus.TimeUs; math.Abs(got-alone.TimeUs) > 1e-6*alone.TimeUs || r.BusBW[0].Points[0].TimeUs >= got {
		t.Errorf("broadcast 1 MiB: where time goes %.3f µs, one call alone %.3f µs, the busbw table %.3f µs", got, alone.TimeUs, r.BusBW[0].Points[0].TimeUs)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "one call alone") {
		t.Errorf("no note that the timeline is one call alone: %q", r.Notes)
	}
}

// nccl-tests' header says how the calls were launched: -g (GPUs per thread) and -G (graphs).
func TestMeasuredLaunch(t *testing.T) {
	for _, c := range []struct {
		in        string
		gpus      int
		graph, ok bool
	}{
		{"# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n", 1, false, true},
		{"junk\n#  nThread 1 nGpus 8 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n", 8, false, true},
		{"# nThread 1 nGpus 2 minBytes 0 maxBytes 8388608 warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 5\n", 2, true, true},
		{"# nThread 1 nGpus 0 minBytes 8\n", 0, false, false},
		{"tag,coll,world,bytes,us,algbw,busbw\ndefault,all_reduce,2,1024,10.5,0.1,0.1\n", 0, false, false},
		{"", 0, false, false},
	} {
		g, graph, ok := MeasuredLaunch([]byte(c.in))
		if g != c.gpus || graph != c.graph || ok != c.ok {
			t.Errorf("MeasuredLaunch(%q) = %d, %v, %v; want %d, %v, %v", c.in, g, graph, ok, c.gpus, c.graph, c.ok)
		}
	}
}

// With Options.Alternatives the tuner map's points carry every cell simulated, NCCL's pick among
// them with the row's time, the tips list them, and a note sums them up.
func TestReportAlternatives(t *testing.T) {
	r, page := buildHTML(t, Options{Funcs: []coll.Func{coll.AllReduce}, Sizes: []int64{64 << 10, 2 << 20}, Alternatives: true, Sections: []string{"tuner"}})
	require.Len(t, r.Tuner, 1)
	for _, p := range r.Tuner[0].Points {
		require.GreaterOrEqual(t, len(p.Alternatives), 4, "%d", p.Bytes)
		picks := 0
		for i, a := range p.Alternatives {
			if i > 0 {
				require.LessOrEqual(t, p.Alternatives[i-1].GPUUs(), a.GPUUs())
			}
			if a.Pick {
				picks++
				require.Equal(t, p.SimAlgo+"/"+p.SimProto, a.Algo+"/"+a.Proto)
				require.Equal(t, p.SimUs, a.TimeUs)
			}
		}
		require.Equal(t, 1, picks, "%d", p.Bytes)
	}
	tuner := svgBlock(t, page, "tuner")
	require.Contains(t, tuner, "simulated (GPU µs, fastest first):")
	// A star on each cell where another cell was simulated faster than NCCL's pick.
	starred := 0
	for _, p := range r.Tuner[0].Points {
		if best := p.Alternatives[0]; !best.Pick {
			starred++
		}
	}
	require.Positive(t, starred, "2 MiB on a DGX H100 node: Ring/LL simulated under NVLS")
	require.Len(t, regexp.MustCompile(`<text x="[0-9.]+" y="[0-9.]+">[0-9]+\*</text>`).FindAllStringIndex(tuner, -1), starred, "starred cells")
	require.Contains(t, page, "A star marks a size")
	_, plain := buildHTML(t, Options{Funcs: []coll.Func{coll.AllReduce}, Sizes: []int64{2 << 20}, Sections: []string{"tuner"}})
	require.NotContains(t, plain, "A star marks")
	require.NotContains(t, svgBlock(t, plain, "tuner"), "*</text>")
	found := false
	for _, n := range r.Notes {
		found = found || strings.HasPrefix(n, "--alternatives: NCCL's pick was the fastest simulated on the GPUs at")
	}
	require.True(t, found, "%q", r.Notes)
}
