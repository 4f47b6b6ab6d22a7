package coll

import (
	"errors"
	"fmt"
	"strings"
)

// ErrDeadlock reports a schedule whose remaining steps can never run.
var ErrDeadlock = errors.New("coll: deadlock")

// Buffers are one rank's buffers for one operation, one float64 per element (Execute is a
// reference: values, not bit patterns, are what it checks).
type Buffers struct {
	Send, Recv []float64
}

// ExecOptions tune the reference interpreter.
type ExecOptions struct {
	// Unbounded ignores flow-control credits (every connection buffers without limit).
	Unbounded bool
	// InPlace runs every operation in place: Buffers.Recv is the one buffer (Op.InPlaceBytes long)
	// holding both the send and the receive buffer at Op.InPlaceOffsets(rank); Buffers.Send is
	// ignored, so the input must be placed in Recv at the send offset.
	InPlace bool
	// Sequential runs every program strictly in list order, ignoring lanes (each step also waits
	// for the step before it). Compile's schedules are deadlock-free this way too; it is slower in
	// time, not different in result.
	Sequential bool
	// Scalar is PreMulSum's scalar (0 means 1): every value a PreMulSum operation reads from a
	// send buffer is multiplied by it, where NCCL pre-multiplies the rank's input.
	Scalar float64
}

// RankStats counts what one rank moved.
type RankStats struct {
	SentBytes, RecvBytes int64 // payload
	SentWire, RecvWire   int64 // on the wire
	SentMsgs, RecvMsgs   int
}

// ExecStats is what Execute observed.
type ExecStats struct {
	Steps int
	Ranks []RankStats // per endpoint: ranks, then switches
}

type stepRef struct{ prog, step int }

