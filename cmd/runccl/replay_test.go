package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/simccl/simccl/intercept"
)

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

type replayJSON struct {
	Transport string `json:"transport"`
	Ranks     int    `json:"ranks"`
	Comms     []struct {
		ID     string `json:"comm"`
		NRanks int    `json:"nranks"`
	} `json:"comms"`
	Launches []struct {
		Key    string  `json:"key"`
		Ops    string  `json:"ops"`
		Calls  int     `json:"calls"`
		Ranks  int     `json:"ranks"`
		TimeUs float64 `json:"time_us"`
	} `json:"launches"`
	ByOp []struct {
		Ops      string  `json:"ops"`
		Launches int     `json:"launches"`
		TimeUs   float64 `json:"time_us"`
	} `json:"by_op"`
	TotalUs float64 `json:"total_us"`
	Check   bool    `json:"check"`
	Checked int64   `json:"checked"`
	Wrong   int64   `json:"wrong"`
	Slowest []struct {
		TimeUs float64 `json:"time_us"`
	} `json:"slowest"`
}

func runReplayJSON(t *testing.T, args ...string) *replayJSON {
	t.Helper()
	var out, errb bytes.Buffer
	code := mainRun(append([]string{"replay", "--json"}, args...), &out, &errb, noenv)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res replayJSON
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return &res
}

// The committed 2×H200 trace of torch_mixed.py (300 calls: all_reduce, all_gather,
// reduce_scatter, broadcast, send/recv, batch_isend_irecv; 4 KiB–128 MiB), executed for real on
// both in-process transports with every element checked.
func TestReplayH200Trace(t *testing.T) {
	if raceEnabled() {
		t.Skip("6e9 checked elements take about 5 minutes per transport under -race; TestReplayGroupsAndRoots runs the same code")
	}
	files, err := filepath.Glob("../../testdata/intercept/h200x2/trace/simccl-trace.rank*.jsonl")
	if err != nil || len(files) != 2 {
		t.Fatalf("trace files %v: %v", files, err)
	}
	// The whole trace moves 24 GB (a minute and a half per transport on 2 cores): with SIMCCL_LONG=1
	// (make test-long) it runs as recorded on both transports; otherwise on shared memory with every
	// count divided by 64, the same 300 launches.
	long := os.Getenv("SIMCCL_LONG") != ""
	transports, div, wantChecked := []string{"shm", "inproc"}, int64(1), int64(6036371456)
	if !long {
		transports, div, wantChecked = []string{"shm"}, 64, 0
		files = shrinkTraces(t, files, div)
	}
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			res := runReplayJSON(t, append([]string{"--check", "--transport", tr, "--top", "5"}, files...)...)
			if res.Ranks != 2 || len(res.Comms) != 1 || res.Comms[0].NRanks != 2 {
				t.Fatalf("ranks %d comms %+v", res.Ranks, res.Comms)
			}
			// Per rank: 50 of each collective, 50 torch send/recv (a Send on rank 0, a Recv on
			// rank 1) and 50 batched exchanges (Send+Recv in one group on each rank).
			if len(res.Launches) != 300 || res.Launches[0].Key != "udf18ccee6a13bbcb#c0" {
				t.Fatalf("%d launches, want 300", len(res.Launches))
			}
			kinds := map[string]int{}
			sum := 0.0
			for _, o := range res.ByOp {
				kinds[o.Ops] = o.Launches
				sum += o.TimeUs
			}
			want := map[string]int{"AllReduce": 50, "AllGather": 50, "ReduceScatter": 50, "Broadcast": 50, "Send+Recv": 100}
			for k, n := range want {
				if kinds[k] != n {
					t.Errorf("%s: %d launches, want %d (%v)", k, kinds[k], n, kinds)
				}
			}
			for _, l := range res.Launches {
				if l.Ranks != 2 || l.TimeUs <= 0 {
					t.Fatalf("launch %+v", l)
				}
			}
			if res.TotalUs <= 0 || sum < res.TotalUs*0.999 || sum > res.TotalUs*1.001 {
				t.Errorf("total %.1f us, by op %.1f us", res.TotalUs, sum)
			}
			if len(res.Slowest) != 5 || res.Slowest[0].TimeUs < res.Slowest[4].TimeUs {
				t.Errorf("slowest %+v", res.Slowest)
			}
			// Every element of every receive buffer: 6,036,371,456 elements in all as recorded; with
			// the counts divided, at least the divided total.
			if !res.Check || res.Wrong != 0 || (wantChecked != 0 && res.Checked != wantChecked) ||
				res.Checked < 6036371456/div {
				t.Fatalf("checked %d elements (counts divided by %d), %d wrong", res.Checked, div, res.Wrong)
			}
			t.Logf("%s: %.0f us of communication over %d launches", tr, res.TotalUs, len(res.Launches))
		})
	}
}

