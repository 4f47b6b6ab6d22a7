package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/cuda"
	"github.com/simccl/simccl/cuda/engine"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/realnet"
)

// The library's logic on Go types (api.go is the C surface over it), so that it can be tested
// without C.

// result is an ncclResult_t (NCCL 2.28 nccl.h).
type result int

const (
	ncclSuccess            result = 0
	ncclUnhandledCudaError result = 1
	ncclSystemError        result = 2
	ncclInternalError      result = 3
	ncclInvalidArgument    result = 4
	ncclInvalidUsage       result = 5
	ncclRemoteError        result = 6
)

// versionCode is what ncclGetVersion reports: the NCCL release whose API this library follows
// (2.28.9, encoded major×10000 + minor×100 + patch as NCCL does from 2.9 on).
const versionCode = 22809

// comm is one rank's communicator (what an ncclComm_t stands for).
type comm struct {
	e       *engine.Comm
	dev     *cuda.Device
	boot    *realnet.Bootstrap // nil for ncclCommInitAll's
	rank, n int
	ordinal int

	mu     sync.Mutex
	splits int
	closed bool
}

var lib = struct {
	mu       sync.Mutex
	roots    []*realnet.Root
	local    map[realnet.UniqueID]*localInit
	lastErr  string
	allocDev map[int]*cuda.Device
	allocs   map[cuda.DevPtr]*cuda.Device
}{local: map[realnet.UniqueID]*localInit{}, allocDev: map[int]*cuda.Device{}, allocs: map[cuda.DevPtr]*cuda.Device{}}

// fail records err as the last error and maps it to an ncclResult_t.
func fail(err error) result {
	if err == nil {
		return ncclSuccess
	}
	lib.mu.Lock()
	lib.lastErr = err.Error()
	lib.mu.Unlock()
	if os.Getenv("SIMCCL_NCCL_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "simccl libnccl: %v\n", err)
	}
	var ce *cuda.Error
	switch {
	case errors.Is(err, engine.ErrPeerGone):
		return ncclRemoteError
	case errors.Is(err, engine.ErrInvalidArgument):
		return ncclInvalidArgument
	case errors.Is(err, engine.ErrMismatch), errors.Is(err, engine.ErrDestroyed), errors.Is(err, engine.ErrNotSupported), errors.Is(err, errUsage):
		return ncclInvalidUsage
	case errors.Is(err, engine.ErrTimeout), errors.Is(err, realnet.ErrBootstrap):
		return ncclSystemError
	case errors.As(err, &ce), errors.Is(err, cuda.ErrNoDriver):
		return ncclUnhandledCudaError
	}
	return ncclInternalError
}

var errUsage = errors.New("invalid usage")

func errUsageOf(what string) error { return fmt.Errorf("%w: %s", errUsage, what) }

// halfToFloat decodes an IEEE binary16.
func halfToFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch e {
	case 0:
		return sign * m * math.Pow(2, -24)
	case 31:
		if m == 0 {
			return sign * math.Inf(1)
		}
		return math.NaN()
	}
	return sign * (1 + m/1024) * math.Pow(2, float64(e-15))
}

func lastError() string {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	return lib.lastErr
}

// initDriver loads libcuda.so.1, or the emulator with SIMCCL_CUDA_EMULATE=N (tests).
func initDriver() error {
	if v := os.Getenv("SIMCCL_CUDA_EMULATE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("SIMCCL_CUDA_EMULATE=%q: %w", v, err)
		}
		if !cuda.Emulated() {
			if err := cuda.Emulate(n); err != nil && !cuda.Emulated() {
				return err
			}
		}
		return nil
	}
	return cuda.Init()
}

// currentOrdinal is the caller's current device (0 when no context is current, as cudaGetDevice).
func currentOrdinal() int {
	if d, ok := cuda.CurrentDevice(); ok {
		return d
	}
	return 0
}

// config is the engine configuration for n ranks: NCCL's rules on planner.CPUMachine, the
// NCCL_* variables as NCCL reads them.
func config(n int) (*engine.Config, error) {
	s, err := planner.SettingsFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	m, err := planner.CPUMachine(n, 1, s)
	if err != nil {
		return nil, err
	}
	p, err := planner.New(m)
	if err != nil {
		return nil, err
	}
	cfg := &engine.Config{Planner: p, ShareGPUs: true}
	if s.Tuning.BuffSize > 0 {
		cfg.SlotBytes = int(s.Tuning.BuffSize / coll.NCCLSteps)
	}
	if v, err := time.ParseDuration(os.Getenv("SIMCCL_TIMEOUT")); err == nil && v > 0 {
		cfg.Timeout = v
	}
	// SIMCCL_DEVICE_FLAGS=1: order every launch across processes by device flags, as a captured
	// launch always is (engine.Config.DeviceFlags); every process must set it alike.
	cfg.DeviceFlags = os.Getenv("SIMCCL_DEVICE_FLAGS") == "1"
	return cfg, nil
}

