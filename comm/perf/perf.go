// Package perf measures collectives on real communicators the way nccl-tests 2.19 does (common.cu):
// sizes from -b to -e by a factor, out-of-place and in-place runs, time averaged over iterations and
// ranks, algbw = bytes/time, busbw = algbw × the collective's factor, and a check of every element.
// It prints nccl-tests' table and gives the same rows as JSON.
package perf

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
)

// Collectives runccl knows, in the order -c all runs them.
var Collectives = []string{"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "sendrecv"}

// ParseColls reads "allreduce", "all_reduce", "all" or a comma-separated list.
func ParseColls(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.ReplaceAll(strings.TrimSpace(f), "_", ""))
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
			return nil, fmt.Errorf("unknown collective %q (want %s or all)", f, strings.Join(Collectives, ", "))
		}
	}
	return out, nil
}

// Options are nccl-tests' flags that apply.
type Options struct {
	Colls    []string
	Sizes    []int64 // total buffer sizes in bytes (-b/-e/-f)
	DataType coll.DataType
	Op       coll.RedOp
	Root     int
	Iters    int  // -n
	Warmup   int  // -w
	Check    bool // check every element of one extra run per size and placement
	// Graph > 0 (nccl-tests' -G/--cudagraph): capture the Iters timed launches as one CUDA graph
	// and time Graph replays of it; the time per iteration is the replays' time over
	// Graph × Iters. GPU backends only.
	Graph int
}

// Row is one line of the table, for one placement.
type Row struct {
	Coll    string  `json:"coll"`
	Bytes   int64   `json:"bytes"`
	Count   int64   `json:"count"`
	Type    string  `json:"type"`
	RedOp   string  `json:"redop"`
	Root    int     `json:"root"`
	InPlace bool    `json:"in_place"`
	TimeUs  float64 `json:"time_us"`
	AlgBW   float64 `json:"algbw"`
	BusBW   float64 `json:"busbw"`
	Wrong   int64   `json:"wrong"` // -1 when not checked
	// Algo, Proto and NChannels are the plan the engine ran (the planner's, with what the engine
	// lacks excluded); NCCL is NCCL's own decision ("NVLS/Simple/16") when it is not that one.
	Algo      string `json:"algo"`
	Proto     string `json:"proto"`
	NChannels int    `json:"nchannels"`
	NCCL      string `json:"nccl,omitempty"`
}

// Decision fills a row's plan columns from the plan run and NCCL's decision.
func (r *Row) Decision(ran, nccl coll.Plan) {
	proto, nch := ran.Shown()
	r.Algo, r.Proto, r.NChannels = ran.AlgoName(), proto.String(), nch
	if d := nccl.Decision(); d != ran.Decision() {
		r.NCCL = d
	}
}

// Result is a whole run.
type Result struct {
	NRanks    int    `json:"nranks"`
	Transport string `json:"transport"`
	// Machine says what the plans were made for (the planner's machine description).
	Machine  string  `json:"machine,omitempty"`
	Rows     []Row   `json:"rows"`
	AvgBusBW float64 `json:"avg_busbw"`
	Wrong    int64   `json:"wrong"`
}

// busFactor is nccl-tests' busbw factor (the *GetBw functions of its tests).
func busFactor(c string, n int) float64 {
	switch c {
	case "allreduce":
		return 2 * float64(n-1) / float64(n)
	case "allgather", "reducescatter", "alltoall":
		return float64(n-1) / float64(n)
	}
	return 1
}

// counts returns (count column, elements per call argument, bytes column) for a size (nccl-tests'
// *GetCollByteCount).
func counts(c string, size int64, elt int64, n int) (countCol, arg, bytes int64) {
	count := size / elt
	switch c {
	case "allgather", "reducescatter", "alltoall":
		base := count / int64(n)
		if g := 16 / elt; g > 1 {
			base = base / g * g
		}
		return base, base, base * int64(n) * elt
	}
	return count, count, count * elt
}

