package simnet

import (
	"runtime"
	"slices"
	"sync"
)

// refine runs colour refinement to its fixed point: the coarsest equitable partition finer than
// the initial colours col (ids 0..classes-1), over a graph in CSR form (element i's neighbours
// are adj[off[i]:off[i+1]], each label<<32 | neighbour). Two elements end with the same colour
// where they started with the same colour and have, for every label and colour, the same number
// of neighbours of that colour by that label. Colours are numbered in order of first appearance,
// so the result depends only on the input. It returns the colours and their number.
func refine(off []int32, adj []uint64, col []uint32, classes int) ([]uint32, int) {
	ne := len(col)
	next := make([]uint32, ne)
	h1s := make([]uint64, ne)
	h2s := make([]uint64, ne)
	var tab colourTable
	for {
		// Every element's signature depends only on the last round's colours: the cores share
		// them out. Numbering the signatures stays sequential, so the colours do not depend on
		// how many cores did it.
		parallelFor(ne, func(lo, hi int) {
			var items []uint64
			for i := lo; i < hi; i++ {
				items = items[:0]
				for _, a := range adj[off[i]:off[i+1]] {
					items = append(items, a&^(1<<32-1)|uint64(col[uint32(a)]))
				}
				slices.Sort(items)
				h1, h2 := treeMix(0x1234, uint64(col[i])), treeMix(0x9876, uint64(col[i]))
				for _, it := range items {
					h1, h2 = treeMix(h1, it), treeMix(h2^0x5555, it)
				}
				h1s[i], h2s[i] = h1, h2
			}
		})
		n := tab.assign(h1s, h2s, next)
		col, next = next, col
		if n == classes {
			return col, n
		}
		classes = n
	}
}

// colourTable numbers the distinct (h1, h2) pairs of a refinement round in order of first
// appearance: an open-addressing table of element indices, probed by h1.
type colourTable struct {
	slot []int32 // element+1 holding the pair; 0: empty
	id   []uint32
}

// assign sets out[i] to the number of pair i and returns the number of distinct pairs.
func (t *colourTable) assign(h1s, h2s []uint64, out []uint32) int {
	size := 1
	for size < 2*len(h1s) {
		size *= 2
	}
	if len(t.slot) != size {
		t.slot = make([]int32, size)
		t.id = make([]uint32, size)
	} else {
		clear(t.slot)
	}
	mask := uint64(size - 1)
	n := uint32(0)
	for i, h1 := range h1s {
		j := h1 & mask
		for {
			s := t.slot[j]
			if s == 0 {
				t.slot[j] = int32(i) + 1
				t.id[j] = n
				out[i] = n
				n++
				break
			}
			if h1s[s-1] == h1 && h2s[s-1] == h2s[i] {
				out[i] = t.id[j]
				break
			}
			j = (j + 1) & mask
		}
	}
	return int(n)
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

// parallelGrain is the fewest elements per goroutine of parallelFor.
const parallelGrain = 1 << 15