func getUniqueID() (realnet.UniqueID, error) {
	if err := initDriver(); err != nil {
		return realnet.UniqueID{}, err
	}
	id, root, err := realnet.NewUniqueID(os.Getenv("SIMCCL_BOOTSTRAP_LISTEN"), 0)
	if err != nil {
		return id, err
	}
	lib.mu.Lock()
	lib.roots = append(lib.roots, root)
	lib.mu.Unlock()
	return id, nil
}

// localInit gathers the ranks of a clique whose ranks are all threads of this process.
type localInit struct {
	devs  []*cuda.Device
	comms []*engine.Comm
	got   int
	err   error
	done  chan struct{}
}

// segmentName is the /dev/shm name of a communicator's segment: from its secret, so that
// others cannot guess it.
func segmentName(id realnet.UniqueID) string {
	h := sha256.Sum256(append([]byte("simccl-libnccl-segment"), id[:]...))
	return "simccl-nccl-" + hex.EncodeToString(h[:12])
}

// initRank is ncclCommInitRank on device ordinal.
func initRank(n int, id realnet.UniqueID, rank, ordinal int) (*comm, error) {
	if n < 1 || rank < 0 || rank >= n {
		return nil, fmt.Errorf("%w: rank %d of %d", engine.ErrInvalidArgument, rank, n)
	}
	if err := initDriver(); err != nil {
		return nil, err
	}
	cfg, err := config(n)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), realnet.DefaultBootstrapTimeout)
	defer cancel()
	boot, err := realnet.NewBootstrap(ctx, id, rank, n, realnet.BootstrapConfig{})
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	me := host + "/" + strconv.Itoa(os.Getpid())
	all, err := boot.AllGather([]byte(me))
	if err != nil {
		boot.Close()
		return nil, err
	}
	procs := map[string]int{}
	for _, v := range all {
		procs[string(v)]++
	}
	dev, err := cuda.Open(ordinal)
	if err != nil {
		boot.Close()
		return nil, err
	}
	c := &comm{dev: dev, boot: boot, rank: rank, n: n, ordinal: ordinal}
	switch {
	case len(procs) == 1 && n > 1:
		c.e, err = joinLocal(id, n, rank, dev, cfg)
	case len(procs) == n || n == 1:
		if n == 1 {
			var cs []*engine.Comm
			if cs, err = engine.InitAll([]*cuda.Device{dev}, cfg); err == nil {
				c.e = cs[0]
			}
		} else {
			c.e, err = engine.InitRank(dev, rank, n, boot, os.Getenv("SIMCCL_SHM_DIR"), segmentName(id), cfg)
		}
	default:
		err = fmt.Errorf("%w: the %d ranks are in %d processes, some with several ranks (one process per rank, or all ranks in one process)", errUsage, n, len(procs))
	}
	if err != nil {
		boot.Close()
		dev.Close()
		return nil, err
	}
	return c, nil
}

// joinLocal waits for every rank of the id in this process and makes one clique of them.
func joinLocal(id realnet.UniqueID, n, rank int, dev *cuda.Device, cfg *engine.Config) (*engine.Comm, error) {
	lib.mu.Lock()
	li := lib.local[id]
	if li == nil {
		li = &localInit{devs: make([]*cuda.Device, n), done: make(chan struct{})}
		lib.local[id] = li
	}
	if li.devs[rank] != nil {
		lib.mu.Unlock()
		return nil, fmt.Errorf("%w: rank %d initialised twice", errUsage, rank)
	}
	li.devs[rank] = dev
	li.got++
	last := li.got == n
	if last {
		delete(lib.local, id)
	}
	lib.mu.Unlock()
	if last {
		li.comms, li.err = engine.InitAll(li.devs, cfg)
		close(li.done)
	}
	select {
	case <-li.done:
	case <-time.After(realnet.DefaultBootstrapTimeout):
		return nil, fmt.Errorf("%w: the ranks of this process did not all initialise", engine.ErrTimeout)
	}
	if li.err != nil {
		return nil, li.err
	}
	return li.comms[rank], nil
}

