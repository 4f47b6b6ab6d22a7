package coll

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// NVLS schedules with fewer heads than ranks on a node (NCCL's nvls.nHeads = the NVLS graph's
// channels, 32 on a 72-GPU node): the result is the collective's, the bytes moved are the same as
// with every rank a head, each loop covers one chunk per head, and only the heads receive the
// switch's reduction and talk to other nodes.
func TestNVLSHeadsSubset(t *testing.T) {
	cases := []struct {
		algo   Algo
		nodes  int
		ppn    int
		heads  []int
		counts []int64
	}{
		{NVLS, 1, 6, []int{4, 1}, []int64{1, 7, 131, 1003}},
		{NVLS, 1, 5, []int{0, 1, 2}, []int64{1003}},
		{NVLSTree, 3, 4, []int{2, 0, 3}, []int64{1, 131, 1003}},
		{NVLSTree, 2, 6, []int{5}, []int64{1003}},
		{NVLS, 2, 4, []int{3, 1}, []int64{131, 1003}}, // across nodes: with CollNet
	}
	for _, tc := range cases {
		for _, count := range tc.counts {
			for nch := 1; nch <= 3; nch++ {
				n := tc.nodes * tc.ppn
				p := Plan{Func: AllReduce, Algo: tc.algo, Proto: Simple, NRanks: n, NNodes: tc.nodes, Count: count,
					DataType: Float32, Op: Sum, NChannels: nch, ChunkSize: 48, NVLSHeads: tc.heads}
				p.BuffSize[Simple] = 8 * 512
				name := fmt.Sprintf("%v/nodes%d/ppn%d/heads%v/c%d/ch%d", tc.algo, tc.nodes, tc.ppn, tc.heads, count, nch)
				s, st := runPlan(t, p, ExecOptions{})
				_, total := expectedSent(&p, s)
				var sum int64
				for _, rs := range st.Ranks[:n] {
					sum += rs.SentBytes
				}
				require.Equal(t, total, sum, "%s: bytes the ranks sent", name)
				head := map[int]bool{}
				for _, h := range tc.heads {
					head[h] = true
				}
				for _, pr := range s.Programs {
					if pr.Rank >= n {
						continue
					}
					for _, st := range pr.Steps {
						if st.Lane == 0 || (tc.algo == NVLS && tc.nodes == 1 && st.Lane == 2) || st.Lane == 3 {
							continue // scatter and gather: every rank
						}
						require.True(t, head[pr.Rank%tc.ppn], "%s: rank %d (not a head) runs a head's step on lane %d", name, pr.Rank, st.Lane)
					}
				}
				// One chunk per head a loop: chunk numbers run over the heads.
				most := int32(-1)
				for _, st := range s.Programs[0].Steps {
					most = max(most, st.Chunk)
				}
				loopElems := int64(len(tc.heads)) * 12 // 48-byte chunks of float32
				parts := (count + int64(nch) - 1) / int64(nch)
				loops := (parts + loopElems - 1) / loopElems
				require.LessOrEqual(t, int64(most)+1, loops*int64(len(tc.heads)), "%s: chunks of channel 0", name)
			}
		}
	}
}

func TestNVLSHeadsChecked(t *testing.T) {
	base := Plan{Func: AllReduce, Algo: NVLS, Proto: Simple, NRanks: 4, Count: 64, DataType: Float32, NChannels: 1}
	for _, bad := range []struct {
		heads []int
		algo  Algo
	}{{[]int{0, 0}, NVLS}, {[]int{4}, NVLS}, {[]int{-1}, NVLS}, {[]int{1}, Ring}} {
		p := base
		p.NVLSHeads, p.Algo = bad.heads, bad.algo
		_, err := Compile(p)
		require.Error(t, err, "heads %v, %v", bad.heads, bad.algo)
	}
}
