package engine

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/cuda"
	"github.com/simccl/simccl/internal/group"
)

// Errors, matched with errors.Is.
var (
	// ErrInvalidArgument: a bad call (ncclInvalidArgument).
	ErrInvalidArgument = errors.New("engine: invalid argument")
	// ErrMismatch: the ranks' calls of one launch disagree (count, type, op, root, matching
	// sends and receives), as NCCL would hang or corrupt memory on.
	ErrMismatch = errors.New("engine: ranks disagree")
	// ErrTimeout: a rank waited longer than Config.Timeout for the others to launch (one goroutine
	// driving several ranks must use GroupStart/GroupEnd).
	ErrTimeout = errors.New("engine: timeout")
	// ErrDestroyed: the communicator was destroyed or failed before.
	ErrDestroyed = errors.New("engine: communicator destroyed")
	// ErrPeerGone: a rank in another process exited, aborted the communicator or failed its part
	// of a launch (InitRank).
	ErrPeerGone = errors.New("engine: peer gone")
	// ErrNotSupported: a valid use the engine does not implement (a CUDA graph capture of a
	// communicator whose ranks are in several processes); the communicator stays usable.
	ErrNotSupported = errors.New("engine: not supported")
)

// DefaultTimeout bounds the host-side waits of a launch for the other ranks.
const DefaultTimeout = 2 * time.Minute

// Config is the communicator configuration.
type Config struct {
	// Planner decides what every call runs (required; it must plan for the clique's ranks):
	// NCCL's decision for the machine, from package planner (the live machine's topology, or
	// planner.CPUMachine's description of ranks sharing a GPU or the emulator). The engine runs
	// it with the algorithms it lacks excluded (Exclude: no NVLS or CollNet).
	Planner coll.Planner
	// SlotBytes is one of a connection's NCCL_STEPS staging slots (default: NCCL's Simple buffer
	// over NCCL_STEPS, 512 KiB). The planner's Simple buffer (NCCL_BUFFSIZE) must be NCCL_STEPS of
	// them; each rank holds 8 slots per connection it sends on.
	SlotBytes int
	// Timeout bounds the host-side waits for the other ranks (default DefaultTimeout).
	Timeout time.Duration
	// ShareGPUs lets several ranks run on one GPU, each through its own cuda.Device opened on the
	// same ordinal (its own host thread): a mode for exercising the multi-rank paths on a machine
	// with fewer GPUs than ranks. NCCL refuses it (one rank per GPU), and its timings say nothing
	// about NVLink.
	ShareGPUs bool
	// DeviceFlags makes the ranks of a communicator spread over processes (InitRank) order every
	// launch's steps through flags in device memory (stream memory operations, flags.go) instead
	// of interprocess events. A launch on a stream that is capturing into a CUDA graph always
	// does (the driver cannot capture interprocess events); every rank of a launch must agree.
	DeviceFlags bool
}

