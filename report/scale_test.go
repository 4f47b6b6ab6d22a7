package report

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/simnet"
	"github.com/stretchr/testify/require"
)

// At 256 nodes even the smallest all-reduce has too many steps to record: the page is produced,
// section 4 is a line saying why (and the compact executor's link totals at the size asked), the
// other sections are intact.
func TestReportAt256Nodes(t *testing.T) {
	start := time.Now()
	at := func(nodes int) (*planner.Planner, error) { return testPlanner(t, "", nodes), nil }
	r, page := buildHTML(t, Options{Planner: testPlanner(t, "", 256), PlannerAt: at, Funcs: []coll.Func{coll.AllReduce}, Sizes: []int64{1 << 10, 1 << 20}})
	t.Logf("256 nodes: %v", time.Since(start))
	f := r.Focus
	require.NotNil(t, f)
	require.Contains(t, f.Unrecorded, "the schedule of one all_reduce at 256 node(s) (2048 ranks) has about")
	require.Contains(t, f.Unrecorded, "(at most 300,000 steps)")
	// 64 nodes record (TestFocusUtilisationDownsized); 256 do not.
	require.Contains(t, []int{64, 128}, f.UpToNodes)
	require.Contains(t, f.Unrecorded, fmt.Sprintf("done up to %d node(s) of this machine", f.UpToNodes))
	require.Contains(t, page, `<p class="skipped" id="focus-summary">The schedule of one all_reduce at 256 node(s)`)
	require.NotNil(t, f.Compact, "link totals at the size asked")
	require.NotEmpty(t, f.Compact.Links)
	for _, id := range []string{"topo", "tuner", "busbw", "memory"} {
		require.Contains(t, page, `<svg id="`+id+`"`)
	}
	require.NotContains(t, page, `<svg id="heat"`)
	require.Contains(t, page, `id="trace-data">null<`)
}

func TestSections(t *testing.T) {
	all := map[string]string{"topology": `<svg id="topo"`, "tuner": `<svg id="tuner"`, "busbw": `<svg id="busbw"`, "time": `<svg id="heat"`, "memory": `<svg id="memory"`}
	for _, tc := range []struct {
		name     string
		sections []string
		focus    string
		off      []string
	}{
		{"all", nil, "", nil},
		{"topology and busbw", []string{"topology", "busbw"}, "", []string{"tuner", "time", "memory"}},
		{"focus none", nil, "none", []string{"time"}},
		{"memory only", []string{"memory"}, "", []string{"topology", "tuner", "busbw", "time"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, page := buildHTML(t, Options{Funcs: []coll.Func{coll.AllReduce}, Sizes: []int64{1 << 10, 1 << 20}, Sections: tc.sections, FocusColl: tc.focus})
			off := map[string]bool{}
			for _, s := range tc.off {
				off[s] = true
				require.NotEmpty(t, r.skipped(s), s)
				require.Contains(t, page, `<p class="skipped" id="skip-`+s+`">`)
			}
			for s, marker := range all {
				if off[s] {
					require.NotContains(t, page, marker, s)
				} else {
					require.Contains(t, page, marker, s)
					require.NotContains(t, page, `id="skip-`+s+`"`)
				}
			}
			require.Equal(t, off["time"], r.Focus == nil)
		})
	}
	_, err := Build(Options{Sections: []string{"nope"}})
	require.ErrorContains(t, err, `section "nope"`)
}

// Every option is checked before the simulation: a bad focus collective or measured rows on
// another number of ranks fail at once, even at a scale whose sweep takes seconds.
func TestBuildChecksFirst(t *testing.T) {
	p := testPlanner(t, "", 64)
	for _, tc := range []struct {
		opt  Options
		want string
	}{
		{Options{FocusColl: "nope"}, "focus collective"},
		{Options{FocusSize: -1}, "focus size"},
		{Options{Measured: []simnet.Measured{{Tag: "default", Coll: "all_reduce", World: 2, Bytes: 1 << 20, Us: 10}}, MeasuredName: "m.csv"}, "measured on 2 ranks"},
	} {
		tc.opt.Planner = p
		start := time.Now()
		_, err := Build(tc.opt)
		require.ErrorContains(t, err, tc.want)
		require.Less(t, time.Since(start), 2*time.Second, tc.want)
	}
}

