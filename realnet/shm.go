package realnet

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Shared-memory transport: each connection is a file in a tmpfs directory (/dev/shm) mapped by both
// processes, holding a header and two rings (one per direction). The file's name is derived from
// the communicator's secret (nobody without it can guess it); the lower rank creates it exclusively
// (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600: a file or link already at the name is never used), the
// higher rank opens it without following links and checks that it is a regular file of this user,
// of mode 0600 and of the expected size. Both map it, announce themselves in the header and wait for
// the other; then the name is unlinked (the mapping stays), and every failure path and Close unlinks
// the names this rank created. Waiting is polling with backoff (spin, yield, short sleeps); a peer
// is declared gone when it sets its closed flag or when its process no longer exists (kill(pid, 0)
// fails with ESRCH, checked every ShmLivenessPeriod).
//
// Header layout (64-byte fields): magic, version, slotBytes, pid[0], pid[1], attached[0],
// attached[1], closed[0], closed[1]; rings start at shmHeaderBytes. The creator writes the magic
// last (after the version and slot size), so the other end reads a complete header once it sees it.

const (
	shmMagic       = 0x73696d63636c5348 // "simcclSH"
	shmVersion     = 1
	shmHeaderBytes = 4096
	// ShmLivenessPeriod is how often a waiting end checks that the peer process exists.
	ShmLivenessPeriod = 50 * time.Millisecond
)

const (
	shmOffMagic    = 0
	shmOffVersion  = 64
	shmOffSlot     = 128
	shmOffPid      = 192 // + 64*side
	shmOffAttached = 320 // + 64*side
	shmOffClosed   = 448 // + 64*side
)

// Shm is the shared-memory Transport of one rank (processes on one host).
type Shm struct {
	dir       string
	names     Secret // file names are derived from it (fileName)
	rank      int
	slotBytes int

	mu      sync.Mutex
	closed  bool
	done    chan struct{}
	keys    map[Key]bool
	conns   []*shmConn
	created map[string]bool // names this rank created and has not unlinked yet
}

// NewShm returns the shared-memory transport of rank in the communicator whose ranks share secret
// (the file names are derived from it: use a secret that differs for every communicator and run,
// as comm does). dir "" selects /dev/shm (or the system temporary directory when /dev/shm does
// not exist); slotBytes ≤ 0 selects DefaultSlotBytes.
func NewShm(dir string, secret Secret, rank, slotBytes int) *Shm {
	if dir == "" {
		dir = "/dev/shm"
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			dir = os.TempDir()
		}
	}
	if slotBytes <= 0 {
		slotBytes = DefaultSlotBytes
	}
	return &Shm{dir: dir, names: secret.Derive("shm names"), rank: rank, slotBytes: slotBytes, done: make(chan struct{}),
		keys: map[Key]bool{}, created: map[string]bool{}}
}

// fileName is the file of the connection between ranks lo < hi for key: "simccl-" and 128 bits
// derived from the secret and the connection, so that one name (/dev/shm can be listed by anyone)
// tells nothing about the names of the communicator's other connections.
func (t *Shm) fileName(lo, hi int, key Key) string {
	var b [32]byte
	for i, v := range [4]int{lo, hi, key.Channel, key.ConnIndex} {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(int64(v)))
	}
	d := t.names.Derive("connection", b[:])
	return filepath.Join(t.dir, "simccl-"+hex.EncodeToString(d[:16]))
}

// unlink removes a name this rank created (or the peer's, once both are attached).
func (t *Shm) unlink(name string) {
	os.Remove(name)
	t.mu.Lock()
	delete(t.created, name)
	t.mu.Unlock()
}

// createFile creates the file of a connection exclusively, never through a link, readable and
// writable by this user only, and sizes it.
func (t *Shm) createFile(name string, size int) (*os.File, error) {
	fd, err := syscall.Open(name, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, syscall.EEXIST) {
			return nil, fmt.Errorf("%s exists already (a file or link this connection did not create: not used): %w", name, err)
		}
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	t.mu.Lock()
	t.created[name] = true
	t.mu.Unlock()
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		t.unlink(name)
		return nil, fmt.Errorf("size %s: %w", name, err)
	}
	return f, nil
}

