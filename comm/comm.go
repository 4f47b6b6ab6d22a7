package comm

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/internal/group"
	"github.com/simccl/simccl/realnet"
)

// Errors of the package (wrapped; test with errors.Is).
var (
	ErrInvalidArgument = errors.New("comm: invalid argument")
	ErrAborted         = errors.New("comm: communicator aborted")
	ErrDestroyed       = errors.New("comm: communicator destroyed")
	// ErrRemote marks a failure caused by another rank (dead peer, dropped connection, timeout).
	ErrRemote = errors.New("comm: remote error")
)

// DefaultTimeout is how long a call may wait without progress before it fails: the bound within
// which every rank reports a dead peer (NCCL itself would block forever; docs/design.md asks for an
// error).
const DefaultTimeout = 10 * time.Second

// UniqueID is NCCL's 128-byte ncclUniqueId: the bootstrap root's address and the communicator's
// secret (realnet.UniqueID). Whoever holds it can join the communicator: hand it to the ranks only.
type UniqueID = realnet.UniqueID

// GetUniqueID starts a bootstrap root in this process, listening on listen ("" = 127.0.0.1:0; use
// "0.0.0.0:0" or an interface address when ranks run on several hosts), and returns its id. The
// root serves one communicator's initialisation and then exits.
func GetUniqueID(listen string) (UniqueID, error) {
	id, _, err := realnet.NewUniqueID(listen, 0)
	return id, err
}

// Config is the communicator configuration (the analogue of ncclConfig_t and the NCCL_* variables
// that matter on CPUs).
type Config struct {
	// Transport: "auto" (default: in-process for ranks of one process, shared memory for processes of
	// one host, TCP otherwise, chosen per peer as NCCL picks P2P/SHM/NET per connection), "inproc",
	// "shm" or "tcp".
	Transport string
	// Timeout: the longest a call waits without progress (default DefaultTimeout); also bounds
	// lazy connection.
	Timeout time.Duration
	// BootstrapTimeout bounds initialisation (default realnet.DefaultBootstrapTimeout).
	BootstrapTimeout time.Duration
	// Planners decides what every call runs (required): For(ranksPerHost, hosts) returns the
	// planner of a communicator laid out as the ranks are (planner.CPU describes the engine's
	// machine to NCCL's rules; NCCL_ALGO, NCCL_PROTO, NCCL_MAX_NCHANNELS … go in its settings).
	// The engine runs the planner's plan with the algorithms and protocols it lacks excluded
	// (Exclude: it runs Simple only, and no NVLS or CollNet), and Plan says when that differs from
	// NCCL's own decision.
	Planners Planners
	// SlotBytes: the size of one of a connection's NCCL_STEPS buffer slots (default 512 KiB, the
	// Simple protocol's step). The Simple chunk size follows from it.
	SlotBytes int
	// ConnectAtInit connects every ring (and tree) connection during init, as NCCL_RUNTIME_CONNECT=0
	// does; by default connections are made on first use of a (channel, peer, connIndex), as NCCL
	// 2.22+ does.
	ConnectAtInit bool
	// Listen is the host for this rank's listeners ("" = the interface that reaches the root).
	Listen string
	// ShmDir is where shared-memory segments are created ("" = /dev/shm).
	ShmDir string
	// Hub is the meeting point of in-process ranks (nil = realnet.DefaultHub()).
	Hub *realnet.Hub
	// Logf, if set, receives NCCL-INFO-style lines (connections made, their memory).
	Logf func(format string, args ...any)
	// Observe, if set, is called with every message this rank sends, before it is sent (tests
	// compare them with the simulator's records of the same plan; traces). It is called from the
	// channels' goroutines concurrently.
	Observe func(Message)
}

