package realnet

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// TCP transport: one socket per connection, opened by the lower rank (it dials the peer's data
// listener, both ends authenticate with the communicator's secret (auth.go), then it sends a hello
// naming the communicator and the key, and the listener answers). Messages are framed as {pieceLen uint64, msgLen uint64} + piece, pieces at most
// SlotBytes; every length read from the wire is bounded. Send copies into one of Steps slot buffers
// that a writer goroutine drains, so a rank never waits for its receiver to post a Recv (the same
// guarantee the ring transports give).

const (
	tcpHelloMagic = 0x73696d6363_6c5443 // "simcclTC"
	tcpHelloLen   = 48
	// TCPHandshakeTimeout bounds the hello exchange of a new data connection.
	TCPHandshakeTimeout = 10 * time.Second
)

// TCPConfig configures a TCP transport.
type TCPConfig struct {
	// Secret is the communicator's secret (required): a connection whose other end does not prove it
	// knows it is refused before anything else is read or written.
	Secret    Secret
	Comm      uint64 // communicator id (several communicators may share a process)
	Rank      int
	Listen    string // listen address, e.g. "127.0.0.1:0" or ":0"; "" = 127.0.0.1:0
	SlotBytes int    // ≤ 0: DefaultSlotBytes
}

// TCP is the socket Transport of one rank.
type TCP struct {
	cfg   TCPConfig
	magic uint64 // the secret's label, in the hello
	ln    net.Listener
	acc   *acceptor

	mu      sync.Mutex
	closed  bool
	done    chan struct{}
	ctx     context.Context // cancelled by Close
	cancel  context.CancelFunc
	peers   []string
	keys    map[Key]bool
	waiting map[Key]chan net.Conn
	conns   []*tcpConn
	rejects atomic.Int64
}

// NewTCP starts listening for data connections. Publish Addr to the other ranks (through the
// bootstrap) and hand their addresses to SetPeers before connecting.
func NewTCP(cfg TCPConfig) (*TCP, error) {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.SlotBytes <= 0 {
		cfg.SlotBytes = DefaultSlotBytes
	}
	if cfg.Secret.IsZero() {
		return nil, fmt.Errorf("tcp transport: no secret (TCPConfig.Secret)")
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("tcp transport: listen on %s: %w", cfg.Listen, err)
	}
	t := &TCP{cfg: cfg, magic: cfg.Secret.Label(), ln: ln, done: make(chan struct{}), keys: map[Key]bool{}, waiting: map[Key]chan net.Conn{}}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.acc = startAcceptor(ln, t.handshakeIn)
	return t, nil
}

func (t *TCP) Name() string { return "tcp" }

// Addr is the address of the data listener.
func (t *TCP) Addr() string { return t.ln.Addr().String() }

// Rejected counts incoming connections refused (wrong magic or communicator, bad hello).
func (t *TCP) Rejected() int64 { return t.rejects.Load() }

// SetPeers gives the data-listener address of every rank (index = rank).
func (t *TCP) SetPeers(addrs []string) {
	t.mu.Lock()
	t.peers = append([]string(nil), addrs...)
	t.mu.Unlock()
}

func (t *TCP) waitChan(k Key) chan net.Conn {
	ch, ok := t.waiting[k]
	if !ok {
		ch = make(chan net.Conn, 1)
		t.waiting[k] = ch
	}
	return ch
}

func (t *TCP) hello(from int, k Key) []byte {
	b := make([]byte, tcpHelloLen)
	binary.LittleEndian.PutUint64(b[0:], tcpHelloMagic)
	binary.LittleEndian.PutUint64(b[8:], t.magic)
	binary.LittleEndian.PutUint64(b[16:], t.cfg.Comm)
	binary.LittleEndian.PutUint32(b[24:], uint32(from))
	binary.LittleEndian.PutUint32(b[28:], uint32(k.Channel))
	binary.LittleEndian.PutUint32(b[32:], uint32(k.ConnIndex))
	binary.LittleEndian.PutUint32(b[36:], uint32(t.cfg.SlotBytes))
	return b
}