// openFile opens the file the peer creates (waiting for it to appear and be sized), never through
// a link, and checks that it is a regular file of this user, mode 0600, of the expected size.
func (t *Shm) openFile(ctx context.Context, name string, size int) (*os.File, error) {
	for n := 0; ; n++ {
		fd, err := syscall.Open(name, syscall.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err == nil {
			f := os.NewFile(uintptr(fd), name)
			var st syscall.Stat_t
			if err := syscall.Fstat(fd, &st); err != nil {
				f.Close()
				return nil, fmt.Errorf("stat %s: %w", name, err)
			}
			switch {
			case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
				err = fmt.Errorf("%s is not a regular file (mode %#o): not used: %w", name, st.Mode, ErrProtocol)
			case int(st.Uid) != os.Geteuid():
				err = fmt.Errorf("%s belongs to user %d, not to this user (%d): not used: %w", name, st.Uid, os.Geteuid(), ErrProtocol)
			case st.Mode&0o077 != 0:
				err = fmt.Errorf("%s has mode %#o, want 0600: not used: %w", name, st.Mode&0o777, ErrProtocol)
			case st.Size != 0 && st.Size != int64(size):
				err = fmt.Errorf("%s has %d bytes, this rank expects %d (another slot size?): %w", name, st.Size, size, ErrProtocol)
			case st.Size == 0:
				f.Close() // created, not sized yet
				f = nil
			}
			if err != nil {
				f.Close()
				return nil, err
			}
			if f != nil {
				return f, nil
			}
		} else if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link: not followed: %w", name, ErrProtocol)
		} else if !errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("open %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.done:
			return nil, ErrClosed
		default:
		}
		backoff(n, 0, true)
	}
}

func (t *Shm) Name() string { return "shm" }

type shmMap struct {
	mem []byte
}

func (m *shmMap) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&m.mem[off])) }

func (t *Shm) Connect(ctx context.Context, key Key) (Conn, error) {
	if key.Peer < 0 || key.Peer == t.rank {
		return nil, fmt.Errorf("shm: connect %v: bad peer for rank %d", key, t.rank)
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, fmt.Errorf("shm: connect %v: %w", key, ErrClosed)
	}
	if t.keys[key] {
		t.mu.Unlock()
		return nil, fmt.Errorf("shm: connect %v: already connected", key)
	}
	t.keys[key] = true
	t.mu.Unlock()

	lo, hi, side := t.rank, key.Peer, 0
	if lo > hi {
		lo, hi, side = hi, lo, 1
	}
	name := t.fileName(lo, hi, key)
	rb := (ringBytes(t.slotBytes) + 4095) &^ 4095
	size := shmHeaderBytes + 2*rb
	var f *os.File
	var err error
	if side == 0 {
		f, err = t.createFile(name, size)
	} else {
		f, err = t.openFile(ctx, name, size)
	}
	if err != nil {
		return nil, fmt.Errorf("shm: connect %v: %w", key, err)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	f.Close()
	if err != nil {
		if side == 0 {
			t.unlink(name)
		}
		return nil, fmt.Errorf("shm: connect %v: mmap %s: %w", key, name, err)
	}
	m := &shmMap{mem: mem}
	runtime.SetFinalizer(m, func(m *shmMap) { syscall.Munmap(m.mem) })
	fail := func(err error) (Conn, error) {
		atomic.StoreUint64(m.u64(shmOffClosed+64*side), 1)
		if side == 0 {
			t.unlink(name)
		}
		return nil, fmt.Errorf("shm: connect %v: %w", key, err)
	}
	wait := func(n int) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.done:
			return ErrClosed
		default:
		}
		backoff(n, 0, true)
		return nil
	}
	if side == 0 {
		atomic.StoreUint64(m.u64(shmOffVersion), shmVersion)
		atomic.StoreUint64(m.u64(shmOffSlot), uint64(t.slotBytes))
		atomic.StoreUint64(m.u64(shmOffMagic), shmMagic)
	} else {
		for n := 0; atomic.LoadUint64(m.u64(shmOffMagic)) == 0; n++ {
			if err := wait(n); err != nil {
				return fail(err)
			}
		}
		if v := atomic.LoadUint64(m.u64(shmOffMagic)); v != shmMagic {
			return fail(fmt.Errorf("%s has magic %#x, not %#x: %w", name, v, uint64(shmMagic), ErrProtocol))
		}
		if v := atomic.LoadUint64(m.u64(shmOffVersion)); v != shmVersion {
			return fail(fmt.Errorf("%s has version %d, this rank %d: %w", name, v, shmVersion, ErrProtocol))
		}
		if v := atomic.LoadUint64(m.u64(shmOffSlot)); v != uint64(t.slotBytes) {
			return fail(fmt.Errorf("peer uses %d-byte slots, this rank %d: %w", v, t.slotBytes, ErrProtocol))
		}
	}
	atomic.StoreUint64(m.u64(shmOffPid+64*side), uint64(os.Getpid()))
	atomic.StoreUint64(m.u64(shmOffAttached+64*side), 1)

	// Wait for the peer to attach.
	for n := 0; atomic.LoadUint64(m.u64(shmOffAttached+64*(1-side))) == 0; n++ {
		if err := wait(n); err != nil {
			return fail(err)
		}
	}
	t.unlink(name) // both attached: the name is no longer needed (whichever end gets here first)
	r0, err := newRing(mem[shmHeaderBytes:shmHeaderBytes+rb], t.slotBytes)
	if err != nil {
		return nil, err
	}
	r1, err := newRing(mem[shmHeaderBytes+rb:], t.slotBytes)
	if err != nil {
		return nil, err
	}
	r0.race, r1.race = raceToken(name+"/0"), raceToken(name+"/1")
	rings := [2]*ring{r0, r1}
	l := &shmLink{m: m, side: side, pid: os.Getpid(), peerPid: int(atomic.LoadUint64(m.u64(shmOffPid + 64*(1-side))))}
	l.spin.Store(shmSpin / 2)
	c := &shmConn{ringConn: &ringConn{tx: rings[side], rx: rings[1-side], l: l, bytes: int64(size)}}
	c.close = func() error {
		atomic.StoreUint64(m.u64(shmOffClosed+64*side), 1)
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		c.close()
		return nil, fmt.Errorf("shm: connect %v: %w", key, ErrClosed)
	}
	t.conns = append(t.conns, c)
	return c, nil
}

