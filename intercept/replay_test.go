package intercept

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/simnet"
)

const h200 = "../testdata/intercept/h200x2/"

func readAll(t *testing.T, pattern string) []Record {
	t.Helper()
	files, _ := filepath.Glob(pattern)
	if len(files) == 0 {
		t.Fatalf("no file matches %s", pattern)
	}
	var recs []Record
	for _, f := range files {
		r, err := ReadTraceFile(f)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r...)
	}
	return recs
}

func machine(t *testing.T, name string, nodes int) *simnet.Machine {
	t.Helper()
	name, doc, err := planner.LoadTopology(name, planner.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.New(planner.Machine{Name: name, Doc: doc, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	m, err := simnet.NewMachine(p.System, nodes, nil, p, p.Settings.Release)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLaunchesGroups(t *testing.T) {
	rec := func(rank int, seq int64, op string, count int64, root int, gid int64) Record {
		r := Record{Seq: seq, Rank: rank, NRanks: 2, Comm: "c", Op: op, Count: count, Dtype: "float", Root: root, GID: gid, PID: 100 + rank}
		if gid != 0 {
			r.Group = 1
		}
		return r
	}
	recs := []Record{
		rec(0, 0, OpAllReduce, 10, -1, 0), rec(1, 0, OpAllReduce, 10, -1, 0),
		// rank 0 sends alone (its own group); rank 1 receives (its own group)
		rec(0, 1, OpSend, 7, 1, 1), rec(1, 1, OpRecv, 7, 0, 1),
		// a grouped exchange: both ranks send and receive
		rec(0, 2, OpSend, 3, 1, 2), rec(0, 3, OpRecv, 3, 1, 2),
		rec(1, 2, OpRecv, 3, 0, 2), rec(1, 3, OpSend, 3, 0, 2),
		// two collectives in one group
		rec(0, 4, OpAllGather, 5, -1, 3), rec(0, 5, OpReduceScatter, 5, -1, 3),
		rec(1, 4, OpAllGather, 5, -1, 3), rec(1, 5, OpReduceScatter, 5, -1, 3),
		{Seq: 9, Rank: 0, NRanks: 2, Comm: "c", Op: OpCommDestroy, Root: -1},
	}
	ls, err := Launches(recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 4 {
		t.Fatalf("%d launches, want 4: %+v", len(ls), ls)
	}
	if len(ls[0].Colls) != 1 || ls[0].Ops() != "AllReduce" {
		t.Errorf("launch 0: %+v", ls[0])
	}
	if want := []Transfer{{0, 1, 28}}; len(ls[1].P2P) != 1 || ls[1].P2P[0] != want[0] {
		t.Errorf("launch 1 transfers %+v, want %+v (one message, seen from both sides)", ls[1].P2P, want)
	}
	if len(ls[2].P2P) != 2 || ls[2].Ops() != "SendRecv" {
		t.Errorf("launch 2: %+v", ls[2])
	}
	if len(ls[3].Colls) != 2 || ls[3].Ops() != "AllGather+ReduceScatter" {
		t.Errorf("launch 3: %+v", ls[3])
	}

	m := machine(t, "h200x2-nvlink", 1)
	rep, err := Replay(ls, m, ReplayOptions{Links: true})
	if err != nil {
		t.Fatal(err)
	}
	ag, _, err := m.Run(funcMust(OpAllGather), 5*4*2, 7, 0, simnet.RunOptions{GPUTime: true})
	if err != nil {
		t.Fatal(err)
	}
	rs, _, err := m.Run(funcMust(OpReduceScatter), 5*4*2, 7, 0, simnet.RunOptions{GPUTime: true})
	if err != nil {
		t.Fatal(err)
	}
	// A launch is timed as its GPUs' time (no host floor: RunOptions.GPUTime); the plain calls
	// would take the floor (simnet.HostEnqueue each), which the launch must not.
	plain, _, err := m.Run(funcMust(OpAllGather), 5*4*2, 7, 0, simnet.RunOptions{})
	if err != nil || !plain.HostBound {
		t.Fatalf("the plain all-gather is not host-bound (%v): the check below would not tell", err)
	}
	want := ag.TimeUs + rs.TimeUs - float64(simnet.KernelLaunch)/float64(simnet.Microsecond)
	if got := rep.Launches[3].TimeUs; math.Abs(got-want) > 1e-6 {
		t.Errorf("grouped AllGather+ReduceScatter: %.3f us, want %.3f (one launch saved)", got, want)
	}
	sum := 0.0
	for _, l := range rep.Launches {
		sum += l.TimeUs
	}
	if math.Abs(sum-rep.TotalUs) > 1e-6 || len(rep.Links) == 0 {
		t.Errorf("total %.3f, launches sum to %.3f; %d links", rep.TotalUs, sum, len(rep.Links))
	}
}

func funcMust(op string) coll.Func {
	f, _ := funcOf(op)
	return f
}

func TestLaunchesSizeMismatch(t *testing.T) {
	_, err := Launches([]Record{
		{Rank: 0, NRanks: 2, Comm: "c", Op: OpAllReduce, Count: 1, Dtype: "float", Root: -1},
		{Rank: 0, NRanks: 4, Comm: "c", Op: OpAllReduce, Count: 1, Dtype: "float", Root: -1},
	})
	if !errors.Is(err, ErrReplay) {
		t.Errorf("err = %v", err)
	}
	if _, err := Replay(nil, machine(t, "h200x2-nvlink", 1), ReplayOptions{}); !errors.Is(err, ErrReplay) {
		t.Errorf("empty replay: err = %v", err)
	}
}

// TestReplayH200Measured is the issue's acceptance check: the trace the shim recorded from a
// torchrun program on the 2×H200 machine, replayed on the 2×H200 topology, predicts the total
// communication time measured in the same run (NCCL kernel time from the profiler) within 15%.
func TestReplayH200Measured(t *testing.T) {
	ls, err := Launches(readAll(t, h200+"trace/*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 300 {
		t.Fatalf("%d launches, want the program's 300 calls", len(ls))
	}
	rep, err := Replay(ls, machine(t, "h200x2-nvlink", 1), ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meas, err := ReadMeasured([]string{h200 + "shim.rank0.json", h200 + "shim.rank1.json"})
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := Compare(rep, meas)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("simulated %.0f us, measured %.0f us, error %+.1f%%", cmp.SimUs, cmp.MeasUs, 100*cmp.RelErr)
	for _, p := range cmp.PerOp {
		t.Logf("  %-15s %3d calls sim %8.0f us measured %8.0f us %+6.1f%%", p.Op, p.Calls, p.SimUs, p.MeasUs, 100*p.RelErr)
	}
	if math.Abs(cmp.RelErr) > 0.15 {
		t.Errorf("total simulated %.0f us vs measured %.0f us: error %+.1f%% (limit 15%%)", cmp.SimUs, cmp.MeasUs, 100*cmp.RelErr)
	}
	// Calls match by kind: the k-th launch in the window is the k-th measured call.
	kind := map[string]string{"all_reduce": "AllReduce", "all_gather": "AllGather", "reduce_scatter": "ReduceScatter",
		"broadcast": "Broadcast", "sendrecv": "SendRecv", "batch_p2p": "SendRecv"}
	for i, c := range cmp.Calls {
		if kind[c.Op] != c.SimOps {
			t.Fatalf("call %d: measured %s, launch %s", i, c.Op, c.SimOps)
		}
	}
}

// TestReplayScaled replays the 2-rank trace on two DGX H100 nodes: the data-parallel
// communicator becomes 16 ranks with the same per-rank counts.
func TestReplayScaled(t *testing.T) {
	ls, err := Launches(readAll(t, h200+"trace/*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var sub []Launch
	for _, l := range ls {
		if len(sub) < 12 {
			sub = append(sub, l)
		}
	}
	m := machine(t, "dgx-h100", 2)
	rep, err := Replay(sub, m, ReplayOptions{Links: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ranks != 16 || len(rep.Scaled) != 1 {
		t.Fatalf("ranks %d, scaled %v", rep.Ranks, rep.Scaled)
	}
	for i, l := range rep.Launches {
		if l.NRanks != 16 {
			t.Errorf("launch %d on %d ranks", i, l.NRanks)
		}
		if len(sub[i].Colls) == 1 {
			c := sub[i].Colls[0]
			dt, _ := dataType(&c)
			want := c.Count * int64(dt.Size())
			if c.Op == OpAllGather || c.Op == OpReduceScatter {
				want *= 16
			}
			// simnet reports nccl-tests' size, rounded to whole 16-byte per-rank blocks.
			if l.Bytes > want || l.Bytes < want-16*16 {
				t.Errorf("launch %d %s count %d: %d bytes simulated, want about %d", i, c.Op, c.Count, l.Bytes, want)
			}
		}
		if l.TimeUs <= 0 {
			t.Errorf("launch %d: time %v", i, l.TimeUs)
		}
	}
	if len(rep.Links) == 0 || rep.Links[0].Utilisation <= 0 || rep.Links[0].Utilisation > 1 {
		t.Errorf("links: %+v", rep.Links[:min(3, len(rep.Links))])
	}
}

// TestParseGPULogsMatchTrace: the NCCL_DEBUG_SUBSYS=COLL logs of the same program (run without
// the shim) parse into the same calls, in the same order, as the shim recorded.
func TestParseGPULogsMatchTrace(t *testing.T) {
	logs, _ := filepath.Glob(h200 + "coll/*.log")
	if len(logs) != 2 {
		t.Fatalf("logs: %v", logs)
	}
	trace := readAll(t, h200+"trace/*.jsonl")
	byRank := map[int][]Record{}
	for _, r := range trace {
		if IsCollective(r.Op) {
			byRank[r.Rank] = append(byRank[r.Rank], r)
		}
	}
	for _, f := range logs {
		recs, _, err := ParseLogFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			t.Fatalf("%s: no call", f)
		}
		want := byRank[recs[0].Rank]
		if len(recs) != len(want) {
			t.Fatalf("%s: %d calls, the shim recorded %d on rank %d", f, len(recs), len(want), recs[0].Rank)
		}
		for i, r := range recs {
			w := want[i]
			if r.Op != w.Op || r.Count != w.Count || r.Dtype != w.Dtype || r.RedOp != w.RedOp || r.Root != w.Root || r.NRanks != w.NRanks {
				t.Fatalf("%s call %d: log %+v, shim %+v", f, i, r, w)
			}
		}
	}
	// Both logs together replay. Logs carry no group marks: each call is a launch of its own, a
	// collective or one message (a Send and its Recv). The trace has the same 200 collectives and
	// 150 messages (50 torch sends, 50 exchanges of two messages) in 300 launches; the logs, 350.
	var all []Record
	for _, f := range logs {
		r, _, _ := ParseLogFile(f)
		all = append(all, r...)
	}
	ls, err := Launches(all)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := Launches(trace)
	if err != nil {
		t.Fatal(err)
	}
	count := func(ls []Launch) (colls, msgs int, bytes int64) {
		for _, l := range ls {
			colls += len(l.Colls)
			msgs += len(l.P2P)
			for _, m := range l.P2P {
				bytes += m.Bytes
			}
		}
		return
	}
	lc, lm, lb := count(ls)
	tc, tm, tb := count(tl)
	if len(ls) != 350 || len(tl) != 300 || lc != 200 || lm != 150 || lc != tc || lm != tm || lb != tb {
		t.Errorf("logs: %d launches, %d collectives, %d messages of %d bytes; trace: %d launches, %d, %d of %d; want 350 and 300 launches, 200 collectives and 150 messages alike", len(ls), lc, lm, lb, len(tl), tc, tm, tb)
	}
	for _, l := range ls {
		if !l.Log || len(l.Colls)+len(l.P2P) != 1 {
			t.Fatalf("log launch %+v: want one call, marked Log", l)
		}
	}
}

// TestLaunchesFromLog: calls read from NCCL logs are matched as a communicator runs them, not by
// their position on each rank. Both ranks send, then receive (an exchange the program grouped,
// which the log does not show): two messages, each once, not a launch of both Sends and another
// of both Recvs (each message twice, as Launches made of the 2×H200 logs before).
func TestLaunchesFromLog(t *testing.T) {
	rec := func(rank int, seq int64, op string, count int64, root int) Record {
		return Record{Seq: seq, Rank: rank, NRanks: 2, Comm: "log1.n2", Op: op, Count: count, Dtype: "float", Root: root, Mode: "log", PID: 100 + rank}
	}
	recs := []Record{
		rec(0, 0, OpAllReduce, 10, -1), rec(1, 0, OpAllReduce, 10, -1),
		// a message from 0 to 1 (torch.distributed.send/recv)
		rec(0, 1, OpSend, 7, 1), rec(1, 1, OpRecv, 7, 0),
		// an exchange: each rank sends, then receives
		rec(0, 2, OpSend, 3, 1), rec(0, 3, OpRecv, 5, 1),
		rec(1, 2, OpSend, 5, 0), rec(1, 3, OpRecv, 3, 0),
		rec(0, 4, OpAllGather, 2, -1), rec(1, 4, OpAllGather, 2, -1),
	}
	files := []TraceFile{{Name: "r0.log"}, {Name: "r1.log"}}
	for _, r := range recs {
		files[r.Rank].Records = append(files[r.Rank].Records, r)
	}
	if err := CheckTraces(files, CheckOptions{}); err != nil {
		t.Fatal(err)
	}
	ls, err := Launches(recs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range ls {
		if !l.Log || l.Comm != "log1.n2" || l.NRanks != 2 {
			t.Errorf("launch %+v: want Log, comm log1.n2, 2 ranks", l)
		}
		s := fmt.Sprintf("%d:%s", l.Index, l.Ops())
		for _, m := range l.P2P {
			s += fmt.Sprintf(" %d>%d/%d", m.Src, m.Dst, m.Bytes)
		}
		got = append(got, s)
	}
	want := []string{"0:AllReduce", "1:SendRecv 0>1/28", "2:SendRecv 0>1/12", "3:SendRecv 1>0/20", "4:AllGather"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("launches %q, want %q", got, want)
	}

	// The replay says how many calls there are and that their launches are not known; a trace of
	// the same program, with its groups, has the same calls and bytes in 4 launches.
	m := machine(t, "h200x2-nvlink", 1)
	rep, err := Replay(ls, m, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	grouped := make([]Record, len(recs))
	for i, r := range recs {
		r.Mode = ""
		if r.Op == OpSend || r.Op == OpRecv {
			r.Group, r.GID = 1, r.Seq
			if r.Seq == 3 {
				r.GID = 2 // the exchange: one group on each rank
			}
		}
		grouped[i] = r
	}
	gl, err := Launches(grouped)
	if err != nil {
		t.Fatal(err)
	}
	grep, err := Replay(gl, m, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.LaunchesKnown || !grep.LaunchesKnown || rep.Calls != 5 || grep.Calls != 5 || len(rep.Launches) != 5 || len(grep.Launches) != 4 {
		t.Fatalf("log: known %v, %d calls, %d launches; grouped: known %v, %d calls, %d launches", rep.LaunchesKnown, rep.Calls, len(rep.Launches), grep.LaunchesKnown, grep.Calls, len(grep.Launches))
	}
	byOp := func(r *Report) map[string]OpTotal {
		m := map[string]OpTotal{}
		for _, o := range r.ByOp {
			o.TimeUs = 0
			m[o.Ops] = o
		}
		return m
	}
	lo, gro := byOp(rep), byOp(grep)
	if lo["SendRecv"] != (OpTotal{Ops: "SendRecv", Calls: 3, Bytes: 28 + 12 + 20}) || gro["SendRecv"] != (OpTotal{Ops: "SendRecv", Launches: 2, Calls: 3, Bytes: 60}) {
		t.Errorf("SendRecv: log %+v, grouped %+v", lo["SendRecv"], gro["SendRecv"])
	}
	if rep.TotalUs <= grep.TotalUs {
		t.Errorf("log replay %.3f us, grouped %.3f: one launch a call must take longer", rep.TotalUs, grep.TotalUs)
	}
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "print no group boundaries") || len(grep.Notes) != 0 {
		t.Errorf("notes: log %q, grouped %q", rep.Notes, grep.Notes)
	}
}

// Communicators that do not fill whole nodes: one rank costs nothing, three ranks run on a whole
// 8-GPU node (noted); the 16-rank data-parallel one is kept.
func TestReplaySubNode(t *testing.T) {
	mk := func(comm string, n, rank int, seq int64) Record {
		return Record{Seq: seq, Rank: rank, NRanks: n, Comm: comm, Op: OpAllReduce, Count: 1 << 20, Dtype: "float", RedOp: "sum", Root: -1}
	}
	ls, err := Launches([]Record{mk("dp", 16, 0, 0), mk("tp", 3, 0, 1), mk("solo", 1, 0, 2)})
	if err != nil {
		t.Fatal(err)
	}
	build := func(nodes int) (*simnet.Machine, error) { return machine(t, "dgx-h100", nodes), nil }
	if _, err := Replay(ls, machine(t, "dgx-h100", 2), ReplayOptions{}); err == nil || !strings.Contains(err.Error(), "no way to build another size") {
		t.Errorf("without Build: err = %v", err)
	}
	rep, err := Replay(ls, machine(t, "dgx-h100", 2), ReplayOptions{Build: build})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]LaunchResult{}
	for _, l := range rep.Launches {
		got[l.Comm] = l
	}
	if got["dp"].NRanks != 16 || got["tp"].NRanks != 8 || got["solo"].TimeUs != 0 || got["solo"].Mode != "single-rank" || got["tp"].TimeUs <= 0 {
		t.Errorf("launches %+v", rep.Launches)
	}
	if len(rep.Notes) < 2 {
		t.Errorf("notes %q", rep.Notes)
	}
}

func ExampleLaunches() {
	recs := []Record{
		{Seq: 0, Rank: 0, NRanks: 2, Comm: "c", Op: OpAllReduce, Count: 1024, Dtype: "float", RedOp: "sum", Root: -1},
		{Seq: 1, Rank: 0, NRanks: 2, Comm: "c", Op: OpSend, Count: 256, Dtype: "bfloat16", Root: 1, Group: 1, GID: 1},
		{Seq: 2, Rank: 0, NRanks: 2, Comm: "c", Op: OpRecv, Count: 256, Dtype: "bfloat16", Root: 1, Group: 1, GID: 1},
	}
	ls, _ := Launches(recs)
	for _, l := range ls {
		fmt.Println(l.Index, l.Ops(), len(l.Colls), l.P2P)
	}
	// Output:
	// 0 AllReduce 1 []
	// 1 SendRecv 0 [{0 1 512} {1 0 512}]
}

// TestReplayOneWaySend: a traced dist.send (one Send on rank 0, its Recv on rank 1) is replayed
// as that one message, not as every rank sending to the next: on 2 H200 the link back from GPU 1
// carries nothing, and the one-way 64 MiB takes less than the exchange of 64 MiB each way.
func TestReplayOneWaySend(t *testing.T) {
	const n = 64 << 20
	send := []Launch{{Comm: "c", NRanks: 2, P2P: []Transfer{{Src: 0, Dst: 1, Bytes: n}}}}
	both := []Launch{{Comm: "c", NRanks: 2, P2P: []Transfer{{Src: 0, Dst: 1, Bytes: n}, {Src: 1, Dst: 0, Bytes: n}}}}
	m := machine(t, "h200x2-nvlink", 1)
	one, err := Replay(send, m, ReplayOptions{Links: true})
	if err != nil {
		t.Fatal(err)
	}
	two, err := Replay(both, m, ReplayOptions{Links: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range one.Links {
		if strings.Contains(l.Link, "GPU/1->GPU/0") && l.Bytes > 0 {
			t.Errorf("a one-way send 0→1 put %v bytes on %s", l.Bytes, l.Link)
		}
	}
	if one.Launches[0].Bytes != n || two.Launches[0].Bytes != 2*n {
		t.Errorf("bytes %d and %d, want %d and %d", one.Launches[0].Bytes, two.Launches[0].Bytes, n, 2*n)
	}
	if !(one.TotalUs < two.TotalUs) {
		t.Errorf("one-way %v µs, exchange %v µs: the one-way send is not lighter", one.TotalUs, two.TotalUs)
	}
}

// TestReplayManyMessages: a group with more messages than can be scheduled (100,000 one-way
// sends of 1 KiB on 2 H200) is timed from samples of its messages, extrapolated in their count,
// and says so; half of them, scheduled whole, take half the time (to within 1%).
func TestReplayManyMessages(t *testing.T) {
	const n, each = 100_000, 1024
	launch := func(k int) []Launch {
		l := Launch{Comm: "c", NRanks: 2}
		for range k {
			l.P2P = append(l.P2P, Transfer{Src: 0, Dst: 1, Bytes: each})
		}
		return []Launch{l}
	}
	m := machine(t, "h200x2-nvlink", 1)
	rep, err := Replay(launch(n), m, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	half, err := Replay(launch(n/2), m, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := rep.Launches[0]
	if l.Bytes != n*each || !strings.HasPrefix(l.Mode, "messages-steady") || half.Launches[0].Mode != "schedule" {
		t.Errorf("%d messages: %d bytes, mode %q; %d messages: mode %q", n, l.Bytes, l.Mode, n/2, half.Launches[0].Mode)
	}
	t.Logf("%d messages %.1f µs (%s), %d: %.1f µs (%s)", n, rep.TotalUs, l.Mode, n/2, half.TotalUs, half.Launches[0].Mode)
	if rel := rep.TotalUs/(2*half.TotalUs) - 1; math.Abs(rel) > 0.01 {
		t.Errorf("%d messages %.1f µs, %d messages %.1f µs: %+.2f%% from twice", n, rep.TotalUs, n/2, half.TotalUs, 100*rel)
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "messages-steady") {
		t.Errorf("no note of the sampling: %q", rep.Notes)
	}
}
