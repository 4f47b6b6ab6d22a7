package coll

import (
	"fmt"
	"math"
)

// Index is a validated schedule's table of steps and messages, the one every executor reads
// instead of re-deriving (and re-checking) it from the programs. Steps are numbered program by
// program (program p's step i is StepStart[p]+i), messages connection by connection (message seq
// of connection c is MsgStart[c]+seq); for each message it holds the step that sends it and the
// step that receives it.
type Index struct {
	StepStart []int32 // len(Programs)+1
	MsgStart  []int32 // len(Conns)+1
	Sender    []int32 // per message: the number of its sending step
	Receiver  []int32 // per message: the number of its receiving step
}

// Msg is the number of message x.
func (ix *Index) Msg(x Xfer) int32 { return ix.MsgStart[x.Conn] + int32(x.Seq) }

// Step is the number of step i of program p.
func (ix *Index) Step(p, i int) int32 { return ix.StepStart[p] + int32(i) }

// Steps and Msgs are the numbers of steps and messages.
func (ix *Index) Steps() int { return int(ix.StepStart[len(ix.StepStart)-1]) }

// Msgs is the number of messages.
func (ix *Index) Msgs() int { return int(ix.MsgStart[len(ix.MsgStart)-1]) }

// Local is the position in its own program of step g, given that program's number p.
func (ix *Index) Local(p int, g int32) int { return int(g - ix.StepStart[p]) }

// NewIndex checks that a schedule keeps the contract (see Validate) and returns its index.
func NewIndex(s *Schedule) (*Index, error) {
	c, err := NewIndexChecker(s)
	if err != nil {
		return nil, err
	}
	for pi := range s.Programs {
		if err := c.CheckProgram(pi); err != nil {
			return nil, err
		}
	}
	return c.Index()
}

// IndexChecker is NewIndex in parts, for a reader that walks the programs itself:
// NewIndexChecker checks the schedule's header and connections, CheckProgram one program and
// its steps, Index every message's two ends. Run in program order, the parts return the error
// NewIndex returns; CheckProgram may run on two goroutines at once for different programs (a
// message's sending and receiving programs each write their own end of it).
type IndexChecker struct {
	s        *Schedule
	ix       *Index
	snd, rcv []msgEnd // per message, what its sending and its receiving step give it
}

// msgEnd is what one end of a message says of it: the step's bytes and the transfer's slots.
type msgEnd struct {
	bytes int64
	slots int
}

// NewIndexChecker checks s's header and connections and makes the index the programs' checks
// fill.
func NewIndexChecker(s *Schedule) (*IndexChecker, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil", ErrBadSchedule)
	}
	if s.NRanks < 1 || s.NChannels < 1 || s.NChannels > MaxChannels {
		return nil, fmt.Errorf("%w: nranks %d, nchannels %d", ErrBadSchedule, s.NRanks, s.NChannels)
	}
	ne := s.Endpoints()
	if len(s.Programs) != ne*s.NChannels {
		return nil, fmt.Errorf("%w: %d programs for %d endpoints × %d channels", ErrBadSchedule, len(s.Programs), ne, s.NChannels)
	}
	for i, sw := range s.Switches {
		if sw.ID != s.NRanks+i || (sw.Kind != SwitchNVLS && sw.Kind != SwitchCollNet) {
			return nil, fmt.Errorf("%w: switch %d is malformed (%+v)", ErrBadSchedule, i, sw)
		}
	}
	ix := &Index{StepStart: make([]int32, len(s.Programs)+1), MsgStart: make([]int32, len(s.Conns)+1)}
	var steps, xfers int64
	for p := range s.Programs {
		steps += int64(len(s.Programs[p].Steps))
		if steps > math.MaxInt32 {
			return nil, fmt.Errorf("%w: more than %d steps", ErrBadSchedule, math.MaxInt32)
		}
		ix.StepStart[p+1] = int32(steps)
		for i := range s.Programs[p].Steps {
			xfers += int64(len(s.Programs[p].Steps[i].Send))
		}
	}
	var msgs int64
	for i, c := range s.Conns {
		if c.Messages < 0 || int64(c.Messages) > xfers {
			return nil, fmt.Errorf("%w: connection %d claims %d messages (the programs send %d in all)", ErrBadSchedule, i, c.Messages, xfers)
		}
		if c.ID != i || c.From < 0 || c.From >= ne || c.To < 0 || c.To >= ne || (c.From == c.To && c.ConnIndex < PATFoldConn) ||
			c.Channel < 0 || c.Channel >= s.NChannels {
			return nil, fmt.Errorf("%w: connection %d is malformed (%+v)", ErrBadSchedule, i, c)
		}
		msgs += int64(c.Messages)
		if msgs > math.MaxInt32 {
			return nil, fmt.Errorf("%w: more than %d messages", ErrBadSchedule, math.MaxInt32)
		}
		ix.MsgStart[i+1] = int32(msgs)
	}
	ix.Sender = make([]int32, msgs)
	ix.Receiver = make([]int32, msgs)
	for m := range ix.Sender {
		ix.Sender[m], ix.Receiver[m] = -1, -1
	}
	return &IndexChecker{s: s, ix: ix, snd: make([]msgEnd, msgs), rcv: make([]msgEnd, msgs)}, nil
}

// CheckProgram checks program pi and its steps, and records their messages' ends.
func (c *IndexChecker) CheckProgram(pi int) error {
	s := c.s
	p := &s.Programs[pi]
	if p.Rank != pi/s.NChannels || p.Channel != pi%s.NChannels {
		return fmt.Errorf("%w: program %d says rank %d channel %d", ErrBadSchedule, pi, p.Rank, p.Channel)
	}
	for i := range p.Steps {
		if err := c.checkStep(pi, i); err != nil {
			return err
		}
	}
	return nil
}

