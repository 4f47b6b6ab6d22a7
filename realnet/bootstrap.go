package realnet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The bootstrap follows NCCL's (bootstrap.cc): a root listens at the address in the unique id;
// every rank opens its own listener, registers {rank, nRanks, listen address} with the root; once
// all have registered the root tells each rank the address of rank+1; ranks connect to their
// successor and accept their predecessor, forming a ring of sockets on which AllGather and Barrier
// run (unidirectional ring, n−1 steps, as NCCL ≤ 2.28.3). Unlike NCCL, every connection is first
// authenticated with the id's secret (auth.go): the root and the ring listeners serve connections
// concurrently, each with a short handshake deadline, so neither a stranger nor an idle connection
// can register, learn the ranks' addresses or stall the others. Every message is framed with the
// communicator's public label (the id's magic) and every length read from the wire is bounded.

// UniqueIDBytes is the size of a unique id: NCCL_UNIQUE_ID_BYTES = 128 (NCCL 2.28 nccl.h.in).
const UniqueIDBytes = 128

// UniqueID is {magic uint64, address length uint16, "host:port" (at most 86 bytes), zero padding,
// secret [32]byte at offset 96}: 128 bytes. The magic is the secret's public Label. Whoever holds
// an id can join its communicator: hand it only to the ranks.
type UniqueID [UniqueIDBytes]byte

const (
	idSecretOff = UniqueIDBytes - SecretBytes
	maxIDAddr   = idSecretOff - 10
	// MaxBootstrapMessage bounds any message read on a bootstrap socket.
	MaxBootstrapMessage = 64 << 20
	maxAddrLen          = 256
	// DefaultBootstrapTimeout bounds every bootstrap step.
	DefaultBootstrapTimeout = 60 * time.Second
	// MaxRanks is the most ranks a communicator may have.
	MaxRanks = 1 << 20
)

// What a connection is for: part of its authentication (auth.go).
const (
	purposeRoot = "bootstrap root"
	purposeRing = "bootstrap ring"
	purposeTCP  = "tcp data"
)

const (
	msgRegister = 1
	msgNext     = 2
	msgRingHi   = 3
)

// ErrBootstrap is wrapped by every bootstrap failure.
var ErrBootstrap = errors.New("realnet: bootstrap")

// Magic returns the id's magic: the public label of its secret.
func (id UniqueID) Magic() uint64 { return binary.LittleEndian.Uint64(id[0:]) }

// Secret returns the id's secret.
func (id UniqueID) Secret() Secret { return Secret(id[idSecretOff:]) }

// Addr returns the root address in the id.
func (id UniqueID) Addr() (string, error) {
	n := int(binary.LittleEndian.Uint16(id[8:]))
	if n == 0 || n > maxIDAddr {
		return "", fmt.Errorf("%w: unique id holds a bad address length %d", ErrBootstrap, n)
	}
	return string(id[10 : 10+n]), nil
}

// check validates an id: an address, a secret, and the magic that goes with the secret.
func (id UniqueID) check() (string, error) {
	addr, err := id.Addr()
	if err != nil {
		return "", err
	}
	s := id.Secret()
	if s.IsZero() || s.Label() != id.Magic() {
		return "", fmt.Errorf("%w: unique id of %s holds no valid secret (an id from another simccl version, or damaged)", ErrBootstrap, addr)
	}
	return addr, nil
}

func makeID(secret Secret, addr string) (UniqueID, error) {
	var id UniqueID
	if len(addr) == 0 || len(addr) > maxIDAddr {
		return id, fmt.Errorf("%w: root address %q does not fit a unique id (at most %d bytes)", ErrBootstrap, addr, maxIDAddr)
	}
	if secret.IsZero() {
		return id, fmt.Errorf("%w: unique id of %s without a secret", ErrBootstrap, addr)
	}
	binary.LittleEndian.PutUint64(id[0:], secret.Label())
	binary.LittleEndian.PutUint16(id[8:], uint16(len(addr)))
	copy(id[10:], addr)
	copy(id[idSecretOff:], secret[:])
	return id, nil
}

