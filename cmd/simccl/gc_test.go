package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestDeferGCLimit: until the first collection the heap may grow to firstGCAt with the collector
// off; after it, GOGC's percentage is back and the memory limit is heapLimit (not "none", which
// let a two-core sweep double its live heap: 4.4 GB on 100 GB200 racks).
func TestDeferGCLimit(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	pct0 := debug.SetGCPercent(100)
	lim0 := debug.SetMemoryLimit(-1)
	defer func() {
		debug.SetGCPercent(pct0)
		debug.SetMemoryLimit(lim0)
	}()
	deferGC()
	if got := debug.SetMemoryLimit(-1); got != firstGCAt {
		t.Fatalf("before the first collection: memory limit %d, want firstGCAt %d", got, firstGCAt)
	}
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("before the first collection: GC percent %d, want -1 (off)", got)
	}
	// The sentinel's finalizer runs after a collection, on the finalizer goroutine.
	deadline := time.Now().Add(10 * time.Second)
	for debug.SetMemoryLimit(-1) != heapLimit {
		if time.Now().After(deadline) {
			t.Fatalf("after collections: memory limit %d, want heapLimit %d", debug.SetMemoryLimit(-1), int64(heapLimit))
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := debug.SetGCPercent(-1); got != 100 {
		t.Fatalf("after the first collection: GC percent %d, want GOGC's 100 back", got)
	}
}
