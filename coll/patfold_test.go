package coll

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A PAT fold by S = n is the schedule itself; by a divisor S of n it holds the first S ranks'
// programs of the schedule, step for step, with each peer numbered mod S and each connection
// of distance 2^k on index PATFoldConn+k, and it passes the schedule's index checks (which let a
// fold's connection join a rank to itself).
func TestCompilePATFold(t *testing.T) {
	for _, tc := range []struct {
		f     Func
		n, S  int
		count int64
		nch   int
	}{
		{AllGather, 8, 8, 4096, 2},
		{AllGather, 8, 1, 4096, 2},
		{AllGather, 12, 3, 1 << 20, 2},
		{ReduceScatter, 8, 2, 4096, 1},
		{ReduceScatter, 6, 1, 1 << 18, 4},
	} {
		p := Plan{Func: tc.f, Algo: PAT, Proto: Simple, NRanks: tc.n, Count: tc.count, DataType: Float32, NChannels: tc.nch}
		full, err := Compile(p)
		require.NoError(t, err)
		fold, err := CompilePATFold(p, tc.S)
		require.NoError(t, err)
		if tc.S == tc.n {
			require.Equal(t, full, fold)
			continue
		}
		require.Equal(t, tc.S, fold.NRanks)
		_, err = NewIndex(fold)
		require.NoError(t, err, "%v n=%d S=%d", tc.f, tc.n, tc.S)
		self := 0
		for r := 0; r < tc.S; r++ {
			for c := 0; c < tc.nch; c++ {
				fp, pp := fold.Programs[r*tc.nch+c], full.Programs[r*tc.nch+c]
				require.Equal(t, len(pp.Steps), len(fp.Steps))
				for i, st := range pp.Steps {
					fs := fp.Steps[i]
					require.Equal(t, st.Prim, fs.Prim)
					require.Equal(t, st.Bytes, fs.Bytes)
					require.Equal(t, st.Deps, fs.Deps)
					require.Equal(t, len(st.Recv), len(fs.Recv))
					require.Equal(t, len(st.Send), len(fs.Send))
					for j, x := range st.Send {
						y := fs.Send[j]
						require.Equal(t, int(x.Peer)%tc.S, int(y.Peer))
						d := (int(x.Peer) - r + tc.n) % tc.n // the distance, ±2^k
						if tc.f == ReduceScatter {
							d = tc.n - d
						}
						cn := fold.Conns[y.Conn]
						require.Equal(t, 1<<(cn.ConnIndex-PATFoldConn), d)
						require.Equal(t, x.Seq, y.Seq)
						require.Equal(t, x.CreditSeq, y.CreditSeq)
						if cn.From == cn.To {
							self++
						}
					}
				}
			}
		}
		if tc.S == 1 {
			require.Positive(t, self)
		}
	}
}

// CompilePATFold refuses what it cannot fold.
func TestCompilePATFoldRefuses(t *testing.T) {
	p := Plan{Func: AllGather, Algo: PAT, Proto: Simple, NRanks: 8, Count: 4096, DataType: Float32, NChannels: 1}
	for _, S := range []int{0, 3, 9, -1} {
		_, err := CompilePATFold(p, S)
		require.Error(t, err, "S=%d", S)
	}
	ring := p
	ring.Algo = Ring
	_, err := CompilePATFold(ring, 1)
	require.ErrorContains(t, err, "not a PAT")
	big := p
	big.NRanks, big.Count = 1<<14, 1<<24
	_, err = CompilePATFold(big, 1<<14)
	require.ErrorContains(t, err, "schedule would have")
}

// EstimatedSteps bounds what Compile makes for PAT, and is close to it: the estimate decides
// whether a PAT schedule may be compiled at all (1,024 one-GPU ranks at 64 MiB: 4.2 M steps).
func TestEstimatedStepsPAT(t *testing.T) {
	for _, c := range []struct {
		f          Func
		n, nch     int
		count      int64
		chunkBytes int64
	}{
		{AllGather, 16, 4, 1 << 14, 0}, {ReduceScatter, 12, 2, 1 << 20, 0}, {AllGather, 33, 4, 3 << 18, 64 << 10},
		{ReduceScatter, 64, 4, 1000, 0},
	} {
		p := Plan{Func: c.f, Algo: PAT, Proto: Simple, NRanks: c.n, Count: c.count, DataType: Float32, NChannels: c.nch, ChunkSize: c.chunkBytes}
		s, err := Compile(p)
		require.NoError(t, err)
		steps := s.NumSteps()
		est := p.EstimatedSteps()
		require.GreaterOrEqual(t, est, float64(steps), "%+v", c)
		require.LessOrEqual(t, est, 2*float64(steps), "%+v", c)
	}
}
