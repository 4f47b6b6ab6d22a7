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
