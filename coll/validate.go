package coll

import (
	"errors"
	"fmt"
)

// ErrBadSchedule reports a schedule that breaks the contract (see schedule.go).
var ErrBadSchedule = errors.New("coll: bad schedule")

func badStep(p *Program, i int, format string, args ...any) error {
	return fmt.Errorf("%w: rank %d channel %d step %d: %s", ErrBadSchedule, p.Rank, p.Channel, i, fmt.Sprintf(format, args...))
}

type msgEnd struct {
	prog, step int
	bytes      int64
	steps      int
}

// Validate checks that a schedule keeps the contract: programs in place, steps well formed,
// dependencies pointing backwards, buffer ranges inside the operation's buffers, and every message
// sent exactly once and received exactly once with the same size. Executors call it before running
// a schedule they did not compile themselves (one read from JSON, say).
func Validate(s *Schedule) error {
	if s == nil {
		return fmt.Errorf("%w: nil", ErrBadSchedule)
	}
	if s.NRanks < 1 || s.NChannels < 1 || s.NChannels > MaxChannels {
		return fmt.Errorf("%w: nranks %d, nchannels %d", ErrBadSchedule, s.NRanks, s.NChannels)
	}
	ne := s.Endpoints()
	if len(s.Programs) != ne*s.NChannels {
		return fmt.Errorf("%w: %d programs for %d endpoints × %d channels", ErrBadSchedule, len(s.Programs), ne, s.NChannels)
	}
	for i, sw := range s.Switches {
		if sw.ID != s.NRanks+i || (sw.Kind != SwitchNVLS && sw.Kind != SwitchCollNet) {
			return fmt.Errorf("%w: switch %d is malformed (%+v)", ErrBadSchedule, i, sw)
		}
	}
	xfers := 0
	for _, p := range s.Programs {
		for _, st := range p.Steps {
			xfers += len(st.Send)
		}
	}
	for i, c := range s.Conns {
		if c.Messages < 0 || c.Messages > xfers {
			return fmt.Errorf("%w: connection %d claims %d messages (the programs send %d in all)", ErrBadSchedule, i, c.Messages, xfers)
		}
		if c.ID != i || c.From < 0 || c.From >= ne || c.To < 0 || c.To >= ne || c.From == c.To ||
			c.Channel < 0 || c.Channel >= s.NChannels {
			return fmt.Errorf("%w: connection %d is malformed (%+v)", ErrBadSchedule, i, c)
		}
	}
	sends := make([][]*msgEnd, len(s.Conns))
	recvs := make([][]*msgEnd, len(s.Conns))
	for i := range s.Conns {
		sends[i] = make([]*msgEnd, s.Conns[i].Messages)
		recvs[i] = make([]*msgEnd, s.Conns[i].Messages)
	}
	for pi := range s.Programs {
		p := &s.Programs[pi]
		if p.Rank != pi/s.NChannels || p.Channel != pi%s.NChannels {
			return fmt.Errorf("%w: program %d says rank %d channel %d", ErrBadSchedule, pi, p.Rank, p.Channel)
		}
		for i := range p.Steps {
			st := &p.Steps[i]
			if st.Index != i {
				return badStep(p, i, "index field says %d", st.Index)
			}
			if st.Op < 0 || st.Op >= len(s.Ops) {
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
				if ref.Offset < 0 || ref.Offset%elt != 0 || ref.Offset+st.Bytes > size {
					return badStep(p, i, "%v buffer range [%d,%d) outside its %d bytes", ref.Buf, ref.Offset, ref.Offset+st.Bytes, size)
				}
			}
			check := func(x Xfer, send bool) error {
				if x.Conn < 0 || x.Conn >= len(s.Conns) {
					return badStep(p, i, "connection %d out of range", x.Conn)
				}
				c := &s.Conns[x.Conn]
				self, peer := c.To, c.From
				tab := recvs
				if send {
					self, peer, tab = c.From, c.To, sends
				}
				if self != p.Rank || peer != x.Peer || c.Channel != p.Channel {
					return badStep(p, i, "connection %d (%d→%d channel %d) does not fit peer %d", x.Conn, c.From, c.To, c.Channel, x.Peer)
				}
				if x.Seq < 0 || x.Seq >= c.Messages {
					return badStep(p, i, "sequence %d on connection %d out of range (%d messages)", x.Seq, x.Conn, c.Messages)
				}
				if tab[x.Conn][x.Seq] != nil {
					return badStep(p, i, "sequence %d on connection %d used twice", x.Seq, x.Conn)
				}
				if send && x.CreditSeq >= x.Seq {
					return badStep(p, i, "credit %d not before sequence %d", x.CreditSeq, x.Seq)
				}
				tab[x.Conn][x.Seq] = &msgEnd{prog: pi, step: i, bytes: st.Bytes, steps: x.Steps}
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
		}
	}
	for ci := range s.Conns {
		for seq := range sends[ci] {
			a, b := sends[ci][seq], recvs[ci][seq]
			if a == nil || b == nil {
				return fmt.Errorf("%w: connection %d (%d→%d) message %d has no %s", ErrBadSchedule, ci, s.Conns[ci].From, s.Conns[ci].To, seq,
					map[bool]string{true: "sender", false: "receiver"}[a == nil])
			}
			if a.bytes != b.bytes || a.steps != b.steps {
				return fmt.Errorf("%w: connection %d message %d: sender has %d bytes/%d slots, receiver %d/%d", ErrBadSchedule, ci, seq, a.bytes, a.steps, b.bytes, b.steps)
			}
		}
	}
	return nil
}
