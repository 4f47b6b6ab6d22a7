// Command shim is simccl's preloadable NCCL library (go build -buildmode=c-shared): it exports
// NCCL's C API and, per SIMCCL_MODE, either forwards every call to the real libnccl and records it
// ("record", the default) or runs virtual communicators that record calls and move no data
// ("virtual"). See intercept/README.md for the environment variables and the trace format.
//
//	CGO_ENABLED=1 go build -buildmode=c-shared -o libsimccl_nccl.so ./intercept/shim
//	LD_PRELOAD=$PWD/libsimccl_nccl.so SIMCCL_TRACE_DIR=/tmp/tr torchrun ...
package main

/*
#cgo LDFLAGS: -ldl
#include "ncclshim.h"
*/
import "C"

import (
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/simccl/simccl/intercept/trace"
)

func main() {}

// ncclResult_t values (NCCL 2.28 nccl.h).
const (
	ncclSuccess         = 0
	ncclSystemError     = 2
	ncclInvalidArgument = 4
	ncclInvalidUsage    = 5
)

// ncclVersionCode is what ncclGetVersion reports in virtual mode: NCCL 2.28.9 encoded as
// major×10000 + minor×100 + patch (the encoding NCCL uses from 2.9 on).
const ncclVersionCode = 22809

type commInfo struct {
	id     string
	rank   int
	nranks int
	splits int // ncclCommSplit calls made on this communicator so far
	dev    int
	handle unsafe.Pointer // virtual mode: the C allocation standing for the communicator
}

var st struct {
	mu       sync.Mutex
	virtual  bool
	loaded   bool
	loadErr  string
	comms    map[uintptr]*commInfo
	anon     int
	depth    int
	gid      int64
	seq      int64
	buf      []byte
	out      *os.File
	openErr  bool
	dir      string
	host     string
	pid      int
	topo     string
	gpus     int
	realPath string
	rec      trace.Record
}

func init() {
	st.comms = map[uintptr]*commInfo{}
	st.virtual = os.Getenv("SIMCCL_MODE") == "virtual"
	st.dir = os.Getenv("SIMCCL_TRACE_DIR")
	if st.dir == "" {
		st.dir = "."
	}
	st.host, _ = os.Hostname()
	st.pid = os.Getpid()
	st.topo = os.Getenv("SIMCCL_TOPO")
	st.gpus = 8
	if v, err := strconv.Atoi(os.Getenv("SIMCCL_GPUS_PER_NODE")); err == nil && v > 0 {
		st.gpus = v
	}
	st.realPath = os.Getenv("SIMCCL_REAL_NCCL")
	st.buf = make([]byte, 0, 64<<10)
	go flusher()
}

// flusher writes buffered records out periodically, so that a program killed without calling
// ncclCommDestroy loses at most the last 200 ms.
func flusher() {
	for {
		time.Sleep(200 * time.Millisecond)
		st.mu.Lock()
		flushLocked()
		st.mu.Unlock()
	}
}

//export simcclFlush
func simcclFlush() {
	st.mu.Lock()
	flushLocked()
	st.mu.Unlock()
}

func flushLocked() {
	if len(st.buf) == 0 {
		return
	}
	if st.out == nil && !st.openErr {
		tag := "pid" + strconv.Itoa(st.pid)
		for _, k := range []string{"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"} {
			if v := os.Getenv(k); v != "" {
				tag = "rank" + v
				break
			}
		}
		_ = os.MkdirAll(st.dir, 0o755)
		path := fmt.Sprintf("%s/simccl-trace.%s.jsonl", st.dir, tag)
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			fmt.Fprintf(os.Stderr, "simccl shim: trace file: %v (records dropped)\n", err)
			st.openErr = true
		}
		st.out = f
	}
	if st.out != nil {
		if _, err := st.out.Write(st.buf); err != nil && !st.openErr {
			fmt.Fprintf(os.Stderr, "simccl shim: writing the trace: %v\n", err)
			st.openErr = true
		}
	}
	st.buf = st.buf[:0]
}

