package realnet

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The bootstrap follows NCCL's (bootstrap.cc, fact sheet §8.4): a root listens at the address in the
// unique id; every rank opens its own listener, registers {rank, nRanks, listen address} with the
// root; once all have registered the root tells each rank the address of rank+1; ranks connect to
// their successor and accept their predecessor, forming a ring of sockets on which AllGather and
// Barrier run (unidirectional ring, n−1 steps, as NCCL ≤ 2.28.3). Every connection starts with the
// 64-bit magic of the unique id and is refused otherwise; every length read from the wire is bounded.

// UniqueIDBytes is the size of a unique id: NCCL_UNIQUE_ID_BYTES = 128 (§8.1).
const UniqueIDBytes = 128

// UniqueID is {magic uint64, address length uint16, "host:port"} zero-padded to 128 bytes.
type UniqueID [UniqueIDBytes]byte

const (
	maxIDAddr = UniqueIDBytes - 10
	// MaxBootstrapMessage bounds any message read on a bootstrap socket.
	MaxBootstrapMessage = 64 << 20
	maxAddrLen          = 256
	// FixedMagic is the magic of ids made from a fixed address (UniqueIDFromAddr), the analogue of
	// NCCL_COMM_ID where every process must derive the same id without communicating.
	FixedMagic uint64 = 0x73696d63636c4944 // "simcclID"
	// DefaultBootstrapTimeout bounds every bootstrap step.
	DefaultBootstrapTimeout = 60 * time.Second
)

const (
	msgRegister = 1
	msgNext     = 2
	msgRingHi   = 3
)

// ErrBootstrap is wrapped by every bootstrap failure.
var ErrBootstrap = errors.New("realnet: bootstrap")

// Magic returns the id's magic.
func (id UniqueID) Magic() uint64 { return binary.LittleEndian.Uint64(id[0:]) }

// Addr returns the root address in the id.
func (id UniqueID) Addr() (string, error) {
	n := int(binary.LittleEndian.Uint16(id[8:]))
	if n == 0 || n > maxIDAddr {
		return "", fmt.Errorf("%w: unique id holds a bad address length %d", ErrBootstrap, n)
	}
	return string(id[10 : 10+n]), nil
}

func makeID(magic uint64, addr string) (UniqueID, error) {
	var id UniqueID
	if len(addr) == 0 || len(addr) > maxIDAddr {
		return id, fmt.Errorf("%w: root address %q does not fit a unique id", ErrBootstrap, addr)
	}
	binary.LittleEndian.PutUint64(id[0:], magic)
	binary.LittleEndian.PutUint16(id[8:], uint16(len(addr)))
	copy(id[10:], addr)
	return id, nil
}

// UniqueIDFromAddr makes the deterministic id of a root at addr ("host:port") with FixedMagic;
// the rank that owns addr must call StartRoot(id).
func UniqueIDFromAddr(addr string) (UniqueID, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return UniqueID{}, fmt.Errorf("%w: root address %q: %v", ErrBootstrap, addr, err)
	}
	return makeID(FixedMagic, addr)
}

// Root is a running bootstrap root; it serves one communicator's registration and then stops.
type Root struct {
	ln       net.Listener
	keep     bool // the listener belongs to the caller: leave it open (StartRootOn)
	magic    uint64
	timeout  time.Duration
	done     chan struct{}
	err      error
	rejected atomic.Int64
}

// NewUniqueID starts a root listening on listen ("127.0.0.1:0" for one host, "0.0.0.0:0" or an
// interface address for several; "" = 127.0.0.1:0) with a random magic, and returns its id.
// timeout ≤ 0 selects DefaultBootstrapTimeout.
func NewUniqueID(listen string, timeout time.Duration) (UniqueID, *Root, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return UniqueID{}, nil, err
	}
	magic := binary.LittleEndian.Uint64(b[:])
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	r, err := startRoot(listen, magic, timeout)
	if err != nil {
		return UniqueID{}, nil, err
	}
	addr := r.ln.Addr().String()
	if host, port, _ := net.SplitHostPort(addr); net.ParseIP(host).IsUnspecified() {
		addr = net.JoinHostPort(outboundIP(), port)
	}
	id, err := makeID(magic, addr)
	if err != nil {
		r.Close()
		return id, nil, err
	}
	return id, r, nil
}

// StartRoot starts the root of a fixed id (UniqueIDFromAddr) at the id's address.
func StartRoot(id UniqueID, timeout time.Duration) (*Root, error) {
	addr, err := id.Addr()
	if err != nil {
		return nil, err
	}
	return startRoot(addr, id.Magic(), timeout)
}