func (c *Config) withDefaults() Config {
	var o Config
	if c != nil {
		o = *c
	}
	if o.Transport == "" {
		o.Transport = "auto"
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.SlotBytes <= 0 {
		o.SlotBytes = realnet.DefaultSlotBytes
	}
	if o.Hub == nil {
		o.Hub = realnet.DefaultHub()
	}
	return o
}

func (c *Config) check() error {
	switch c.Transport {
	case "auto", "inproc", "shm", "tcp":
	default:
		return fmt.Errorf("%w: config Transport %q (want auto, inproc, shm or tcp)", ErrInvalidArgument, c.Transport)
	}
	if c.Planners == nil {
		return fmt.Errorf("%w: config Planners is required (planner.CPU{} plans with NCCL's rules for this engine)", ErrInvalidArgument)
	}
	return nil
}

// Message is one message of a schedule as the engine sends it: the step of the sender's program
// on a channel that sends it, the connection (channel, sender, receiver, connIndex) and its payload.
type Message struct {
	Channel, From, To, ConnIndex int
	Step                         int // index of the sending step in its program
	Seq                          int // message number on the connection, from 0
	Bytes                        int64
}

// Planners makes the planner of a communicator from the layout of its ranks.
type Planners interface {
	For(ranksPerHost, hosts int) (coll.Planner, error)
}

// Exclude is what the engine cannot run: protocols other than Simple (LL and LL128 carry flags in
// the data, which the engine's transports do not implement) and the algorithms with switch
// endpoints (NVLS, NVLSTree, CollNet).
var Exclude = func() coll.Exclude {
	var ex coll.Exclude
	ex.Protos[coll.LL], ex.Protos[coll.LL128] = true, true
	for a := coll.Algo(0); a < coll.NumAlgos; a++ {
		if a != coll.Ring && a != coll.Tree && a != coll.PAT {
			ex.Algos[a] = true
		}
	}
	return ex
}()

// Comm is a communicator: one rank's membership in a group of ranks. Its methods may be called from
// any goroutine; collective calls are queued in call order and run by the communicator's own
// executor, asynchronously (wait with Stream.Synchronize or Comm.Synchronize). Calls on one
// communicator run one after another in call order; different communicators run independently and
// concurrently.
type Comm struct {
	rank, n int
	cfg     Config
	magic   uint64
	secret  realnet.Secret // every rank's, from the id: derives split, shrink and shared-memory secrets
	boot    *realnet.Bootstrap
	tr      *router
	planner coll.Planner

	connMu  sync.Mutex
	conns   map[realnet.Key]*conn
	memory  atomic.Int64
	nconns  atomic.Int64
	schedMu sync.Mutex
	scheds  map[string]*coll.Schedule
	// connected: schedules whose connections are all open (guarded by schedMu)
	connected map[*coll.Schedule]bool
	scr       [coll.MaxChannels][4]scratch

	asyncErr  atomic.Pointer[error]
	queue     []*task // guarded by stateMu
	wake      chan struct{}
	stopped   chan struct{}
	defStream *Stream
	stateMu   sync.Mutex
	destroyed bool
	group     group.Group[*Comm, *call] // Comm.GroupStart/GroupEnd
	splits    int
	shrinks   int
	released  bool // Destroy ran
	rdv       net.Listener
	peers     []peerInfo
	token     uint64    // this rank's peerInfo.Token
	userOps   []float64 // PreMulSum scalars; handle = coll.PreMulSum + index
}

// conn is an established transport connection with per-direction locks.
type conn struct {
	c      realnet.Conn
	sendMu sync.Mutex
	recvMu sync.Mutex
}

// peerInfo is what every rank publishes at init.
type peerInfo struct {
	Host string `json:"host"`
	Pid  int    `json:"pid"`
	TCP  string `json:"tcp"`
	// Rdv is a listener kept open for the life of the communicator: the lowest surviving rank of a
	// Shrink serves the new communicator's bootstrap root on it.
	Rdv string `json:"rdv"`
	// Token names this rank of this communicator within its process (random): ranks of the same
	// process look it up among the failed ones (markFailed) while they wait to connect to it.
	Token uint64 `json:"token,omitempty"`
	// Nonce (random, rank 0's) makes this run's shared-memory names differ from any earlier run of
	// a communicator with the same secret (a launcher job's secret is fixed).
	Nonce []byte `json:"nonce,omitempty"`
}

// failedTokens are the tokens of this process's communicator ranks that failed or were aborted
// (bounded: the oldest are forgotten). A goroutine rank still waiting to connect lazily to one of
// them stops at once instead of after Config.Timeout (connect's peer watch).
var failedTokens struct {
	sync.Mutex
	set   map[uint64]bool
	order []uint64
}

const maxFailedTokens = 1 << 14

func markFailed(tok uint64) {
	if tok == 0 {
		return
	}
	f := &failedTokens
	f.Lock()
	defer f.Unlock()
	if f.set == nil {
		f.set = map[uint64]bool{}
	}
	if f.set[tok] {
		return
	}
	if len(f.order) >= maxFailedTokens {
		delete(f.set, f.order[0])
		f.order = f.order[1:]
	}
	f.set[tok] = true
	f.order = append(f.order, tok)
}

func tokenFailed(tok uint64) bool {
	f := &failedTokens
	f.Lock()
	defer f.Unlock()
	return tok != 0 && f.set[tok]
}

// peerGone reports whether peer is known to be dead while this rank waits to connect to it: a rank
// of this process whose communicator failed or was aborted, or, over shared memory, a process that
// no longer exists (the shared-memory transport already assumes one PID namespace per host).
// Elsewhere (TCP to another process) it says false: a dial refused by the peer's listener, or
// Config.Timeout, decides there.
func (c *Comm) peerGone(peer int) bool {
	if peer < 0 || peer >= len(c.peers) || c.rank >= len(c.peers) || peer == c.rank {
		return false
	}
	p, me := c.peers[peer], c.peers[c.rank]
	switch {
	case p.Host != me.Host:
		return false
	case p.Pid == me.Pid:
		return tokenFailed(p.Token)
	case c.tr.kind[peer] == "shm":
		return !realnet.ProcessAlive(p.Pid)
	}
	return false
}

// InitRank joins the communicator of id as rank of nranks (ncclCommInitRank). It blocks until all
// ranks have joined or the bootstrap times out.
func InitRank(nranks int, id UniqueID, rank int, cfg *Config) (*Comm, error) {
	o := cfg.withDefaults()
	if err := o.check(); err != nil {
		return nil, err
	}
	if nranks <= 0 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("%w: rank %d of %d ranks", ErrInvalidArgument, rank, nranks)
	}
	boot, err := realnet.NewBootstrap(context.Background(), id, rank, nranks,
		realnet.BootstrapConfig{Listen: listenAddr(o.Listen), Timeout: o.BootstrapTimeout})
	if err != nil {
		return nil, err
	}
	c := &Comm{rank: rank, n: nranks, cfg: o, magic: id.Magic(), secret: id.Secret(), boot: boot,
		conns: map[realnet.Key]*conn{}, scheds: map[string]*coll.Schedule{}, connected: map[*coll.Schedule]bool{},
		wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	c.defStream = NewStream()
	if err := c.setupTransports(); err != nil {
		boot.Close()
		return nil, err
	}
	go c.executor()
	if o.ConnectAtInit {
		if err := c.connectAll(); err != nil {
			c.Abort()
			c.Destroy()
			return nil, err
		}
	}
	return c, nil
}

func listenAddr(host string) string {
	if host == "" {
		return ""
	}
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") && strings.Count(host, ":") == 1 {
		return host
	}
	return host + ":0"
}