func (c *Config) withDefaults() (Config, error) {
	var o Config
	if c != nil {
		o = *c
	}
	if o.Planner == nil {
		return o, fmt.Errorf("%w: config Planner is required (package planner plans with NCCL's rules)", ErrInvalidArgument)
	}
	if o.SlotBytes <= 0 {
		o.SlotBytes = int(coll.DefaultBuffSize[coll.Simple] / coll.NCCLSteps)
	}
	if o.SlotBytes%16 != 0 || o.SlotBytes < 512 {
		return o, fmt.Errorf("%w: config SlotBytes %d: want a multiple of 16, at least 512 (coll's smallest Simple buffer is 8 slots of 512 bytes)", ErrInvalidArgument, o.SlotBytes)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return o, nil
}

// Exclude is what this engine cannot run: the algorithms with switch endpoints (NVLS, NVLSTree,
// CollNet). LL, LL128 and Simple run (exec.go; LL128 where the planner picks it as NCCL would, on
// NVLink paths, or under NCCL_PROTO); comm's CPU engine runs Simple only (comm.Exclude).
var Exclude = func() coll.Exclude {
	ex := comm.Exclude
	ex.Protos[coll.LL] = false
	ex.Protos[coll.LL128] = false
	return ex
}()

// plan is the planner's plan for a call with what the engine lacks excluded, and NCCL's own
// decision for it.
func (c *Config) plan(call coll.Call) (ran, nccl coll.Plan, err error) {
	if nccl, err = c.Planner.Plan(call); err != nil {
		return ran, nccl, err
	}
	call.Exclude = Exclude
	if ran, err = c.Planner.Plan(call); err != nil {
		return ran, nccl, err
	}
	b := ran.BuffSize[coll.Simple]
	if b == 0 {
		b = coll.DefaultBuffSize[coll.Simple]
	}
	if b != int64(coll.NCCLSteps)*int64(c.SlotBytes) {
		return ran, nccl, fmt.Errorf("%w: the plan's Simple buffer is %d bytes (NCCL_BUFFSIZE), the engine's slots %d × %d (Config.SlotBytes)", ErrInvalidArgument, b, coll.NCCLSteps, c.SlotBytes)
	}
	return ran, nccl, nil
}

// Comm is one rank of a clique of GPUs in this process (ncclComm_t). Its calls may be made from
// any goroutine; they enqueue on the given stream of the rank's device and return once enqueued.
type Comm struct {
	rank int
	cl   *clique
	dev  *cuda.Device
	k    *cuda.Kernels

	mu     sync.Mutex
	gen    uint64
	group  group.Group[*Comm, *call] // Comm.GroupStart/GroupEnd
	err    error                     // sticky: a failed launch or Destroy
	failed atomic.Bool               // err != nil (read without the lock on every call)
	last   *launch                   // the last in-process launch this rank ran its part of (Destroy waits for its peers to leave it)
	premul []float64

	// Device state, touched only on the device's thread (inside Do).
	streams map[[2]int]cuda.Stream // (channel, lane)
	events  [][]cuda.Event         // [channel][step]
	start   cuda.Event
	// fevents: [channel][step], plain events for this rank's own cross-lane order in a flag-mode
	// launch (events holds interprocess ones, which a capture cannot record); flags: this rank's
	// flag area (flags.go), InitRank only.
	fevents [][]cuda.Event
	flags   cuda.DevPtr
	staging map[int]stageBuf // by connection key (channel<<24 | peer<<8 | connIndex)
	// llStaging: the LL buffers of the connections this rank sends on, by connection key; zeroed
	// at allocation, then only LL lines are written there (a receiver zeroes what it read).
	llStaging map[int]stageBuf
	aux       cuda.Stream // a private stream for zeroing new LL buffers (never captured)
	// tmp: per (channel, lane), room for an LL step's raw result when it cannot be fused (several
	// messages in or out, or the integer Avg's division before sending).
	tmp     map[[2]int]stageBuf
	scratch []stageBuf    // per operation of a launch: pre-scaled input and zeros
	retired []cuda.DevPtr // outgrown buffers, freed by Destroy
}

type stageBuf struct {
	p    cuda.DevPtr
	size int64
}

// clique is the communicators of one InitAll.
type clique struct {
	n     int
	comms []*Comm
	cfg   Config

	mu      sync.Mutex
	cond    *sync.Cond
	pending map[uint64]*launch
	plans   map[string]*plan
	xp      *xproc // one process per rank (InitRank); nil: every rank in this process
}

// InitAll makes one communicator per device (ncclCommInitAll): rank i runs on devs[i]. It enables
// peer access between every pair (the kernels read peers' memory directly) and loads the kernels
// on every device. The devices stay owned by the caller (close them after Destroy).
func InitAll(devs []*cuda.Device, cfg *Config) ([]*Comm, error) {
	o, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("%w: InitAll with no devices", ErrInvalidArgument)
	}
	if o.Planner.NRanks() != len(devs) {
		return nil, fmt.Errorf("%w: the planner plans for %d ranks, InitAll has %d devices", ErrInvalidArgument, o.Planner.NRanks(), len(devs))
	}
	seen := map[*cuda.Device]bool{}
	ordinals := map[int]bool{}
	for i, d := range devs {
		if d == nil {
			return nil, fmt.Errorf("%w: device %d is nil", ErrInvalidArgument, i)
		}
		if seen[d] {
			// Its one host thread would have to enqueue for two ranks that wait for each other.
			return nil, fmt.Errorf("%w: device %v given twice (open the ordinal once per rank)", ErrInvalidArgument, d.Ordinal)
		}
		if ordinals[d.Ordinal] && !o.ShareGPUs {
			return nil, fmt.Errorf("%w: GPU %d given to two ranks (one rank per GPU, as NCCL; Config.ShareGPUs allows it)", ErrInvalidArgument, d.Ordinal)
		}
		seen[d], ordinals[d.Ordinal] = true, true
	}
	cl := &clique{n: len(devs), cfg: o, pending: map[uint64]*launch{}, plans: map[string]*plan{}}
	cl.cond = sync.NewCond(&cl.mu)
	for i, d := range devs {
		c := &Comm{rank: i, cl: cl, dev: d, streams: map[[2]int]cuda.Stream{}, staging: map[int]stageBuf{}, llStaging: map[int]stageBuf{}, tmp: map[[2]int]stageBuf{}}
		err := d.Do(func(x *cuda.Ctx) error {
			for _, p := range devs {
				if err := x.EnablePeer(p); err != nil {
					return err
				}
			}
			var err error
			if c.k, err = x.LoadKernels(); err != nil {
				return err
			}
			c.start, err = x.NewEvent(false)
			return err
		})
		if err != nil {
			for _, p := range cl.comms {
				_ = p.Destroy()
			}
			return nil, fmt.Errorf("engine: init rank %d on %v: %w", i, d, err)
		}
		cl.comms = append(cl.comms, c)
	}
	return cl.comms, nil
}

