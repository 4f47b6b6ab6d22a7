package simnet

import (
	"runtime"
	"slices"
	"testing"
)

// refine shares its rounds out over the cores; its colours must not depend on how many there are.
// The graph: a long path whose elements start with a few colours and link to their neighbours,
// big enough to be split.
func TestRefineIndependentOfGOMAXPROCS(t *testing.T) {
	const ne = 5 * parallelGrain
	off := make([]int32, ne+1)
	var adj []uint64
	for i := 0; i < ne; i++ {
		for _, j := range []int{i - 1, i + 1, (i * 7) % ne} {
			if j >= 0 && j < ne && j != i {
				adj = append(adj, uint64(1+j%3)<<32|uint64(j))
			}
		}
		off[i+1] = int32(len(adj))
	}
	run := func(procs int) ([]uint32, int) {
		old := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(old)
		col := make([]uint32, ne)
		for i := range col {
			col[i] = uint32(i % 5 / 4) // colours 0 and 1
		}
		return refine(off, adj, col, 2)
	}
	a, na := run(1)
	b, nb := run(4)
	if na != nb || !slices.Equal(a, b) {
		t.Fatalf("GOMAXPROCS 1: %d colours, 4: %d colours, or different numbering", na, nb)
	}
	if na < 3 {
		t.Fatalf("%d colours: the test graph does not refine", na)
	}
	t.Logf("%d elements, %d colours", ne, na)
}