// InitAll creates n communicators of one process, ranks 0..n-1, driven by goroutines
// (ncclCommInitAll).
func InitAll(n int, cfg *Config) ([]*Comm, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: InitAll of %d ranks", ErrInvalidArgument, n)
	}
	o := cfg.withDefaults()
	if err := o.check(); err != nil {
		return nil, err // reported once, not by every rank
	}
	id, err := GetUniqueID("")
	if err != nil {
		return nil, err
	}
	comms := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = InitRank(n, id, r, cfg)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range comms {
			if c != nil {
				c.Abort()
			}
		}
		return nil, err
	}
	return comms, nil
}

func hostID() string {
	h, _ := os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		h += "/" + strings.TrimSpace(string(b))
	}
	return h
}

func (c *Comm) setupTransports() error {
	o := c.cfg
	var tcp *realnet.TCP
	var err error
	if o.Transport == "tcp" || o.Transport == "auto" {
		host := o.Listen
		if host == "" {
			host = c.boot.LocalHost()
		}
		tcp, err = realnet.NewTCP(realnet.TCPConfig{Secret: c.secret, Comm: c.magic, Rank: c.rank, Listen: listenAddr(host), SlotBytes: o.SlotBytes})
		if err != nil {
			return err
		}
	}
	c.token = rand.Uint64() | 1
	me := peerInfo{Host: hostID(), Pid: os.Getpid(), Token: c.token}
	if c.rank == 0 {
		me.Nonce = make([]byte, 16)
		if _, err := crand.Read(me.Nonce); err != nil {
			return err
		}
	}
	if tcp != nil {
		me.TCP = tcp.Addr()
	}
	rdvHost := o.Listen
	if rdvHost == "" {
		rdvHost = c.boot.LocalHost()
	}
	if c.rdv, err = net.Listen("tcp", listenAddr(rdvHost)); err != nil {
		if tcp != nil {
			tcp.Close()
		}
		return fmt.Errorf("comm: init: rendezvous listener on %s: %v", rdvHost, err)
	}
	me.Rdv = c.rdv.Addr().String()
	b, _ := json.Marshal(me)
	all, err := c.boot.AllGather(b)
	if err != nil {
		if tcp != nil {
			tcp.Close()
		}
		return err
	}
	infos := make([]peerInfo, c.n)
	addrs := make([]string, c.n)
	for r, raw := range all {
		if err := json.Unmarshal(raw, &infos[r]); err != nil {
			if tcp != nil {
				tcp.Close()
			}
			return fmt.Errorf("comm: init: rank %d published bad peer info: %v", r, err)
		}
		addrs[r] = infos[r].TCP
	}
	c.peers = infos
	ppn, hosts := layout(infos)
	if c.planner, err = o.Planners.For(ppn, hosts); err != nil {
		if tcp != nil {
			tcp.Close()
		}
		return fmt.Errorf("comm: init: planner of %d host(s) × %d rank(s): %w", hosts, ppn, err)
	}
	if c.planner.NRanks() != c.n {
		if tcp != nil {
			tcp.Close()
		}
		return fmt.Errorf("comm: init: the planner plans for %d ranks, the communicator has %d", c.planner.NRanks(), c.n)
	}
	rt := &router{kind: make([]string, c.n)}
	for r := range infos {
		switch {
		case o.Transport != "auto":
			rt.kind[r] = o.Transport
		case infos[r].Host == me.Host && infos[r].Pid == me.Pid:
			rt.kind[r] = "inproc"
		case infos[r].Host == me.Host:
			rt.kind[r] = "shm"
		default:
			rt.kind[r] = "tcp"
		}
		if rt.kind[r] == "tcp" && addrs[r] == "" {
			return fmt.Errorf("comm: init: rank %d has no TCP listener", r)
		}
	}
	if tcp != nil {
		tcp.SetPeers(addrs)
		rt.tcp = tcp
	}
	rt.inproc = realnet.NewInProc(o.Hub, c.magic, c.rank, o.SlotBytes)
	if len(infos[0].Nonce) < 16 {
		return fmt.Errorf("comm: init: rank 0 published no nonce")
	}
	rt.shm = realnet.NewShm(o.ShmDir, c.secret.Derive("shm", infos[0].Nonce), c.rank, o.SlotBytes)
	c.tr = rt
	return nil
}

