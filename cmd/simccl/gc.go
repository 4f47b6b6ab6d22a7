package main

import (
	"os"
	"runtime"
	"runtime/debug"
)

// firstGCAt is the heap size up to which simccl collects no garbage. A call builds its schedule
// and records in one go and keeps them to its end: a collection before then marks them, frees
// next to nothing, and the pages it frees are returned and faulted in again (128 nodes at 1 GiB:
// eight collections before the replay, 9,000-14,000 more page faults; peak 320 MB without them,
// 290 MB with). Past it the collector runs as GOGC says. The price is memory: a run that makes
// garbage keeps up to this much (all_to_all on 128 nodes: peak 205 → 386 MB; 512 MiB took it to
// 516 MB and spared the 64-node fat tree its one collection, 400 → 462 MB).
const firstGCAt = 384 << 20

// heapLimit is the soft limit on the memory the Go runtime holds (debug.SetMemoryLimit: heap,
// stacks and the runtime's own) once the first collection has run. Without it GOGC=100 lets the
// heap grow to twice what is live before collecting: a sweep whose sizes run side by side on two
// cores, about 2 GB live, peaked at 4.0-4.4 GB (100 GB200 racks, all-reduce 16 MiB-1 GiB; 3.4 GB
// for one 1 GiB call on 1,400 racks). With the limit the collector runs earlier as the heap nears
// it: 3.07 GB and 3% more time for that sweep, 2.81 GB and 7.5% more for that call (BENCHMARKS.md,
// stop 37). It is soft: where more than this is live the runtime goes past it rather than fail
// (the collector then takes at most half the CPU). 3 GiB keeps a run under the 4 GiB that the
// simulator-speed targets allow, with room for what the runtime does not count.
const heapLimit = 3 << 30

// deferGC turns the collector off until the heap reaches firstGCAt (a memory limit), and back to
// GOGC's percentage, with heapLimit as the memory limit, once the first collection has run (a
// sentinel's finalizer). A GOGC or GOMEMLIMIT of the environment is left as it says.
func deferGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	pct := debug.SetGCPercent(-1)
	debug.SetMemoryLimit(firstGCAt)
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(heapLimit)
	})
}

// gcSentinel is unreachable once made: its finalizer runs after the first collection. (It holds
// a pointer: the finalizer of a tiny pointer-free object may never run.)
type gcSentinel struct{ _ *int }
