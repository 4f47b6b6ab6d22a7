package coll

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func bitsOf(dt DataType, vs ...float64) []uint64 {
	out := make([]uint64, len(vs))
	for i, v := range vs {
		out[i] = dt.FromFloat(v)
	}
	return out
}

func TestReduceRefIntegers(t *testing.T) {
	cases := []struct {
		dt     DataType
		op     RedOp
		scalar float64
		in     []float64
		want   float64
	}{
		{Int8, Sum, 0, []float64{100, 100}, -56},  // wraps
		{Uint8, Sum, 0, []float64{200, 100}, 44},  // wraps
		{Int8, Prod, 0, []float64{16, 16, 3}, 0},  // 768 mod 256
		{Int8, Max, 0, []float64{-3, -100, 5}, 5}, // signed compare
		{Uint32, Max, 0, []float64{1, 4294967295, 7}, 4294967295},
		{Int32, Min, 0, []float64{-1, 2}, -1},
		{Int8, Avg, 0, []float64{-7, 0, 0}, -2},       // truncates toward zero
		{Int8, Avg, 0, []float64{100, 100, 1}, -18},   // the wrapped sum (−55) divided
		{Uint8, Avg, 0, []float64{200, 100, 1}, 15},   // (301 mod 256) / 3
		{Int32, PreMulSum, 3.9, []float64{1, -2}, -3}, // scalar truncated to 3
		{Uint8, PreMulSum, 3, []float64{100, 1}, 47},  // 300 mod 256 + 3
	}
	for _, c := range cases {
		e := ReduceRef(c.dt, c.op, c.scalar, bitsOf(c.dt, c.in...))
		require.False(t, e.Approx)
		require.Equal(t, c.want, c.dt.Float(e.Bits), "%v %v %v", c.dt, c.op, c.in)
		require.True(t, e.Holds(c.dt, c.dt.FromFloat(c.want)))
	}
	e := ReduceRef(Int64, Sum, 0, []uint64{math.MaxInt64, 1})
	require.Equal(t, int64(math.MinInt64), int64(e.Bits))
	e = ReduceRef(Uint64, Prod, 0, []uint64{1 << 63, 2})
	require.Equal(t, uint64(0), e.Bits)
}

// Float results are exact exactly when no fold order can round, otherwise within
// n·(ε·M + δ).
func TestReduceRefFloats(t *testing.T) {
	cases := []struct {
		dt     DataType
		op     RedOp
		scalar float64
		in     []float64
		want   float64
		tol    float64
	}{
		{Float8e4m3, Sum, 0, []float64{2, 2, 2, 2, 2, 2, 2, 2}, 16, 0},                          // 16 = 2^4: exact
		{Float8e4m3, Sum, 0, []float64{2, 2, 2, 2, 2, 2, 2, 2, 1}, 17, 9 * (0.125*17 + 0x1p-9)}, // 17 needs 5 bits
		{Float16, Sum, 0, []float64{1.25, -3.5, 4}, 1.75, 0},
		{Float16, Avg, 0, []float64{1, 2, 3, 2}, 2, 0}, // 1/4 exact
		{Float16, Avg, 0, []float64{3, 3, 3}, 3 * 3 * 0.333251953125, 3 * (0x1p-10*3*3*0.333251953125 + 0x1p-24)},
		{Float32, PreMulSum, 0.75, []float64{1, 2}, 2.25, 0},
		{Bfloat16, PreMulSum, 0.1, []float64{1}, 0.10009765625, 0},                                     // 0.1 rounds to the type first
		{Bfloat16, PreMulSum, 0.1, []float64{3}, 0.30029296875, 1 * (0x1p-7*0.30029296875 + 0x1p-133)}, // 3·s needs 9 bits
		{Float32, Prod, 0, []float64{-2, 0.5, 3}, -3, 0},
		{Float8e5m2, Prod, 0, []float64{3, 3}, 9, 2 * (0.25*9 + 0x1p-16*9)}, // 9 = 1001b needs 4 bits, e5m2 has 3
		{Float8e5m2, Max, 0, []float64{-1, 0.5, 0.25}, 0.5, 0},
		{Float64, Min, 0, []float64{-1, 0.5, -7}, -7, 0},
	}
	for _, c := range cases {
		e := ReduceRef(c.dt, c.op, c.scalar, bitsOf(c.dt, c.in...))
		require.True(t, e.Approx)
		require.InDelta(t, c.want, e.Value, 1e-12, "%v %v %v", c.dt, c.op, c.in)
		require.InDelta(t, c.tol, e.Tol, c.tol*1e-9, "%v %v %v: tolerance", c.dt, c.op, c.in)
	}
	e := ReduceRef(Float16, Sum, 0, bitsOf(Float16, 1, 2))
	require.True(t, e.Holds(Float16, Float16.FromFloat(3)))
	require.False(t, e.Holds(Float16, Float16.FromFloat(3.001)))
	require.False(t, e.Holds(Float16, uint64(FormatHalf.NaN())))
}

func TestReferenceLayout(t *testing.T) {
	const n, cnt = 3, 2
	dt := Int32
	send := make([][]byte, n)
	for r := range send {
		send[r] = make([]byte, n*cnt*4)
		for i := 0; i < n*cnt; i++ {
			dt.SetValue(send[r], i, float64(10*r+i))
		}
	}
	val := func(ref *Reference, r int, i int64) (float64, bool) {
		e, ok := ref.Want(r, i)
		return dt.Float(e.Bits), ok
	}
	for _, c := range []struct {
		f       Func
		r       int
		i       int64
		want    float64
		written bool
	}{
		{AllReduce, 2, 1, 1 + 11 + 21, true},
		{Reduce, 1, 0, 0 + 10 + 20, true}, {Reduce, 0, 0, 0, false},
		{ReduceScatter, 2, 1, 5 + 15 + 25, true},
		{Broadcast, 0, 1, 11, true},
		{AllGather, 1, 5, 21, true},
		{AllToAll, 1, 4, 22, true}, // rank 1's block 2 is rank 2's block 1 (its element 2)
		{SendRecv, 0, 1, 21, true}, // rank 0 receives from rank 2
	} {
		ref, err := NewReference(&Plan{Func: c.f, NRanks: n, Count: cnt, DataType: dt, Op: Sum, Root: 1}, 0, send)
		require.NoError(t, err)
		got, ok := val(ref, c.r, c.i)
		require.Equal(t, c.written, ok, "%v rank %d element %d", c.f, c.r, c.i)
		if ok {
			require.Equal(t, c.want, got, "%v rank %d element %d", c.f, c.r, c.i)
		}
	}
	_, err := NewReference(&Plan{Func: AllGather, NRanks: n, Count: 100, DataType: dt}, 0, send)
	require.Error(t, err)
}
