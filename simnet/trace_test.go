package simnet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/stretchr/testify/require"
)

// traceNesting checks a Chrome trace the way Perfetto's JSON importer stacks complete events:
// for each (pid, tid), the "X" slices sorted by start (longest first on a tie) must each end
// before the next starts or contain it entirely, with stack discipline. Times are read in
// nanoseconds as Perfetto reads them (ts×1000 rounded). It returns the number of slices and tracks.
func traceNesting(t *testing.T, data []byte) (slices, tracks int) {
	t.Helper()
	var doc struct {
		TraceEvents []struct {
			Ph  string   `json:"ph"`
			Pid int      `json:"pid"`
			Tid int      `json:"tid"`
			Ts  float64  `json:"ts"`
			Dur *float64 `json:"dur"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	type span struct{ start, end int64 }
	for _, conv := range []struct {
		name string
		ns   func(us float64) int64
	}{
		{"rounded", func(us float64) int64 { return int64(math.Round(us * 1000)) }},
	} {
		byTrack := map[[2]int][]span{}
		slices = 0
		for _, ev := range doc.TraceEvents {
			if ev.Ph != "X" {
				continue
			}
			require.NotNil(t, ev.Dur, "complete event without dur")
			s := conv.ns(ev.Ts)
			byTrack[[2]int{ev.Pid, ev.Tid}] = append(byTrack[[2]int{ev.Pid, ev.Tid}], span{s, s + conv.ns(*ev.Dur)})
			slices++
		}
		tracks = len(byTrack)
		bad, pairs := 0, 0
		var example string
		for k, sp := range byTrack {
			sort.Slice(sp, func(a, b int) bool {
				if sp[a].start != sp[b].start {
					return sp[a].start < sp[b].start
				}
				return sp[a].end > sp[b].end
			})
			var stack []int64 // ends of the open slices
			for _, s := range sp {
				for len(stack) > 0 && stack[len(stack)-1] <= s.start {
					stack = stack[:len(stack)-1]
				}
				pairs++
				if len(stack) > 0 && s.end > stack[len(stack)-1] {
					bad++
					if example == "" {
						example = fmt.Sprintf("pid %d tid %d: [%d, %d] ns starts inside a slice ending at %d ns and ends after it", k[0], k[1], s.start, s.end, stack[len(stack)-1])
					}
					continue
				}
				stack = append(stack, s.end)
			}
		}
		require.Zero(t, bad, "%s times: %d of %d slices overlap without nesting; e.g. %s", conv.name, bad, pairs, example)
	}
	return slices, tracks
}

// traceFlows checks the trace's flow arrows as Perfetto binds them: every flow id has one start
// ("s") and one end ("f", "bp":"e"); the start lies within a "send" slice of its (pid, tid) and
// the end within a "recv" slice of its (pid, tid) — the slice each binds to — and the two slices
// are the same message (recv's peer is the sender's pid). It returns the number of flows.
func traceFlows(t *testing.T, data []byte) int {
	t.Helper()
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Pid  int            `json:"pid"`
			Tid  int            `json:"tid"`
			Ts   float64        `json:"ts"`
			Dur  *float64       `json:"dur"`
			ID   int64          `json:"id"`
			Bp   string         `json:"bp"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	ns := func(us float64) int64 { return int64(math.Round(us * 1000)) }
	type slice struct {
		start, end int64
		name       string
		peer       int
	}
	byTrack := map[[2]int][]slice{}
	for _, ev := range doc.TraceEvents {
		if ev.Ph == "X" {
			peer, _ := ev.Args["peer"].(float64)
			byTrack[[2]int{ev.Pid, ev.Tid}] = append(byTrack[[2]int{ev.Pid, ev.Tid}], slice{ns(ev.Ts), ns(ev.Ts) + ns(*ev.Dur), ev.Name, int(peer)})
		}
	}
	enclosing := func(pid, tid int, ts int64, prefix string) *slice {
		for i, s := range byTrack[[2]int{pid, tid}] {
			if s.start <= ts && ts <= s.end && strings.HasPrefix(s.name, prefix) {
				return &byTrack[[2]int{pid, tid}][i]
			}
		}
		return nil
	}
	type end struct {
		pid, peer int
		ok        bool
	}
	starts, ends := map[int64]end{}, map[int64]end{}
	for _, ev := range doc.TraceEvents {
		switch ev.Ph {
		case "s":
			_, dup := starts[ev.ID]
			require.False(t, dup, "flow %d starts twice", ev.ID)
			s := enclosing(ev.Pid, ev.Tid, ns(ev.Ts), "send ")
			require.NotNil(t, s, "flow %d starts outside a send slice", ev.ID)
			starts[ev.ID] = end{ev.Pid, s.peer, true}
		case "f":
			require.Equal(t, "e", ev.Bp, "flow %d ends without binding to its enclosing slice", ev.ID)
			_, dup := ends[ev.ID]
			require.False(t, dup, "flow %d ends twice", ev.ID)
			r := enclosing(ev.Pid, ev.Tid, ns(ev.Ts), "recv ")
			require.NotNil(t, r, "flow %d ends outside a recv slice", ev.ID)
			ends[ev.ID] = end{ev.Pid, r.peer, true}
		}
	}
	require.Equal(t, len(starts), len(ends))
	for id, s := range starts {
		e := ends[id]
		require.True(t, e.ok, "flow %d has no end", id)
		require.Equal(t, s.peer, e.pid, "flow %d ends on rank %d, its send went to %d", id, e.pid, s.peer)
		require.Equal(t, s.pid, e.peer, "flow %d: the receive names sender %d, the send is on %d", id, e.peer, s.pid)
	}
	return len(starts)
}

// Every track of the trace nests as Perfetto requires, on one node and on clusters of 8 and 64
// nodes, for collectives whose messages overlap (pipelined ring slots, tree parents and children,
// all-to-all peers).
func TestTraceTracksNest(t *testing.T) {
	for _, tc := range []struct {
		nodes int
		f     coll.Func
		size  int64
	}{
		{1, coll.AllReduce, 1 << 20},
		{1, coll.AllToAll, 1 << 20},
		{8, coll.AllReduce, 1 << 20},
		{8, coll.AllGather, 64 << 10},
		{64, coll.AllReduce, 8 << 10},
	} {
		t.Run(fmt.Sprintf("%dnodes/%s/%d", tc.nodes, coll.TestName(tc.f), tc.size), func(t *testing.T) {
			m, _ := hgxMachine(t, tc.nodes)
			row, res, err := m.Run(tc.f, tc.size, coll.Float32, coll.Sum, RunOptions{Record: true})
			require.NoError(t, err)
			require.NotEmpty(t, res.Ops, "mode %s records no ops", row.Mode)
			// Two runs one after the other, as simccl run lays out its calls.
			runs := []Traced{{Label: "a", Ops: res.Ops, Names: res.LinkName}, {Label: "b", Ops: res.Ops, Offset: res.Time + Microsecond, Names: res.LinkName}}
			var buf bytes.Buffer
			require.NoError(t, WriteTrace(&buf, runs))
			slices, tracks := traceNesting(t, buf.Bytes())
			require.Equal(t, 4*len(res.Ops), slices, "a send and a receive slice per message of each run")
			require.Equal(t, 2*len(res.Ops), traceFlows(t, buf.Bytes()))
			t.Logf("%s, %d ops: %d slices on %d tracks, %d bytes", row.Mode, len(res.Ops), slices, tracks, buf.Len())
			var again bytes.Buffer
			require.NoError(t, WriteTrace(&again, runs))
			require.Equal(t, buf.Bytes(), again.Bytes(), "trace not deterministic")
		})
	}
}
