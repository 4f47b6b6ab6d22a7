package coll

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// An NVLSTree schedule compiled with the upper half of its channels on a second builder (fork,
// join) is the one a single pass compiles: the same programs, connections and numbers.
func TestCompileForkSame(t *testing.T) {
	base := nvlsTreeBenchPlan
	odd := base
	odd.NChannels, odd.Count = 3, base.Count+12344
	lo := base
	lo.ChannelLo, lo.NChannels, lo.Count = 2, 4, base.Count/3
	star := Plan{Func: AllReduce, Algo: NVLSTree, Proto: Simple, NRanks: 8, NNodes: 4, Count: 1 << 16, NChannels: 2,
		NodeTrees: starTrees, DataType: Float32}
	ring := Plan{Func: AllReduce, Algo: Ring, Proto: Simple, NRanks: 128, NNodes: 16, NChannels: 2, Count: 1 << 16, DataType: Float32}
	for i, plans := range [][]Plan{{base}, {odd}, {lo}, {star}, {ring, base}} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var got []*Schedule
			for _, fork := range []bool{false, true} {
				old := forkChannels
				forkChannels = func(int64) bool { return fork }
				s, err := Compile(plans...)
				forkChannels = old
				require.NoError(t, err)
				got = append(got, s)
			}
			require.Equal(t, got[0], got[1])
		})
	}
}
