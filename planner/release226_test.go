package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/graph"
)

// TestRelease226GB200: under NCCL 2.26's rules a GB200 NVL72 rack has no P2C path (added in
// 2.27.3): its GPUs reach their NICs through the Grace CPU as PHB, so GPUDirect RDMA is off by
// default (the level is PXB) and the graphs' inter-node type is PHB; its NVLinks are 40.0 GB/s
// (40.1 from 2.28). 2.28 on the same rack: P2C, GDR on. And the ≤2.27 NVLSTree bandwidth
// (min(bwIntra, bwInter/2) on more than 2 nodes, × 5/6) puts Tree ahead of NVLSTree on 20 racks
// at 1 GiB, where 2.28 runs NVLSTree.
func TestRelease226GB200(t *testing.T) {
	for _, c := range []struct {
		release   string
		gdr       bool
		typeInter graph.PathType
		nvl       float64
		algo20    coll.Algo
	}{
		{"2.26", false, graph.PathPHB, 40, coll.Tree},
		{"2.28", true, graph.PathP2C, float64(float32(40.1)), coll.NVLSTree},
	} {
		t.Run(c.release, func(t *testing.T) {
			p := newTestPlanner(t, "gb200-nvl72", 2, Settings{Release: c.release})
			assert.Equal(t, c.gdr, p.Transports.GDR[0], "GPUDirect RDMA of GPU 0")
			assert.Equal(t, c.typeInter, graph.PathType(int(p.Search.Ring.TypeInter)), "ring graph's inter-node type")
			gpus := p.System.Nodes[graph.GPU]
			require.NotEmpty(t, gpus)
			assert.InDelta(t, c.nvl, p.System.Version.NVLinkBw(gpus[0].GPU.SM), 1e-9)
			p20 := newTestPlanner(t, "gb200-nvl72", 20, Settings{Release: c.release})
			d, err := p20.Decide(coll.Call{Func: coll.AllReduce, Count: 1 << 28, DataType: coll.Float32, Op: coll.Sum})
			require.NoError(t, err)
			assert.Equal(t, c.algo20, d.Plan.Algo, "20 racks, 1 GiB")
		})
	}
}