func (t *Shm) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.done)
	conns := t.conns
	t.conns = nil
	var names []string
	for name := range t.created {
		names = append(names, name)
	}
	t.created = map[string]bool{}
	t.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	for _, name := range names {
		os.Remove(name) // a connection still waiting for its peer
	}
	return nil
}

type shmLink struct {
	m         *shmMap
	side      int
	peerPid   int
	pid       int
	lastCheck atomic.Int64 // unix nanoseconds of the last liveness check
	gone      atomic.Bool
	spin      atomic.Int32 // polls a wait spins before it yields (adaptive)
}

func (l *shmLink) state() error {
	if atomic.LoadUint64(l.m.u64(shmOffClosed+64*l.side)) != 0 {
		return ErrClosed
	}
	if l.gone.Load() || atomic.LoadUint64(l.m.u64(shmOffClosed+64*(1-l.side))) != 0 {
		return ErrPeerGone
	}
	return nil
}

func (l *shmLink) wait(deadline time.Time, n int, _ bool) error {
	if n > 0 && (n%64 == 0 || n >= shmYields) {
		now := time.Now()
		if !deadline.IsZero() && !now.Before(deadline) {
			return ErrTimeout
		}
		if last := l.lastCheck.Load(); now.UnixNano()-last >= int64(ShmLivenessPeriod) && l.lastCheck.CompareAndSwap(last, now.UnixNano()) {
			if !processAlive(l.peerPid) {
				l.gone.Store(true)
			}
		}
	}
	if l.peerPid == l.pid {
		// A goroutine rank of this process: it needs this thread's P more than a spin.
		backoff(n, 0, false)
		return nil
	}
	spin := int(l.spin.Load())
	switch {
	case n == 0 && spin < shmSpin:
		l.spin.Store(int32(min(spin+shmSpinGrow, shmSpin)))
	case n == spin && n > 0:
		l.spin.Store(int32(spin / 2))
	}
	backoff(n, spin, true)
	return nil
}

func (l *shmLink) notify(bool) {}

// ProcessAlive reports whether the process pid of this host (and PID namespace) exists and is not a
// zombie: how the shared-memory transport decides that a peer is gone.
func ProcessAlive(pid int) bool { return processAlive(pid) }

// processAlive reports whether pid exists and is not a zombie (a killed process whose parent has not
// reaped it yet still answers kill(pid, 0)).
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !os.IsNotExist(err)
	}
	// The state follows the command name, which is in parentheses and may contain spaces.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		switch b[i+2] {
		case 'Z', 'X', 'x':
			return false
		}
	}
	return true
}