func startRoot(listen string, magic uint64, timeout time.Duration) (*Root, error) {
	if timeout <= 0 {
		timeout = DefaultBootstrapTimeout
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("%w: root listen on %s: %v", ErrBootstrap, listen, err)
	}
	r := &Root{ln: ln, magic: magic, timeout: timeout, done: make(chan struct{})}
	go r.serve()
	return r, nil
}

// Close stops the root.
func (r *Root) Close() error {
	if r.keep {
		if tl, ok := r.ln.(*net.TCPListener); ok {
			return tl.SetDeadline(time.Unix(1, 0)) // unblock Accept, keep the socket
		}
		return nil
	}
	return r.ln.Close()
}

// NewUniqueIDWithMagic makes the id of a root at addr with a given magic (ids that every rank derives
// by itself, e.g. for shrinking a communicator; the magic should differ per use).
func NewUniqueIDWithMagic(magic uint64, addr string) (UniqueID, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return UniqueID{}, fmt.Errorf("%w: root address %q: %v", ErrBootstrap, addr, err)
	}
	return makeID(magic, addr)
}

// StartRootOn serves one communicator's registration on a listener the caller keeps (it stays
// open afterwards, ready for another root), with the given magic.
func StartRootOn(ln net.Listener, magic uint64, timeout time.Duration) *Root {
	if timeout <= 0 {
		timeout = DefaultBootstrapTimeout
	}
	r := &Root{ln: ln, keep: true, magic: magic, timeout: timeout, done: make(chan struct{})}
	go r.serve()
	return r
}

// Wait returns when the root has served its communicator (or failed) and gives its error.
func (r *Root) Wait() error { <-r.done; return r.err }

// Rejected counts connections refused (wrong magic, bad lengths, bad ranks).
func (r *Root) Rejected() int64 { return r.rejected.Load() }

type registration struct {
	c    net.Conn
	n    int
	addr string
}

func (r *Root) serve() {
	defer close(r.done)
	if r.keep {
		defer func() {
			if tl, ok := r.ln.(*net.TCPListener); ok {
				tl.SetDeadline(time.Time{})
			}
		}()
	} else {
		defer r.ln.Close()
	}
	var regs []registration
	nranks := -1
	got := 0
	fail := func(err error) {
		r.err = err
		for _, g := range regs {
			if g.c != nil {
				g.c.Close()
			}
		}
	}
	deadline := time.Now().Add(r.timeout)
	for nranks < 0 || got < nranks {
		if tl, ok := r.ln.(*net.TCPListener); ok {
			tl.SetDeadline(deadline)
		}
		c, err := r.ln.Accept()
		if err != nil {
			fail(fmt.Errorf("%w: root: %d of %d ranks registered: %v", ErrBootstrap, got, nranks, err))
			return
		}
		c.SetDeadline(time.Now().Add(r.timeout))
		typ, body, err := readMsg(c, r.magic, maxAddrLen+8)
		if err != nil || typ != msgRegister || len(body) < 8 {
			r.rejected.Add(1)
			c.Close()
			continue
		}
		rank := int(binary.LittleEndian.Uint32(body[0:]))
		n := int(binary.LittleEndian.Uint32(body[4:]))
		if n <= 0 || n > 1<<20 || rank >= n || (nranks >= 0 && n != nranks) {
			r.rejected.Add(1)
			c.Close()
			continue
		}
		if nranks < 0 {
			nranks = n
			regs = make([]registration, n)
		}
		if regs[rank].c != nil { // a duplicate rank
			r.rejected.Add(1)
			c.Close()
			continue
		}
		regs[rank] = registration{c: c, n: n, addr: string(body[8:])}
		got++
	}
	for i := range regs {
		next := regs[(i+1)%nranks].addr
		err := writeMsg(regs[i].c, r.magic, msgNext, []byte(next))
		regs[i].c.Close()
		if err != nil && r.err == nil {
			r.err = fmt.Errorf("%w: root: answering rank %d: %v", ErrBootstrap, i, err)
		}
	}
}

// writeMsg writes {magic u64, type u32, len u32, body}.
func writeMsg(c net.Conn, magic uint64, typ uint32, body []byte) error {
	b := make([]byte, 16+len(body))
	binary.LittleEndian.PutUint64(b[0:], magic)
	binary.LittleEndian.PutUint32(b[8:], typ)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(body)))
	copy(b[16:], body)
	_, err := c.Write(b)
	return err
}

// readMsg reads one message, refusing a wrong magic or a body longer than max.
func readMsg(c net.Conn, magic uint64, max int) (uint32, []byte, error) {
	var h [16]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return 0, nil, err
	}
	if m := binary.LittleEndian.Uint64(h[0:]); m != magic {
		return 0, nil, fmt.Errorf("%w: magic %#x, want %#x", ErrProtocol, m, magic)
	}
	n := binary.LittleEndian.Uint32(h[12:])
	if int64(n) > int64(max) {
		return 0, nil, fmt.Errorf("%w: message of %d bytes exceeds the %d-byte bound", ErrProtocol, n, max)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c, body); err != nil {
		return 0, nil, err
	}
	return binary.LittleEndian.Uint32(h[8:]), body, nil
}