// Rank is this communicator's rank.
func (c *Comm) Rank() int { return c.rank }

// Count is the number of ranks.
func (c *Comm) Count() int { return c.cl.n }

// Device is the GPU this rank runs on.
func (c *Comm) Device() *cuda.Device { return c.dev }

// GetAsyncError is the error that broke the communicator, if any (ncclCommGetAsyncError).
func (c *Comm) GetAsyncError() error {
	if c.cl.xp == nil && !c.failed.Load() {
		return nil // in-process and healthy: the common case, without the lock
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && c.cl.xp != nil {
		if err := c.cl.xp.check(false); err != nil {
			c.err = err
			c.failed.Store(true)
		}
	}
	return c.err
}

// Abort fails the communicator at once (ncclCommAbort): ranks in other processes see their
// waits fail (ErrPeerGone); the device's work is not waited for, and the device memory the
// communicator holds is left allocated (a kernel may still read it).
func (c *Comm) Abort() error {
	c.mu.Lock()
	if c.err == nil || !errors.Is(c.err, ErrDestroyed) {
		c.err = fmt.Errorf("rank %d: %w (aborted)", c.rank, ErrDestroyed)
		c.failed.Store(true)
	}
	c.mu.Unlock()
	c.tellPeers()
	c.releaseFlags()
	return nil
}

// releaseFlags, on Abort, sets every word of this rank's flag area (flags.go) to a value that
// satisfies its waits, on a private stream, so that a device-flag wait whose writer will never
// come (a dead peer during a graph replay) no longer holds the caller's streams: their work runs
// to its end on whatever the buffers hold, as after NCCL's abort, and a later synchronize returns.
func (c *Comm) releaseFlags() {
	if c.cl.xp == nil || c.flags == 0 {
		return
	}
	// On the calling thread: the device's thread may itself be waiting on the stuck work.
	_ = c.dev.OnThisThread(func(x *cuda.Ctx) error {
		s, err := x.NewStream()
		if err != nil {
			return err
		}
		err = x.MemsetAsync(c.flags, 1, flagBytes(c.cl.n), s) // each word 0x01010101 ≥ 1
		return errors.Join(err, x.DestroyStream(s))           // the memset still runs
	})
}

// tellPeers raises the segment's abort flag of a communicator whose ranks are in several
// processes (InitRank), so that the others' waits fail with ErrPeerGone within a poll interval:
// on Abort, and when this rank's part of a launch failed (its peers wait for its steps, which
// will not come, and cannot see its Go state). In-process peers learn it from the launch.
func (c *Comm) tellPeers() {
	if xp := c.cl.xp; xp != nil {
		xp.mu.Lock()
		if xp.seg != nil {
			xp.abort()
		}
		xp.mu.Unlock()
	}
}

func (c *Comm) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
		c.failed.Store(true)
	}
	c.mu.Unlock()
}