// Index checks, once every program has been, that every message has a sender and a receiver
// that agree on its bytes and slots, and returns the index.
func (c *IndexChecker) Index() (*Index, error) {
	s, ix := c.s, c.ix
	for ci := range s.Conns {
		for seq := 0; seq < s.Conns[ci].Messages; seq++ {
			m := ix.MsgStart[ci] + int32(seq)
			a, b := ix.Sender[m], ix.Receiver[m]
			if a < 0 || b < 0 {
				return nil, fmt.Errorf("%w: connection %d (%d→%d) message %d has no %s", ErrBadSchedule, ci, s.Conns[ci].From, s.Conns[ci].To, seq,
					map[bool]string{true: "sender", false: "receiver"}[a < 0])
			}
			if sa, sb := c.snd[m], c.rcv[m]; sa != sb {
				return nil, fmt.Errorf("%w: connection %d message %d: sender has %d bytes/%d slots, receiver %d/%d", ErrBadSchedule, ci, seq, sa.bytes, sa.slots, sb.bytes, sb.slots)
			}
		}
	}
	return ix, nil
}

// checkStep checks step i of program pi and records its messages in the index, and their ends.
func (ck *IndexChecker) checkStep(pi, i int) error {
	s, ix := ck.s, ck.ix
	p := &s.Programs[pi]
	st := &p.Steps[i]
	if int(st.Index) != i {
		return badStep(p, i, "index field says %d", st.Index)
	}
	if st.Op < 0 || int(st.Op) >= len(s.Ops) {
		return badStep(p, i, "operation %d out of range", st.Op)
	}
	if st.Prim < 0 || st.Prim >= NumPrims {
		return badStep(p, i, "bad primitive %d", int(st.Prim))
	}
	for _, d := range st.Deps {
		if d < 0 || d >= i {
			return badStep(p, i, "dependency %d does not point to an earlier step", d)
		}
	}
	op := &s.Ops[st.Op]
	elt := int64(op.DataType.Size())
	if elt == 0 {
		return badStep(p, i, "operation %d has unknown data type", st.Op)
	}
	if st.Bytes < 0 || st.Bytes%elt != 0 {
		return badStep(p, i, "%d bytes is not a whole number of %d-byte elements", st.Bytes, elt)
	}
	if st.Bytes > max64(op.SendBytes, op.RecvBytes) {
		return badStep(p, i, "%d bytes, more than the operation's buffers hold", st.Bytes)
	}
	if st.Prim.Receives() != (len(st.Recv) > 0) || st.Prim.Sends() != (len(st.Send) > 0) {
		return badStep(p, i, "%v with %d receives and %d sends", st.Prim, len(st.Recv), len(st.Send))
	}
	if !st.Prim.Reduces() && len(st.Recv) > 1 {
		return badStep(p, i, "%v cannot take %d messages", st.Prim, len(st.Recv))
	}
	if st.Prim.ReadsSrc() != (st.Src != nil) || st.Prim.WritesDst() != (st.Dst != nil) {
		return badStep(p, i, "%v with src %v dst %v", st.Prim, st.Src != nil, st.Dst != nil)
	}
	if p.Rank >= s.NRanks && st.Prim != RecvReduceForward && st.Prim != RecvSend {
		return badStep(p, i, "a switch cannot run %v", st.Prim)
	}
	for _, ref := range []*BufRef{st.Src, st.Dst} {
		if ref == nil {
			continue
		}
		size := op.RecvBytes
		if ref.Buf == BufSend {
			size = op.SendBytes
		} else if ref.Buf != BufRecv {
			return badStep(p, i, "unknown buffer %v", ref.Buf)
		}
		if ref.Offset%elt != 0 {
			return badStep(p, i, "%v buffer offset %d is not a multiple of the %d-byte element", ref.Buf, ref.Offset, elt)
		}
		if ref.Offset < 0 || ref.Offset+st.Bytes > size {
			return badStep(p, i, "%v buffer range [%d,%d) outside its %d bytes", ref.Buf, ref.Offset, ref.Offset+st.Bytes, size)
		}
	}
	g := ix.Step(pi, i)
	check := func(x Xfer, send bool) error {
		if x.Conn < 0 || int(x.Conn) >= len(s.Conns) {
			return badStep(p, i, "connection %d out of range", x.Conn)
		}
		c := &s.Conns[x.Conn]
		self, peer, tab := c.To, c.From, ix.Receiver
		if send {
			self, peer, tab = c.From, c.To, ix.Sender
		}
		if self != p.Rank || peer != int(x.Peer) || c.Channel != p.Channel {
			return badStep(p, i, "connection %d (%d→%d channel %d) does not fit peer %d", x.Conn, c.From, c.To, c.Channel, x.Peer)
		}
		if x.Seq < 0 || int(x.Seq) >= c.Messages {
			return badStep(p, i, "sequence %d on connection %d out of range (%d messages)", x.Seq, x.Conn, c.Messages)
		}
		m := ix.Msg(x)
		if tab[m] >= 0 {
			return badStep(p, i, "sequence %d on connection %d used twice", x.Seq, x.Conn)
		}
		if send && x.CreditSeq >= x.Seq {
			return badStep(p, i, "credit %d not before sequence %d", x.CreditSeq, x.Seq)
		}
		tab[m] = g
		end := &ck.rcv[m]
		if send {
			end = &ck.snd[m]
		}
		*end = msgEnd{st.Bytes, int(x.Steps)}
		return nil
	}
	for _, x := range st.Recv {
		if err := check(x, false); err != nil {
			return err
		}
	}
	for _, x := range st.Send {
		if err := check(x, true); err != nil {
			return err
		}
	}
	return nil
}
