package simnet

import (
	"runtime"
	"slices"
	"sync"
)

// refine runs colour refinement to its fixed point: the coarsest equitable partition finer than
// the initial colours col (ids 0..classes-1, each used), over a graph in CSR form (element i's neighbours
// are adj[off[i]:off[i+1]], each label<<32 | neighbour). Two elements end with the same colour
// where they started with the same colour and have, for every label and colour, the same number
// of neighbours of that colour by that label. It returns the colours and their number.
//
// Each round refines the last round's partition by every element's multiset of (label,
// neighbour's colour), hashed as the sum of its items' hashes (two 64-bit sums: no sort), as a round of the synchronous refinement does, but computes the multiset
// only for the elements one of whose neighbours changed colour in the last round (all of them in
// the first): the others' multisets are the last round's, which every member of their class
// shares. A class that splits keeps its number for one part — the part of the members whose
// neighbours did not change, else its largest part (the first of the largest in the round's
// order), so that the fewest elements change and the fewest are recomputed in the next round, as
// in Hopcroft's "all but the largest" — and the other parts take the next numbers in the order
// the round meets them, so the colours depend only on the input. On a tree whose classes grow along a chain (a 72-GPU rack's chain in a tree of 300
// GB200 racks: 142 rounds over 1.44 M elements) the rounds after the first touch only the chain's
// frontier, where the synchronous form visited every element every round. A round takes its
// dirty elements in the order of the elements (sorted, or from a pass over mark where they are
// many), so that their multisets read the CSR and the colours in memory order, not in the order
// the changes reached them: on 4,096 hgx-h100-16nic nodes with rail routing (four quotients of
// 3.9 M elements, 22-32 rounds each) a 1 GiB all-reduce went from 39.3 to 25.5 s, the same row.
func refine(off []int32, adj []uint64, col []uint32, classes int) ([]uint32, int) {
	ne := len(col)
	type pair struct{ h1, h2 uint64 }
	// Per class: its members; the multiset hash every member has, and that keeps the class's
	// number in a round; the last round one of its members was dirty, how many were, and that
	// round's largest group of them (-1: none yet).
	type class struct {
		size, touched, dirtyIn, best int32
		key                          pair
	}
	cls := make([]class, classes)
	for c := range cls {
		cls[c].best = -1
	}
	for _, c := range col {
		cls[c].size++
	}
	mark := make([]int32, ne) // the last round that put the element in dirty (0: none)
	dirty := make([]int32, ne)
	for i := range dirty {
		dirty[i] = int32(i)
	}
	var hs []pair
	var changed []int32
	var slot, groupOf, first, count []int32
	var ids []uint32 // per group, the number its members take
	for round := int32(1); len(dirty) > 0; round++ {
		// The dirty elements' multisets depend only on the last round's colours: the cores
		// share them out; the numbering below is sequential.
		hs = slices.Grow(hs[:0], len(dirty))[:len(dirty)]
		parallelFor(len(dirty), func(lo, hi int) {
			for k := lo; k < hi; k++ {
				i := dirty[k]
				// A multiset's hash: the sum of its items' hashes, two of them (128 bits), so
				// that the order of the neighbours does not matter and nothing is sorted.
				var h1, h2 uint64
				for _, a := range adj[off[i]:off[i+1]] {
					it := a&^(1<<32-1) | uint64(col[uint32(a)])
					h1 += treeMix(0x1234, it)
					h2 += treeMix(0x9876, it)
				}
				hs[k] = pair{h1, h2}
			}
		})
		// Group the dirty elements by (class, multiset): an open-addressing table probed by the
		// hash, its slots holding group+1 (0: empty); groups numbered in order of first member.
		tab := 1
		for tab < 2*len(dirty) {
			tab *= 2
		}
		if len(slot) < tab {
			slot = make([]int32, tab)
		}
		slot = slot[:tab]
		clear(slot)
		mask := uint64(tab - 1)
		groupOf = slices.Grow(groupOf[:0], len(dirty))[:len(dirty)]
		first, count = first[:0], count[:0]
		for k, i := range dirty {
			c, h := col[i], hs[k]
			if cl := &cls[c]; cl.touched != round {
				cl.touched, cl.dirtyIn = round, 1
			} else {
				cl.dirtyIn++
			}
			for j := (h.h1 ^ uint64(c)*0x9e3779b97f4a7c15) & mask; ; j = (j + 1) & mask {
				g := slot[j] - 1
				if g < 0 {
					g = int32(len(first))
					slot[j] = g + 1
					first = append(first, int32(k))
					count = append(count, 0)
				} else if f := first[g]; hs[f] != h || col[dirty[f]] != c {
					continue
				}
				groupOf[k] = g
				count[g]++
				break
			}
		}
		// Which part keeps its class's number (key): where some members are not dirty, theirs
		// (key as it is); else the largest part (the first of the largest), so that the fewest
		// elements change and the next round has the fewest to recompute.
		for g, f := range first {
			if cl := &cls[col[dirty[f]]]; cl.dirtyIn == cl.size && (cl.best < 0 || count[g] > count[cl.best]) {
				cl.best, cl.key = int32(g), hs[f]
			}
		}
		changed = changed[:0]
		ids = slices.Grow(ids[:0], len(first))[:len(first)]
		for k, i := range dirty {
			c, g := col[i], groupOf[k]
			if first[g] == int32(k) {
				cls[c].best = -1 // for the next round
				ids[g] = c
				if hs[k] != cls[c].key {
					ids[g] = uint32(len(cls))
					cls = append(cls, class{best: -1, key: hs[k]})
				}
			}
			if id := ids[g]; id != c {
				cls[c].size--
				cls[id].size++
				col[i] = id
				changed = append(changed, i)
			}
		}
		// Next round: the neighbours of the elements that changed colour, in the order of the
		// elements (their adjacency and their neighbours' colours read in memory order).
		dirty = dirty[:0]
		for _, i := range changed {
			for _, a := range adj[off[i]:off[i+1]] {
				if j := uint32(a); mark[j] != round {
					mark[j] = round
					dirty = append(dirty, int32(j))
				}
			}
		}
		if len(dirty) > ne/dirtyScan {
			dirty = dirty[:0]
			for j, m := range mark {
				if m == round {
					dirty = append(dirty, int32(j))
				}
			}
		} else {
			slices.Sort(dirty)
		}
	}
	return col, len(cls)
}

// parallelFor calls f on consecutive ranges covering [0, n), on up to GOMAXPROCS goroutines at
// once where n is large enough to be worth it. f must only write what its range owns. It is the
// simulator's one use of goroutines: work whose result cannot depend on how it was shared out.
func parallelFor(n int, f func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n/parallelGrain)
	if workers <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	per := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += per {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			f(lo, hi)
		}(lo, min(lo+per, n))
	}
	wg.Wait()
}

// dirtyScan: a round whose dirty elements are more than one in dirtyScan of all takes them in
// order from a pass over mark, else sorts them.
const dirtyScan = 16

// parallelGrain is the fewest elements per goroutine of parallelFor.
const parallelGrain = 1 << 15
