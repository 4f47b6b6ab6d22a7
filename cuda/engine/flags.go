package engine

import (
	"encoding/binary"
	"fmt"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/cuda"
)

// Device flags: how the ranks of a communicator spread over several processes order their steps
// when a launch cannot use interprocess events — when the caller's stream is capturing into a
// CUDA graph (the driver refuses to record an interprocess event there), or always under
// Config.DeviceFlags. NCCL orders its steps with counters in device memory that its kernel
// polls; here the order is kept by 32-bit words in device memory, written and waited for by
// stream memory operations (cuStreamWriteValue32, cuStreamWaitValue32), which a capture records
// as graph nodes. Every word has one writer and one reader, is 0 at rest, set to 1 by its writer
// and reset to 0 by its reader right after its wait: the values are constants, so a graph replay
// runs exactly the launch it captured, as often as it is replayed.
//
// Each rank owns one area (allocated by InitRank, exported through IPC beside its staging
// buffers) that holds the words it waits on:
//
//   - ready[m]: message m (coll.Index's global number: MsgStart[conn]+seq) of the Simple protocol
//     is in the sender's staging slot. Written by the sender after its step, waited on by the
//     receiving step (LL and LL128 messages carry flags in their lines instead).
//   - consumed[m]: the receiver's step that read message m is done. Written only for the messages
//     some send's credit names (Xfer.CreditSeq), waited on by the step that reuses the slot.
//   - done[q], ack[q]: the end-of-launch barrier. Rank q writes done[q] once all its lanes have
//     finished the launch; after waiting for it, this rank answers ack in q's area. A rank writes
//     its next done to q only after q's ack of the previous one, so that no done word is set twice
//     before its reader resets it, whatever the order in which processes replay their graphs.
//     The ack words start at 1 (nothing to acknowledge before the first launch).
//
// The barrier keeps the launch contract: when the caller's stream passes it, every peer has
// finished every step of the launch (no peer still reads this rank's staging) — and, as NCCL
// requires of graphs, every rank replays its graph the same number of times in the same order
// as its other calls.

const (
	xFlagKey  = 1 << 32 // the flag area's key among a rank's published buffers
	flagMsgs  = 1 << 18 // message words per kind (ready, consumed): the messages of one launch
	flagReady = iota    // word kinds
	flagConsumed
	flagDone
	flagAck
)

// flagBytes is the size of one rank's flag area for n ranks.
func flagBytes(n int) int { return 4 * (2*n + 2*flagMsgs) }

// flagWord is the byte offset of word i of a kind in an area of n ranks.
func flagWord(n, kind, i int) int {
	switch kind {
	case flagDone:
		return 4 * i
	case flagAck:
		return 4 * (n + i)
	case flagReady:
		return 4 * (2*n + i)
	}
	return 4 * (2*n + flagMsgs + i)
}

// newFlagArea allocates and publishes this rank's flag area (zero, the ack words 1).
func (xp *xproc) newFlagArea(x *cuda.Ctx) (cuda.DevPtr, error) {
	size := flagBytes(xp.n)
	p, err := x.Alloc(size)
	if err != nil {
		return 0, err
	}
	if err := x.Memset(p, 0, size); err != nil {
		x.Free(p)
		return 0, err
	}
	ones := make([]byte, 4*xp.n)
	for q := 0; q < xp.n; q++ {
		binary.LittleEndian.PutUint32(ones[4*q:], 1)
	}
	if err := x.CopyHtoD(p.Add(flagWord(xp.n, flagAck, 0)), ones); err != nil {
		x.Free(p)
		return 0, err
	}
	if err := xp.publishStaging(x, xFlagKey, p); err != nil {
		x.Free(p)
		return 0, err
	}
	return p, nil
}

// flagAt is the address of word i of a kind in rank's area, as this process sees it.
func (e *exec) flagAt(rank, kind, i int) (cuda.DevPtr, error) {
	if kind == flagReady || kind == flagConsumed {
		if i >= flagMsgs {
			return 0, fmt.Errorf("%w: a launch of more than %d messages on a capturing stream across processes", ErrNotSupported, flagMsgs)
		}
	}
	base := e.c.flags
	if rank != e.c.rank {
		var err error
		if base, err = e.L.xp.peerStaging(e.x, rank, xFlagKey, e.c.cl.cfg.Timeout); err != nil {
			return 0, err
		}
	}
	return base.Add(flagWord(e.L.n, kind, i)), nil
}

// msgNum is message (conn, seq)'s global number.
func (e *exec) msgNum(conn, seq int) int { return int(e.L.pl.ix.MsgStart[conn]) + seq }

// awaitFlag makes st wait for this rank's word (kind, i) and reset it.
func (e *exec) awaitFlag(st cuda.Stream, kind, i int) error {
	p, err := e.flagAt(e.c.rank, kind, i)
	if err != nil {
		return err
	}
	if err := e.x.WaitFlag(st, p, 1); err != nil {
		return err
	}
	return e.x.WriteFlag(st, p, 0)
}

// raiseFlag sets rank's word (kind, i) in stream order on st.
func (e *exec) raiseFlag(st cuda.Stream, rank, kind, i int) error {
	p, err := e.flagAt(rank, kind, i)
	if err != nil {
		return err
	}
	return e.x.WriteFlag(st, p, 1)
}

// signal, after step st of channel ch (flag mode), tells its receivers that its Simple messages
// are ready and its senders that the messages it consumed whose slots a credit reuses are read.
func (e *exec) signal(stream cuda.Stream, st *coll.Step) error {
	if !isLine(st.Proto) {
		for _, sx := range st.Send {
			if err := e.raiseFlag(stream, e.s.Conns[sx.Conn].To, flagReady, e.msgNum(int(sx.Conn), int(sx.Seq))); err != nil {
				return err
			}
		}
	}
	for _, rx := range st.Recv {
		m := e.msgNum(int(rx.Conn), int(rx.Seq))
		if e.L.pl.credited()[m] {
			if err := e.raiseFlag(stream, e.s.Conns[rx.Conn].From, flagConsumed, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// joinFlags is join's barrier in flag mode, on the caller's stream after this rank's lanes.
func (e *exec) joinFlags() error {
	me, n, st := e.c.rank, e.L.n, e.user
	for q := 0; q < n; q++ {
		if q != me {
			if err := e.awaitFlag(st, flagAck, q); err != nil {
				return err
			}
		}
	}
	for q := 0; q < n; q++ {
		if q != me {
			if err := e.raiseFlag(st, q, flagDone, me); err != nil {
				return err
			}
		}
	}
	for q := 0; q < n; q++ {
		if q != me {
			if err := e.awaitFlag(st, flagDone, q); err != nil {
				return err
			}
			if err := e.raiseFlag(st, q, flagAck, me); err != nil {
				return err
			}
		}
	}
	return nil
}

// credited marks the messages whose consumption a credit waits for (by global number).
func (pl *plan) credited() []bool {
	pl.creditOnce.Do(func() {
		pl.creditSet = make([]bool, len(pl.ix.Sender))
		for _, p := range pl.s.Programs {
			for _, st := range p.Steps {
				for _, x := range st.Send {
					if x.CreditSeq >= 0 {
						pl.creditSet[int(pl.ix.MsgStart[x.Conn])+int(x.CreditSeq)] = true
					}
				}
			}
		}
	})
	return pl.creditSet
}
