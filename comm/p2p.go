package comm

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/realnet"
)

// Point-to-point calls (Send and Recv of a group; AllToAll runs as a collective schedule) run as a
// coll SendRecv schedule of this rank's transfers: each one split over the channels and chunks the
// planner gives a transfer of its size (NCCL 2.28 addP2pToPlan), on connIndex 1. A rank knows only
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
	plans := map[int64]coll.Plan{}
	planFor := func(bytes int64) (coll.Plan, error) {
		if p, ok := plans[bytes]; ok {
			return p, nil
		}
		p, _, err := c.Plan(coll.Call{Func: coll.SendRecv, Count: bytes, DataType: coll.Uint8})
		plans[bytes] = p
		return p, err
	}
	add := func(from, to int, bytes int64) (coll.Plan, error) {
		p, err := planFor(bytes)
		if err != nil {
			return p, err
		}
		transfers = append(transfers, coll.Transfer{From: from, To: to, Count: bytes, NChannels: p.NChannels, ChunkSize: p.ChunkSize})
		return p, nil
	}
	var p2pPlan coll.Plan
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
		pl, err := add(c.rank, k.peer, b)
		if err != nil {
			return err
		}
		p2pPlan = pl
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
		pl, err := add(k.peer, c.rank, b)
		if err != nil {
			return err
		}
		p2pPlan = pl
		bufs.recvSeg = append(bufs.recvSeg, segment{recvOff, k.recv[:b]})
		recvOff += b
	}
	if len(transfers) == 0 {
		return nil
	}
	plan := coll.Plan{Func: coll.SendRecv, DataType: coll.Uint8, NRanks: c.n, Algo: coll.Ring, Proto: p2pPlan.Proto,
		NChannels: max(p2pPlan.P2PChannels, 1), P2PChannels: p2pPlan.P2PChannels, ChunkSize: p2pPlan.ChunkSize,
		BuffSize: p2pPlan.BuffSize, Transfers: transfers}
	plan.BuffSize[coll.Simple] = int64(realnet.Steps * c.cfg.SlotBytes)
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