// Destroy waits for the device's work and frees the communicator's streams, events and buffers
// (ncclCommDestroy). Calls afterwards fail with ErrDestroyed.
func (c *Comm) Destroy() error {
	c.mu.Lock()
	if errors.Is(c.err, ErrDestroyed) {
		c.mu.Unlock()
		return nil
	}
	c.err = fmt.Errorf("rank %d: %w", c.rank, ErrDestroyed)
	c.failed.Store(true)
	last := c.last
	c.mu.Unlock()
	if last != nil {
		// A peer still in the last launch's join reads this rank's events (peerEvent): not
		// before it has left may they be freed.
		last.waitLeft(c.cl.cfg.Timeout)
	}
	return c.dev.Do(func(x *cuda.Ctx) error {
		errs := []error{x.Synchronize()}
		for _, s := range c.streams {
			errs = append(errs, x.DestroyStream(s))
		}
		for _, evs := range append(c.events, c.fevents...) {
			for _, e := range evs {
				errs = append(errs, x.DestroyEvent(e))
			}
		}
		if c.start != 0 {
			errs = append(errs, x.DestroyEvent(c.start))
		}
		for _, b := range c.staging {
			errs = append(errs, x.Free(b.p))
		}
		for _, b := range c.llStaging {
			errs = append(errs, x.Free(b.p))
		}
		for _, b := range c.tmp {
			errs = append(errs, x.Free(b.p))
		}
		if c.aux != 0 {
			errs = append(errs, x.DestroyStream(c.aux))
		}
		for _, b := range c.scratch {
			if b.p != 0 {
				errs = append(errs, x.Free(b.p))
			}
		}
		for _, p := range c.retired {
			errs = append(errs, x.Free(p))
		}
		if c.flags != 0 {
			errs = append(errs, x.Free(c.flags))
		}
		if c.k != nil {
			errs = append(errs, c.k.Unload(x))
		}
		if c.cl.xp != nil {
			errs = append(errs, c.cl.xp.close(x))
		}
		c.streams, c.events, c.fevents, c.staging, c.scratch, c.retired = nil, nil, nil, nil, nil, nil
		c.flags = 0
		c.llStaging, c.tmp, c.aux = nil, nil, 0
		return errors.Join(errs...)
	})
}

// RedOpCreatePreMulSum returns an operation that multiplies every input by scalar before summing
// (ncclRedOpCreatePreMulSum with a host scalar). Every rank must create its ops in the same order.
func (c *Comm) RedOpCreatePreMulSum(scalar float64) coll.RedOp {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.premul = append(c.premul, scalar)
	return coll.PreMulSum + coll.RedOp(len(c.premul)-1)
}