// Polling policy of a waiting end (NCCL's kernels and proxies poll too: a step is a few µs, far less
// than a scheduler tick). A wait first spins: it only re-reads the counters (each a load of a shared
// cache line, ~50–100 ns), for up to shmSpin polls (~10–20 µs: a peer on another core answers well
// within it). Then every poll lets the other goroutines of this process run (Gosched: other channels
// of this rank, or, with goroutine ranks, the peer itself), and, when the peer is another process,
// from shmGosched polls past the spin also yields the thread to other processes (sched_yield): that
// is what makes an oversubscribed host (more ranks than cores) progress, the rank that holds the
// data gets the core. Only after shmYields polls (a wait of well over 100 ms, an idle communicator)
// does it sleep, 1 ms at a time, to stop burning a core: Go's timers cannot sleep much less than a
// millisecond on Linux, so a sleep in the hot path would cost ~1 ms per step.
//
// The spin is adaptive, per connection, as adaptive mutexes are: every wait adds shmSpinGrow polls
// to the budget (up to shmSpin), every wait that outlasts the budget halves it. With a core per rank
// most waits end while spinning and the budget stays high; on an oversubscribed host, where the peer
// is often not running and spinning only delays it, the budget falls to a few polls.
const (
	shmSpin     = 192
	shmSpinGrow = 8
	shmGosched  = 64
	shmYields   = 1 << 17
)

func backoff(n, spin int, otherProcess bool) {
	switch {
	case n < spin:
	case n < spin+shmGosched || (!otherProcess && n < shmYields):
		runtime.Gosched()
	case n < shmYields:
		runtime.Gosched()
		syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
	default:
		time.Sleep(time.Millisecond)
	}
}

// shmConn is a ring connection in a shared mapping; it adds SlotConn, in-place access to the slots.
type shmConn struct {
	*ringConn
}

// PeekRecv implements SlotConn.
func (c *shmConn) PeekRecv(deadline time.Time) ([]byte, int, error) {
	defer runtime.KeepAlive(c)
	r := c.rx
	h := r.head()
	for n := 0; r.tail() <= h; n++ {
		if err := c.l.state(); err != nil {
			return nil, 0, err
		}
		if err := c.l.wait(deadline, n, true); err != nil {
			return nil, 0, fmt.Errorf("recv: %w", err)
		}
	}
	raceAcquire(r.race)
	hdr, data := r.slot(h)
	k := binary.LittleEndian.Uint64(hdr[0:])
	total := binary.LittleEndian.Uint64(hdr[8:])
	if k > uint64(r.slotBytes) || total > 1<<62 || k > total {
		return nil, 0, fmt.Errorf("recv: a piece of %d bytes of a %d-byte message in %d-byte slots: %w", k, total, r.slotBytes, ErrSize)
	}
	return data[:k], int(total), nil
}

// ReleaseRecv implements SlotConn.
func (c *shmConn) ReleaseRecv() {
	r := c.rx
	raceRelease(r.race)
	atomic.StoreUint64(r.u64(ringHeadOff), r.head()+1)
	runtime.KeepAlive(c)
}

// ReserveSend implements SlotConn.
func (c *shmConn) ReserveSend(wait bool, deadline time.Time) ([]byte, bool, error) {
	defer runtime.KeepAlive(c)
	r := c.tx
	t := r.tail()
	for n := 0; t-r.head() >= Steps; n++ {
		if err := c.l.state(); err != nil {
			return nil, false, err
		}
		if !wait {
			return nil, false, nil
		}
		if err := c.l.wait(deadline, n, false); err != nil {
			return nil, false, fmt.Errorf("send: %w", err)
		}
	}
	if err := c.l.state(); err != nil {
		return nil, false, err
	}
	raceAcquire(r.race)
	_, data := r.slot(t)
	return data, true, nil
}

// PublishSend implements SlotConn.
func (c *shmConn) PublishSend(n, msgLen int) {
	r := c.tx
	t := r.tail()
	hdr, _ := r.slot(t)
	binary.LittleEndian.PutUint64(hdr[0:], uint64(n))
	binary.LittleEndian.PutUint64(hdr[8:], uint64(msgLen))
	raceRelease(r.race)
	atomic.StoreUint64(r.u64(ringTailOff), t+1)
	runtime.KeepAlive(c)
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
