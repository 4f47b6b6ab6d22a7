package engine

import (
	"fmt"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/comm/perf"
	"github.com/simccl/simccl/cuda"
)

// Bench measures collectives on the communicators of one clique the way nccl-tests 2.19 does
// (common.cu) and as comm/perf does on CPUs, so that the two backends print the same table: per
// size, out-of-place then in-place; Warmup launches, then Iters launches timed on the host from
// the first launch to the end of every rank's stream; algbw = bytes/time, busbw = algbw × the
// collective's factor; with Check, one extra run per size and placement whose every element is
// compared with a float64 reference (#wrong). One goroutine drives every GPU, each launch in a
// process-wide group (nccl-tests -g N with one thread).
func Bench(comms []*Comm, opt perf.Options) (*perf.Result, error) {
	n := len(comms)
	if n == 0 {
		return nil, fmt.Errorf("engine: Bench: no communicators")
	}
	if opt.Iters <= 0 {
		opt.Iters = 20
	}
	if opt.Root < 0 || opt.Root >= n {
		return nil, fmt.Errorf("engine: Bench: root %d of %d ranks", opt.Root, n)
	}
	elt := int64(opt.DataType.Size())
	if elt == 0 {
		return nil, fmt.Errorf("engine: Bench: data type %v", opt.DataType)
	}
	var maxSize int64
	for _, s := range opt.Sizes {
		maxSize = max(maxSize, s)
	}
	maxSize = max(maxSize, 16)
	b := &bench{comms: comms, n: n, opt: opt, elt: elt, op: opt.Op}
	if opt.Op == coll.PreMulSum {
		b.scalar = 2
		for _, c := range comms {
			b.op = c.RedOpCreatePreMulSum(b.scalar)
		}
	}
	defer b.free()
	for _, c := range comms {
		var rb benchRank
		err := c.dev.Do(func(x *cuda.Ctx) error {
			var err error
			if rb.send, err = x.Alloc(int(maxSize)); err != nil {
				return err
			}
			if rb.recv, err = x.Alloc(int(maxSize)); err != nil {
				return err
			}
			if err = x.Memset(rb.send, 0, int(maxSize)); err != nil {
				return err
			}
			if err = x.Memset(rb.recv, 0, int(maxSize)); err != nil {
				return err
			}
			rb.stream, err = x.NewStream()
			return err
		})
		b.ranks = append(b.ranks, rb)
		if err != nil {
			return nil, fmt.Errorf("engine: Bench: rank %d: %w", c.rank, err)
		}
	}
	res := &perf.Result{NRanks: n, Transport: "cuda-p2p"}
	for _, cname := range opt.Colls {
		for _, size := range opt.Sizes {
			countCol, arg, bytes := benchCounts(cname, size, elt, n)
			var line perf.Line
			for _, inPlace := range []bool{false, true} {
				row := perf.Row{Coll: cname, Bytes: bytes, Count: countCol, Type: opt.DataType.String(), RedOp: perf.OpName(opt.Op),
					Root: -1, InPlace: inPlace, Wrong: -1}
				if cname == "broadcast" || cname == "reduce" {
					row.Root = opt.Root
				}
				if !benchReduces(cname) {
					row.RedOp = "none"
				}
				if inPlace && (cname == "alltoall" || cname == "sendrecv") {
					continue // not in-place safe
				}
				for i := 0; i < opt.Warmup; i++ {
					if err := b.issue(cname, arg, inPlace); err != nil {
						return nil, err
					}
				}
				if err := b.sync(); err != nil {
					return nil, err
				}
				var us float64
				if opt.Graph > 0 {
					var err error
					if us, err = b.timeGraph(cname, arg, inPlace); err != nil {
						return nil, err
					}
				} else {
					t0 := time.Now()
					for i := 0; i < opt.Iters; i++ {
						if err := b.issue(cname, arg, inPlace); err != nil {
							return nil, err
						}
					}
					if err := b.sync(); err != nil {
						return nil, err
					}
					us = float64(time.Since(t0).Microseconds()) / float64(opt.Iters)
				}
				us = max(us, 1e-3)
				row.TimeUs = us
				row.AlgBW = float64(bytes) / us / 1e3
				row.BusBW = row.AlgBW * benchBusFactor(cname, n)
				if opt.Check {
					w, err := b.check(cname, arg, inPlace)
					if err != nil {
						return nil, err
					}
					row.Wrong = w
				}
				if f, err := coll.ParseFunc(cname); err == nil && arg > 0 {
					ran, nccl, err := comms[0].cl.cfg.plan(coll.Call{Func: f, Count: arg, DataType: opt.DataType, Op: opt.Op, Root: opt.Root})
					if err != nil {
						return nil, err
					}
					row.Decision(ran, nccl)
				}
				if inPlace {
					line.InPlace = &row
				} else {
					line.OutOfPlace = row
				}
			}
			// Each size goes to the sink as it finishes (rows are kept only without one), as
			// comm/perf.Run does, so that both backends stream the same lines.
			res.Add(line, opt.Sink == nil)
			if opt.Sink != nil {
				if err := opt.Sink.Line(line); err != nil {
					return nil, err
				}
			}
		}
	}
	return res, nil
}

