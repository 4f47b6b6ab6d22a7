package tuning

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/coll"
)

// nvlsComm is a Hopper communicator of nodes × 8 ranks whose NVLS graph has 16 channels of
// bwIntra 20 and bwInter 30 GB/s (numbers picked to tell every term of the rules apart).
func nvlsComm(nodes int) *Comm {
	c := workedExample()
	c.NRanks, c.NNodes = 8*nodes, nodes
	c.NVLSSupport, c.HasNVSwitch = true, true
	c.Graphs[GraphNVLS] = GraphInfo{Pattern: PatternNVLS, NChannels: 16, BwIntra: 20, BwInter: 30, TypeIntra: PathNVL, TypeInter: PathPIX}
	if nodes > 1 {
		for _, g := range []int{GraphRing, GraphTree} {
			c.Graphs[g].TypeInter = PathPIX
		}
	}
	return c
}

// TestNVLSBandwidth226 holds NCCL 2.26's NVLS and NVLSTree bandwidth (≤2.27 ncclTopoTuneModel):
// NVLS AllReduce nCh × min(bwIntra, bwInter) and AllGather nCh × min(bwIntra × (ppn−1)/ppn, 0.9 ×
// bwInter); NVLSTree nCh × min(bwIntra, bwInter) on 2 nodes and min(bwIntra, bwInter/2) on more;
// each × 5/6 to an algorithm bandwidth. 2.28's rule (nvlsEfficiency, nRanks/nsteps, the NVLSTree
// ceiling) gives other figures on the same graph.
func TestNVLSBandwidth226(t *testing.T) {
	cases := []struct {
		name  string
		nodes int
		f     coll.Func
		a     coll.Algo
		want  float64 // GB/s, algorithm bandwidth under 2.26
	}{
		{"NVLS AllReduce, 1 node", 1, coll.AllReduce, coll.NVLS, 16 * 20 * 5.0 / 6},
		{"NVLS AllGather, 1 node", 1, coll.AllGather, coll.NVLS, 16 * 20 * 7.0 / 8},
		{"NVLSTree AllReduce, 2 nodes", 2, coll.AllReduce, coll.NVLSTree, 16 * 20 * 5.0 / 6},
		{"NVLSTree AllReduce, 4 nodes", 4, coll.AllReduce, coll.NVLSTree, 16 * 15 * 5.0 / 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb, err := Model(nvlsComm(c.nodes), &Config{Version: "2.26"})
			require.NoError(t, err)
			assert.InDelta(t, c.want, float64(tb.Bw[c.f][c.a][coll.Simple]), 0.01)
			t228, err := Model(nvlsComm(c.nodes), &Config{Version: "2.28"})
			require.NoError(t, err)
			assert.NotEqual(t, tb.Bw[c.f][c.a][coll.Simple], t228.Bw[c.f][c.a][coll.Simple], "2.28's rule gives another figure")
		})
	}
}
