package intercept

import (
	"fmt"
	"sync"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
)

// ExecOptions steer Execute.
type ExecOptions struct {
	// Config is the real engine's configuration (transport, channels, algorithm…); nil: defaults
	// (in-process transport for goroutine ranks).
	Config *comm.Config
	// MaxBytes skips launches whose largest buffer exceeds it (0: no limit); the report counts them.
	MaxBytes int64
}

// ExecLaunch is one launch run for real.
type ExecLaunch struct {
	Comm   string  `json:"comm"`
	Index  int     `json:"index"`
	Ops    string  `json:"ops"`
	NRanks int     `json:"nranks"`
	Bytes  int64   `json:"bytes"` // largest buffer of the launch
	WallUs float64 `json:"wall_us"`
}

// ExecReport is the outcome of Execute.
type ExecReport struct {
	Launches []ExecLaunch `json:"launches"`
	TotalUs  float64      `json:"total_us"`
	Skipped  int          `json:"skipped"`
	Wrong    int          `json:"wrong"` // AllReduce/Broadcast results that differ from their definition
}

// Execute runs the trace's launches for real with the comm engine, every communicator as
// goroutine ranks of this process (comm.InitAll) on host memory, one launch after another in each
// communicator's order, and times each launch from its first call to the last rank's completion.
// Data is synthetic: rank r sends the value r+1; AllReduce (sum) and Broadcast results are
// checked against their definition.
func Execute(launches []Launch, opt ExecOptions) (*ExecReport, error) {
	if len(launches) == 0 {
		return nil, fmt.Errorf("%w: the trace has no collective or point-to-point call", ErrReplay)
	}
	comms := map[string][]*comm.Comm{}
	defer func() {
		for _, cs := range comms {
			for _, c := range cs {
				c.Destroy()
			}
		}
	}()
	rep := &ExecReport{}
	for _, l := range launches {
		cs := comms[l.Comm]
		if cs == nil {
			var err error
			if cs, err = comm.InitAll(l.NRanks, opt.Config); err != nil {
				return nil, fmt.Errorf("%w: communicator %s (%d ranks): %v", ErrReplay, l.Comm, l.NRanks, err)
			}
			comms[l.Comm] = cs
		}
		big, err := launchBytes(&l)
		if err != nil {
			return nil, err
		}
		if opt.MaxBytes > 0 && big > opt.MaxBytes {
			rep.Skipped++
			continue
		}
		wall, wrong, err := runLaunch(cs, &l)
		if err != nil {
			return nil, fmt.Errorf("%w: %s launch %d (%s): %v", ErrReplay, l.Comm, l.Index, l.Ops(), err)
		}
		rep.Wrong += wrong
		us := float64(wall) / float64(time.Microsecond)
		rep.Launches = append(rep.Launches, ExecLaunch{Comm: l.Comm, Index: l.Index, Ops: l.Ops(), NRanks: l.NRanks, Bytes: big, WallUs: us})
		rep.TotalUs += us
	}
	return rep, nil
}

// bufs returns the send and receive sizes (bytes) of one collective on n ranks.
func bufs(r *Record, n int) (send, recv int64, err error) {
	dt, err := dataType(r)
	if err != nil {
		return 0, 0, err
	}
	b := r.Count * int64(dt.Size())
	switch r.Op {
	case OpAllGather:
		return b, b * int64(n), nil
	case OpReduceScatter:
		return b * int64(n), b, nil
	case OpAllToAll:
		return b * int64(n), b * int64(n), nil
	}
	return b, b, nil
}

func launchBytes(l *Launch) (int64, error) {
	var big int64
	for i := range l.Colls {
		s, r, err := bufs(&l.Colls[i], l.NRanks)
		if err != nil {
			return 0, err
		}
		big = max(big, s, r)
	}
	for _, t := range l.P2P {
		big = max(big, t.Bytes)
	}
	return big, nil
}

// runLaunch issues the launch on every rank (a goroutine each; several calls go in one group)
// and waits for all of them.
func runLaunch(cs []*comm.Comm, l *Launch) (time.Duration, int, error) {
	n := len(cs)
	type rankBufs struct{ send, recv [][]byte }
	rb := make([]rankBufs, n)
	for r := 0; r < n; r++ {
		for i := range l.Colls {
			s, v, _ := bufs(&l.Colls[i], n)
			sb := make([]byte, s)
			dt, _ := dataType(&l.Colls[i])
			for e := 0; e < int(s)/dt.Size(); e++ {
				comm.SetElement(dt, sb, e, float64(r+1))
			}
			rb[r].send = append(rb[r].send, sb)
			rb[r].recv = append(rb[r].recv, make([]byte, v))
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := time.Now()
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			c := cs[r]
			grouped := len(l.Colls)+len(l.P2P) > 1
			if grouped {
				c.GroupStart()
			}
			var err error
			for i := range l.Colls {
				x := &l.Colls[i]
				dt, _ := dataType(x)
				op := coll.Sum
				if x.RedOp != "" {
					op, _ = coll.ParseRedOp(x.RedOp)
				}
				if op == coll.PreMulSum {
					op = coll.Sum
				}
				s, v, cnt := rb[r].send[i], rb[r].recv[i], int(x.Count)
				switch x.Op {
				case OpAllReduce:
					err = c.AllReduce(s, v, cnt, dt, op, nil)
				case OpBroadcast:
					err = c.Broadcast(s, v, cnt, dt, x.Root, nil)
				case OpReduce:
					err = c.Reduce(s, v, cnt, dt, op, x.Root, nil)
				case OpAllGather:
					err = c.AllGather(s, v, cnt, dt, nil)
				case OpReduceScatter:
					err = c.ReduceScatter(s, v, cnt, dt, op, nil)
				case OpAllToAll:
					err = c.AllToAll(s, v, cnt, dt, nil)
				default:
					err = fmt.Errorf("op %s cannot be executed", x.Op)
				}
				if err != nil {
					break
				}
			}
			for _, t := range l.P2P {
				if err != nil {
					break
				}
				buf := make([]byte, t.Bytes)
				if t.Src == r {
					err = c.Send(buf, int(t.Bytes), coll.Int8, t.Dst, nil)
				}
				if err == nil && t.Dst == r {
					err = c.Recv(make([]byte, t.Bytes), int(t.Bytes), coll.Int8, t.Src, nil)
				}
			}
			if grouped {
				if e := c.GroupEnd(); err == nil {
					err = e
				}
			}
			if e := c.Synchronize(); err == nil {
				err = e
			}
			errs[r] = err
		}(r)
	}
	wg.Wait()
	wall := time.Since(start)
	for r, err := range errs {
		if err != nil {
			return 0, 0, fmt.Errorf("rank %d: %v", r, err)
		}
	}
	// Check what has a one-line definition: AllReduce sum and Broadcast.
	wrong := 0
	for i := range l.Colls {
		x := &l.Colls[i]
		dt, _ := dataType(x)
		var want float64
		switch {
		case x.Op == OpAllReduce && (x.RedOp == "sum" || x.RedOp == ""):
			want = float64(n*(n+1)) / 2
		case x.Op == OpBroadcast:
			want = float64(x.Root + 1)
		default:
			continue
		}
		for r := 0; r < n; r++ {
			v := rb[r].recv[i]
			if len(v) == 0 {
				continue
			}
			last := len(v)/dt.Size() - 1
			if comm.Element(dt, v, 0) != want || comm.Element(dt, v, last) != want {
				wrong++
				break
			}
		}
	}
	return wall, wrong, nil
}