// layout describes where the ranks run as the planner's machine: ranks per host and hosts, when
// every host holds the same number of consecutive ranks; otherwise one host of every rank (the
// planner's nodes are identical blocks of consecutive ranks, and the plan is right whatever the
// layout: only its speed depends on it).
func layout(infos []peerInfo) (ppn, hosts int) {
	n := len(infos)
	seen := map[string]bool{}
	run := 0
	for r := 0; r < n; r++ {
		if r == 0 || infos[r].Host != infos[r-1].Host {
			if seen[infos[r].Host] {
				return n, 1
			}
			seen[infos[r].Host] = true
			hosts++
			if r > 0 && ppn == 0 {
				ppn = run
			} else if r > 0 && run != ppn {
				return n, 1
			}
			run = 0
		}
		run++
	}
	if ppn == 0 {
		ppn = run
	}
	if run != ppn {
		return n, 1
	}
	return ppn, hosts
}

// router sends each peer's connections to the transport chosen for it.
type router struct {
	kind   []string
	inproc *realnet.InProc
	shm    *realnet.Shm
	tcp    *realnet.TCP
}

func (r *router) Connect(ctx context.Context, k realnet.Key) (realnet.Conn, error) {
	if k.Peer < 0 || k.Peer >= len(r.kind) {
		return nil, fmt.Errorf("comm: connect: peer %d out of range", k.Peer)
	}
	switch r.kind[k.Peer] {
	case "inproc":
		return r.inproc.Connect(ctx, k)
	case "shm":
		return r.shm.Connect(ctx, k)
	}
	return r.tcp.Connect(ctx, k)
}