// handshakeIn authenticates an incoming connection, reads its hello and hands it to the matching
// Connect.
func (t *TCP) handshakeIn(c net.Conn) {
	c.SetDeadline(time.Now().Add(min(HandshakeTimeout, TCPHandshakeTimeout)))
	if err := authAccept(c, t.cfg.Secret, purposeTCP); err != nil {
		t.rejects.Add(1)
		c.Close()
		return
	}
	b := make([]byte, tcpHelloLen)
	if _, err := io.ReadFull(c, b); err != nil {
		t.rejects.Add(1)
		c.Close()
		return
	}
	if binary.LittleEndian.Uint64(b[0:]) != tcpHelloMagic || binary.LittleEndian.Uint64(b[8:]) != t.magic ||
		binary.LittleEndian.Uint64(b[16:]) != t.cfg.Comm || binary.LittleEndian.Uint32(b[36:]) != uint32(t.cfg.SlotBytes) {
		t.rejects.Add(1)
		c.Close()
		return
	}
	from := int(int32(binary.LittleEndian.Uint32(b[24:])))
	k := Key{Channel: int(int32(binary.LittleEndian.Uint32(b[28:]))), Peer: from, ConnIndex: int(int32(binary.LittleEndian.Uint32(b[32:])))}
	t.mu.Lock()
	if t.closed || from < 0 || from >= t.cfg.Rank {
		t.mu.Unlock()
		t.rejects.Add(1)
		c.Close()
		return
	}
	ch := t.waitChan(k)
	t.mu.Unlock()
	// The answer (our own hello) is written by Connect once this rank asks for the key, so the dialer
	// knows both ends are attached.
	c.SetDeadline(time.Time{})
	select {
	case ch <- c:
	default: // a duplicate connection for this key
		t.rejects.Add(1)
		c.Close()
	}
}

func (t *TCP) Connect(ctx context.Context, key Key) (Conn, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, fmt.Errorf("tcp: connect %v: %w", key, ErrClosed)
	}
	if key.Peer < 0 || key.Peer >= len(t.peers) || key.Peer == t.cfg.Rank {
		t.mu.Unlock()
		return nil, fmt.Errorf("tcp: connect %v: no such peer (%d peers known)", key, len(t.peers))
	}
	if t.keys[key] {
		t.mu.Unlock()
		return nil, fmt.Errorf("tcp: connect %v: already connected", key)
	}
	t.keys[key] = true
	addr := t.peers[key.Peer]
	var ch chan net.Conn
	if t.cfg.Rank > key.Peer {
		ch = t.waitChan(key)
	}
	t.mu.Unlock()

	var nc net.Conn
	if ch != nil {
		select {
		case nc = <-ch:
			nc.SetDeadline(time.Now().Add(TCPHandshakeTimeout))
			if _, err := nc.Write(t.hello(t.cfg.Rank, key)); err != nil {
				nc.Close()
				return nil, fmt.Errorf("tcp: connect %v: answering rank %d: %w", key, key.Peer, ErrPeerGone)
			}
			nc.SetDeadline(time.Time{})
		case <-ctx.Done():
			return nil, fmt.Errorf("tcp: connect %v: waiting for rank %d: %w", key, key.Peer, ctx.Err())
		case <-t.done:
			return nil, fmt.Errorf("tcp: connect %v: %w", key, ErrClosed)
		}
	} else {
		var err error
		nc, err = t.dial(ctx, addr, key)
		if err != nil {
			return nil, err
		}
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c := newTCPConn(nc, t.cfg.SlotBytes)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		c.Close()
		return nil, fmt.Errorf("tcp: connect %v: %w", key, ErrClosed)
	}
	t.conns = append(t.conns, c)
	return c, nil
}