// shrinkTraces writes copies of the rank traces with every count divided by div (at least 1).
func shrinkTraces(t *testing.T, files []string, div int64) []string {
	t.Helper()
	var perRank [][]intercept.Record
	for _, f := range files {
		recs, err := intercept.ReadTraceFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i := range recs {
			recs[i].Count = max(1, recs[i].Count/div)
		}
		perRank = append(perRank, recs)
	}
	return writeTraces(t, perRank)
}

// rec builds one trace record.
func rec(seq int64, comm string, rank, n int, op string, count int64, dtype, redop string, root int, gid int64) intercept.Record {
	r := intercept.Record{Seq: seq, TimeNs: 1000 + seq, Rank: rank, NRanks: n, Comm: comm, Op: op, Count: count, Dtype: dtype, RedOp: redop, Root: root}
	if gid != 0 {
		r.Group, r.GID = 1, gid
	}
	return r
}

func writeTraces(t *testing.T, perRank [][]intercept.Record) []string {
	t.Helper()
	dir := t.TempDir()
	var files []string
	for r, recs := range perRank {
		var b []byte
		for i := range recs {
			b = intercept.AppendRecord(b, &recs[i])
		}
		f := filepath.Join(dir, fmt.Sprintf("simccl-trace.rank%d.jsonl", r))
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// mixedTrace is a 4-rank program: grouped send/recv exchanges in both directions around the
// ring, broadcasts and reduces from every root with every reduction, all-reduce average on
// integers and floats, all-gather, reduce-scatter, all-to-all, a group mixing collectives with
// send/recv, and a split into two 2-rank communicators ({0,2} and {1,3}) used alone and in a group
// that spans it and the world communicator. Counts are odd and small to large; types vary.
func mixedTrace() [][]intercept.Record {
	const n = 4
	const world = "uworld"
	out := make([][]intercept.Record, n)
	for r := 0; r < n; r++ {
		var seq int64
		var gid int64
		add := func(x intercept.Record) {
			x.Seq = seq
			x.TimeNs = 1000 + seq
			seq++
			out[r] = append(out[r], x)
		}
		group := func() int64 { gid++; return gid }
		sub := fmt.Sprintf("uworld/s0c%d", r%2)
		add(intercept.Record{Rank: r, NRanks: n, Comm: world, Op: intercept.OpCommInit, Root: -1})
		add(intercept.Record{Rank: r / 2, NRanks: 2, Comm: sub, Op: intercept.OpCommSplit, Root: -1, Parent: world, Color: r % 2})
		// Ring exchange in both directions, one group per step, three sizes.
		for _, cnt := range []int64{1, 4099, 300001} {
			g := group()
			add(rec(0, world, r, n, intercept.OpSend, cnt, "float", "", (r+1)%n, g))
			add(rec(0, world, r, n, intercept.OpSend, cnt, "float", "", (r+n-1)%n, g))
			add(rec(0, world, r, n, intercept.OpRecv, cnt, "float", "", (r+n-1)%n, g))
			add(rec(0, world, r, n, intercept.OpRecv, cnt, "float", "", (r+1)%n, g))
		}
		// Several messages to one peer in one group: matched in order.
		g := group()
		for _, cnt := range []int64{7, 70001, 13} {
			if r%2 == 0 {
				add(rec(0, world, r, n, intercept.OpSend, cnt, "bfloat16", "", r+1, g))
			} else {
				add(rec(0, world, r, n, intercept.OpRecv, cnt, "bfloat16", "", r-1, g))
			}
		}
		// Ungrouped send/recv from 3 to 0 (torch's dist.send / dist.recv).
		if r == 3 {
			add(rec(0, world, r, n, intercept.OpSend, 5000, "int32", "", 0, 0))
		}
		if r == 0 {
			add(rec(0, world, r, n, intercept.OpRecv, 5000, "int32", "", 3, 0))
		}
		for root := 0; root < n; root++ {
			add(rec(0, world, r, n, intercept.OpBroadcast, 100003+int64(root), []string{"float", "half", "int8", "double"}[root], "", root, 0))
		}
		for i, op := range []string{"sum", "prod", "max", "min", "avg"} {
			root := (i + 1) % n
			add(rec(0, world, r, n, intercept.OpReduce, 65537, []string{"float", "int32", "bfloat16", "half", "float"}[i], op, root, 0))
		}
		add(rec(0, world, r, n, intercept.OpAllReduce, 1<<20+3, "float", "avg", -1, 0))
		add(rec(0, world, r, n, intercept.OpAllReduce, 999, "int32", "avg", -1, 0))
		add(rec(0, world, r, n, intercept.OpAllReduce, 4097, "f8e4m3", "max", -1, 0))
		add(rec(0, world, r, n, intercept.OpAllGather, 12345, "bfloat16", "", -1, 0))
		add(rec(0, world, r, n, intercept.OpReduceScatter, 54321, "half", "sum", -1, 0))
		add(rec(0, world, r, n, intercept.OpAllToAll, 777, "uint8", "", -1, 0))
		// A group of collectives and send/recv on the world communicator.
		g = group()
		add(rec(0, world, r, n, intercept.OpAllReduce, 100000, "float", "sum", -1, g))
		add(rec(0, world, r, n, intercept.OpBroadcast, 3333, "int64", "", 2, g))
		add(rec(0, world, r, n, intercept.OpSend, 2048, "float", "", (r+2)%n, g))
		add(rec(0, world, r, n, intercept.OpRecv, 2048, "float", "", (r+2)%n, g))
		// The split communicators alone, then in a group with the world communicator.
		add(rec(0, sub, r/2, 2, intercept.OpAllReduce, 200001, "float", "sum", -1, 0))
		add(rec(0, sub, r/2, 2, intercept.OpReduce, 1001, "double", "max", 1, 0))
		g = group()
		add(rec(0, sub, r/2, 2, intercept.OpBroadcast, 4321, "float", "", 1, g))
		add(rec(0, world, r, n, intercept.OpAllGather, 1000, "int32", "", -1, g))
		add(rec(0, sub, r/2, 2, intercept.OpSend, 99, "half", "", 1-r/2, g))
		add(rec(0, sub, r/2, 2, intercept.OpRecv, 99, "half", "", 1-r/2, g))
		add(intercept.Record{Rank: r / 2, NRanks: 2, Comm: sub, Op: intercept.OpCommDestroy, Root: -1})
		add(intercept.Record{Rank: r, NRanks: n, Comm: world, Op: intercept.OpCommDestroy, Root: -1})
	}
	return out
}

func TestReplayGroupsAndRoots(t *testing.T) {
	files := writeTraces(t, mixedTrace())
	res := runReplayJSON(t, append([]string{"--check", "--timeout", "20s"}, files...)...)
	if res.Ranks != 4 || len(res.Comms) != 3 {
		t.Fatalf("ranks %d, comms %+v", res.Ranks, res.Comms)
	}
	if res.Wrong != 0 || res.Checked == 0 {
		t.Fatalf("checked %d, wrong %d", res.Checked, res.Wrong)
	}
	// Launches (the launches of different ranks that share a call are one): on the world
	// communicator 3 ring exchanges, 2 multi-message groups (0→1 and 2→3), 1 ungrouped send/recv
	// pair, 4 broadcasts, 5 reduces, 6 single collectives, 1 mixed group; on each split
	// communicator 2 single calls; the group spanning both is one launch of all 4 ranks, named
	// after rank 0's first call in it (on split communicator s0c0).
	byKey := map[string]int{}
	for _, l := range res.Launches {
		byKey[strings.SplitN(l.Key, "#", 2)[0]]++
	}
	if len(res.Launches) != 27 || byKey["uworld"] != 22 || byKey["uworld/s0c0"] != 3 || byKey["uworld/s0c1"] != 2 {
		t.Fatalf("%d launches, per communicator %v", len(res.Launches), byKey)
	}
	want := map[string]string{
		"uworld#p0>1.0":  "4 ranks 16 calls Send+Recv",                     // first ring exchange
		"uworld#p0>1.3":  "2 ranks 6 calls Send+Recv",                      // three messages 0→1 in one group
		"uworld#p3>0.3":  "2 ranks 2 calls Send+Recv",                      // ungrouped send 3→0 (after three ring messages), recv on 0
		"uworld#c4":      "4 ranks 4 calls Reduce",                         // first reduce (root 1)
		"uworld#c15":     "4 ranks 16 calls AllReduce+Broadcast+Send+Recv", // mixed group
		"uworld/s0c0#c2": "4 ranks 16 calls Broadcast+AllGather+Send+Recv", // spans communicators
	}
	for _, l := range res.Launches {
		if w, ok := want[l.Key]; ok {
			if got := fmt.Sprintf("%d ranks %d calls %s", l.Ranks, l.Calls, l.Ops); got != w {
				t.Errorf("launch %s: %s, want %s", l.Key, got, w)
			}
			delete(want, l.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("launches missing: %v", want)
	}
	if !testing.Short() {
		for _, tr := range []string{"shm", "tcp"} {
			res := runReplayJSON(t, append([]string{"--check", "--transport", tr, "--top", "0"}, files...)...)
			if res.Wrong != 0 || res.Checked == 0 {
				t.Fatalf("%s: checked %d, wrong %d", tr, res.Checked, res.Wrong)
			}
		}
	}
}

// One process per rank trace: the test builds runccl and runs it.
func TestReplayProcs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds runccl and starts processes")
	}
	bin := buildRunccl(t)
	files := writeTraces(t, mixedTrace())
	cmd := exec.Command(bin, append([]string{"replay", "--procs", "--check", "--json"}, files...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var res replayJSON
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if res.Ranks != 4 || res.Wrong != 0 || res.Checked == 0 || len(res.Launches) != 27 || !strings.Contains(res.Transport, "shared memory") {
		t.Fatalf("ranks %d, launches %d, checked %d, wrong %d, transport %q", res.Ranks, len(res.Launches), res.Checked, res.Wrong, res.Transport)
	}
	// A bad trace fails in the parent, before any process starts.
	two := mixedTrace()
	two[1][5].Count++
	cmd = exec.Command(bin, append([]string{"replay", "--procs"}, writeTraces(t, two)...)...)
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "rank1.jsonl: seq 5") {
		t.Fatalf("mismatched trace under --procs: %v\n%s", err, b)
	}
}

func TestReplayBadTraces(t *testing.T) {
	pair := func(n0, n1 int64) [][]intercept.Record {
		return [][]intercept.Record{
			{rec(0, "c", 0, 2, intercept.OpAllReduce, n0, "float", "sum", -1, 0), rec(1, "c", 0, 2, intercept.OpBroadcast, 8, "float", "", 1, 0)},
			{rec(0, "c", 1, 2, intercept.OpAllReduce, n1, "float", "sum", -1, 0), rec(1, "c", 1, 2, intercept.OpBroadcast, 8, "float", "", 1, 0)},
		}
	}
	cases := []struct {
		name  string
		ranks func() [][]intercept.Record
		raw   map[int]string // replaces a rank file's content
		drop  int            // rank file left out (0: none)
		args  []string
		want  []string // in stderr
	}{
		{name: "missing rank file", ranks: func() [][]intercept.Record { return pair(8, 8) }, drop: 1,
			want: []string{"no trace holds rank 1", "missing rank file", "rank 0 in", "rank0.jsonl"}},
		{name: "size differs", ranks: func() [][]intercept.Record {
			p := pair(8, 8)
			p[1][1].NRanks, p[1][1].Rank = 3, 1
			return p
		}, want: []string{"communicator c has 2 ranks at", "but 3 at", "rank1.jsonl: seq 1 (Broadcast"}},
		{name: "unknown op", ranks: func() [][]intercept.Record {
			p := pair(8, 8)
			p[0][1].Op = "AllScatter"
			return p
		}, want: []string{"rank0.jsonl: seq 1 (AllScatter", `unknown op "AllScatter"`}},
		{name: "count differs", ranks: func() [][]intercept.Record { return pair(8, 16) },
			want: []string{"collective 0 of communicator c differs", "rank0.jsonl: seq 0 (AllReduce 8 float sum", "rank1.jsonl: seq 0 (AllReduce 16 float sum"}},
		{name: "root differs", ranks: func() [][]intercept.Record {
			p := pair(8, 8)
			p[1][1].Root = 0
			return p
		}, want: []string{"collective 1 of communicator c differs", "rank1.jsonl: seq 1 (Broadcast 8 float root 0"}},
		{name: "type differs", ranks: func() [][]intercept.Record {
			p := pair(8, 8)
			p[1][0].Dtype = "half"
			return p
		}, want: []string{"differs", "AllReduce 8 half sum"}},
		{name: "one collective more", ranks: func() [][]intercept.Record {
			p := pair(8, 8)
			p[1] = append(p[1], rec(2, "c", 1, 2, intercept.OpAllGather, 4, "int8", "", -1, 0))
			return p
		}, want: []string{"rank 0 issues 2 collectives, rank 1 issues 3", "first unmatched: ", "rank1.jsonl: seq 2 (AllGather"}},
		{name: "send without recv", ranks: func() [][]intercept.Record {
			p := pair(8, 8)
			p[0] = append(p[0], rec(2, "c", 0, 2, intercept.OpSend, 4, "float", "", 1, 0))
			return p
		}, want: []string{"rank0.jsonl: seq 2 (Send 4 float to 1", "no matching Recv on rank 1"}},
		{name: "recv without send", ranks: func() [][]intercept.Record {
			p := pair(8, 8)
			p[0] = append(p[0], rec(2, "c", 0, 2, intercept.OpRecv, 4, "float", "", 1, 0))
			return p
		}, want: []string{"rank0.jsonl: seq 2 (Recv 4 float from 1", "no matching Send on rank 1"}},
		{name: "message sizes differ", ranks: func() [][]intercept.Record {
			p := pair(8, 8)
			p[0] = append(p[0], rec(2, "c", 0, 2, intercept.OpSend, 4, "float", "", 1, 0))
			p[1] = append(p[1], rec(2, "c", 1, 2, intercept.OpRecv, 5, "float", "", 0, 0))
			return p
		}, want: []string{"message 0 from rank 0 to rank 1 of communicator c", "Send 4 float", "does not match", "Recv 5 float"}},
		{name: "rank in two files", ranks: func() [][]intercept.Record {
			p := pair(8, 8)
			for i := range p[1] {
				p[1][i].Rank = 0
			}
			return p
		}, want: []string{"rank 0 of communicator c is in two traces", "rank0.jsonl", "rank1.jsonl"}},
		{name: "two ranks in one file", ranks: func() [][]intercept.Record {
			p := pair(8, 8)
			p[0] = append(p[0], p[1]...)
			return p[:1]
		}, want: []string{"rank0.jsonl: seq 0 (AllReduce", "holds ranks 0 and 1 of communicator c"}},
		{name: "malformed line", ranks: func() [][]intercept.Record { return pair(8, 8) }, raw: map[int]string{1: "{\"seq\":0,\"rank\":1,\"nranks\":2,\"comm\":\"c\",\"op\":\"AllReduce\",\"count\":8,\"dtype\":\"float\",\"root\":-1,\"group\":0}\n{\"seq\":1,\"rank\":1,\n"},
			want: []string{"rank1.jsonl:2:"}},
		{name: "unknown type", ranks: func() [][]intercept.Record {
			p := pair(8, 8)
			p[0][0].Dtype = "float128"
			return p
		}, want: []string{"rank0.jsonl:1:", "float128"}},
		{name: "neither trace nor log", ranks: func() [][]intercept.Record { return pair(8, 8) }, raw: map[int]string{0: "hello\nworld\n"},
			want: []string{"rank0.jsonl: neither a trace", "2 lines read"}},
		{name: "over --max-memory", ranks: func() [][]intercept.Record { return pair(1<<20, 1<<20) }, args: []string{"--max-memory", "12M"},
			want: []string{"needs 16M of buffers in one process, over --max-memory 12M", "needs 8M: ", "rank1.jsonl: seq 0 (AllReduce 1048576 float sum"}},
		{name: "absurd count", ranks: func() [][]intercept.Record { return pair(1<<60, 1<<60) },
			want: []string{"rank0.jsonl: seq 0 (AllReduce 1152921504606846976 float sum", "cannot be allocated"}},
		{name: "empty trace", ranks: func() [][]intercept.Record {
			return [][]intercept.Record{{{Rank: 0, NRanks: 1, Comm: "c", Op: intercept.OpCommInit, Root: -1}}}
		}, want: []string{"no collective or point-to-point call"}},
		// Consistent call lists that deadlock when run (rank 1 receives before the all-reduce that
		// rank 0 issues before its send): the comm engine's timeout ends it, naming the call.
		{name: "deadlock ends by timeout", ranks: func() [][]intercept.Record {
			return [][]intercept.Record{
				{rec(0, "c", 0, 2, intercept.OpAllReduce, 1<<16, "float", "sum", -1, 0), rec(1, "c", 0, 2, intercept.OpSend, 1<<20, "float", "", 1, 0)},
				{rec(0, "c", 1, 2, intercept.OpRecv, 1<<20, "float", "", 0, 0), rec(1, "c", 1, 2, intercept.OpAllReduce, 1<<16, "float", "sum", -1, 0)},
			}
		}, args: []string{"--timeout", "1s"}, want: []string{"replay: ", "jsonl: seq", "comm c rank"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := writeTraces(t, tc.ranks())
			for r, s := range tc.raw {
				if err := os.WriteFile(files[r], []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.drop > 0 {
				files = append(files[:tc.drop], files[tc.drop+1:]...)
			}
			var out, errb bytes.Buffer
			code := mainRun(append(append([]string{"replay"}, tc.args...), files...), &out, &errb, noenv)
			if code != 1 {
				t.Fatalf("exit %d, want 1; stderr: %s", code, errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb.String())
				}
			}
		})
	}
	for _, args := range [][]string{{}, {"--transport", "ib", "x"}, {"--algo", "bogus", "x"}, {"--procs", "--transport", "inproc", "x"}, {"--top", "-1", "x"}, {"--nosuch", "x"}, {"--max-memory", "lots", "x"}, {"--scale", "-2", "x"}} {
		var out, errb bytes.Buffer
		if code := mainRun(append([]string{"replay"}, args...), &out, &errb, noenv); code != 2 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := mainRun([]string{"replay", "/nonexistent/simccl-trace.rank0.jsonl"}, &out, &errb, noenv); code != 1 || !strings.Contains(errb.String(), "/nonexistent/simccl-trace.rank0.jsonl") {
		t.Errorf("missing file: exit %d, %s", code, errb.String())
	}
}

// --scale 8 runs the 4-rank program as 8 ranks: one 8-rank world communicator, the split
// communicators and the send/recv patterns copied per block of 4.
func TestReplayScale(t *testing.T) {
	files := writeTraces(t, mixedTrace())
	res := runReplayJSON(t, append([]string{"--check", "--scale", "8", "--top", "0"}, files...)...)
	if res.Ranks != 8 || len(res.Comms) != 5 || res.Wrong != 0 || res.Checked == 0 {
		t.Fatalf("ranks %d, comms %+v, checked %d, wrong %d", res.Ranks, res.Comms, res.Checked, res.Wrong)
	}
	ranks := map[string]int{}
	for _, c := range res.Comms {
		ranks[c.ID] = c.NRanks
	}
	if ranks["uworld"] != 8 || ranks["uworld/s0c0@0"] != 2 || ranks["uworld/s0c1@1"] != 2 {
		t.Fatalf("communicators %v", ranks)
	}
	// World collectives are one launch of 8 ranks; exchanges are per copy; split communicators
	// per copy; the groups with a world collective join everything.
	if len(res.Launches) != 37 {
		t.Fatalf("%d launches, want 37", len(res.Launches))
	}
	for _, l := range res.Launches {
		if l.Key == "uworld#c0" && l.Ranks != 8 || l.Key == "uworld#p4>5.0" && (l.Ranks != 4 || l.Calls != 16) {
			t.Errorf("launch %+v", l)
		}
	}
	var out, errb bytes.Buffer
	if code := mainRun(append([]string{"replay", "--scale", "6"}, files...), &out, &errb, noenv); code != 1 || !strings.Contains(errb.String(), "want a multiple of 4") {
		t.Errorf("--scale 6: exit %d, %s", code, errb.String())
	}
}

func TestReplayTable(t *testing.T) {
	files := writeTraces(t, mixedTrace())
	var out, errb bytes.Buffer
	if code := mainRun(append([]string{"replay", "--check", "--calls", "--top", "3"}, files...), &out, &errb, noenv); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s := out.String()
	for _, want := range []string{
		"# runccl replay: 4 rank traces, goroutine ranks, transport auto (in-process), 3 communicators, 27 launches",
		"#   communicator uworld: 4 ranks, ", "#   communicator uworld/s0c1: 2 ranks, 10 calls",
		"ops  launches", "Send+Recv", "# total communication time: ", "# slowest 3 launches",
		"# every launch, in order",
		"elements compared, 0 wrong",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	rows := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) == 5 && strings.Contains(f[0], "#") && f[0][0] != '#' {
			rows[f[0]] = f[1] + " " + f[2] + " " + f[3]
		}
	}
	for key, want := range map[string]string{
		"uworld#p0>1.2": "Send+Recv 16 4800016", "uworld#c9": "AllReduce 4 4194316",
		"uworld/s0c0#c2": "Broadcast+AllGather+Send+Recv 16 33680", "uworld/s0c1#c1": "Reduce 2 8008",
	} {
		if rows[key] != want {
			t.Errorf("launch %s: %q, want %q", key, rows[key], want)
		}
	}
	if len(rows) != 27 {
		t.Errorf("%d launches listed:\n%s", len(rows), s)
	}
}