func (r *router) Close() {
	r.inproc.Close()
	r.shm.Close()
	if r.tcp != nil {
		r.tcp.Close()
	}
}

// Rank and Count (ncclCommUserRank, ncclCommCount).
func (c *Comm) Rank() int  { return c.rank }
func (c *Comm) Count() int { return c.n }

// TransportOf names the transport used to reach peer.
func (c *Comm) TransportOf(peer int) string {
	if peer < 0 || peer >= c.n {
		return ""
	}
	return c.tr.kind[peer]
}

// MemoryBytes is the buffer memory of the connections made so far (per-connection buffers, as
// NCCL's transports allocate them), and their number.
func (c *Comm) MemoryBytes() (bytes int64, conns int) { return c.memory.Load(), int(c.nconns.Load()) }

// GetAsyncError returns the communicator's error, nil while it is healthy (ncclCommGetAsyncError).
func (c *Comm) GetAsyncError() error {
	if e := c.asyncErr.Load(); e != nil {
		return *e
	}
	return nil
}

func (c *Comm) logf(format string, args ...any) {
	if c.cfg.Logf != nil {
		c.cfg.Logf(format, args...)
	}
}

// fail records the first error and tears the transports down so that the peers notice at once.
func (c *Comm) fail(err error) {
	if c.asyncErr.CompareAndSwap(nil, &err) {
		c.logf("rank %d: communicator failed: %v", c.rank, err)
	}
	markFailed(c.token)
	c.tr.Close()
	c.boot.Close()
}

// Abort stops the communicator: pending and queued calls return errors, resources are freed
// (ncclCommAbort). Safe to call at any time, from any goroutine, more than once.
func (c *Comm) Abort() error {
	c.fail(fmt.Errorf("rank %d: %w", c.rank, ErrAborted))
	c.stateMu.Lock()
	c.destroyed = true
	c.stateMu.Unlock()
	c.kick()
	return nil
}

// Finalize waits for every queued call to finish and synchronises with the other ranks
// (ncclCommFinalize); it returns the communicator's error, if any.
func (c *Comm) Finalize() error {
	if err := c.drain(); err != nil {
		return err
	}
	if err := c.GetAsyncError(); err != nil {
		return err
	}
	if err := c.boot.Barrier(); err != nil {
		c.fail(err)
		return err
	}
	return nil
}

// drain waits until the executor has run everything queued so far.
func (c *Comm) drain() error {
	s := NewStream()
	if err := c.submit(&task{streams: []*Stream{s}}); err != nil {
		return err
	}
	return s.Synchronize()
}

// Destroy frees the communicator's resources (ncclCommDestroy); call Finalize first for a clean
// collective teardown.
func (c *Comm) Destroy() error {
	c.stateMu.Lock()
	if c.released {
		c.stateMu.Unlock()
		return nil
	}
	c.destroyed = true
	c.released = true
	c.stateMu.Unlock()
	c.kick()
	<-c.stopped
	// Graceful: let buffered sends reach the peers before the sockets close.
	if c.GetAsyncError() == nil {
		deadline := time.Now().Add(c.cfg.Timeout)
		c.connMu.Lock()
		for _, cn := range c.conns {
			if f, ok := cn.c.(realnet.Flusher); ok {
				f.Flush(deadline)
			}
		}
		c.connMu.Unlock()
	}
	c.tr.Close()
	c.boot.Close()
	c.rdv.Close()
	return nil
}