// Execute runs a schedule on in-memory buffers (bufs[op][rank]) following the contract in
// schedule.go: a step runs once its dependencies are done, its messages have arrived and (unless
// opt.Unbounded) its credits are free. It returns ErrDeadlock naming the blocked steps if some
// steps can never run, and never hangs.
func Execute(s *Schedule, bufs [][]Buffers, opt ExecOptions) (*ExecStats, error) {
	ix, err := NewIndex(s)
	if err != nil {
		return nil, err
	}
	if len(bufs) != len(s.Ops) {
		return nil, fmt.Errorf("coll: Execute: %d buffer sets for %d operations", len(bufs), len(s.Ops))
	}
	for o := range bufs {
		if len(bufs[o]) != s.NRanks {
			return nil, fmt.Errorf("coll: Execute: operation %d: buffers for %d ranks, want %d", o, len(bufs[o]), s.NRanks)
		}
		elt := int64(s.Ops[o].DataType.Size())
		for r, b := range bufs[o] {
			if !opt.InPlace && (int64(len(b.Recv)) < s.Ops[o].RecvBytes/elt || int64(len(b.Send)) < s.Ops[o].SendBytes/elt) {
				return nil, fmt.Errorf("coll: Execute: operation %d rank %d: buffers too small (send %d, recv %d elements; want %d, %d)",
					o, r, len(b.Send), len(b.Recv), s.Ops[o].SendBytes/elt, s.Ops[o].RecvBytes/elt)
			}
			if opt.InPlace && int64(len(b.Recv))*elt < s.Ops[o].InPlaceBytes() {
				return nil, fmt.Errorf("coll: Execute: operation %d rank %d: in place needs Recv of %d elements, have %d", o, r, s.Ops[o].InPlaceBytes()/elt, len(b.Recv))
			}
		}
	}
	np := len(s.Programs)
	done := make([][]bool, np)
	queued := make([][]bool, np)
	dependents := make([][][]int, np)
	total := 0
	for pi := range s.Programs {
		p := &s.Programs[pi]
		done[pi] = make([]bool, len(p.Steps))
		queued[pi] = make([]bool, len(p.Steps))
		dependents[pi] = make([][]int, len(p.Steps))
		for i := range p.Steps {
			for _, d := range p.Steps[i].Deps {
				dependents[pi][d] = append(dependents[pi][d], i)
			}
		}
		total += len(p.Steps)
	}
	creditWaiters := make([][][]stepRef, len(s.Conns))
	data := make([][][]float64, len(s.Conns))
	arrived := make([][]bool, len(s.Conns))
	consumed := make([][]bool, len(s.Conns))
	for ci, c := range s.Conns {
		creditWaiters[ci] = make([][]stepRef, c.Messages)
		data[ci] = make([][]float64, c.Messages)
		arrived[ci] = make([]bool, c.Messages)
		consumed[ci] = make([]bool, c.Messages)
	}
	for pi := range s.Programs {
		for i, st := range s.Programs[pi].Steps {
			for _, x := range st.Send {
				if x.CreditSeq >= 0 {
					creditWaiters[x.Conn][x.CreditSeq] = append(creditWaiters[x.Conn][x.CreditSeq], stepRef{pi, i})
				}
			}
		}
	}
	stats := &ExecStats{Ranks: make([]RankStats, s.Endpoints())}
	var queue []stepRef
	push := func(r stepRef) {
		if !done[r.prog][r.step] && !queued[r.prog][r.step] {
			queued[r.prog][r.step] = true
			queue = append(queue, r)
		}
	}
	for pi := range s.Programs {
		for i, st := range s.Programs[pi].Steps {
			if len(st.Deps) == 0 && (i == 0 || !opt.Sequential) {
				push(stepRef{pi, i})
			}
		}
	}
	if opt.Sequential {
		for pi := range s.Programs {
			for i := 1; i < len(s.Programs[pi].Steps); i++ {
				dependents[pi][i-1] = append(dependents[pi][i-1], i)
			}
		}
	}
	ready := func(pi, i int) bool {
		st := &s.Programs[pi].Steps[i]
		if opt.Sequential && i > 0 && !done[pi][i-1] {
			return false
		}
		for _, d := range st.Deps {
			if !done[pi][d] {
				return false
			}
		}
		for _, x := range st.Recv {
			if !arrived[x.Conn][x.Seq] {
				return false
			}
		}
		if !opt.Unbounded {
			for _, x := range st.Send {
				if x.CreditSeq >= 0 && !consumed[x.Conn][x.CreditSeq] {
					return false
				}
			}
		}
		return true
	}
	executed := 0
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		queued[r.prog][r.step] = false
		if done[r.prog][r.step] || !ready(r.prog, r.step) {
			continue
		}
		p := &s.Programs[r.prog]
		st := &p.Steps[r.step]
		if err := runStep(s, bufs, opt, p, st, data); err != nil {
			return stats, err
		}
		done[r.prog][r.step] = true
		executed++
		rs := &stats.Ranks[p.Rank]
		for _, x := range st.Recv {
			arrived[x.Conn][x.Seq] = false
			data[x.Conn][x.Seq] = nil
			consumed[x.Conn][x.Seq] = true
			rs.RecvBytes += st.Bytes
			rs.RecvWire += st.Wire
			rs.RecvMsgs++
			for _, w := range creditWaiters[x.Conn][x.Seq] {
				push(w)
			}
		}
		for _, x := range st.Send {
			arrived[x.Conn][x.Seq] = true
			rs.SentBytes += st.Bytes
			rs.SentWire += st.Wire
			rs.SentMsgs++
			c := &s.Conns[x.Conn]
			to := c.To*s.NChannels + c.Channel
			push(stepRef{to, ix.Local(to, ix.Receiver[ix.Msg(x)])})
		}
		for _, d := range dependents[r.prog][r.step] {
			push(stepRef{r.prog, d})
		}
	}
	stats.Steps = executed
	if executed < total {
		return stats, deadlockError(s, done, arrived, consumed, opt, total-executed)
	}
	return stats, nil
}