// UniqueIDFromAddr makes the id of a root at addr ("host:port") with a given secret: the analogue
// of NCCL_COMM_ID, where every process derives the same id without communicating; they must share
// the secret (SIMCCL_COMM_ID=host:port#secret, a secret file: docs/security.md). The rank that owns
// addr must call StartRoot(id).
func UniqueIDFromAddr(addr string, secret Secret) (UniqueID, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return UniqueID{}, fmt.Errorf("%w: root address %q: %v", ErrBootstrap, addr, err)
	}
	return makeID(secret, addr)
}

// Root is a running bootstrap root; it serves one communicator's registration and then stops.
type Root struct {
	ln       net.Listener
	keep     bool // the listener belongs to the caller: leave it open (StartRootOn)
	secret   Secret
	magic    uint64
	timeout  time.Duration
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	err      error
	rejected atomic.Int64
}

// NewUniqueID starts a root listening on listen ("127.0.0.1:0" for one host, "0.0.0.0:0" or an
// interface address for several; "" = 127.0.0.1:0) with a random secret, and returns its id.
// timeout ≤ 0 selects DefaultBootstrapTimeout.
func NewUniqueID(listen string, timeout time.Duration) (UniqueID, *Root, error) {
	secret, err := NewSecret()
	if err != nil {
		return UniqueID{}, nil, err
	}
	return NewRoot(listen, secret, timeout)
}

// NewRoot starts a root for secret listening on listen (as NewUniqueID) and returns its id.
func NewRoot(listen string, secret Secret, timeout time.Duration) (UniqueID, *Root, error) {
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	if secret.IsZero() {
		return UniqueID{}, nil, fmt.Errorf("%w: a root without a secret", ErrBootstrap)
	}
	r, err := startRoot(listen, secret, timeout)
	if err != nil {
		return UniqueID{}, nil, err
	}
	addr := r.ln.Addr().String()
	if host, port, _ := net.SplitHostPort(addr); net.ParseIP(host).IsUnspecified() {
		addr = net.JoinHostPort(outboundIP(), port)
	}
	id, err := makeID(secret, addr)
	if err != nil {
		r.Close()
		return id, nil, err
	}
	return id, r, nil
}

// StartRoot starts the root of a fixed id (UniqueIDFromAddr) at the id's address.
func StartRoot(id UniqueID, timeout time.Duration) (*Root, error) {
	addr, err := id.check()
	if err != nil {
		return nil, err
	}
	return startRoot(addr, id.Secret(), timeout)
}

func startRoot(listen string, secret Secret, timeout time.Duration) (*Root, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("%w: root listen on %s: %v", ErrBootstrap, listen, err)
	}
	return newRoot(ln, false, secret, timeout), nil
}

func newRoot(ln net.Listener, keep bool, secret Secret, timeout time.Duration) *Root {
	if timeout <= 0 {
		timeout = DefaultBootstrapTimeout
	}
	r := &Root{ln: ln, keep: keep, secret: secret, magic: secret.Label(), timeout: timeout, stop: make(chan struct{}), done: make(chan struct{})}
	go r.serve()
	return r
}

// Close stops the root (a listener of StartRootOn stays open).
func (r *Root) Close() error {
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.done
	return nil
}

// StartRootOn serves the registration of id's communicator on a listener the caller keeps (it stays
// open afterwards, ready for another root). Only one root may serve a listener at a time.
func StartRootOn(ln net.Listener, id UniqueID, timeout time.Duration) (*Root, error) {
	if _, err := id.check(); err != nil {
		return nil, err
	}
	return newRoot(ln, true, id.Secret(), timeout), nil
}

// Wait returns when the root has served its communicator (or failed) and gives its error.
func (r *Root) Wait() error { <-r.done; return r.err }

// Rejected counts connections refused (failed authentication, bad messages, bad or duplicate ranks).
func (r *Root) Rejected() int64 { return r.rejected.Load() }

type registration struct {
	c       net.Conn
	rank, n int
	addr    string
}

