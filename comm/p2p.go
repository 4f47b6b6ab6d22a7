package comm

import (
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/realnet"
)

// Point-to-point calls (Send, Recv, and AllToAll as grouped sends and receives, as NCCL builds it)
// run directly on connIndex 1 of channel 0 (NCCL's connIndex 1 is send/recv): per peer, the group's
// sends go out in call order on one goroutine and its receives come in in call order on another, so
// any pattern inside a group is deadlock-free.

const p2pConnIndex = 1

func (c *Comm) runP2P(calls []*call) error {
	sends := map[int][][]byte{}
	recvs := map[int][][]byte{}
	for _, k := range calls {
		elt := int64(k.dt.Size())
		if k.f == coll.AllToAll {
			per := k.count * elt
			for p := 0; p < c.n; p++ {
				sends[p] = append(sends[p], k.send[int64(p)*per:int64(p+1)*per])
				recvs[p] = append(recvs[p], k.recv[int64(p)*per:int64(p+1)*per])
			}
			continue
		}
		if k.p2pSend {
			sends[k.peer] = append(sends[k.peer], k.send[:k.count*elt])
		} else {
			recvs[k.peer] = append(recvs[k.peer], k.recv[:k.count*elt])
		}
	}
	// A send whose memory a receive of the same group overwrites (in-place SendRecv) is snapshotted
	// first, so that it sends the data as it was when the group was launched.
	for p, msgs := range sends {
		for i, m := range msgs {
			for _, rs := range recvs {
				for _, r := range rs {
					if overlaps(m, r) {
						msgs[i] = append([]byte(nil), m...)
					}
				}
			}
		}
		sends[p] = msgs
	}
	// Send to self: copy in order.
	if len(sends[c.rank]) != len(recvs[c.rank]) {
		return fmt.Errorf("%w: rank %d: %d sends to itself but %d receives from itself in one group", ErrInvalidArgument, c.rank, len(sends[c.rank]), len(recvs[c.rank]))
	}
	for i, s := range sends[c.rank] {
		r := recvs[c.rank][i]
		if len(r) != len(s) {
			return fmt.Errorf("%w: rank %d: send to itself of %d bytes matched with a receive of %d", ErrInvalidArgument, c.rank, len(s), len(r))
		}
		if !sameStart(r, s) {
			copy(r, s)
		}
	}
	delete(sends, c.rank)
	delete(recvs, c.rank)
	need := map[realnet.Key]bool{}
	for p := range sends {
		need[realnet.Key{Channel: 0, Peer: p, ConnIndex: p2pConnIndex}] = true
	}
	for p := range recvs {
		need[realnet.Key{Channel: 0, Peer: p, ConnIndex: p2pConnIndex}] = true
	}
	var keys []realnet.Key
	c.connMu.Lock()
	for k := range need {
		if _, ok := c.conns[k]; !ok {
			keys = append(keys, k)
		}
	}
	c.connMu.Unlock()
	if err := c.connect(keys); err != nil {
		return err
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	run := func(p int, msgs [][]byte, send bool) {
		defer wg.Done()
		key := realnet.Key{Channel: 0, Peer: p, ConnIndex: p2pConnIndex}
		cn, err := c.getConn(key)
		for _, m := range msgs {
			if err != nil {
				break
			}
			if send {
				cn.sendMu.Lock()
				err = cn.c.Send(m, time.Now().Add(c.cfg.Timeout))
				cn.sendMu.Unlock()
			} else {
				cn.recvMu.Lock()
				err = cn.c.Recv(m, time.Now().Add(c.cfg.Timeout))
				cn.recvMu.Unlock()
			}
			if err != nil {
				err = c.remote(key, err)
			}
		}
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			c.fail(err)
		}
	}
	for p, m := range sends {
		wg.Add(1)
		go run(p, m, true)
	}
	for p, m := range recvs {
		wg.Add(1)
		go run(p, m, false)
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