// dial connects to a peer's listener (retrying while it is not up yet) and exchanges hellos.
func (t *TCP) dial(ctx context.Context, addr string, key Key) (net.Conn, error) {
	var d net.Dialer
	for attempt := 0; ; attempt++ {
		hctx, cancel := context.WithTimeout(ctx, TCPHandshakeTimeout)
		nc, err := d.DialContext(hctx, "tcp", addr)
		cancel()
		if err == nil {
			nc.SetDeadline(time.Now().Add(TCPHandshakeTimeout))
			if err = authDial(nc, t.cfg.Secret, purposeTCP); errors.Is(err, ErrAuth) {
				nc.Close()
				return nil, fmt.Errorf("tcp: connect %v: %s: %w (%w)", key, addr, ErrProtocol, err)
			}
			if err == nil {
				_, err = nc.Write(t.hello(t.cfg.Rank, key))
			}
			if err == nil {
				// The peer answers when it connects this key itself, which may be later (lazy
				// connection): wait as long as ctx allows.
				dl, _ := ctx.Deadline()
				nc.SetDeadline(dl)
				stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
				tdone := context.AfterFunc(t.ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
				b := make([]byte, tcpHelloLen)
				_, err = io.ReadFull(nc, b)
				stop()
				tdone()
				if err == nil {
					if binary.LittleEndian.Uint64(b[0:]) != tcpHelloMagic || binary.LittleEndian.Uint64(b[8:]) != t.magic {
						nc.Close()
						return nil, fmt.Errorf("tcp: connect %v: %s answered with a wrong magic: %w", key, addr, ErrProtocol)
					}
					nc.SetDeadline(time.Time{})
					return nc, nil
				}
			}
			nc.Close()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("tcp: connect %v: waiting for rank %d: %w", key, key.Peer, ctx.Err())
			}
			if t.ctx.Err() != nil {
				return nil, fmt.Errorf("tcp: connect %v: %w", key, ErrClosed)
			}
			return nil, fmt.Errorf("tcp: connect %v: hello with %s: %v: %w", key, addr, err, ErrPeerGone)
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			// The peer listened before its address was published (NewTCP), so a refusal means that its
			// listener is closed: its transport, communicator or process is gone.
			return nil, fmt.Errorf("tcp: connect %v: dial %s: %v: %w", key, addr, err, ErrPeerGone)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("tcp: connect %v: dial %s: %v: %w", key, addr, err, ctx.Err())
		case <-t.done:
			return nil, fmt.Errorf("tcp: connect %v: %w", key, ErrClosed)
		case <-time.After(time.Duration(min(attempt+1, 20)) * 5 * time.Millisecond):
		}
	}
}

func (t *TCP) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.done)
	t.cancel()
	conns := t.conns
	t.conns = nil
	waiting := t.waiting
	t.waiting = map[Key]chan net.Conn{}
	t.mu.Unlock()
	t.acc.Stop(false)
	for _, c := range conns {
		c.Close()
	}
	for _, ch := range waiting {
		select {
		case c := <-ch:
			c.Close()
		default:
		}
	}
	return nil
}

// tcpConn is a framed connection with a writer goroutine and Steps slot buffers.
type tcpConn struct {
	nc        net.Conn
	rd        *bufio.Reader // small messages: header and payload in one read
	slotBytes int
	free      chan []byte
	queue     chan []byte // frames: 16-byte header + piece, in a slot buffer
	done      chan struct{}
	once      sync.Once
	closed    atomic.Bool
	werr      atomic.Pointer[error]
	hdr       [16]byte
	nslots    atomic.Int64
}

func newTCPConn(nc net.Conn, slotBytes int) *tcpConn {
	c := &tcpConn{nc: nc, rd: bufio.NewReaderSize(nc, 64<<10), slotBytes: slotBytes, free: make(chan []byte, Steps), queue: make(chan []byte, Steps), done: make(chan struct{})}
	for i := 0; i < Steps; i++ {
		c.free <- nil // slot buffers are allocated on first use
	}
	go c.writer()
	return c
}

