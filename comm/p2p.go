package comm

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/simccl/simccl/coll"
)

// Point-to-point calls (Send and Recv of a group; AllToAll runs as a collective schedule) run as a
// coll SendRecv schedule of this rank's transfers, which the planner plans (each one split over
// the channels and chunks NCCL gives a transfer of its size to its peer), on connIndex 1. A rank knows only
// its own sends and receives, and its peers only theirs; both ends of a transfer plan it alike
// (same size, same planner), so the messages on every connection match. The schedule's send and
// receive buffers are the calls' buffers laid end to end, in the order coll lays transfers out.

// runP2P runs a group's sends and receives.
func (c *Comm) runP2P(calls []*call) error {
	var sends, recvs []*call
	for _, k := range calls {
		if k.p2pSend {
			sends = append(sends, k)
		} else {
			recvs = append(recvs, k)
		}
	}
	// A send whose memory a receive of the same group overwrites (in-place SendRecv) is snapshotted
	// first, so that it sends the data as it was when the group was launched.
	sendBuf := make([][]byte, len(sends))
	for i, k := range sends {
		sendBuf[i] = k.send[:k.count*int64(k.dt.Size())]
		for _, r := range recvs {
			if overlaps(sendBuf[i], r.recv) {
				sendBuf[i] = append([]byte(nil), sendBuf[i]...)
			}
		}
	}
	// Transfers: this rank's sends in call order (a send to itself pairs with its receives from
	// itself, in order), then its receives from others in call order.
	var transfers []coll.Transfer
	var bufs opBufs
	var sendOff, recvOff int64
	selfRecvs := []*call{}
	for _, k := range recvs {
		if k.peer == c.rank {
			selfRecvs = append(selfRecvs, k)
		}
	}
	nSelf := 0
	add := func(from, to int, bytes int64) {
		transfers = append(transfers, coll.Transfer{From: from, To: to, Count: bytes})
	}
	for i, k := range sends {
		b := int64(len(sendBuf[i]))
		if k.peer == c.rank {
			if nSelf >= len(selfRecvs) {
				return fmt.Errorf("%w: rank %d: %d sends to itself but %d receives from itself in one group", ErrInvalidArgument, c.rank, nSelf+1, len(selfRecvs))
			}
			r := selfRecvs[nSelf]
			nSelf++
			if rb := r.count * int64(r.dt.Size()); rb != b {
				return fmt.Errorf("%w: rank %d: send to itself of %d bytes matched with a receive of %d", ErrInvalidArgument, c.rank, b, rb)
			}
			if b == 0 {
				continue
			}
			if sameStart(r.recv, sendBuf[i]) {
				continue // in place: nothing to copy
			}
			bufs.recvSeg = append(bufs.recvSeg, segment{recvOff, r.recv[:b]})
			recvOff += b
		} else if b == 0 {
			continue
		}
		add(c.rank, k.peer, b)
		bufs.sendSeg = append(bufs.sendSeg, segment{sendOff, sendBuf[i]})
		sendOff += b
	}
	if nSelf != len(selfRecvs) {
		return fmt.Errorf("%w: rank %d: %d sends to itself but %d receives from itself in one group", ErrInvalidArgument, c.rank, nSelf, len(selfRecvs))
	}
	for _, k := range recvs {
		b := k.count * int64(k.dt.Size())
		if k.peer == c.rank || b == 0 {
			continue
		}
		add(k.peer, c.rank, b)
		bufs.recvSeg = append(bufs.recvSeg, segment{recvOff, k.recv[:b]})
		recvOff += b
	}
	if len(transfers) == 0 {
		return nil
	}
	plan, _, err := c.Plan(coll.Call{Func: coll.SendRecv, DataType: coll.Uint8, Transfers: transfers})
	if err != nil {
		return err
	}
	if err := c.checkBuffers(&plan); err != nil {
		return err
	}
	s, err := coll.Compile(plan)
	if err != nil {
		return err
	}
	if err := c.ensureConns(s); err != nil {
		return err
	}
	bs := []opBufs{bufs}
	op := []*call{{f: coll.SendRecv, dt: coll.Uint8}}
	errs := make([]error, s.NChannels)
	var wg sync.WaitGroup
	for ch := 0; ch < s.NChannels; ch++ {
		if len(s.Program(c.rank, ch).Steps) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[ch] = c.runProgram(s, s.Program(c.rank, ch), bs, op)
			if errs[ch] != nil {
				c.fail(errs[ch])
			}
		}()
	}
	wg.Wait()
	return firstErr(errs)
}

// overlaps reports whether two byte slices share memory.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}