// deadlockError names, for a few blocked programs, the first step that cannot run and why.
func deadlockError(s *Schedule, done [][]bool, arrived, consumed [][]bool, opt ExecOptions, left int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of the schedule's steps can never run", left)
	shown := 0
	for pi := range s.Programs {
		p := &s.Programs[pi]
		for i := range p.Steps {
			if done[pi][i] {
				continue
			}
			st := &p.Steps[i]
			depsOK := true
			for _, d := range st.Deps {
				depsOK = depsOK && done[pi][d]
			}
			if !depsOK {
				continue
			}
			var why []string
			for _, x := range st.Recv {
				if !arrived[x.Conn][x.Seq] && !consumed[x.Conn][x.Seq] {
					why = append(why, fmt.Sprintf("message %d from rank %d (connection %d)", x.Seq, x.Peer, x.Conn))
				}
			}
			if !opt.Unbounded {
				for _, x := range st.Send {
					if x.CreditSeq >= 0 && !consumed[x.Conn][x.CreditSeq] {
						why = append(why, fmt.Sprintf("rank %d to free the slot of message %d (connection %d)", x.Peer, x.CreditSeq, x.Conn))
					}
				}
			}
			fmt.Fprintf(&b, "; rank %d channel %d step %d (%v, lane %d) waits for %s", p.Rank, p.Channel, i, st.Prim, st.Lane, strings.Join(why, ", "))
			if shown++; shown == 4 {
				return fmt.Errorf("%w: %s; …", ErrDeadlock, b.String())
			}
		}
	}
	return fmt.Errorf("%w: %s", ErrDeadlock, b.String())
}

// runStep does one step's data movement.
func runStep(s *Schedule, bufs [][]Buffers, opt ExecOptions, p *Program, st *Step, data [][][]float64) error {
	op := &s.Ops[st.Op]
	elt := int64(op.DataType.Size())
	n := int(st.Bytes / elt)
	slice := func(ref *BufRef) ([]float64, error) {
		b := &bufs[st.Op][p.Rank]
		var buf []float64
		off := ref.Offset / elt
		switch {
		case opt.InPlace:
			so, ro := op.InPlaceOffsets(p.Rank)
			if ref.Buf == BufSend {
				off += so / elt
			} else {
				off += ro / elt
			}
			buf = b.Recv
		case ref.Buf == BufSend:
			buf = b.Send
		default:
			buf = b.Recv
		}
		if off < 0 || off+int64(n) > int64(len(buf)) {
			return nil, fmt.Errorf("coll: Execute: rank %d channel %d step %d: %v range [%d,%d) outside %d elements", p.Rank, p.Channel, st.Index, ref.Buf, off, off+int64(n), len(buf))
		}
		return buf[off : off+int64(n)], nil
	}
	acc := make([]float64, n)
	have := false
	if st.Src != nil {
		src, err := slice(st.Src)
		if err != nil {
			return err
		}
		copy(acc, src)
		have = true
		if op.RedOp == PreMulSum && st.Src.Buf == BufSend && opt.Scalar != 0 {
			for i := range acc {
				acc[i] *= opt.Scalar
			}
		}
	}
	if st.Prim == LocalReduce {
		dst, err := slice(st.Dst)
		if err != nil {
			return err
		}
		for i := range acc {
			acc[i] = reduce(op.RedOp, dst[i], acc[i])
		}
	}
	for _, x := range st.Recv {
		msg := data[x.Conn][x.Seq]
		if len(msg) != n {
			return fmt.Errorf("coll: Execute: rank %d channel %d step %d: message %d on connection %d has %d elements, want %d", p.Rank, p.Channel, st.Index, x.Seq, x.Conn, len(msg), n)
		}
		if !have {
			copy(acc, msg)
			have = true
			continue
		}
		for i := range acc {
			acc[i] = reduce(op.RedOp, acc[i], msg[i])
		}
	}
	if st.PostOp && op.RedOp == Avg {
		for i := range acc {
			acc[i] /= float64(s.NRanks)
		}
	}
	if st.Dst != nil {
		dst, err := slice(st.Dst)
		if err != nil {
			return err
		}
		copy(dst, acc)
	}
	for _, x := range st.Send {
		data[x.Conn][x.Seq] = acc
	}
	return nil
}

// reduce applies one reduction to two values (Avg sums, the division is the post-op; PreMulSum
// sums, its inputs were multiplied by ExecOptions.Scalar as they were read).
func reduce(op RedOp, a, b float64) float64 {
	switch op {
	case Prod:
		return a * b
	case Max:
		if b > a {
			return b
		}
		return a
	case Min:
		if b < a {
			return b
		}
		return a
	}
	return a + b
}