// At 64 nodes the focus is downsized to a latency-bound size: utilisation is that of the
// recorded run (bytes / capacity × its time), written with two digits below 1% rather than 0%,
// and a line says why it is low.
func TestFocusUtilisationDownsized(t *testing.T) {
	r, page := buildHTML(t, Options{Planner: testPlanner(t, "", 64), Funcs: []coll.Func{coll.AllReduce}, Sizes: []int64{1 << 20}, Sections: []string{"time"}})
	f := r.Focus
	require.NotZero(t, f.Asked)
	require.Less(t, f.Size, f.Asked)
	T := f.TimeUs * 1e-6
	for _, l := range f.Links {
		require.Greater(t, l.Util, 0.0, l.Name)
		require.InDelta(t, l.Bytes/(l.GBps*1e9*T), l.Util, 1e-3*l.Util+1e-9, l.Name)
	}
	busiest := page[strings.Index(page, `<table id="busiest">`):]
	busiest = busiest[:strings.Index(busiest, "</table>")]
	require.NotContains(t, busiest, "<td>0%</td>")
	cells := regexp.MustCompile(`<td>([0-9.]+)%</td>`).FindAllStringSubmatch(busiest, -1)
	require.NotEmpty(t, cells)
	for _, c := range cells {
		v, err := strconv.ParseFloat(c[1], 64)
		require.NoError(t, err)
		require.Greater(t, v, 0.0)
	}
	if f.Links[0].Util < 0.01 {
		require.Contains(t, page, `id="focus-idle"`)
	}
}

// One colour per collective, solid for the simulation and dashed for measurements; the legend
// right of the plot area, inside the drawing.
func TestBusbwColoursAndLegend(t *testing.T) {
	var series []Series
	for _, c := range []string{"all_reduce", "all_gather", "reduce_scatter"} {
		series = append(series, Series{Name: "sim " + c, Coll: c, Points: []BWPoint{{Bytes: 1024, BusBw: 1}, {Bytes: 1 << 30, BusBw: 400}}})
	}
	for _, c := range []string{"all_gather", "all_reduce"} {
		series = append(series, Series{Name: "measured " + c + " [a-rather-long-tag-name]", Coll: c, Measured: true, Points: []BWPoint{{Bytes: 1024, BusBw: 1}, {Bytes: 1 << 30, BusBw: 390}}})
	}
	var b strings.Builder
	busbwSVG(&b, series)
	svg := b.String()
	line := regexp.MustCompile(`<g class="series" data-series="([^"]+)"><polyline fill="none" stroke="([^"]+)" stroke-width="2"( stroke-dasharray="[^"]+")?`)
	colour := map[string]string{}
	for _, m := range line.FindAllStringSubmatch(svg, -1) {
		colour[m[1]] = m[2]
		require.Equal(t, strings.HasPrefix(m[1], "measured"), m[3] != "", "dashed iff measured: %s", m[1])
	}
	require.Len(t, colour, 5)
	require.Equal(t, colour["sim all_reduce"], colour["measured all_reduce [a-rather-long-tag-name]"])
	require.Equal(t, colour["sim all_gather"], colour["measured all_gather [a-rather-long-tag-name]"])
	require.NotEqual(t, colour["sim all_reduce"], colour["sim all_gather"])
	require.NotEqual(t, colour["sim all_gather"], colour["sim reduce_scatter"])

	num := func(re, s string) []float64 {
		var out []float64
		for _, m := range regexp.MustCompile(re).FindAllStringSubmatch(s, -1) {
			v, err := strconv.ParseFloat(m[1], 64)
			require.NoError(t, err)
			out = append(out, v)
		}
		return out
	}
	W := num(`<svg id="busbw"[^>]* width="([0-9.]+)"`, svg)[0]
	H := num(`<svg id="busbw"[^>]* height="([0-9.]+)"`, svg)[0]
	right := 0.0
	for _, x := range append(num(`<circle class="pt" cx="([0-9.]+)"`, svg), num(`<line class="grid" x1="[0-9.]+" x2="([0-9.]+)"`, svg)...) {
		right = max(right, x)
	}
	keys := regexp.MustCompile(`<g class="key"[^>]*><line x1="([0-9.]+)" x2="[0-9.]+" y1="([0-9.]+)"`).FindAllStringSubmatch(svg, -1)
	require.Len(t, keys, 5)
	for _, k := range keys {
		x, _ := strconv.ParseFloat(k[1], 64)
		y, _ := strconv.ParseFloat(k[2], 64)
		require.Greater(t, x, right+5, "legend over the data")
		require.Less(t, y, H)
	}
	longest := float64(len("measured all_gather [a-rather-long-tag-name]"))
	require.GreaterOrEqual(t, W, right+46+6*longest, "legend text runs off the drawing")
}

