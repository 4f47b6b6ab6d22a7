package realnet

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// A ring is one direction of a connection: a single-producer single-consumer queue of Steps slots
// laid out in a byte region (Go memory for in-process connections, a shared mapping for shared
// memory). Layout (all little-endian, 64-byte aligned):
//
//	0   tail  uint64   messages published by the producer (written by the producer only)
//	64  head  uint64   messages consumed by the consumer (written by the consumer only)
//	128 slot 0: 64-byte header {pieceLen uint64, msgLen uint64} + slotBytes of data
//	…   slot Steps-1
//
// The producer fills slot tail%Steps and then publishes with an atomic store of tail+1; the consumer
// reads slot head%Steps after an atomic load shows tail > head and frees it with a store of head+1.
// This is NCCL's head/tail step protocol for the Simple protocol (NCCL 2.28
// src/device/prims_simple.h) without the flags of LL.
type ring struct {
	mem       []byte
	slotBytes int
	race      unsafe.Pointer // race-detector token (shared mappings only; nil otherwise)
}

const (
	ringTailOff   = 0
	ringHeadOff   = 64
	ringSlotsOff  = 128
	slotHeaderLen = 64
)

// ringBytes is the size of a ring region with slots of slotBytes.
func ringBytes(slotBytes int) int {
	return ringSlotsOff + Steps*(slotHeaderLen+slotBytes)
}

func newRing(mem []byte, slotBytes int) (*ring, error) {
	if slotBytes <= 0 || len(mem) < ringBytes(slotBytes) {
		return nil, fmt.Errorf("realnet: ring region of %d bytes too small for slots of %d bytes", len(mem), slotBytes)
	}
	if uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return nil, fmt.Errorf("realnet: ring region not 8-byte aligned")
	}
	return &ring{mem: mem, slotBytes: slotBytes}, nil
}

func (r *ring) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&r.mem[off])) }
func (r *ring) tail() uint64        { return atomic.LoadUint64(r.u64(ringTailOff)) }
func (r *ring) head() uint64        { return atomic.LoadUint64(r.u64(ringHeadOff)) }

func (r *ring) slot(i uint64) (hdr, data []byte) {
	off := ringSlotsOff + int(i%Steps)*(slotHeaderLen+r.slotBytes)
	return r.mem[off : off+slotHeaderLen], r.mem[off+slotHeaderLen : off+slotHeaderLen+r.slotBytes]
}

// link is what a ring endpoint needs from its connection: the local and peer states and a way to wait.
type link interface {
	// state returns ErrClosed when this end was closed, ErrPeerGone when the peer is known to be gone,
	// nil otherwise.
	state() error
	// wait blocks a little (until a notification, a backoff step, or the deadline); it returns
	// ErrTimeout when the deadline has passed. n counts the waits of the current operation.
	// forData is true for a consumer waiting for data, false for a producer waiting for a slot.
	wait(deadline time.Time, n int, forData bool) error
	// notify wakes the peer after a publish (forData true: wake its consumer) or after freeing a slot
	// (false: wake its producer); a no-op for polling links.
	notify(forData bool)
}

// ringConn is a Conn over two rings (one per direction) and a link.
type ringConn struct {
	tx, rx *ring
	l      link
	close  func() error
	bytes  int64
}

func (c *ringConn) SlotBytes() int     { return c.tx.slotBytes }
func (c *ringConn) Close() error       { return c.close() }
func (c *ringConn) BufferBytes() int64 { return c.bytes }

func (c *ringConn) Send(p []byte, deadline time.Time) error {
	defer runtime.KeepAlive(c) // the rings may live in a mapping that c's link owns
	r := c.tx
	total := len(p)
	first := true
	for first || len(p) > 0 {
		first = false
		n := 0
		t := r.tail()
		for t-r.head() >= Steps {
			if err := c.l.state(); err != nil {
				return err
			}
			if err := c.l.wait(deadline, n, false); err != nil {
				return fmt.Errorf("send of %d bytes: %w", total, err)
			}
			n++
		}
		if err := c.l.state(); err != nil {
			return err
		}
		raceAcquire(r.race)
		hdr, data := r.slot(t)
		k := min(len(p), r.slotBytes)
		copy(data, p[:k])
		binary.LittleEndian.PutUint64(hdr[0:], uint64(k))
		binary.LittleEndian.PutUint64(hdr[8:], uint64(total))
		raceRelease(r.race)
		atomic.StoreUint64(r.u64(ringTailOff), t+1)
		c.l.notify(true)
		p = p[k:]
	}
	return nil
}

func (c *ringConn) Recv(p []byte, deadline time.Time) error {
	off := 0
	return c.RecvFunc(len(p), deadline, func(piece []byte) { off += copy(p[off:], piece) })
}

// RecvFunc implements DirectReceiver: pieces are handed over from the slots in place.
func (c *ringConn) RecvFunc(want int, deadline time.Time, fn func([]byte)) error {
	defer runtime.KeepAlive(c)
	r := c.rx
	got := 0
	first := true
	for first || got < want {
		n := 0
		h := r.head()
		for r.tail() <= h {
			if err := c.l.state(); err != nil {
				if r.tail() > h {
					// The peer's last piece landed between the two loads: it wrote the piece,
					// then closed. Messages already sent are delivered before ErrPeerGone.
					break
				}
				return err
			}
			if err := c.l.wait(deadline, n, true); err != nil {
				return fmt.Errorf("recv of %d bytes: %w", want, err)
			}
			n++
		}
		raceAcquire(r.race)
		hdr, data := r.slot(h)
		k := binary.LittleEndian.Uint64(hdr[0:])
		total := binary.LittleEndian.Uint64(hdr[8:])
		if k > uint64(r.slotBytes) || (first && total != uint64(want)) || uint64(got)+k > uint64(want) {
			return fmt.Errorf("recv: want a %d-byte message, got a piece of %d of a %d-byte message: %w", want, k, total, ErrSize)
		}
		first = false
		fn(data[:k])
		got += int(k)
		raceRelease(r.race)
		atomic.StoreUint64(r.u64(ringHeadOff), h+1)
		c.l.notify(false)
	}
	return nil
}
