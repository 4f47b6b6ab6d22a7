package colltest_test

import (
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/coll/colltest"
	"github.com/stretchr/testify/require"
)

// faulty is a world that runs its calls correctly, then damages one element of one rank's result.
type faulty struct {
	colltest.World
	rank, elem int
}

func (f faulty) Run(c colltest.Call, bufs []colltest.Buffers) error {
	if err := f.World.Run(c, bufs); err != nil {
		return err
	}
	b := bufs[f.rank].Recv
	b[f.elem*c.DataType.Size()] ^= 0x40
	return nil
}

// The kit finds one wrong element, says where (also where the collective must not write: a
// non-root's buffer in Reduce), and a rank checking itself (Case.Check) finds the same.
func TestKitFindsWrongElements(t *testing.T) {
	w, err := colltest.Interpreter{Plan: coll.Plan{Algo: coll.Ring, Proto: coll.Simple, NChannels: 2}}.Open(4)
	require.NoError(t, err)
	bad := faulty{World: w, rank: 2, elem: 6}
	// Results checked exactly (a float PreMulSum by 0.75 rounds: its tolerance may absorb the damage).
	exact := []coll.RedOp{coll.Sum, coll.Prod, coll.Max, coll.Min, coll.Avg}
	m := colltest.Matrix{Counts: []int{9}, Types: []coll.DataType{coll.Int8, coll.Float16, coll.Float8e5m2},
		TypeOps: map[coll.DataType][]coll.RedOp{coll.Float16: exact, coll.Float8e5m2: exact}}
	cases := m.Cases(4)
	require.Len(t, cases, (3*6*2+3*2+1)+2*(3*5*2+3*2+1))
	for _, c := range cases {
		c.Values = true
		if colltest.SkipInPlaceP2P(c) {
			continue
		}
		wrong, msgs, err := colltest.Verify(bad, c)
		require.NoError(t, err)
		require.Equal(t, 1, wrong, "%v", c)
		require.Len(t, msgs, 1)
		require.True(t, strings.Contains(msgs[0], "rank 2: element 6 ="), msgs[0])

		bufs := make([]colltest.Buffers, 4)
		for r := range bufs {
			bufs[r] = c.Buffers(r)
		}
		require.NoError(t, bad.Run(c.Call, bufs))
		for r := range bufs {
			wrong, _ := c.Check(r, bufs[r])
			require.Equal(t, map[bool]int{true: 1}[r == 2], wrong, "%v rank %d", c, r)
		}
	}
}

// Matrix.Cases walks a fixed order: functions, types, reductions, placement, counts.
func TestMatrixCases(t *testing.T) {
	m := colltest.Matrix{Funcs: []coll.Func{coll.AllReduce, coll.AllToAll}, Counts: []int{1, 2},
		TypeOps: map[coll.DataType][]coll.RedOp{coll.Float32: {coll.Sum, coll.PreMulSum}, coll.Int8: {coll.Max}}}
	var got []string
	for _, c := range m.Cases(3) {
		got = append(got, c.String())
	}
	require.Equal(t, []string{
		"allreduce/int8/max/count=1/n=3", "allreduce/int8/max/count=2/n=3",
		"allreduce/int8/max/count=1/inplace/n=3", "allreduce/int8/max/count=2/inplace/n=3",
		"allreduce/float/sum/count=1/n=3", "allreduce/float/sum/count=2/n=3",
		"allreduce/float/sum/count=1/inplace/n=3", "allreduce/float/sum/count=2/inplace/n=3",
		"allreduce/float/premulsum/count=1/n=3", "allreduce/float/premulsum/count=2/n=3",
		"allreduce/float/premulsum/count=1/inplace/n=3", "allreduce/float/premulsum/count=2/inplace/n=3",
		"alltoall/int8/count=1/n=3", "alltoall/int8/count=2/n=3",
		"alltoall/float/count=1/n=3", "alltoall/float/count=2/n=3",
	}, got)
	require.Equal(t, colltest.FloatScalar, m.Cases(3)[8].Scalar)
}
