//go:build race

package realnet

import (
	"runtime"
	"sync"
	"unsafe"
)

// The race detector does not see the happens-before edges that atomics in shared mappings create
// (its shadow memory covers the Go heap only), so with -race the shared-memory rings also
// release/acquire a per-ring token in Go memory. Only ranks of one process (tests) can share a token;
// separate processes have separate detectors anyway.

var raceTokens sync.Map // ring name → *byte

func raceToken(name string) unsafe.Pointer {
	v, _ := raceTokens.LoadOrStore(name, new(byte))
	return unsafe.Pointer(v.(*byte))
}

func raceRelease(p unsafe.Pointer) {
	if p != nil {
		runtime.RaceReleaseMerge(p)
	}
}

func raceAcquire(p unsafe.Pointer) {
	if p != nil {
		runtime.RaceAcquire(p)
	}
}
