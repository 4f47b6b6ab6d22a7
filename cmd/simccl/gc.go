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

// deferGC turns the collector off until the heap reaches firstGCAt (a memory limit), and back to
// GOGC's percentage, without a limit, once the first collection has run (a sentinel's finalizer).
// A GOGC or GOMEMLIMIT of the environment is left as it says.
func deferGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	pct := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(firstGCAt)
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(limit)
	})
}

// gcSentinel is unreachable once made: its finalizer runs after the first collection. (It holds
// a pointer: the finalizer of a tiny pointer-free object may never run.)
type gcSentinel struct{ _ *int }