// BootstrapConfig configures a rank's bootstrap.
type BootstrapConfig struct {
	// Listen is the rank's ring listener ("" = the interface that reaches the root, any port).
	Listen  string
	Timeout time.Duration // every step; ≤ 0 = DefaultBootstrapTimeout
}

// Bootstrap is one rank's ring of bootstrap sockets.
type Bootstrap struct {
	rank, n    int
	magic      uint64
	timeout    time.Duration
	next, prev net.Conn
	ln         net.Listener
	mu         sync.Mutex
	rejected   atomic.Int64
	closeOnce  sync.Once
	localHost  string
}

// NewBootstrap joins the communicator of id as rank of n: registers with the root and builds the ring.
func NewBootstrap(ctx context.Context, id UniqueID, rank, n int, cfg BootstrapConfig) (*Bootstrap, error) {
	if n <= 0 || rank < 0 || rank >= n {
		return nil, fmt.Errorf("%w: rank %d of %d ranks", ErrBootstrap, rank, n)
	}
	rootAddr, err := id.Addr()
	if err != nil {
		return nil, err
	}
	to := cfg.Timeout
	if to <= 0 {
		to = DefaultBootstrapTimeout
	}
	b := &Bootstrap{rank: rank, n: n, magic: id.Magic(), timeout: to}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	fail := func(format string, args ...any) (*Bootstrap, error) {
		b.Close()
		return nil, fmt.Errorf("%w: rank %d: %s", ErrBootstrap, rank, fmt.Sprintf(format, args...))
	}
	// Connect to the root (it may start after us: retry until the deadline).
	var d net.Dialer
	var rc net.Conn
	for attempt := 0; ; attempt++ {
		rc, err = d.DialContext(ctx, "tcp", rootAddr)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fail("reaching the root at %s: %v", rootAddr, err)
		case <-time.After(time.Duration(min(attempt+1, 20)) * 10 * time.Millisecond):
		}
	}
	defer rc.Close()
	listen := cfg.Listen
	if listen == "" {
		host, _, _ := net.SplitHostPort(rc.LocalAddr().String())
		listen = net.JoinHostPort(host, "0")
	}
	b.ln, err = net.Listen("tcp", listen)
	if err != nil {
		return fail("listen on %s: %v", listen, err)
	}
	myAddr := b.ln.Addr().String()
	if host, port, _ := net.SplitHostPort(myAddr); net.ParseIP(host).IsUnspecified() {
		lh, _, _ := net.SplitHostPort(rc.LocalAddr().String())
		myAddr = net.JoinHostPort(lh, port)
	}
	b.localHost, _, _ = net.SplitHostPort(rc.LocalAddr().String())
	dl, _ := ctx.Deadline()
	rc.SetDeadline(dl)
	body := make([]byte, 8+len(myAddr))
	binary.LittleEndian.PutUint32(body[0:], uint32(rank))
	binary.LittleEndian.PutUint32(body[4:], uint32(n))
	copy(body[8:], myAddr)
	if err := writeMsg(rc, b.magic, msgRegister, body); err != nil {
		return fail("registering with the root at %s: %v", rootAddr, err)
	}
	typ, nextAddr, err := readMsg(rc, b.magic, maxAddrLen)
	if err != nil || typ != msgNext {
		return fail("waiting for the root at %s (are all %d ranks started?): type %d, %v", rootAddr, n, typ, err)
	}
	if n == 1 {
		return b, nil
	}
	// Ring: dial next, accept prev, concurrently.
	acc := make(chan error, 1)
	go func() { acc <- b.acceptPrev(dl) }()
	for attempt := 0; ; attempt++ {
		b.next, err = d.DialContext(ctx, "tcp", string(nextAddr))
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			b.ln.Close()
			<-acc
			return fail("connecting to rank %d at %s: %v", (rank+1)%n, nextAddr, err)
		case <-time.After(time.Duration(min(attempt+1, 20)) * 5 * time.Millisecond):
		}
	}
	b.next.SetDeadline(dl)
	hi := make([]byte, 4)
	binary.LittleEndian.PutUint32(hi, uint32(rank))
	if err := writeMsg(b.next, b.magic, msgRingHi, hi); err != nil {
		b.ln.Close()
		<-acc
		return fail("hello to rank %d: %v", (rank+1)%n, err)
	}
	b.next.SetDeadline(time.Time{})
	if err := <-acc; err != nil {
		return fail("accepting rank %d: %v", (rank+n-1)%n, err)
	}
	return b, nil
}