// Many series: the drawing grows to hold the legend.
func TestBusbwLegendGrows(t *testing.T) {
	var series []Series
	for i := 0; i < 30; i++ {
		series = append(series, Series{Name: "measured all_reduce [" + strconv.Itoa(i) + "]", Coll: "all_reduce", Measured: true, Points: []BWPoint{{Bytes: 1024, BusBw: 1}}})
	}
	var b strings.Builder
	busbwSVG(&b, series)
	m := regexp.MustCompile(`<svg id="busbw"[^>]* height="([0-9.]+)"`).FindStringSubmatch(b.String())
	h, _ := strconv.ParseFloat(m[1], 64)
	require.GreaterOrEqual(t, h, 15+10+30*18.0)
}

// The collective of an nccl-tests log is the one its command line names.
func TestMeasuredCollFromLog(t *testing.T) {
	body := "#  Rank  0 Group  0 Pid 1 on h device 0\n#  Rank  1 Group  0 Pid 2 on h device 1\n     1024   128  float  none  -1  12.0  0.09  0.04  0  11.0  0.09  0.04  0\n"
	simccl := "# simccl run: dgx, 1 node(s) x 2 GPUs = 2 ranks, 1 channels\n" +
		"1024 256 float sum -1 10.0 0.10 0.10 N/A 10.0 0.10 0.10 N/A Ring LL 1 all_reduce sim\n" +
		"1024 128 float none -1 9.0 0.11 0.06 N/A 9.0 0.11 0.06 N/A Ring LL 1 all_gather sim\n"
	for _, tc := range []struct {
		name, log, coll string
		want            []string // the collective of each row
		err             string
	}{
		{"command line", "# ./build/all_gather_perf -b 1K -e 1K -g 2\n" + body, "", []string{"all_gather"}, ""},
		{"mpirun line", "mpirun -np 2 /opt/nccl-tests/build/all_gather_perf_mpi -b 1K\n" + body, "", []string{"all_gather"}, ""},
		{"agrees", "$ all_gather_perf -b 1K\n" + body, "all_gather", []string{"all_gather"}, ""},
		{"disagrees", "$ all_gather_perf -b 1K\n" + body, "all_reduce", nil, "all_gather_perf's output, not all_reduce's"},
		{"named by -c only", body, "all_gather", []string{"all_gather"}, ""},
		{"unnamed", body, "", nil, "does not name its collective"},
		{"not simulated", "$ ./hypercube_perf\n" + body, "", nil, "hypercube_perf"},
		{"two logs", "# ./all_reduce_perf\n" + body + "# ./all_gather_perf\n" + body, "", []string{"all_reduce", "all_gather"}, ""},
		{"file names are not binaries", "# results for nccl_perf.csv\n" + body, "", nil, "does not name"},
		{"simccl table", simccl, "", []string{"all_reduce", "all_gather"}, ""},
		{"simccl table, one coll", simccl, "all_gather", []string{"all_gather"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := ReadMeasured([]byte(tc.log), "log.txt", tc.coll)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, r := range rows {
				got = append(got, r.Coll)
				require.Equal(t, 2, r.World)
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// A size budget: the sizes of the sweep whose simulation would pass it are not simulated, and a
// line says so in the tuner and busbw sections; the focus's compact totals at such a size too.
func TestSizeBudget(t *testing.T) {
	r, page := buildHTML(t, Options{Planner: testPlanner(t, "", 4), PlannerAt: func(n int) (*planner.Planner, error) { return testPlanner(t, "", n), nil },
		Funcs: []coll.Func{coll.AllReduce}, Sizes: []int64{1 << 10, 4 << 10, 1 << 20, 16 << 20}, SizeBudget: time.Nanosecond, FocusSize: 16 << 20, FocusMaxSteps: 2000})
	require.Len(t, r.BusBW, 1)
	require.Len(t, r.BusBW[0].Points, 2, "the two first sizes are simulated, which the others are extrapolated from")
	require.Len(t, r.Cut, 1)
	require.Contains(t, r.Cut[0], "all_reduce from 1M up not simulated at 4 node(s): 4K took")
	require.Contains(t, page, `id="cut-busbw-0"`)
	require.Contains(t, page, `id="cut-tuner-0"`)
	require.Nil(t, r.Focus.Compact)
	require.Contains(t, strings.Join(r.Notes, "\n"), "no link totals at 16M either")

	// No bound: every size.
	r, _ = buildHTML(t, Options{Planner: testPlanner(t, "", 4), Funcs: []coll.Func{coll.AllReduce}, Sizes: []int64{1 << 10, 1 << 20}, SizeBudget: -1, Sections: []string{"busbw"}})
	require.Len(t, r.BusBW[0].Points, 2)
	require.Empty(t, r.Cut)
}