// initAll is ncclCommInitAll: one communicator per device, all in this process.
func initAll(ordinals []int) ([]*comm, error) {
	if len(ordinals) == 0 {
		return nil, fmt.Errorf("%w: no devices", engine.ErrInvalidArgument)
	}
	if err := initDriver(); err != nil {
		return nil, err
	}
	cfg, err := config(len(ordinals))
	if err != nil {
		return nil, err
	}
	devs := make([]*cuda.Device, len(ordinals))
	closeAll := func() {
		for _, d := range devs {
			if d != nil {
				d.Close()
			}
		}
	}
	for i, o := range ordinals {
		if devs[i], err = cuda.Open(o); err != nil {
			closeAll()
			return nil, err
		}
	}
	es, err := engine.InitAll(devs, cfg)
	if err != nil {
		closeAll()
		return nil, err
	}
	out := make([]*comm, len(es))
	for i, e := range es {
		out[i] = &comm{e: e, dev: devs[i], rank: i, n: len(es), ordinal: ordinals[i]}
	}
	return out, nil
}

// split is ncclCommSplit: a collective over the parent; color < 0 (NCCL_SPLIT_NOCOLOR) gives no
// communicator.
func (c *comm) split(color, key int) (*comm, error) {
	if c.boot == nil {
		return nil, fmt.Errorf("%w: ncclCommSplit of a communicator made by ncclCommInitAll", errUsage)
	}
	c.mu.Lock()
	c.splits++
	c.mu.Unlock()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(int64(color)))
	binary.LittleEndian.PutUint64(b[8:], uint64(int64(key)))
	all, err := c.boot.AllGather(b[:])
	if err != nil {
		return nil, err
	}
	type member struct{ key, rank int }
	var ms []member
	for r, v := range all {
		if len(v) != 16 {
			return nil, fmt.Errorf("%w: split: rank %d sent %d bytes", engine.ErrInvalidArgument, r, len(v))
		}
		if int(int64(binary.LittleEndian.Uint64(v))) == color && color >= 0 {
			ms = append(ms, member{int(int64(binary.LittleEndian.Uint64(v[8:]))), r})
		}
	}
	sort.SliceStable(ms, func(i, j int) bool {
		if ms[i].key != ms[j].key {
			return ms[i].key < ms[j].key
		}
		return ms[i].rank < ms[j].rank
	})
	newRank := -1
	for i, m := range ms {
		if m.rank == c.rank {
			newRank = i
		}
	}
	// The new rank 0 of every colour makes the new id and tells the others.
	var mine []byte
	if newRank == 0 {
		id, err := getUniqueID()
		if err != nil {
			return nil, err
		}
		mine = id[:]
	}
	ids, err := c.boot.AllGather(mine)
	if err != nil {
		return nil, err
	}
	if color < 0 {
		return nil, nil
	}
	var id realnet.UniqueID
	copy(id[:], ids[ms[0].rank])
	return initRank(len(ms), id, newRank, c.ordinal)
}

func (c *comm) destroy() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	err := c.e.Destroy()
	if c.boot != nil {
		c.boot.Close()
	}
	c.dev.Close()
	return err
}

func (c *comm) abort() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	err := c.e.Abort()
	if c.boot != nil {
		c.boot.Close()
	}
	return err
}

// memAlloc is ncclMemAlloc: device memory on the caller's current device.
func memAlloc(size int) (cuda.DevPtr, error) {
	if err := initDriver(); err != nil {
		return 0, err
	}
	o := currentOrdinal()
	lib.mu.Lock()
	d := lib.allocDev[o]
	lib.mu.Unlock()
	if d == nil {
		nd, err := cuda.Open(o)
		if err != nil {
			return 0, err
		}
		lib.mu.Lock()
		if d = lib.allocDev[o]; d == nil {
			d, lib.allocDev[o] = nd, nd
		} else {
			nd.Close()
		}
		lib.mu.Unlock()
	}
	var p cuda.DevPtr
	err := d.Do(func(x *cuda.Ctx) error {
		var err error
		p, err = x.Alloc(max(size, 1))
		return err
	})
	if err != nil {
		return 0, err
	}
	lib.mu.Lock()
	lib.allocs[p] = d
	lib.mu.Unlock()
	return p, nil
}

func memFree(p cuda.DevPtr) error {
	lib.mu.Lock()
	d := lib.allocs[p]
	delete(lib.allocs, p)
	lib.mu.Unlock()
	if d == nil {
		return fmt.Errorf("%w: ncclMemFree of %#x, not from ncclMemAlloc", engine.ErrInvalidArgument, uint64(p))
	}
	// As cudaFree, wait for the device's work first (a collective may still use the buffer).
	return d.Do(func(x *cuda.Ctx) error {
		if err := x.Synchronize(); err != nil {
			return err
		}
		return x.Free(p)
	})
}