// register authenticates one incoming connection and reads its registration, within the handshake
// deadline; it checks what one message can show (the rank is within the communicator's size).
func (r *Root) register(c net.Conn) (registration, error) {
	c.SetDeadline(time.Now().Add(min(HandshakeTimeout, r.timeout)))
	if err := authAccept(c, r.secret, purposeRoot); err != nil {
		return registration{}, err
	}
	typ, body, err := readMsg(c, r.magic, maxAddrLen+8)
	if err != nil {
		return registration{}, err
	}
	if typ != msgRegister || len(body) < 8 {
		return registration{}, fmt.Errorf("%w: message type %d of %d bytes, want a registration", ErrProtocol, typ, len(body))
	}
	rank := int(binary.LittleEndian.Uint32(body[0:]))
	n := int(binary.LittleEndian.Uint32(body[4:]))
	if n <= 0 || n > MaxRanks || rank >= n {
		return registration{}, fmt.Errorf("%w: rank %d of %d ranks", ErrProtocol, rank, n)
	}
	return registration{c: c, rank: rank, n: n, addr: string(body[8:])}, nil
}

func (r *Root) serve() {
	defer close(r.done)
	regc := make(chan registration)
	finished := make(chan struct{})
	acc := startAcceptor(r.ln, func(c net.Conn) {
		g, err := r.register(c)
		if err != nil {
			r.rejected.Add(1)
			c.Close()
			return
		}
		select {
		case regc <- g:
		case <-finished:
			c.Close()
		}
	})
	var regs []registration
	nranks := -1
	got := 0
	timer := time.NewTimer(r.timeout)
	defer timer.Stop()
	fail := func(err error) {
		r.err = err
		close(finished)
		acc.Stop(r.keep)
		for _, g := range regs {
			if g.c != nil {
				g.c.Close()
			}
		}
	}
	for nranks < 0 || got < nranks {
		var g registration
		select {
		case g = <-regc:
		case <-timer.C:
			fail(fmt.Errorf("%w: root: %d of %d ranks registered within %v", ErrBootstrap, got, nranks, r.timeout))
			return
		case <-r.stop:
			fail(fmt.Errorf("%w: root: closed with %d of %d ranks registered", ErrBootstrap, got, nranks))
			return
		}
		if nranks >= 0 && g.n != nranks || nranks >= 0 && regs[g.rank].c != nil {
			r.rejected.Add(1) // another size, or a duplicate rank
			g.c.Close()
			continue
		}
		if nranks < 0 {
			nranks = g.n
			regs = make([]registration, nranks)
		}
		regs[g.rank] = g
		got++
	}
	close(finished)
	acc.Stop(r.keep)
	for i := range regs {
		next := regs[(i+1)%nranks].addr
		regs[i].c.SetDeadline(time.Now().Add(r.timeout))
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
	secret     Secret
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
	if n <= 0 || n > MaxRanks || rank < 0 || rank >= n {
		return nil, fmt.Errorf("%w: rank %d of %d ranks (at most %d)", ErrBootstrap, rank, n, MaxRanks)
	}
	rootAddr, err := id.check()
	if err != nil {
		return nil, err
	}
	to := cfg.Timeout
	if to <= 0 {
		to = DefaultBootstrapTimeout
	}
	b := &Bootstrap{rank: rank, n: n, magic: id.Magic(), secret: id.Secret(), timeout: to}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	fail := func(format string, args ...any) (*Bootstrap, error) {
		b.Close()
		return nil, fmt.Errorf("%w: rank %d: %s", ErrBootstrap, rank, fmt.Sprintf(format, args...))
	}
	dl, _ := ctx.Deadline()
	// Connect to the root and authenticate. The root may start after us, or close a connection
	// unanswered while it is busy with many others: retry until the deadline. A root that answers
	// without knowing the secret belongs to another communicator: stop at once.
	rc, err := dialAuth(ctx, rootAddr, b.secret, purposeRoot, 10*time.Millisecond)
	if err != nil {
		b.Close()
		if errors.Is(err, ErrAuth) {
			return nil, fmt.Errorf("%w: rank %d: the bootstrap root at %s serves another communicator (another job at this address, ranks that do not share the secret, or a stranger): %w", ErrBootstrap, rank, rootAddr, err)
		}
		return nil, fmt.Errorf("%w: rank %d: reaching the root at %s: %v", ErrBootstrap, rank, rootAddr, err)
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
		b.ln.Close()
		return b, nil
	}
	// Ring: dial next, accept prev, concurrently.
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	acc := make(chan error, 1)
	go func() { acc <- b.acceptPrev(actx) }()
	b.next, err = dialAuth(ctx, string(nextAddr), b.secret, purposeRing, 5*time.Millisecond)
	if err != nil {
		acancel()
		<-acc
		b.Close()
		return nil, fmt.Errorf("%w: rank %d: connecting to rank %d at %s: %w", ErrBootstrap, rank, (rank+1)%n, nextAddr, err)
	}
	b.next.SetDeadline(dl)
	hi := make([]byte, 4)
	binary.LittleEndian.PutUint32(hi, uint32(rank))
	if err := writeMsg(b.next, b.magic, msgRingHi, hi); err != nil {
		acancel()
		<-acc
		return fail("hello to rank %d: %v", (rank+1)%n, err)
	}
	b.next.SetDeadline(time.Time{})
	if err := <-acc; err != nil {
		return fail("accepting rank %d: %v", (rank+n-1)%n, err)
	}
	return b, nil
}

// dialAuth connects to addr and authenticates for purpose, retrying (every step, growing to 20
// steps) while the listener is not up or closes the connection unanswered, until ctx is done. An
// error wrapping ErrAuth is final.
func dialAuth(ctx context.Context, addr string, secret Secret, purpose string, step time.Duration) (net.Conn, error) {
	var d net.Dialer
	for attempt := 0; ; attempt++ {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			dl := time.Now().Add(HandshakeTimeout)
			if cd, ok := ctx.Deadline(); ok && cd.Before(dl) {
				dl = cd
			}
			c.SetDeadline(dl)
			stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
			err = authDial(c, secret, purpose)
			stop()
			if err == nil {
				c.SetDeadline(time.Time{})
				return c, nil
			}
			c.Close()
			if errors.Is(err, ErrAuth) {
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%v (%w)", err, ctx.Err())
		case <-time.After(time.Duration(min(attempt+1, 20)) * step):
		}
	}
}

// acceptPrev accepts the ring predecessor: connections are authenticated concurrently, each within
// the handshake deadline, and the first that authenticates and names the predecessor is kept; the
// ring listener is then closed.
func (b *Bootstrap) acceptPrev(ctx context.Context) error {
	want := (b.rank + b.n - 1) % b.n
	var mu sync.Mutex
	found := make(chan struct{})
	finished := false
	dl, _ := ctx.Deadline()
	acc := startAcceptor(b.ln, func(c net.Conn) {
		hd := time.Now().Add(HandshakeTimeout)
		if hd.After(dl) {
			hd = dl
		}
		c.SetDeadline(hd)
		err := authAccept(c, b.secret, purposeRing)
		var typ uint32
		var body []byte
		if err == nil {
			typ, body, err = readMsg(c, b.magic, 4)
		}
		if err != nil || typ != msgRingHi || len(body) != 4 || int(binary.LittleEndian.Uint32(body)) != want {
			b.rejected.Add(1)
			c.Close()
			return
		}
		c.SetDeadline(time.Time{})
		mu.Lock()
		defer mu.Unlock()
		if finished || b.prev != nil {
			b.rejected.Add(1)
			c.Close()
			return
		}
		b.prev = c
		close(found)
	})
	var err error
	select {
	case <-found:
	case <-ctx.Done():
		err = ctx.Err()
	}
	mu.Lock()
	finished = true
	if b.prev != nil {
		err = nil
	}
	mu.Unlock()
	acc.Stop(false) // closes the ring listener: the ring is complete or has failed
	return err
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
