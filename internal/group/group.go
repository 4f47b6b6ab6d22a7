// Package group keeps NCCL's group semantics for the real engines (comm and cuda/engine): groups
// nest (ncclGroupStart/ncclGroupEnd, NCCL 2.28), calls made while one is open are held, and the
// outermost end hands them over, per communicator in the order the communicators first appeared,
// each communicator's calls in the order they were made. An engine keeps one process-wide Group
// (one goroutine driving several communicators) and one per communicator (goroutine ranks).
package group

import (
	"sync"
	"sync/atomic"
)

// Group is one group's state. The zero value is a closed group, ready to use; it is safe for
// concurrent use.
type Group[K comparable, C any] struct {
	mu    sync.Mutex
	depth int
	open  atomic.Int32 // depth, readable without the lock (Open)
	keys  []K
	calls map[K][]C
	// spare: the storage of an ended group handed back by Recycle, for the next group (a group of
	// one call then allocates nothing here). old: the communicators whose (emptied) slices the
	// recycled map still holds, which End drops when this group did not call them; spareOld is
	// the same for the spare storage. Walking these lists instead of the map keeps map iteration
	// (its random start costs more than the rest of a one-call group) off the path.
	spareKeys  []K
	spareCalls map[K][]C
	old        []K
	spareOld   []K
}

// Start opens a group, or one more level of an open one.
func (g *Group[K, C]) Start() {
	g.mu.Lock()
	g.depth++
	g.open.Store(int32(g.depth))
	g.mu.Unlock()
}

// Hold queues call c of communicator k when a group is open and reports whether it did (false:
// the caller launches c itself).
func (g *Group[K, C]) Hold(k K, c C) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.depth == 0 {
		return false
	}
	if g.calls == nil {
		if g.spareCalls != nil {
			g.keys, g.calls = g.spareKeys, g.spareCalls
			g.spareKeys, g.spareCalls = nil, nil
			g.old, g.spareOld = g.spareOld, g.old[:0]
		} else {
			g.calls = map[K][]C{}
		}
	}
	if len(g.calls[k]) == 0 { // absent, or an empty slice kept from a recycled group
		g.keys = append(g.keys, k)
	}
	g.calls[k] = append(g.calls[k], c)
	return true
}

// Recycle hands back what End returned, once the caller is done with it (it must not keep the
// keys, the map or the slices): the next group reuses the storage. Optional.
func (g *Group[K, C]) Recycle(keys []K, calls map[K][]C) {
	if calls == nil || len(calls) > 64 || len(keys) != len(calls) {
		return
	}
	for _, k := range keys { // End left only the keys' entries in calls
		v := calls[k]
		clear(v) // drop the references to the calls
		calls[k] = v[:0]
	}
	g.mu.Lock()
	if g.spareCalls == nil {
		g.spareOld = append(g.spareOld[:0], keys...)
		clear(keys)
		g.spareKeys, g.spareCalls = keys[:0], calls
	}
	g.mu.Unlock()
}

// End closes one level. ok is false when no group was open (the caller's error: an end without a
// start). When the outermost level closes, it returns the communicators that were called, in
// first-call order, with their calls, and the group is empty again; inner levels return none.
func (g *Group[K, C]) End() (keys []K, calls map[K][]C, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.depth == 0 {
		return nil, nil, false
	}
	g.depth--
	g.open.Store(int32(g.depth))
	if g.depth > 0 {
		return nil, nil, true
	}
	keys, calls = g.keys, g.calls
	g.keys, g.calls = nil, nil
	for _, k := range g.old {
		if len(calls[k]) == 0 {
			delete(calls, k) // kept from a recycled group, not called in this one
		}
	}
	clear(g.old)
	g.old = g.old[:0]
	return keys, calls, true
}

// Open reports whether a group is open, without taking the lock: a caller on its fast path
// (nothing to hold) checks it before Hold. A group opened or closed concurrently may be missed,
// as with any check before the call; Hold is the authoritative test.
func (g *Group[K, C]) Open() bool { return g.open.Load() > 0 }