// resolveOp maps a user op (PreMulSum handles included) to the schedule's op and scalar.
func (c *Comm) resolveOp(op coll.RedOp) (coll.RedOp, float64, error) {
	if op >= 0 && op < coll.PreMulSum {
		return op, 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	i := int(op - coll.PreMulSum)
	if op < 0 || i >= len(c.premul) || math.IsNaN(c.premul[i]) {
		return 0, 0, fmt.Errorf("%w: reduction op %d (not a built-in op nor a PreMulSum of this communicator)", ErrInvalidArgument, int(op))
	}
	return coll.PreMulSum, c.premul[i], nil
}

// call is one API call of one rank.
type call struct {
	f       coll.Func
	p2pSend bool
	peer    int
	count   int64
	dt      coll.DataType
	op      coll.RedOp
	scalar  float64
	root    int
	flags   bool // across processes: this launch is ordered by device flags (Launch.flags)
	send    cuda.DevPtr
	recv    cuda.DevPtr
	stream  cuda.Stream
}

func (c *Comm) checkCall(k *call) error {
	n := c.cl.n
	if k.count < 0 {
		return fmt.Errorf("%w: rank %d %v: count %d", ErrInvalidArgument, c.rank, k.f, k.count)
	}
	if k.dt < 0 || k.dt >= coll.NumDataTypes {
		return fmt.Errorf("%w: rank %d %v: data type %d", ErrInvalidArgument, c.rank, k.f, int(k.dt))
	}
	if k.f == coll.Broadcast || k.f == coll.Reduce {
		if k.root < 0 || k.root >= n {
			return fmt.Errorf("%w: rank %d %v: root %d of %d ranks", ErrInvalidArgument, c.rank, k.f, k.root, n)
		}
	}
	if k.f == coll.SendRecv && (k.peer < 0 || k.peer >= n) {
		return fmt.Errorf("%w: rank %d: peer %d of %d ranks", ErrInvalidArgument, c.rank, k.peer, n)
	}
	if k.count > 0 {
		needSend := k.f != coll.SendRecv || k.p2pSend
		needRecv := k.f != coll.SendRecv || !k.p2pSend
		if k.f == coll.Broadcast && k.root != c.rank {
			needSend = false
		}
		if k.f == coll.Reduce && k.root != c.rank {
			needRecv = false
		}
		if needSend && k.send == 0 {
			return fmt.Errorf("%w: rank %d %v: null send buffer", ErrInvalidArgument, c.rank, k.f)
		}
		if needRecv && k.recv == 0 {
			return fmt.Errorf("%w: rank %d %v: null receive buffer", ErrInvalidArgument, c.rank, k.f)
		}
	}
	return nil
}

func (c *Comm) reduceCall(f coll.Func, send, recv cuda.DevPtr, count int, dt coll.DataType, op coll.RedOp, root int, s cuda.Stream) error {
	base, scalar, err := c.resolveOp(op)
	if err != nil {
		return err
	}
	return c.enqueue(call{f: f, count: int64(count), dt: dt, op: base, scalar: scalar, root: root, send: send, recv: recv, stream: s})
}

// AllReduce reduces count elements of every rank's send into every rank's recv (ncclAllReduce).
// In place: send == recv.
func (c *Comm) AllReduce(send, recv cuda.DevPtr, count int, dt coll.DataType, op coll.RedOp, s cuda.Stream) error {
	return c.reduceCall(coll.AllReduce, send, recv, count, dt, op, 0, s)
}

// Reduce reduces count elements into root's recv (ncclReduce); recv is only written on root.
func (c *Comm) Reduce(send, recv cuda.DevPtr, count int, dt coll.DataType, op coll.RedOp, root int, s cuda.Stream) error {
	return c.reduceCall(coll.Reduce, send, recv, count, dt, op, root, s)
}

// ReduceScatter reduces n×recvcount elements and leaves block rank in recv (ncclReduceScatter).
// In place: recv == send + rank×recvcount elements.
func (c *Comm) ReduceScatter(send, recv cuda.DevPtr, recvcount int, dt coll.DataType, op coll.RedOp, s cuda.Stream) error {
	return c.reduceCall(coll.ReduceScatter, send, recv, recvcount, dt, op, 0, s)
}

// Broadcast copies count elements of root's send into every rank's recv (ncclBroadcast).
func (c *Comm) Broadcast(send, recv cuda.DevPtr, count int, dt coll.DataType, root int, s cuda.Stream) error {
	return c.enqueue(call{f: coll.Broadcast, count: int64(count), dt: dt, root: root, send: send, recv: recv, stream: s})
}

// AllGather gathers sendcount elements of every rank into recv in rank order (ncclAllGather).
// In place: send == recv + rank×sendcount elements.
func (c *Comm) AllGather(send, recv cuda.DevPtr, sendcount int, dt coll.DataType, s cuda.Stream) error {
	return c.enqueue(call{f: coll.AllGather, count: int64(sendcount), dt: dt, send: send, recv: recv, stream: s})
}

// AllToAll sends block j (count elements) of send to rank j, which stores it as block rank of
// its recv (ncclAlltoAll). Not in place.
func (c *Comm) AllToAll(send, recv cuda.DevPtr, count int, dt coll.DataType, s cuda.Stream) error {
	return c.enqueue(call{f: coll.AllToAll, count: int64(count), dt: dt, send: send, recv: recv, stream: s})
}

// Send sends count elements to peer (ncclSend). Point-to-point calls run in launches every rank
// makes (see the package documentation): put them in a group on every rank.
func (c *Comm) Send(buf cuda.DevPtr, count int, dt coll.DataType, peer int, s cuda.Stream) error {
	return c.enqueue(call{f: coll.SendRecv, p2pSend: true, peer: peer, count: int64(count), dt: dt, send: buf, stream: s})
}

// Recv receives count elements from peer into buf (ncclRecv).
func (c *Comm) Recv(buf cuda.DevPtr, count int, dt coll.DataType, peer int, s cuda.Stream) error {
	return c.enqueue(call{f: coll.SendRecv, peer: peer, count: int64(count), dt: dt, recv: buf, stream: s})
}

// GroupStart opens a group on this communicator (the goroutine-per-rank form): its calls are
// launched together by the matching GroupEnd.
func (c *Comm) GroupStart() { c.group.Start() }

// GroupEnd closes the communicator's group and launches its calls.
func (c *Comm) GroupEnd() error {
	keys, calls, ok := c.group.End()
	if !ok {
		return fmt.Errorf("%w: GroupEnd without GroupStart", ErrInvalidArgument)
	}
	if done, err := aloneGroup([]*Comm{c}, calls); done {
		freeCalls(keys, calls)
		c.group.Recycle(keys, calls) // consumed: nothing of the group is kept
		return err
	}
	return c.launch(calls[c])
}

// aloneGroup runs a group whose communicators all have one rank and whose calls all take the
// one-rank path (alone) that way, in each communicator's call order, as NCCL does for a group of
// one-rank calls (nccl-tests wraps every call in ncclGroupStart/End). It reports false, running
// nothing, when any call needs the schedule.
func aloneGroup(comms []*Comm, calls map[*Comm][]*call) (bool, error) {
	for _, c := range comms {
		if c.cl.n != 1 || c.cl.xp != nil {
			return false, nil
		}
		for _, k := range calls[c] {
			if k.f == coll.SendRecv || k.op == coll.PreMulSum {
				return false, nil
			}
		}
	}
	var errs []error
	for _, c := range comms {
		for _, k := range calls[c] {
			if _, err := c.alone(k); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return true, errors.Join(errs...)
}

// processGroup is the process-wide group (ncclGroupStart/End driven by one goroutine for several
// communicators).
var processGroup group.Group[*Comm, *call]

// GroupStart opens a process-wide group: calls on any communicator are held until GroupEnd,
// which launches every communicator's calls concurrently (the way one goroutine drives all the
// GPUs of a clique, as one thread does with NCCL).
func GroupStart() { processGroup.Start() }

// GroupEnd closes the process-wide group and launches its calls; it returns once every
// communicator's calls are enqueued on their streams.
func GroupEnd() error {
	comms, calls, ok := processGroup.End()
	if !ok {
		return fmt.Errorf("%w: GroupEnd without GroupStart", ErrInvalidArgument)
	}
	return launchGroup(comms, calls, processGroup.Recycle)
}

// GroupEndComms ends the group of every communicator of comms (each opened by its own
// Comm.GroupStart) and launches their calls together, as GroupEnd does those of the process-wide
// group. It is the group of one caller that drives several communicators while other callers
// drive theirs: NCCL's groups are per host thread (cuda/libnccl keeps one list per C thread),
// and the process-wide group would take other threads' calls in, or let its end fall to another
// thread. Ending the communicators' groups one by one would not do: a launch waits for every rank.
func GroupEndComms(comms []*Comm) error {
	var keys []*Comm
	calls := make(map[*Comm][]*call, len(comms))
	var errs []error
	for _, c := range comms {
		ks, cs, ok := c.group.End()
		if !ok {
			errs = append(errs, fmt.Errorf("%w: rank %d: GroupEnd without GroupStart", ErrInvalidArgument, c.rank))
			continue
		}
		for _, k := range ks {
			if _, dup := calls[k]; !dup {
				keys = append(keys, k)
			}
			calls[k] = append(calls[k], cs[k]...)
		}
	}
	return errors.Join(append(errs, launchGroup(keys, calls, nil))...)
}

// launchGroup launches the calls of an ended group (aloneGroup, launchTogether or one launch per
// communicator, concurrently); recycle, if not nil, takes back the group's storage once consumed.
func launchGroup(comms []*Comm, calls map[*Comm][]*call, recycle func([]*Comm, map[*Comm][]*call)) error {
	if len(comms) == 0 {
		return nil
	}
	if done, err := aloneGroup(comms, calls); done {
		freeCalls(comms, calls)
		if recycle != nil {
			recycle(comms, calls) // consumed: nothing of the group is kept
		}
		return err
	}
	if ok, err := launchTogether(comms, calls); ok {
		return err
	}
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.launch(calls[c])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// callPool holds the calls of groups consumed by aloneGroup (nothing keeps them): a held call
// reuses one, so a grouped one-rank call allocates nothing (pprof on the emulator: the
// allocation's garbage collections, with their write barriers, were a third of the call).
var callPool = sync.Pool{New: func() any { return new(call) }}

// freeCalls returns a consumed group's calls to callPool.
func freeCalls(comms []*Comm, calls map[*Comm][]*call) {
	for _, c := range comms {
		for _, k := range calls[c] {
			*k = call{}
			callPool.Put(k)
		}
	}
}

// enqueue takes the call by value: a one-rank call outside a group (alone) then costs no
// allocation; a call that is held or launched is copied to the heap (callPool).
func (c *Comm) enqueue(k call) error {
	if err := c.GetAsyncError(); err != nil {
		return err
	}
	if err := c.checkCall(&k); err != nil {
		return err
	}
	if !processGroup.Open() && !c.group.Open() {
		if ok, err := c.alone(&k); ok {
			return err
		}
	}
	kp := callPool.Get().(*call)
	*kp = k
	if processGroup.Hold(c, kp) || c.group.Hold(c, kp) {
		return nil
	}
	if ok, err := c.alone(kp); ok { // a group closed meanwhile
		return err
	}
	return c.launch([]*call{kp})
}

// aloneKernelMax is the largest one-rank copy (alone) made by the copy kernel; larger ones are
// cuMemcpyDtoDAsync. On one H200 (testdata/device/h200x1-2026-11-28-ll) back-to-back small copies
// took 5.0–5.4 µs each by the kernel against 5.5–6.0 µs by cuMemcpyDtoDAsync, and a 1 GiB copy
// 548 µs against 506 µs (the copy engine is 8% faster at HBM speed). SIMCCL_ONE_RANK_COPY=kernel
// or memcpy forces one (a measurement knob).
var aloneKernelMax = func() int {
	switch os.Getenv("SIMCCL_ONE_RANK_COPY") {
	case "kernel":
		return math.MaxInt
	case "memcpy":
		return -1
	}
	return 1 << 20
}()

// OneRank describes how this communicator's one-rank calls run (alone), for a C caller that
// enqueues them itself (cuda/libnccl): the device's context, the copy kernel and its grid cap, and
// the largest copy made by the kernel (larger ones are cuMemcpyDtoDAsync). ok is false when the
// communicator has several ranks, ranks in other processes, or has failed.
func (c *Comm) OneRank() (ctx uintptr, copyKernel cuda.Function, maxGrid, kernelMax int, ok bool) {
	if c.cl.n != 1 || c.cl.xp != nil || c.failed.Load() {
		return 0, 0, 0, 0, false
	}
	f, g := c.k.CopyKernel()
	return c.dev.Context(), f, g, aloneKernelMax, true
}

// Fail records err as the communicator's error (GetAsyncError; calls afterwards fail with it): a
// failure of work a C caller enqueued for it (OneRank).
func (c *Comm) Fail(err error) {
	if err != nil {
		c.fail(err)
	}
}

// alone runs a call of a one-rank communicator outside a group as NCCL does for one rank: the
// result is the input (Sum, Prod, Max, Min and Avg of one input; every collective's output is its
// one block), so an out-of-place call is one device-to-device copy on the caller's stream,
// enqueued from the calling thread, and an in-place call enqueues nothing. PreMulSum (a scaling)
// and point-to-point take the schedule path. It reports false when it does not apply.
func (c *Comm) alone(k *call) (bool, error) {
	if c.cl.n != 1 || c.cl.xp != nil || k.f == coll.SendRecv || k.op == coll.PreMulSum {
		return false, nil
	}
	n := int(k.count) * k.dt.Size()
	if n == 0 || k.send == k.recv {
		return true, nil
	}
	err := c.dev.OnThisThread(func(x *cuda.Ctx) error {
		if n <= aloneKernelMax {
			return c.k.Copy(x, k.stream, k.recv, k.send, n)
		}
		return x.CopyDtoDAsync(k.recv, k.send, n, k.stream)
	})
	if err != nil {
		c.fail(err)
	}
	return true, err
}