// refineRounds is the synchronous colour refinement refine replaced (stop 37): every round
// recomputes every element's signature (its colour and its neighbours' multiset) and numbers
// the distinct signatures in order of first appearance. The reference for refine's partition.
func refineRounds(off []int32, adj []uint64, col []uint32, classes int) ([]uint32, int) {
	ne := len(col)
	col = slices.Clone(col)
	next := make([]uint32, ne)
	h1s := make([]uint64, ne)
	h2s := make([]uint64, ne)
	var tab colourTable
	for {
		for i := 0; i < ne; i++ {
			var items []uint64
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

// samePartition reports whether colourings a and b put the same elements together.
func samePartition(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	ab, ba := map[uint32]uint32{}, map[uint32]uint32{}
	for i := range a {
		if x, ok := ab[a[i]]; ok && x != b[i] {
			return false
		}
		if y, ok := ba[b[i]]; ok && y != a[i] {
			return false
		}
		ab[a[i]], ba[b[i]] = b[i], a[i]
	}
	return true
}

// TestRefineMatchesRounds: refine, which recomputes only the elements next to a change, ends at
// the partition of the synchronous refinement that recomputes every element every round, on
// graphs that take one round, a few, and hundreds (a long path split from its ends), with
// labels, several initial colours and unequal degrees.
func TestRefineMatchesRounds(t *testing.T) {
	type graph struct {
		name string
		ne   int
		edge func(i int) []uint64 // element i's neighbours, label<<32 | j
		col  func(i int) uint32
		ncol int
	}
	rng := uint64(12345)
	rnd := func(n int) int {
		rng = rng*6364136223846793005 + 1442695040888963407
		return int((rng >> 33) % uint64(n))
	}
	randomEdges := make([][]uint64, 3000)
	for i := range randomEdges {
		for k := 0; k < 1+rnd(3); k++ {
			j := rnd(len(randomEdges))
			l := uint64(1 + rnd(2))
			randomEdges[i] = append(randomEdges[i], l<<32|uint64(j))
			randomEdges[j] = append(randomEdges[j], (l+2)<<32|uint64(i))
		}
	}
	// Ten copies of one random graph of 300, the copies joined in a ring by one element each:
	// symmetric under rotation by a copy.
	copies := make([][]uint64, 3000)
	for i := 0; i < 300; i++ {
		for k := 0; k < 1+rnd(3); k++ {
			j, l := rnd(300), uint64(1+rnd(2))
			for c := 0; c < 10; c++ {
				copies[c*300+i] = append(copies[c*300+i], l<<32|uint64(c*300+j))
				copies[c*300+j] = append(copies[c*300+j], (l+2)<<32|uint64(c*300+i))
			}
		}
	}
	for c := 0; c < 10; c++ {
		copies[c*300] = append(copies[c*300], 5<<32|uint64((c+1)%10*300))
	}
	graphs := []graph{
		{name: "path of 600 (about 300 rounds)", ne: 600, ncol: 1, col: func(int) uint32 { return 0 },
			edge: func(i int) []uint64 {
				var e []uint64
				if i > 0 {
					e = append(e, 1<<32|uint64(i-1))
				}
				if i < 599 {
					e = append(e, 1<<32|uint64(i+1))
				}
				return e
			}},
		{name: "cycle of 500 (one class)", ne: 500, ncol: 1, col: func(int) uint32 { return 0 },
			edge: func(i int) []uint64 { return []uint64{1<<32 | uint64((i+1)%500), 2<<32 | uint64((i+499)%500)} }},
		{name: "cycle of 500, one element marked", ne: 500, ncol: 2, col: func(i int) uint32 { return uint32(min(i, 1)) ^ 1 },
			edge: func(i int) []uint64 { return []uint64{1<<32 | uint64((i+1)%500), 1<<32 | uint64((i+499)%500)} }},
		{name: "binary tree of 1023, labelled up and down", ne: 1023, ncol: 1, col: func(int) uint32 { return 0 },
			edge: func(i int) []uint64 {
				var e []uint64
				if i > 0 {
					e = append(e, 1<<32|uint64((i-1)/2))
				}
				for _, k := range []int{2*i + 1, 2*i + 2} {
					if k < 1023 {
						e = append(e, 2<<32|uint64(k))
					}
				}
				return e
			}},
		{name: "random, 3000 elements, 3 colours", ne: 3000, ncol: 3, col: func(i int) uint32 { return uint32(i % 7 % 3) },
			edge: func(i int) []uint64 { return randomEdges[i] }},
		{name: "ten copies of a random graph of 300 in a ring", ne: 3000, ncol: 2, col: func(i int) uint32 { return uint32(i % 300 % 2) },
			edge: func(i int) []uint64 { return copies[i] }},
	}
	for _, g := range graphs {
		off := make([]int32, g.ne+1)
		var adj []uint64
		col := make([]uint32, g.ne)
		for i := 0; i < g.ne; i++ {
			adj = append(adj, g.edge(i)...)
			off[i+1] = int32(len(adj))
			col[i] = g.col(i)
		}
		want, nw := refineRounds(off, adj, slices.Clone(col), g.ncol)
		got, ng := refine(off, adj, slices.Clone(col), g.ncol)
		if ng != nw || !samePartition(got, want) {
			t.Errorf("%s: refine %d classes, the synchronous rounds %d, or another partition", g.name, ng, nw)
			continue
		}
		for _, c := range got {
			if int(c) >= ng {
				t.Fatalf("%s: colour %d of %d", g.name, c, ng)
			}
		}
		t.Logf("%s: %d classes", g.name, ng)
	}
}

// TestRefineMatchesRoundsRandom: the same on 200 random graphs made of copies of one random graph
// (so that classes have many members, some dirty and some not in a round), joined in a ring, with
// random initial colours repeated per copy.
func TestRefineMatchesRoundsRandom(t *testing.T) {
	rng := uint64(99)
	rnd := func(n int) int {
		rng = rng*6364136223846793005 + 1442695040888963407
		return int((rng >> 33) % uint64(n))
	}
	for trial := 0; trial < 200; trial++ {
		m, copies := 2+rnd(40), 1+rnd(8)
		ne := m * copies
		nbr := make([][]uint64, ne)
		for e := 0; e < m*(1+rnd(2)); e++ {
			i, j, l := rnd(m), rnd(m), uint64(1+rnd(3))
			for c := 0; c < copies; c++ {
				nbr[c*m+i] = append(nbr[c*m+i], l<<32|uint64(c*m+j))
				nbr[c*m+j] = append(nbr[c*m+j], (l+3)<<32|uint64(c*m+i))
			}
		}
		if copies > 1 && rnd(2) == 0 {
			a := rnd(m)
			for c := 0; c < copies; c++ {
				nbr[c*m+a] = append(nbr[c*m+a], 7<<32|uint64((c+1)%copies*m+a))
			}
		}
		ncol := 1 + rnd(3)
		base := make([]uint32, m)
		for i := range base {
			base[i] = uint32(i % ncol)
		}
		off := make([]int32, ne+1)
		var adj []uint64
		col := make([]uint32, ne)
		for i := 0; i < ne; i++ {
			adj = append(adj, nbr[i]...)
			off[i+1] = int32(len(adj))
			col[i] = base[i%m]
		}
		ncol = min(ncol, m)
		want, nw := refineRounds(off, adj, slices.Clone(col), ncol)
		got, ng := refine(off, adj, slices.Clone(col), ncol)
		if ng != nw || !samePartition(got, want) {
			t.Fatalf("trial %d (%d copies of %d): refine %d classes, the synchronous rounds %d, or another partition", trial, copies, m, ng, nw)
		}
	}
}