// ensureReal loads the real library once (record mode). Called with st.mu held.
func ensureReal() bool {
	if st.loaded {
		return st.loadErr == ""
	}
	st.loaded = true
	var cpath *C.char
	if st.realPath != "" {
		cpath = C.CString(st.realPath)
		defer C.free(unsafe.Pointer(cpath))
	}
	if msg := C.simccl_load(cpath); msg != nil {
		st.loadErr = C.GoString(msg)
		fmt.Fprintf(os.Stderr, "simccl shim: %s\n", st.loadErr)
		return false
	}
	return true
}

// real is ensureReal taking the lock itself.
func real() bool {
	st.mu.Lock()
	ok := ensureReal()
	st.mu.Unlock()
	return ok
}

func now() int64 { return time.Now().UnixNano() }

// lookup returns the communicator's info; a communicator made by a call the shim does not export
// (ncclCommInitRankScalable, ncclCommShrink, …) is registered on first sight from the real
// library's queries. Called with st.mu held.
func lookup(c C.ncclComm_t) *commInfo {
	if ci := st.comms[uintptr(c)]; ci != nil {
		return ci
	}
	ci := &commInfo{nranks: 1}
	st.anon++
	if !st.virtual && st.loadErr == "" && ensureReal() {
		var n, r C.int
		if C.r_CommInt(C.F_CommCount, c, &n) == 0 {
			ci.nranks = int(n)
		}
		if C.r_CommInt(C.F_CommUserRank, c, &r) == 0 {
			ci.rank = int(r)
		}
	}
	// Not known from a unique id: named by its order among such communicators and its size,
	// which the other ranks of a symmetric program reproduce.
	ci.id = fmt.Sprintf("anon%d.n%d", st.anon, ci.nranks)
	st.comms[uintptr(c)] = ci
	return ci
}

func idOf(id *C.ncclUniqueId) string {
	h := fnv.New64a()
	h.Write(C.GoBytes(unsafe.Pointer(id), 128))
	return fmt.Sprintf("u%016x", h.Sum64())
}

// emit appends one record. Called with st.mu held; t0 is the call's start, dur its time in the
// real library.
func emit(ci *commInfo, op string, count int64, dt, redop, root int, stream unsafe.Pointer, t0, dur int64) {
	r := &st.rec
	*r = trace.Record{Seq: st.seq, TimeNs: t0, DurNs: dur, Rank: ci.rank, NRanks: ci.nranks, Comm: ci.id, Op: op,
		Count: count, Root: root, Group: st.depth}
	st.seq++
	if dt >= 0 {
		r.Dtype = trace.DtypeName(dt)
	}
	if redop >= 0 {
		r.RedOp = trace.RedOpName(redop)
	}
	if stream != nil {
		r.Stream = "0x" + strconv.FormatUint(uint64(uintptr(stream)), 16)
	}
	if st.depth > 0 {
		r.GID = st.gid
	}
	st.buf = trace.AppendRecord(st.buf, r)
	if len(st.buf) > 60<<10 {
		flushLocked()
	}
}

// emitComm records a communicator event.
func emitComm(ci *commInfo, op, parent string, color int, t0, dur int64) {
	r := &st.rec
	*r = trace.Record{Seq: st.seq, TimeNs: t0, DurNs: dur, Rank: ci.rank, NRanks: ci.nranks, Comm: ci.id, Op: op,
		Root: -1, Group: st.depth, Parent: parent, Color: color, Host: st.host, PID: st.pid, Mode: "record"}
	if st.virtual {
		r.Mode, r.Topo = "virtual", st.topo
	}
	if st.depth > 0 {
		r.GID = st.gid
	}
	st.seq++
	st.buf = trace.AppendRecord(st.buf, r)
}