// Synchronize waits for the calls queued on the communicator's default stream.
func (c *Comm) Synchronize() error { return c.defStream.Synchronize() }

// Split creates communicators from the ranks of c with equal color, ordered by key then by rank in
// c (ncclCommSplit). color NoColor gives a nil communicator. Every rank of c must call it.
func (c *Comm) Split(color, key int, cfg *Config) (*Comm, error) {
	if err := c.drain(); err != nil {
		return nil, err
	}
	if err := c.GetAsyncError(); err != nil {
		return nil, err
	}
	if cfg == nil {
		cc := c.cfg
		cc.Logf = c.cfg.Logf
		cfg = &cc
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(int64(color)))
	binary.LittleEndian.PutUint64(b[8:], uint64(int64(key)))
	all, err := c.boot.AllGather(b[:])
	if err != nil {
		c.fail(err)
		return nil, err
	}
	type member struct{ color, key, rank int }
	var mine []member
	for r, raw := range all {
		if len(raw) != 16 {
			return nil, fmt.Errorf("comm: split: rank %d sent %d bytes", r, len(raw))
		}
		m := member{int(int64(binary.LittleEndian.Uint64(raw[0:]))), int(int64(binary.LittleEndian.Uint64(raw[8:]))), r}
		if m.color == color && color != NoColor {
			mine = append(mine, m)
		}
	}
	// Order by key, then parent rank.
	for i := 1; i < len(mine); i++ {
		for j := i; j > 0 && (mine[j].key < mine[j-1].key || mine[j].key == mine[j-1].key && mine[j].rank < mine[j-1].rank); j-- {
			mine[j], mine[j-1] = mine[j-1], mine[j]
		}
	}
	// The first member of each color starts the new root and publishes its address; the members
	// derive the new communicator's secret from c's (it never crosses the wire).
	var seq [16]byte
	binary.LittleEndian.PutUint64(seq[0:], uint64(c.splits))
	binary.LittleEndian.PutUint64(seq[8:], uint64(int64(color)))
	secret := c.secret.Derive("split", seq[:])
	var idb []byte
	var root *realnet.Root
	if color != NoColor && mine[0].rank == c.rank {
		id, r, err := realnet.NewRoot(listenAddr(c.boot.LocalHost()), secret, cfg.BootstrapTimeout)
		if err != nil {
			return nil, err
		}
		root = r
		addr, _ := id.Addr()
		idb = []byte(addr)
	}
	ids, err := c.boot.AllGather(idb)
	if err != nil {
		if root != nil {
			root.Close()
		}
		c.fail(err)
		return nil, err
	}
	c.splits++
	if color == NoColor {
		return nil, nil
	}
	leader := mine[0].rank
	id, err := realnet.UniqueIDFromAddr(string(ids[leader]), secret)
	if err != nil {
		return nil, fmt.Errorf("comm: split: rank %d published a bad root address: %w", leader, err)
	}
	newRank := 0
	for i, m := range mine {
		if m.rank == c.rank {
			newRank = i
		}
	}
	return InitRank(len(mine), id, newRank, cfg)
}

// NoColor is NCCL_SPLIT_NOCOLOR: the rank takes part in Split but gets no communicator.
const NoColor = -1

// RedOpCreatePreMulSum registers a PreMulSum operation (inputs multiplied by scalar, then summed)
// and returns its handle (ncclRedOpCreatePreMulSum with a host-immediate scalar).
func (c *Comm) RedOpCreatePreMulSum(scalar float64) coll.RedOp {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	c.userOps = append(c.userOps, scalar)
	return coll.PreMulSum + coll.RedOp(len(c.userOps)-1)
}

