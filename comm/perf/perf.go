// Package perf measures collectives on real communicators the way nccl-tests does (src/common.cu,
// NVIDIA/nccl-tests; NCCL_TESTS_VERSION 2.19.6 in reference/nccl-model.md §7): a sweep of sizes
// from -b to -e, a warm-up at min, 2×min, … ≤ max before it, out-of-place and in-place runs per
// size, the time of -n iterations (each of -m calls in one group) combined over the ranks (-a),
// algbw = bytes/time, busbw = algbw × the collective's factor, and a check of every element (-c).
//
// Rows are handed to a Sink as each size finishes (TableWriter prints nccl-tests' table,
// JSONWriter the same rows as JSON), so that a run killed half way keeps its finished rows.
package perf

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
)

// Collectives runccl knows, in the order "all" runs them. These are the identifiers of
// Options.Colls and Row.Coll; output spells them as nccl-tests does (NameOf: all_reduce, …).
var Collectives = []string{"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "sendrecv"}

// ParseColls reads "allreduce", "all_reduce", "all_reduce_perf", "all" or a comma-separated list.
func ParseColls(s string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(s, ",") {
		f := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(name), "_perf"))
		f = strings.ReplaceAll(f, "_", "")
		if f == "all" {
			return Collectives, nil
		}
		ok := false
		for _, c := range Collectives {
			if f == c {
				out, ok = append(out, c), true
			}
		}
		if !ok {
			return nil, fmt.Errorf("unknown collective %q (want %s or all)", strings.TrimSpace(name), strings.Join(NamesOf(Collectives), ", "))
		}
	}
	return out, nil
}

// Average is how the ranks' times of one row are combined (nccl-tests -a). The zero value is
// nccl-tests' default, the mean.
type Average int

const (
	Mean  Average = iota // -a 1 (default): the mean of the ranks' times
	Rank0                // -a 0: rank 0's time
	Min                  // -a 2: the shortest
	Max                  // -a 3: the longest
)

// AverageOf maps nccl-tests' -a value (0 rank 0, 1 mean, 2 min, 3 max) to an Average.
func AverageOf(a int) (Average, error) {
	switch a {
	case 0:
		return Rank0, nil
	case 1:
		return Mean, nil
	case 2:
		return Min, nil
	case 3:
		return Max, nil
	}
	return 0, fmt.Errorf("%d: want 0 (rank 0), 1 (mean), 2 (min) or 3 (max)", a)
}

// Flag is the Average's nccl-tests -a value.
func (a Average) Flag() int {
	switch a {
	case Rank0:
		return 0
	case Min:
		return 2
	case Max:
		return 3
	}
	return 1
}

// Options are nccl-tests' flags that apply to one sweep.
type Options struct {
	Colls    []string
	Sizes    []int64 // total buffer sizes in bytes (-b/-e with -f or -i; Sweep)
	DataType coll.DataType
	Op       coll.RedOp
	Root     int
	Iters    int  // -n
	Warmup   int  // -w: warm-up iterations at each of WarmupSizes(Sizes) before the sweep
	Check    bool // -c: check every element of one extra run per size and placement
	// CheckIters is nccl-tests' -c N: with Check, up to N checked runs per size and placement,
	// stopping at the first with a wrong element (0 means 1).
	CheckIters int
	// AggIters is -m: every timed iteration issues this many calls in one group (0 means 1); the
	// time is divided by Iters × AggIters.
	AggIters int
	// Blocking is -z 1: wait for every call (and then for every rank) before issuing the next.
	Blocking bool
	// Average combines the ranks' times (-a).
	Average Average
	// CPUTime is -C 1: report the time to issue the calls (cputime), not to complete them.
	CPUTime bool
	// Cycles is -N: the sweep runs this many times after one warm-up (0 means 1; Forever: until
	// an error or an abort).
	Cycles int
	// Graph > 0 (nccl-tests' -G/--cudagraph): capture the Iters timed launches as one CUDA graph
	// and time Graph replays of it; the time per iteration is the replays' time over
	// Graph × Iters. GPU backends only.
	Graph int
	// Sink, when set, receives every line as its size finishes (on rank 0's process; rows are then
	// not kept in Result.Rows).
	Sink Sink
}

// Forever as Options.Cycles runs the sweep until the run is aborted (nccl-tests -N 0).
const Forever = -1