func rooted(c string) bool { return c == "broadcast" || c == "reduce" }
func reduces(c string) bool {
	return c == "allreduce" || c == "reduce" || c == "reducescatter"
}

// Run measures on the communicators of this process (one per rank it drives: all ranks with
// goroutine ranks, one in a launcher-started process); every process of the communicator must call
// it with the same options. Rank 0's rows are returned (nil on other processes).
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
	results := make([][]Row, len(cs))
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = runRank(c, opt)
			if errs[i] != nil {
				c.Abort()
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return nil, e
		}
	}
	for i, c := range cs {
		if c.Rank() == 0 {
			res := &Result{NRanks: c.Count(), Transport: c.TransportOf((c.Rank() + 1) % c.Count()), Rows: results[i]}
			for _, r := range res.Rows {
				res.AvgBusBW += r.BusBW
				if r.Wrong > 0 {
					res.Wrong += r.Wrong
				}
			}
			if len(res.Rows) > 0 {
				res.AvgBusBW /= float64(len(res.Rows))
			}
			return res, nil
		}
	}
	return nil, nil
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

func runRank(c *comm.Comm, opt Options) ([]Row, error) {
	n := c.Count()
	s := &rankState{c: c, n: n, rank: c.Rank(), opt: opt, elt: int64(opt.DataType.Size()), op: opt.Op}
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
	var rows []Row
	for _, cname := range opt.Colls {
		// Warm-up at every size, as nccl-tests does before the sweep.
		for _, sz := range opt.Sizes {
			_, arg, _ := counts(cname, sz, s.elt, n)
			for w := 0; w < opt.Warmup; w++ {
				if err := s.issue(cname, arg, false); err != nil {
					return nil, err
				}
			}
		}
		if err := c.Synchronize(); err != nil {
			return nil, err
		}
		for _, sz := range opt.Sizes {
			countCol, arg, bytes := counts(cname, sz, s.elt, n)
			for _, inPlace := range []bool{false, true} {
				if cname == "alltoall" && inPlace {
					continue
				}
				if err := c.Barrier(); err != nil {
					return nil, err
				}
				start := time.Now()
				for it := 0; it < opt.Iters; it++ {
					if err := s.issue(cname, arg, inPlace); err != nil {
						return nil, err
					}
				}
				if err := c.Synchronize(); err != nil {
					return nil, err
				}
				el := time.Since(start).Seconds() / float64(opt.Iters)
				// Average the time over ranks (nccl-tests -a 1) and sum the wrong elements.
				wrong := int64(-1)
				if opt.Check {
					w, err := s.check(cname, arg, inPlace)
					if err != nil {
						return nil, err
					}
					wrong = w
				}
				tot := []float64{el, float64(wrong)}
				if err := c.AllReduce(comm.Bytes(tot), comm.Bytes(tot), 2, coll.Float64, coll.Sum, nil); err != nil {
					return nil, err
				}
				if err := c.Synchronize(); err != nil {
					return nil, err
				}
				el = tot[0] / float64(n)
				if opt.Check {
					wrong = int64(tot[1])
				}
				root := -1
				if rooted(cname) {
					root = opt.Root
				}
				redop := "none"
				if reduces(cname) {
					redop = opt.Op.String()
				}
				algbw := float64(bytes) / el / 1e9
				row := Row{Coll: cname, Bytes: bytes, Count: countCol, Type: opt.DataType.String(), RedOp: redop,
					Root: root, InPlace: inPlace, TimeUs: el * 1e6, AlgBW: algbw, BusBW: algbw * busFactor(cname, n), Wrong: wrong}
				if f, err := coll.ParseFunc(cname); err == nil && arg > 0 {
					ran, nccl, err := c.Plan(coll.Call{Func: f, Count: arg, DataType: opt.DataType, Op: opt.Op, Root: opt.Root})
					if err != nil {
						return nil, err
					}
					row.Decision(ran, nccl)
				}
				rows = append(rows, row)
			}
		}
	}
	return rows, nil
}

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
func (s *rankState) check(cname string, arg int64, inPlace bool) (int64, error) {
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
	f, err := coll.ParseFunc(cname)
	if err != nil {
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

// WriteTable prints the result as nccl-tests does.
func WriteTable(w io.Writer, res *Result) {
	fmt.Fprintf(w, "# nThread 1 nGpus %d minBytes %d maxBytes %d  transport %s\n", res.NRanks, minBytes(res), maxBytesOf(res), res.Transport)
	if res.Machine != "" {
		fmt.Fprintf(w, "# plans: %s\n", res.Machine)
	}
	cur := ""
	var oop *Row
	flush := func(r *Row, ip *Row) {
		root := fmt.Sprint(r.Root)
		fmt.Fprintf(w, "%12d  %12d  %8s  %6s  %6s", r.Bytes, r.Count, r.Type, r.RedOp, root)
		for _, x := range []*Row{r, ip} {
			if x == nil {
				fmt.Fprintf(w, "  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A")
				continue
			}
			wr := "N/A"
			if x.Wrong >= 0 {
				wr = fmt.Sprint(x.Wrong)
			}
			fmt.Fprintf(w, "  %7s  %6.2f  %6.2f  %6s", fmtTime(x.TimeUs), x.AlgBW, x.BusBW, wr)
		}
		// The plan run, after nccl-tests' columns, and NCCL's decision where it is another.
		if r.Algo != "" {
			fmt.Fprintf(w, "  %6s  %6s  %3d", r.Algo, r.Proto, r.NChannels)
			if r.NCCL != "" {
				fmt.Fprintf(w, "  nccl:%s", r.NCCL)
			}
		}
		fmt.Fprintln(w)
	}
	for i := range res.Rows {
		r := &res.Rows[i]
		if r.Coll != cur {
			if oop != nil {
				flush(oop, nil)
				oop = nil
			}
			cur = r.Coll
			fmt.Fprintf(w, "#\n# Collective: %s\n#\n", r.Coll)
			fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %32s  %32s\n", "", "", "", "", "", "out-of-place", "in-place")
			fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %6s  %6s  %3s\n", "size", "count", "type", "redop", "root",
				"time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "algo", "proto", "nch")
			fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "",
				"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")
		}
		if !r.InPlace {
			if oop != nil {
				flush(oop, nil)
			}
			oop = r
			continue
		}
		if oop != nil && oop.Bytes == r.Bytes {
			flush(oop, r)
		} else {
			flush(r, r)
		}
		oop = nil
	}
	if oop != nil {
		flush(oop, nil)
	}
	wrongMsg := "OK"
	if res.Wrong > 0 {
		wrongMsg = "FAILED"
	}
	fmt.Fprintf(w, "# Out of bounds values : %d %s\n", res.Wrong, wrongMsg)
	// nccl-tests: PRINT("# Avg bus bandwidth    : %g %s\n", bw, "") — C's %g is Go's %.6g
	// (6 significant digits, trailing zeros dropped), and the empty %s leaves a trailing space.
	fmt.Fprintf(w, "# Avg bus bandwidth    : %.6g \n#\n", res.AvgBusBW)
}

func fmtTime(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.0f", us)
	case us >= 1e4:
		return fmt.Sprintf("%.1f", us)
	}
	return fmt.Sprintf("%.2f", us)
}

func minBytes(r *Result) int64 {
	m := int64(math.MaxInt64)
	for _, x := range r.Rows {
		m = min(m, x.Bytes)
	}
	if len(r.Rows) == 0 {
		return 0
	}
	return m
}

func maxBytesOf(r *Result) int64 {
	var m int64
	for _, x := range r.Rows {
		m = max(m, x.Bytes)
	}
	return m
}

// WriteJSON writes the result as JSON.
func WriteJSON(w io.Writer, res *Result) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(res)
}
