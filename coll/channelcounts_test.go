package coll

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// ChannelCounts gives each channel the elements Compile walks on it: rank 0's scatter lane (lane
// 0 of the NVLS schedules) sends each of its channel's elements to the switch exactly once.
func TestChannelCountsMatchesCompile(t *testing.T) {
	for _, p := range []Plan{
		{Func: AllReduce, Algo: NVLS, NRanks: 8, NNodes: 1, NChannels: 5, Count: 100003, DataType: Float32},
		{Func: AllReduce, Algo: NVLS, NRanks: 4, NNodes: 1, NChannels: 3, Count: 7, DataType: Int8},
		{Func: AllReduce, Algo: NVLSTree, NRanks: 8, NNodes: 2, NChannels: 4, Count: 1 << 16, DataType: Float16},
		{Func: AllGather, Algo: NVLS, NRanks: 4, NNodes: 1, NChannels: 3, Count: 999, DataType: Float64},
		{Func: AllReduce, Algo: NVLS, NRanks: 4, NNodes: 1, NChannels: 3, Count: 1000, DataType: Float32, Parts: []int64{500, 300, 200}},
	} {
		p.Proto, p.Op = Simple, Sum
		s, err := Compile(p)
		require.NoError(t, err)
		cnts := p.ChannelCounts()
		require.Len(t, cnts, p.NChannels)
		var sum int64
		for c, want := range cnts {
			var got int64
			for _, st := range s.Programs[c].Steps { // rank 0, channel c
				if st.Lane == 0 && len(st.Send) > 0 {
					got += st.Bytes
				}
			}
			require.Equal(t, want*int64(p.DataType.Size()), got, "%v %v channel %d", p.Algo, p.Func, c)
			sum += want
		}
		require.Equal(t, p.Count, sum)
		if p.Parts != nil {
			cnts[0]++
			require.Equal(t, int64(500), p.Parts[0], "ChannelCounts must not alias Parts")
		}
	}
}