// Row is one placement of one size.
type Row struct {
	Coll    string // an entry of Collectives
	Bytes   int64
	Count   int64
	Type    string
	RedOp   string // nccl-tests' name (OpName), "none" for collectives that do not reduce
	Root    int    // -1 for collectives without a root
	InPlace bool
	TimeUs  float64
	AlgBW   float64
	BusBW   float64
	Wrong   int64 // -1 when not checked
	// Algo, Proto and NChannels are the plan the engine ran (the planner's, with what the engine
	// lacks excluded); NCCL is NCCL's own decision ("NVLS/Simple/16") when it is not that one.
	Algo      string
	Proto     string
	NChannels int
	NCCL      string
}

// Decision fills a row's plan columns from the plan run and NCCL's decision.
func (r *Row) Decision(ran, nccl coll.Plan) {
	r.Algo, r.Proto, r.NChannels = ran.ShownNames()
	if d := nccl.Decision(); d != ran.Decision() {
		r.NCCL = d
	}
}

// A Line is one size of a sweep: its out-of-place row and, where the collective runs in place, its
// in-place row (one line of nccl-tests' table).
type Line struct {
	OutOfPlace Row
	InPlace    *Row
}

// A Sink receives a sweep's lines as they are measured, in order, on rank 0's goroutine. An error
// stops the run (every rank's communicator is aborted).
type Sink interface {
	Line(Line) error
}

// Result sums up a run.
type Result struct {
	NRanks    int
	Transport string
	// Machine says what the plans were made for (the planner's machine description).
	Machine string
	// Rows are the rows measured, out-of-place before in-place for each size (empty when
	// Options.Sink received them).
	Rows     []Row
	AvgBusBW float64 // the mean busbw of the placements run
	Placed   int     // the number of placements run (rows)
	Wrong    int64   // wrong elements, all rows together
	// Failed counts the placements with a wrong element (nccl-tests' "Out of bounds values").
	Failed int
}

// Add counts a line in r (and keeps its rows unless keep is false).
func (r *Result) Add(l Line, keep bool) {
	for _, x := range l.Rows() {
		r.AvgBusBW = (r.AvgBusBW*float64(r.Placed) + x.BusBW) / float64(r.Placed+1)
		r.Placed++
		if x.Wrong > 0 {
			r.Wrong += x.Wrong
			r.Failed++
		}
		if keep {
			r.Rows = append(r.Rows, x)
		}
	}
}

// Rows returns the line's rows, out-of-place first.
func (l Line) Rows() []Row {
	if l.InPlace == nil {
		return []Row{l.OutOfPlace}
	}
	return []Row{l.OutOfPlace, *l.InPlace}
}

// Run measures on the communicators of this process (one per rank it drives: all ranks with
// goroutine ranks, one in a launcher-started process); every process of the communicator must call
// it with the same options. Rank 0's process gets the result (nil on other processes).
func Run(cs []*comm.Comm, opt Options) (*Result, error) {
	if len(cs) == 0 {
		return nil, fmt.Errorf("perf: no communicators")
	}
	if opt.Iters <= 0 {
		opt.Iters = 20
	}
	if opt.Root < 0 || opt.Root >= cs[0].Count() {
		return nil, fmt.Errorf("perf: root %d of %d ranks", opt.Root, cs[0].Count())
	}
	if opt.Graph > 0 {
		return nil, errors.New("perf: CUDA graphs (-G) need a GPU backend")
	}
	var res *Result
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		var r *Result
		if c.Rank() == 0 {
			r = &Result{NRanks: c.Count(), Transport: c.TransportOf(1 % c.Count())}
			res = r
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = runRank(c, opt, r)
			if errs[i] != nil {
				c.Abort()
			}
		}()
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return nil, err
	}
	return res, nil
}

// firstError returns the first error that is not an abort caused by another rank's error.
func firstError(errs []error) error {
	var first error
	for _, e := range errs {
		if e == nil {
			continue
		}
		if first == nil {
			first = e
		}
		if !errors.Is(e, comm.ErrAborted) {
			return e
		}
	}
	return first
}

// RankBufferBytes is the memory one rank's buffers take for opt: a send and a receive buffer of
// the largest size (runRank), and, for PreMulSum and Avg, the scaled copy of the input comm makes.
func RankBufferBytes(opt Options) int64 {
	var m int64
	for _, sz := range opt.Sizes {
		m = max(m, sz)
	}
	if m > 1<<60 {
		return 1 << 62
	}
	n := 2 * (m + 64)
	if opt.Op == coll.PreMulSum || opt.Op == coll.Avg {
		n += m
	}
	return n
}

type rankState struct {
	c          *comm.Comm
	n, rank    int
	opt        Options
	elt        int64
	send, recv []byte
	scalar     float64
	op         coll.RedOp
}