type benchRank struct {
	send, recv cuda.DevPtr
	stream     cuda.Stream
}

type bench struct {
	comms  []*Comm
	n      int
	opt    perf.Options
	elt    int64
	op     coll.RedOp
	scalar float64
	ranks  []benchRank
}

func (b *bench) free() {
	for r, rb := range b.ranks {
		_ = b.comms[r].dev.Do(func(x *cuda.Ctx) error {
			_ = x.StreamSync(rb.stream)
			_ = x.Free(rb.send)
			_ = x.Free(rb.recv)
			return x.DestroyStream(rb.stream)
		})
	}
}

// benchBusFactor is nccl-tests' busbw factor (the *GetBw functions of its tests).
func benchBusFactor(c string, n int) float64 {
	switch c {
	case "allreduce":
		return 2 * float64(n-1) / float64(n)
	case "allgather", "reducescatter", "alltoall":
		return float64(n-1) / float64(n)
	}
	return 1
}

// benchCounts gives nccl-tests' count column, the count argument and the bytes column of a size.
func benchCounts(c string, size, elt int64, n int) (countCol, arg, bytes int64) {
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

func benchReduces(c string) bool { return c == "allreduce" || c == "reduce" || c == "reducescatter" }

// pointers gives rank r's send and receive buffers for a call (nccl-tests' in-place layout).
func (b *bench) pointers(r int, cname string, arg int64, inPlace bool) (send, recv cuda.DevPtr) {
	rb := b.ranks[r]
	if !inPlace {
		return rb.send, rb.recv
	}
	off := int(int64(r) * arg * b.elt)
	switch cname {
	case "allgather":
		return rb.recv.Add(off), rb.recv
	case "reducescatter":
		return rb.recv, rb.recv.Add(off)
	}
	return rb.recv, rb.recv
}

func (b *bench) issue(cname string, arg int64, inPlace bool) error {
	GroupStart()
	var errs []error
	cnt := int(arg)
	dt := b.opt.DataType
	for r, c := range b.comms {
		s, rv := b.pointers(r, cname, arg, inPlace)
		st := b.ranks[r].stream
		var err error
		switch cname {
		case "allreduce":
			err = c.AllReduce(s, rv, cnt, dt, b.op, st)
		case "allgather":
			err = c.AllGather(s, rv, cnt, dt, st)
		case "reducescatter":
			err = c.ReduceScatter(s, rv, cnt, dt, b.op, st)
		case "broadcast":
			err = c.Broadcast(s, rv, cnt, dt, b.opt.Root, st)
		case "reduce":
			err = c.Reduce(s, rv, cnt, dt, b.op, b.opt.Root, st)
		case "alltoall":
			err = c.AllToAll(s, rv, cnt, dt, st)
		case "sendrecv":
			err = c.Send(s, cnt, dt, (r+1)%b.n, st)
			if err == nil {
				err = c.Recv(rv, cnt, dt, (r+b.n-1)%b.n, st)
			}
		default:
			err = fmt.Errorf("engine: Bench: unknown collective %q", cname)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := GroupEnd(); err != nil {
		return err
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// capture records iters launches of the call into one CUDA graph (Capture, global mode); the
// caller destroys it with release.
func (b *bench) capture(cname string, arg int64, inPlace bool, iters int) (exec cuda.GraphExec, release func(), err error) {
	streams := make([]cuda.Stream, b.n)
	for r := range streams {
		streams[r] = b.ranks[r].stream
	}
	exec, err = Capture(b.comms, streams, cuda.CaptureGlobal, func() error {
		for i := 0; i < iters; i++ {
			if err := b.issue(cname, arg, inPlace); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("engine: Bench: %w", err)
	}
	d0 := b.comms[0].dev
	return exec, func() { _ = d0.Do(func(x *cuda.Ctx) error { return x.DestroyGraphExec(exec) }) }, nil
}

// replay launches exec times times on rank 0's stream and waits for the end.
func (b *bench) replay(exec cuda.GraphExec, times int) error {
	return b.comms[0].dev.Do(func(x *cuda.Ctx) error {
		for i := 0; i < times; i++ {
			if err := x.LaunchGraph(exec, b.ranks[0].stream); err != nil {
				return err
			}
		}
		return x.StreamSync(b.ranks[0].stream)
	})
}

// timeGraph returns the time per iteration of opt.Graph replays of a graph of opt.Iters launches,
// from the first replay's launch to the end of the last.
func (b *bench) timeGraph(cname string, arg int64, inPlace bool) (float64, error) {
	exec, release, err := b.capture(cname, arg, inPlace, b.opt.Iters)
	if err != nil {
		return 0, err
	}
	defer release()
	t0 := time.Now()
	if err := b.replay(exec, b.opt.Graph); err != nil {
		return 0, fmt.Errorf("engine: Bench: graph replay: %w", err)
	}
	return float64(time.Since(t0).Microseconds()) / float64(b.opt.Graph*b.opt.Iters), nil
}

func (b *bench) sync() error {
	for r, c := range b.comms {
		if err := c.dev.Do(func(x *cuda.Ctx) error { return x.StreamSync(b.ranks[r].stream) }); err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return nil
}

// check runs the call once on known inputs and counts the wrong elements of every rank.
func (b *bench) check(cname string, arg int64, inPlace bool) (int64, error) {
	dt := b.opt.DataType
	n := b.n
	sendElems, recvElems := arg, arg
	switch cname {
	case "allgather":
		recvElems = arg * int64(n)
	case "reducescatter":
		sendElems = arg * int64(n)
	case "alltoall":
		sendElems, recvElems = arg*int64(n), arg*int64(n)
	}
	for r, c := range b.comms {
		s, rv := b.pointers(r, cname, arg, inPlace)
		in := make([]byte, sendElems*b.elt)
		for i := 0; i < int(sendElems); i++ {
			comm.SetElement(dt, in, i, coll.TestValue(r, int64(i)))
		}
		poison := make([]byte, recvElems*b.elt)
		for i := range poison {
			poison[i] = 0xA5
		}
		err := c.dev.Do(func(x *cuda.Ctx) error {
			if err := x.StreamSync(b.ranks[r].stream); err != nil {
				return err
			}
			if !inPlace {
				if err := x.CopyHtoD(rv, poison); err != nil {
					return err
				}
			}
			return x.CopyHtoD(s, in)
		})
		if err != nil {
			return 0, err
		}
	}
	if b.opt.Graph > 0 {
		// Check what the timing ran: the call captured into a graph (of one launch, so that an
		// in-place call is applied once), replayed once.
		exec, release, err := b.capture(cname, arg, inPlace, 1)
		if err != nil {
			return 0, err
		}
		defer release()
		if err := b.replay(exec, 1); err != nil {
			return 0, err
		}
	} else if err := b.issue(cname, arg, inPlace); err != nil {
		return 0, err
	}
	if err := b.sync(); err != nil {
		return 0, err
	}
	f, err := coll.ParseFunc(cname)
	if err != nil {
		return 0, err
	}
	var wrong int64
	for r, c := range b.comms {
		want, err := coll.TestWant(f, dt, b.opt.Op, b.scalar, n, r, b.opt.Root, arg, coll.TestValue)
		if err != nil {
			return 0, err
		}
		if want == nil {
			continue
		}
		_, rv := b.pointers(r, cname, arg, inPlace)
		out := make([]byte, recvElems*b.elt)
		if err := c.dev.Do(func(x *cuda.Ctx) error { return x.CopyDtoH(out, rv) }); err != nil {
			return 0, err
		}
		for i := 0; i < int(recvElems); i++ {
			if !want(int64(i)).Holds(dt, dt.Bits(out, i)) {
				wrong++
			}
		}
	}
	return wrong, nil
}
