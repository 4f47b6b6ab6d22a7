package realnet

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Hub is the meeting point of in-process transports: goroutine ranks of one process that share a
// Hub connect to each other through rings in Go memory. The zero Hub is not usable; use NewHub or
// DefaultHub.
type Hub struct {
	mu      sync.Mutex
	pending map[hubKey]*inprocPair
}

type hubKey struct {
	comm      uint64
	lo, hi    int
	channel   int
	connIndex int
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{pending: map[hubKey]*inprocPair{}} }

var defaultHub = NewHub()

// DefaultHub is the process-wide hub.
func DefaultHub() *Hub { return defaultHub }

// inprocPair is one connection's shared state: two rings and the two ends' flags.
type inprocPair struct {
	rings   [2]*ring // rings[s] carries side s → side 1-s
	ready   chan struct{}
	closed  [2]atomic.Bool
	done    [2]chan struct{}
	once    [2]sync.Once
	wake    [2][2]chan struct{} // wake[side][0] producer waits for a slot, [1] consumer waits for data
	slot    int
	bufSize int64
}

// InProc is the in-process Transport of one rank: connections are memory rings shared with goroutine
// ranks of the same process (no copy through the kernel).
type InProc struct {
	hub       *Hub
	comm      uint64
	rank      int
	slotBytes int

	mu     sync.Mutex
	closed bool
	done   chan struct{}
	keys   map[Key]bool
	conns  []*ringConn
}

// NewInProc returns the in-process transport of rank in the communicator comm (an id every rank of
// the communicator agrees on). slotBytes ≤ 0 selects DefaultSlotBytes.
func NewInProc(hub *Hub, comm uint64, rank, slotBytes int) *InProc {
	if hub == nil {
		hub = defaultHub
	}
	if slotBytes <= 0 {
		slotBytes = DefaultSlotBytes
	}
	return &InProc{hub: hub, comm: comm, rank: rank, slotBytes: slotBytes, done: make(chan struct{}), keys: map[Key]bool{}}
}

func (t *InProc) Name() string { return "inproc" }

func (t *InProc) Connect(ctx context.Context, key Key) (Conn, error) {
	if key.Peer < 0 {
		return nil, fmt.Errorf("inproc: connect %v: bad peer", key)
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, fmt.Errorf("inproc: connect %v: %w", key, ErrClosed)
	}
	if t.keys[key] {
		t.mu.Unlock()
		return nil, fmt.Errorf("inproc: connect %v: already connected", key)
	}
	t.keys[key] = true
	t.mu.Unlock()

	lo, hi := t.rank, key.Peer
	side := 0
	if lo > hi {
		lo, hi, side = hi, lo, 1
	}
	hk := hubKey{t.comm, lo, hi, key.Channel, key.ConnIndex}
	h := t.hub
	h.mu.Lock()
	p, ok := h.pending[hk]
	if ok {
		delete(h.pending, hk)
		h.mu.Unlock()
		close(p.ready)
	} else {
		size := ringBytes(t.slotBytes)
		p = &inprocPair{ready: make(chan struct{}), slot: t.slotBytes, bufSize: int64(2 * size)}
		for s := 0; s < 2; s++ {
			p.rings[s], _ = newRing(alignedBytes(size), t.slotBytes)
			p.done[s] = make(chan struct{})
			for w := 0; w < 2; w++ {
				p.wake[s][w] = make(chan struct{}, 1)
			}
		}
		h.pending[hk] = p
		h.mu.Unlock()
		select {
		case <-p.ready:
		case <-ctx.Done():
			if t.withdraw(hk, p) {
				return nil, fmt.Errorf("inproc: connect %v: %w", key, ctx.Err())
			}
			<-p.ready
		case <-t.done:
			if t.withdraw(hk, p) {
				return nil, fmt.Errorf("inproc: connect %v: %w", key, ErrClosed)
			}
			<-p.ready
		}
	}
	l := &inprocLink{p: p, side: side}
	c := &ringConn{tx: p.rings[side], rx: p.rings[1-side], l: l, bytes: p.bufSize / 2}
	c.close = l.close
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		l.close()
		return nil, fmt.Errorf("inproc: connect %v: %w", key, ErrClosed)
	}
	t.conns = append(t.conns, c)
	return c, nil
}

// withdraw removes p from the hub if the peer has not taken it yet.
func (t *InProc) withdraw(hk hubKey, p *inprocPair) bool {
	t.hub.mu.Lock()
	defer t.hub.mu.Unlock()
	if t.hub.pending[hk] == p {
		delete(t.hub.pending, hk)
		return true
	}
	return false
}

func (t *InProc) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.done)
	conns := t.conns
	t.conns = nil
	t.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	return nil
}

// alignedBytes returns a zeroed slice of n bytes whose start is 64-byte aligned.
func alignedBytes(n int) []byte {
	b := make([]byte, n+64)
	off := 0
	for (uintptrOf(b)+uintptr(off))%64 != 0 {
		off++
	}
	return b[off : off+n]
}

type inprocLink struct {
	p    *inprocPair
	side int
}

func (l *inprocLink) close() error {
	l.p.once[l.side].Do(func() {
		l.p.closed[l.side].Store(true)
		close(l.p.done[l.side])
	})
	return nil
}

func (l *inprocLink) state() error {
	if l.p.closed[l.side].Load() {
		return ErrClosed
	}
	if l.p.closed[1-l.side].Load() {
		return ErrPeerGone
	}
	return nil
}

func (l *inprocLink) wait(deadline time.Time, n int, forData bool) error {
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		return ErrTimeout
	}
	if n < 8 {
		runtime.Gosched()
		return nil
	}
	w := 0
	if forData {
		w = 1
	}
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		tm := time.NewTimer(time.Until(deadline))
		defer tm.Stop()
		timeout = tm.C
	}
	select {
	case <-l.p.wake[l.side][w]:
	case <-l.p.done[0]:
	case <-l.p.done[1]:
	case <-timeout:
		return ErrTimeout
	}
	return nil
}

func (l *inprocLink) notify(forData bool) {
	w := 0
	if forData {
		w = 1
	}
	select {
	case l.p.wake[1-l.side][w] <- struct{}{}:
	default:
	}
}