// runRank runs the sweep on one rank; res is non-nil on rank 0, which fills it and feeds the sink.
func runRank(c *comm.Comm, opt Options, res *Result) error {
	n := c.Count()
	s := &rankState{c: c, n: n, rank: c.Rank(), opt: opt, elt: int64(opt.DataType.Size()), op: opt.Op}
	if s.elt == 0 {
		return fmt.Errorf("perf: data type %v", opt.DataType)
	}
	if opt.Op == coll.PreMulSum {
		s.scalar = 2
		s.op = c.RedOpCreatePreMulSum(s.scalar)
	}
	var maxBytes int64
	for _, sz := range opt.Sizes {
		maxBytes = max(maxBytes, sz)
	}
	// AllToAll/ReduceScatter send n blocks, AllGather receives them: size the buffers for the largest.
	s.send = make([]byte, maxBytes+64)
	s.recv = make([]byte, maxBytes+64)
	for _, cname := range opt.Colls {
		f, err := coll.ParseFunc(cname)
		if err != nil {
			return err
		}
		// Warm-up at min, 2×min, … ≤ max, as nccl-tests' TimeTest does before the sweep.
		for _, sz := range WarmupSizes(opt.Sizes) {
			arg, _ := coll.TestCount(f, sz, int(s.elt), n)
			for w := 0; w < opt.Warmup; w++ {
				if err := s.issueIter(cname, arg, false); err != nil {
					return err
				}
			}
			if err := c.Synchronize(); err != nil {
				return err
			}
		}
		for cycle := 0; opt.Cycles == Forever || cycle < max(opt.Cycles, 1); cycle++ {
			for _, sz := range opt.Sizes {
				var line Line
				for _, inPlace := range []bool{false, true} {
					if cname == "alltoall" && inPlace {
						continue
					}
					row, err := s.measure(f, cname, sz, inPlace)
					if err != nil {
						return err
					}
					if inPlace {
						line.InPlace = &row
					} else {
						line.OutOfPlace = row
					}
				}
				if res == nil {
					continue
				}
				res.Add(line, opt.Sink == nil)
				if opt.Sink != nil {
					if err := opt.Sink.Line(line); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// measure times one placement of one size and checks it; every rank returns the row.
func (s *rankState) measure(f coll.Func, cname string, sz int64, inPlace bool) (Row, error) {
	c, opt := s.c, s.opt
	arg, bytes := coll.TestCount(f, sz, int(s.elt), s.n)
	if err := c.Barrier(); err != nil {
		return Row{}, err
	}
	start := time.Now()
	for it := 0; it < opt.Iters; it++ {
		if err := s.issueIter(cname, arg, inPlace); err != nil {
			return Row{}, err
		}
	}
	issued := time.Since(start)
	if err := c.Synchronize(); err != nil {
		return Row{}, err
	}
	el := time.Since(start)
	if opt.CPUTime {
		el = issued
	}
	sec := el.Seconds() / float64(opt.Iters*max(opt.AggIters, 1))
	wrong := int64(-1)
	if opt.Check {
		wrong = 0
		for i := 0; i < max(opt.CheckIters, 1) && wrong == 0; i++ {
			w, err := s.check(f, cname, arg, inPlace)
			if err != nil {
				return Row{}, err
			}
			wrong = w
		}
	}
	sec, wrong, err := s.combine(sec, wrong)
	if err != nil {
		return Row{}, err
	}
	root := -1
	if rooted(cname) {
		root = opt.Root
	}
	redop := "none"
	if f.Reduces() {
		redop = OpName(opt.Op)
	}
	algbw := float64(bytes) / sec / 1e9
	row := Row{Coll: cname, Bytes: bytes, Count: arg, Type: opt.DataType.String(), RedOp: redop,
		Root: root, InPlace: inPlace, TimeUs: sec * 1e6, AlgBW: algbw, BusBW: algbw * coll.BusFactor(f, s.n), Wrong: wrong}
	if arg > 0 {
		ran, nccl, err := c.Plan(coll.Call{Func: f, Count: arg, DataType: opt.DataType, Op: opt.Op, Root: opt.Root})
		if err != nil {
			return Row{}, err
		}
		row.Decision(ran, nccl)
	}
	return row, nil
}

// combine reduces the ranks' times as Options.Average says and sums their wrong elements (-1
// stays -1: not checked).
func (s *rankState) combine(sec float64, wrong int64) (float64, int64, error) {
	c := s.c
	first := 0.0
	if s.rank == 0 {
		first = sec
	}
	tot := []float64{sec, float64(max(wrong, 0)), first}
	if err := c.AllReduce(comm.Bytes(tot), comm.Bytes(tot), len(tot), coll.Float64, coll.Sum, nil); err != nil {
		return 0, 0, err
	}
	t := []float64{sec}
	switch s.opt.Average {
	case Min, Max:
		op := coll.Min
		if s.opt.Average == Max {
			op = coll.Max
		}
		if err := c.AllReduce(comm.Bytes(t), comm.Bytes(t), 1, coll.Float64, op, nil); err != nil {
			return 0, 0, err
		}
	}
	if err := c.Synchronize(); err != nil {
		return 0, 0, err
	}
	if wrong >= 0 {
		wrong = int64(tot[1])
	}
	switch s.opt.Average {
	case Rank0:
		return tot[2], wrong, nil
	case Min, Max:
		return t[0], wrong, nil
	}
	return tot[0] / float64(s.n), wrong, nil
}

func rooted(c string) bool { return c == "broadcast" || c == "reduce" }

// buffers returns (send, recv) for one call with arg elements per call argument.
func (s *rankState) buffers(cname string, arg int64, inPlace bool) ([]byte, []byte) {
	e := s.elt
	in, out := arg*e, arg*e
	switch cname {
	case "allgather":
		out = arg * e * int64(s.n)
	case "reducescatter":
		in = arg * e * int64(s.n)
	case "alltoall":
		in, out = arg*e*int64(s.n), arg*e*int64(s.n)
	}
	if !inPlace {
		return s.send[:in], s.recv[:out]
	}
	switch cname {
	case "allgather":
		return s.recv[int64(s.rank)*in : int64(s.rank+1)*in], s.recv[:out]
	case "reducescatter":
		return s.recv[:in], s.recv[int64(s.rank)*out : int64(s.rank+1)*out]
	}
	return s.recv[:in], s.recv[:max(in, out)]
}

// issueIter issues one timed iteration: AggIters calls in one group (nccl-tests -m), then, when
// blocking (-z 1), waits for them and for every rank.
func (s *rankState) issueIter(cname string, arg int64, inPlace bool) error {
	agg := max(s.opt.AggIters, 1)
	if agg > 1 {
		s.c.GroupStart()
	}
	var err error
	for a := 0; a < agg && err == nil; a++ {
		err = s.issue(cname, arg, inPlace)
	}
	if agg > 1 {
		if e := s.c.GroupEnd(); err == nil {
			err = e
		}
	}
	if err == nil && s.opt.Blocking {
		if err = s.c.Synchronize(); err == nil {
			err = s.c.Barrier()
		}
	}
	return err
}

func (s *rankState) issue(cname string, arg int64, inPlace bool) error {
	c, dt, cnt := s.c, s.opt.DataType, int(arg)
	send, recv := s.buffers(cname, arg, inPlace)
	switch cname {
	case "allreduce":
		return c.AllReduce(send, recv, cnt, dt, s.op, nil)
	case "allgather":
		return c.AllGather(send, recv, cnt, dt, nil)
	case "reducescatter":
		return c.ReduceScatter(send, recv, cnt, dt, s.op, nil)
	case "broadcast":
		return c.Broadcast(send, recv, cnt, dt, s.opt.Root, nil)
	case "reduce":
		return c.Reduce(send, recv, cnt, dt, s.op, s.opt.Root, nil)
	case "alltoall":
		return c.AllToAll(send, recv, cnt, dt, nil)
	case "sendrecv":
		c.GroupStart()
		err := c.Send(send, cnt, dt, (s.rank+1)%s.n, nil)
		if err == nil {
			err = c.Recv(recv, cnt, dt, (s.rank+s.n-1)%s.n, nil)
		}
		if e := c.GroupEnd(); err == nil {
			err = e
		}
		return err
	}
	return fmt.Errorf("perf: unknown collective %q", cname)
}

// check fills the inputs, runs the collective once and counts the wrong elements of this rank.
func (s *rankState) check(f coll.Func, cname string, arg int64, inPlace bool) (int64, error) {
	dt := s.opt.DataType
	send, recv := s.buffers(cname, arg, inPlace)
	for i := 0; i < len(send)/int(s.elt); i++ {
		comm.SetElement(dt, send, i, coll.TestValue(s.rank, int64(i)))
	}
	if !inPlace {
		for i := range recv {
			recv[i] = 0xA5
		}
	}
	if err := s.issue(cname, arg, inPlace); err != nil {
		return 0, err
	}
	if err := s.c.Synchronize(); err != nil {
		return 0, err
	}
	want, err := coll.TestWant(f, dt, s.opt.Op, s.scalar, s.n, s.rank, s.opt.Root, arg, coll.TestValue)
	if want == nil {
		return 0, err
	}
	var wrong int64
	for i := 0; i < len(recv)/int(s.elt); i++ {
		if !want(int64(i)).Holds(dt, dt.Bits(recv, i)) {
			wrong++
		}
	}
	return wrong, nil
}