func (b *Bootstrap) acceptPrev(dl time.Time) error {
	want := (b.rank + b.n - 1) % b.n
	for {
		if tl, ok := b.ln.(*net.TCPListener); ok {
			tl.SetDeadline(dl)
		}
		c, err := b.ln.Accept()
		if err != nil {
			return err
		}
		c.SetDeadline(dl)
		typ, body, err := readMsg(c, b.magic, 4)
		if err != nil || typ != msgRingHi || len(body) != 4 || int(binary.LittleEndian.Uint32(body)) != want {
			b.rejected.Add(1)
			c.Close()
			continue
		}
		c.SetDeadline(time.Time{})
		b.prev = c
		return nil
	}
}

// Rank and Size of the communicator; Magic of its id.
func (b *Bootstrap) Rank() int       { return b.rank }
func (b *Bootstrap) Size() int       { return b.n }
func (b *Bootstrap) Magic() uint64   { return b.magic }
func (b *Bootstrap) Rejected() int64 { return b.rejected.Load() }

// LocalHost is the address of the interface that reaches the root (for data listeners).
func (b *Bootstrap) LocalHost() string { return b.localHost }

// AllGather gives every rank's data (index = rank); each rank's data may have a different length,
// at most MaxBootstrapMessage bytes. Calls are collective and must be made in the same order on
// every rank; they are serialised.
func (b *Bootstrap) AllGather(data []byte) ([][]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([][]byte, b.n)
	out[b.rank] = append([]byte(nil), data...)
	if b.n == 1 {
		return out, nil
	}
	if b.next == nil || b.prev == nil {
		return nil, fmt.Errorf("%w: rank %d: bootstrap closed", ErrBootstrap, b.rank)
	}
	dl := time.Now().Add(b.timeout)
	b.next.SetWriteDeadline(dl)
	b.prev.SetReadDeadline(dl)
	// Step s: send the slot of rank-s to next, receive the slot of rank-s-1 from prev.
	ready := make(chan error, b.n)
	sendErr := make(chan error, 1)
	go func() {
		for s := 0; s < b.n-1; s++ {
			i := (b.rank - s + b.n) % b.n
			if s > 0 {
				// wait until slot i has arrived (it is received at step s-1)
				if err := <-ready; err != nil {
					sendErr <- err
					return
				}
			}
			if err := writeMsg(b.next, b.magic, uint32(i), out[i]); err != nil {
				sendErr <- fmt.Errorf("%w: rank %d: allgather send to rank %d: %v", ErrBootstrap, b.rank, (b.rank+1)%b.n, err)
				return
			}
		}
		sendErr <- nil
	}()
	var recvErr error
	for s := 0; s < b.n-1; s++ {
		i := (b.rank - s - 1 + 2*b.n) % b.n
		typ, body, err := readMsg(b.prev, b.magic, MaxBootstrapMessage)
		if err == nil && int(typ) != i {
			err = fmt.Errorf("%w: got slot %d, want %d", ErrProtocol, typ, i)
		}
		if err != nil {
			recvErr = fmt.Errorf("%w: rank %d: allgather receive from rank %d: %v", ErrBootstrap, b.rank, (b.rank+b.n-1)%b.n, err)
			ready <- recvErr
			break
		}
		out[i] = body
		if s < b.n-2 {
			ready <- nil
		}
	}
	if recvErr != nil {
		b.closeLocked()
		<-sendErr
		return nil, recvErr
	}
	if err := <-sendErr; err != nil {
		b.closeLocked()
		return nil, err
	}
	return out, nil
}

// Barrier returns when every rank has entered it.
func (b *Bootstrap) Barrier() error {
	_, err := b.AllGather(nil)
	return err
}

// Close releases the sockets; blocked calls return errors.
func (b *Bootstrap) Close() error {
	b.closeOnce.Do(func() {
		var cs []io.Closer
		if b.next != nil {
			cs = append(cs, b.next)
		}
		if b.prev != nil {
			cs = append(cs, b.prev)
		}
		if b.ln != nil {
			cs = append(cs, b.ln)
		}
		for _, c := range cs {
			if c != nil {
				c.Close()
			}
		}
	})
	return nil
}

func (b *Bootstrap) closeLocked() { b.Close() }

// outboundIP guesses the address other hosts reach this one at (the source of a UDP route to a
// public address; no packet is sent), 127.0.0.1 when there is none.
func outboundIP() string {
	c, err := net.Dial("udp", "192.0.2.1:9")
	if err != nil {
		return "127.0.0.1"
	}
	defer c.Close()
	host, _, _ := net.SplitHostPort(c.LocalAddr().String())
	return host
}
