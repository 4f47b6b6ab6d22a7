package coll

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// StepSizes agrees with the schedule Compile makes: over every rank of the first channel, the wire
// bytes sent equal messages-per-loop × loops × the mean wire bytes per step.
func TestStepSizesMatchesCompile(t *testing.T) {
	for _, c := range []struct {
		f     Func
		p     Proto
		bytes int64
		n     int
		nch   int
		chunk int64
	}{
		{AllReduce, LL128, 1000 * 4, 4, 1, 0},
		{AllReduce, LL, 1 << 20, 8, 4, 0},
		{AllReduce, Simple, 3<<20 + 4096, 5, 3, 0},
		{AllReduce, LL128, 77 << 20, 8, 2, 0},
		{AllGather, LL, 1 << 20, 8, 2, 0},
		{ReduceScatter, Simple, 9 << 20, 3, 2, 128 << 10},
		{AllGather, LL128, 6 << 20, 4, 4, 0},
	} {
		elt := int64(4)
		count := c.bytes / elt
		if c.f != AllReduce {
			count /= int64(c.n)
		}
		s, err := Compile(Plan{Func: c.f, Algo: Ring, Proto: c.p, NRanks: c.n, Count: count, DataType: Float32, NChannels: c.nch, ChunkSize: c.chunk})
		require.NoError(t, err)
		var sent float64
		for r := 0; r < c.n; r++ {
			for _, st := range s.Program(r, 0).Steps {
				sent += float64(st.Wire) * float64(len(st.Send))
			}
		}
		loops, _, wire := StepSizes(c.f, Ring, c.p, c.bytes, c.n, c.nch, c.chunk)
		steps := float64(c.n - 1)
		if c.f == AllReduce {
			steps *= 2
		}
		want := float64(c.n) * steps * float64(loops) * wire
		require.InDelta(t, want, sent, 1e-6*want+1, "%v %v %d B: %d loops of %.1f wire bytes", c.f, c.p, c.bytes, loops, wire)
	}
	// An LL128 payload of 1000 B takes 9 lines of 128 B: 1152 wire bytes.
	_, pay, wire := StepSizes(AllGather, Ring, LL128, 2000, 2, 1, 0)
	require.Equal(t, 1000.0, pay)
	require.Equal(t, 1152.0, wire)
}
