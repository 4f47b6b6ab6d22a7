package simnet

import (
	"errors"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/stretchr/testify/require"
)

// Simulate checks the schedule (coll.IndexChecker) as it builds its records: a schedule that
// breaks the contract, where the records index by it (connection, sequence, dependency, credit,
// a program's rank) or elsewhere (a message received twice, the messages a connection claims),
// is refused with coll.NewIndex's error, and none makes the build panic; the same with the
// records built in one part or two.
func TestSimulateBadScheduleIndexError(t *testing.T) {
	for _, split := range []bool{false, true} {
		t.Run(map[bool]string{false: "one part", true: "two parts"}[split], func(t *testing.T) {
			defer setRecordsSplit(split)()
			testBadScheduleIndexError(t)
		})
	}
}

// setRecordsSplit makes buildRecords split or not, and returns what undoes it.
func setRecordsSplit(split bool) func() {
	old := recordsSplit
	recordsSplit = func(int) bool { return split }
	return func() { recordsSplit = old }
}

func testBadScheduleIndexError(t *testing.T) {
	for name, spoil := range map[string]func(s *coll.Schedule){
		"connection out of range": func(s *coll.Schedule) { s.Programs[0].Steps[1].Send[0].Conn = 7 },
		"negative connection":     func(s *coll.Schedule) { s.Programs[1].Steps[0].Recv[0].Conn = -1 },
		"sequence out of range":   func(s *coll.Schedule) { s.Programs[0].Steps[1].Send[0].Seq = 9 },
		"negative sequence":       func(s *coll.Schedule) { s.Programs[1].Steps[1].Recv[0].Seq = -2 },
		"dependency forward":      func(s *coll.Schedule) { s.Programs[0].Steps[0].Deps = []int{1} },
		"credit not before":       func(s *coll.Schedule) { s.Programs[0].Steps[9].Send[0].CreditSeq = 9 },
		"wrong end":               func(s *coll.Schedule) { s.Programs[0].Steps[0].Recv = s.Programs[1].Steps[0].Recv },
		"program's rank":          func(s *coll.Schedule) { s.Programs[1].Rank = 0 },
		"received twice":          func(s *coll.Schedule) { s.Programs[1].Steps[1].Recv[0].Seq = 0 },
		"messages claimed":        func(s *coll.Schedule) { s.Conns[0].Messages = -1 },
	} {
		t.Run(name, func(t *testing.T) {
			e := NewEngine(nil)
			r := pairRouter{e.AddLink("0->1", GBps(1), 0), e.AddLink("1->0", GBps(1), 0)}
			s := streamSchedule(10, 10)
			spoil(s)
			_, want := coll.NewIndex(s)
			require.Error(t, want)
			_, err := Simulate(e, r, s, Timing{}, Options{})
			require.Error(t, err)
			require.True(t, errors.Is(err, coll.ErrBadSchedule), "%v", err)
			require.Equal(t, "simnet: "+want.Error(), err.Error())
		})
	}
}

// A replay whose schedule the check refuses stops within a block of events of the refusal
// (Engine.abort) and returns the check's error: here a check that has already failed, on a
// schedule of 100,000 messages (about 300,000 events).
func TestSimulateStoppedByCheck(t *testing.T) {
	e := NewEngine(nil)
	r := pairRouter{e.AddLink("0->1", GBps(1), 0), e.AddLink("1->0", GBps(1), 0)}
	refused := errors.New("refused")
	job := startIndex(nil)
	job.once.Do(func() {})
	job.err = refused
	close(job.done)
	_, err := Simulate(e, r, streamSchedule(100_000, 1024), Timing{}, Options{index: job})
	require.ErrorIs(t, err, refused)
	require.LessOrEqual(t, e.Events, uint64(eventBlock))
	require.Nil(t, e.abort)
}

// foldedNVLSTree is the NVLSTree channel fold's schedule of a 64 MiB all-reduce on 4 DGX H100
// nodes, with its fold, timing, engine and cluster.
func foldedNVLSTree(t *testing.T) (*coll.Schedule, nvlsFold, Timing, *Engine, *Cluster) {
	t.Helper()
	m, _ := testMachine(t, "dgx-h100", 4, DefaultFabric(), "NVLSTree", "")
	plan, tm, e, cl := nvlsTreeCall(t, m, 64<<20)
	f, ok := nvlsFoldOf(plan, cl)
	require.True(t, ok)
	s, err := coll.Compile(f.plan(plan))
	require.NoError(t, err)
	return s, f, tm, e, cl
}

// The records built in two parts at once are the ones built in one pass (buildRecords), on the
// NVLSTree channel fold of 4 DGX H100 nodes (switches, credits, two lanes), and replay to the
// same time.
func TestRecordsSplitSame(t *testing.T) {
	s, f, tm, e, cl := foldedNVLSTree(t)
	var xs []*sim
	var times []Time
	for _, split := range []bool{false, true} {
		undo := setRecordsSplit(split)
		x := &sim{e: e, s: s, r: cl, tm: tm}
		require.NoError(t, x.buildRecords())
		xs = append(xs, x)
		res, err := Simulate(foldedEngine(e, f.members), cl, s, tm, Options{prune: true})
		require.NoError(t, err)
		times = append(times, res.Time)
		undo()
	}
	a, b := xs[0], xs[1]
	require.Greater(t, len(a.rec), 1000)
	require.Equal(t, a.off, b.off)
	require.Equal(t, a.connOff, b.connOff)
	require.Equal(t, a.rec, b.rec)
	require.Equal(t, a.rel, b.rel)
	require.Equal(t, a.sendList, b.sendList)
	require.Equal(t, a.msg, b.msg)
	require.Equal(t, times[0], times[1])
}

// A lean engine (foldedEngine's: the links a rate computation may hold, no link statistics)
// replays a schedule to the same picosecond as the same engine walking whole routes: the NVLSTree
// channel fold on 4 DGX H100 nodes (its switch links unbounded and pruned, relaxed node links).
func TestLeanEngineSameTime(t *testing.T) {
	s, f, tm, e, cl := foldedNVLSTree(t)
	var times []Time
	for _, lean := range []bool{true, false} {
		q := foldedEngine(e, f.members)
		q.lean = lean
		res, err := Simulate(q, cl, s, tm, Options{prune: true})
		require.NoError(t, err)
		times = append(times, res.Time)
		if lean {
			shorter := 0
			for _, ft := range q.filts {
				if len(ft.pos) < ft.n {
					shorter++
				}
			}
			require.NotZero(t, shorter, "some route walked in part")
		}
	}
	require.Equal(t, times[0], times[1])
}