// RedOpDestroy forgets a PreMulSum handle (ncclRedOpDestroy).
func (c *Comm) RedOpDestroy(op coll.RedOp) error {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	i := int(op - coll.PreMulSum)
	if i < 0 || i >= len(c.userOps) || c.userOps[i] != c.userOps[i] {
		return fmt.Errorf("%w: reduction op %d was not created on this communicator", ErrInvalidArgument, op)
	}
	c.userOps[i] = nanScalar()
	return nil
}

// resolveOp maps a handle to (base op, scalar).
func (c *Comm) resolveOp(op coll.RedOp) (coll.RedOp, float64, error) {
	if op >= 0 && op < coll.PreMulSum {
		return op, 0, nil
	}
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	i := int(op - coll.PreMulSum)
	if i < 0 || i >= len(c.userOps) || c.userOps[i] != c.userOps[i] {
		return 0, 0, fmt.Errorf("%w: reduction op %d (create PreMulSum ops with RedOpCreatePreMulSum)", ErrInvalidArgument, op)
	}
	return coll.PreMulSum, c.userOps[i], nil
}

func nanScalar() float64 { return math.NaN() } // marks a destroyed PreMulSum handle

// Plan returns the plan this communicator runs for a call, and NCCL's own decision for it (they
// differ when NCCL would choose an algorithm or protocol the engine lacks: Exclude).
func (c *Comm) Plan(call coll.Call) (ran, nccl coll.Plan, err error) {
	if nccl, err = c.planner.Plan(call); err != nil {
		return ran, nccl, err
	}
	call.Exclude = Exclude
	ran, err = c.planner.Plan(call)
	return ran, nccl, err
}

// Barrier waits for the calls queued so far and then for every rank to reach it (a host-side
// synchronisation through the bootstrap ring, for benchmarks and tests).
func (c *Comm) Barrier() error {
	if err := c.drain(); err != nil {
		return err
	}
	if err := c.GetAsyncError(); err != nil {
		return err
	}
	if err := c.boot.Barrier(); err != nil {
		c.fail(err)
		return err
	}
	return nil
}

// Shrink builds a communicator of the ranks of c that are not in exclude, keeping their relative
// order (ncclCommShrink, NCCL 2.27, with NCCL_SHRINK_ABORT semantics: c's pending work is aborted
// first). It needs no working connection to the excluded ranks and no id sent out of band: the
// lowest surviving rank serves the new bootstrap root on a listener every rank published at init,
// under a secret all survivors derive from c's secret, the number of shrinks and exclude. Every
// surviving rank must call it with the same exclude list; c stays usable only for Destroy.
func (c *Comm) Shrink(exclude []int, cfg *Config) (*Comm, error) {
	ex := map[int]bool{}
	for _, r := range exclude {
		if r < 0 || r >= c.n {
			return nil, fmt.Errorf("%w: shrink: rank %d out of range (%d ranks)", ErrInvalidArgument, r, c.n)
		}
		ex[r] = true
	}
	if ex[c.rank] {
		return nil, fmt.Errorf("%w: shrink: rank %d excludes itself", ErrInvalidArgument, c.rank)
	}
	var survivors []int
	for r := 0; r < c.n; r++ {
		if !ex[r] {
			survivors = append(survivors, r)
		}
	}
	// Abort in-flight work (our peers may be dead); c keeps its rendezvous listener.
	c.fail(fmt.Errorf("rank %d: %w (shrink)", c.rank, ErrAborted))
	c.stateMu.Lock()
	c.shrinks++
	seq := c.shrinks
	c.stateMu.Unlock()
	var b []byte
	for _, v := range append([]int{seq, -1}, survivors...) {
		b = binary.LittleEndian.AppendUint64(b, uint64(int64(v)))
	}
	leader := survivors[0]
	id, err := realnet.UniqueIDFromAddr(c.peers[leader].Rdv, c.secret.Derive("shrink", b))
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		cc := c.cfg
		cfg = &cc
	}
	if c.rank == leader {
		root, err := realnet.StartRootOn(c.rdv, id, cfg.BootstrapTimeout)
		if err != nil {
			return nil, err
		}
		defer root.Close()
	}
	newRank := 0
	for i, r := range survivors {
		if r == c.rank {
			newRank = i
		}
	}
	return InitRank(len(survivors), id, newRank, cfg)
}