func (c *tcpConn) SlotBytes() int { return c.slotBytes }

// BufferBytes reports the slot buffers allocated so far (the kernel's socket buffers are not counted).
func (c *tcpConn) BufferBytes() int64 { return c.nslots.Load() * int64(16+c.slotBytes) }

func (c *tcpConn) writer() {
	for {
		select {
		case f := <-c.queue:
			if _, err := c.nc.Write(f); err != nil {
				e := c.classify(err)
				c.werr.CompareAndSwap(nil, &e)
				c.nc.Close()
				c.once.Do(func() { close(c.done) })
				return
			}
			c.free <- f
		case <-c.done:
			return
		}
	}
}

func (c *tcpConn) classify(err error) error {
	if c.closed.Load() {
		return ErrClosed
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w (%v)", ErrTimeout, err)
	}
	return fmt.Errorf("%w (%v)", ErrPeerGone, err)
}

func (c *tcpConn) Send(p []byte, deadline time.Time) error {
	total := len(p)
	first := true
	var timeout <-chan time.Time
	for first || len(p) > 0 {
		first = false
		var buf []byte
		select {
		case buf = <-c.free:
		default:
			if timeout == nil && !deadline.IsZero() {
				tm := time.NewTimer(time.Until(deadline))
				defer tm.Stop()
				timeout = tm.C
			}
			select {
			case buf = <-c.free:
			case <-c.done:
				return c.err()
			case <-timeout:
				return fmt.Errorf("send of %d bytes: %w", total, ErrTimeout)
			}
		}
		if e := c.werr.Load(); e != nil || c.closed.Load() {
			return c.err()
		}
		if buf == nil {
			buf = make([]byte, 16+c.slotBytes)
			c.nslots.Add(1)
		}
		buf = buf[:cap(buf)]
		k := min(len(p), c.slotBytes)
		binary.LittleEndian.PutUint64(buf[0:], uint64(k))
		binary.LittleEndian.PutUint64(buf[8:], uint64(total))
		copy(buf[16:], p[:k])
		c.queue <- buf[:16+k]
		p = p[k:]
	}
	return nil
}

func (c *tcpConn) err() error {
	if c.closed.Load() {
		return ErrClosed
	}
	if e := c.werr.Load(); e != nil {
		return *e
	}
	return ErrPeerGone
}

func (c *tcpConn) Recv(p []byte, deadline time.Time) error {
	if c.closed.Load() {
		return ErrClosed
	}
	c.nc.SetReadDeadline(deadline)
	want := len(p)
	got := 0
	first := true
	for first || got < want {
		if _, err := io.ReadFull(c.rd, c.hdr[:]); err != nil {
			return fmt.Errorf("recv of %d bytes: %w", want, c.classify(err))
		}
		k := binary.LittleEndian.Uint64(c.hdr[0:])
		total := binary.LittleEndian.Uint64(c.hdr[8:])
		if k > uint64(c.slotBytes) || (first && total != uint64(want)) || uint64(got)+k > uint64(want) {
			return fmt.Errorf("recv: want a %d-byte message, got a piece of %d of a %d-byte message: %w", want, k, total, ErrSize)
		}
		first = false
		if _, err := io.ReadFull(c.rd, p[got:got+int(k)]); err != nil {
			return fmt.Errorf("recv of %d bytes: %w", want, c.classify(err))
		}
		got += int(k)
	}
	return nil
}

// Flush implements Flusher: it waits until the writer has written every queued frame.
func (c *tcpConn) Flush(deadline time.Time) error {
	for {
		if len(c.free) == Steps {
			return nil
		}
		select {
		case <-c.done:
			return c.err()
		default:
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return fmt.Errorf("flush: %w", ErrTimeout)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func (c *tcpConn) Close() error {
	c.closed.Store(true)
	c.once.Do(func() { close(c.done) })
	return c.nc.Close()
}
