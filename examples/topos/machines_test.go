package topos_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/search"
)

// The machines the examples model, checked through the planner: what each file's comment says
// NCCL's rules give (link bandwidths, path types, NIC choice, the search's shape).

func machine(t *testing.T, name string, nodes int) *planner.Planner {
	t.Helper()
	n, doc, err := planner.LoadTopology(name, planner.Settings{})
	require.NoError(t, err)
	p, err := planner.New(planner.Machine{Name: n, Doc: doc, Nodes: nodes, SearchOnly: true})
	require.NoError(t, err)
	return p
}

// gpuPath is the path from GPU rank a to GPU rank b; netPath from GPU rank to NET index net.
func gpuPath(t *testing.T, s *graph.System, a, b int) *graph.Path {
	t.Helper()
	p := s.Path(s.GPUByRank(a), s.GPUByRank(b))
	require.NotNil(t, p, "no path GPU %d -> GPU %d", a, b)
	return p
}

func netPath(t *testing.T, s *graph.System, rank, net int) *graph.Path {
	t.Helper()
	p := s.Path(s.GPUByRank(rank), s.NETs()[net])
	require.NotNil(t, p, "no path GPU %d -> NET %d", rank, net)
	return p
}

// sysLink is the bandwidth of the SYS link between the first two CPUs.
func sysLink(t *testing.T, s *graph.System) float64 {
	t.Helper()
	cpus := s.Nodes[graph.CPU]
	require.GreaterOrEqual(t, len(cpus), 2)
	for _, l := range cpus[0].Links {
		if l.Remote == cpus[1] && l.Type == graph.LinkSYS {
			return l.BW
		}
	}
	t.Fatalf("no SYS link between CPU 0 and CPU 1")
	return 0
}

func graphLine(g *search.Graph) string {
	return fmt.Sprintf("pattern %d nChannels %d bw %g/%g type %s/%s intra %v inter %v",
		g.Pattern, g.NChannels, g.BwIntra, g.BwInter, g.TypeIntra, g.TypeInter, g.Intra, g.Inter)
}

// DGX H200 differs from DGX H100 only in the GPU's PCI ids: same sm, same links, so NCCL's
// model (and simccl's) is the same, at one node and across nodes.
func TestDGXH200IsDGXH100ToTheModel(t *testing.T) {
	for _, nodes := range []int{1, 2} {
		h100, h200 := machine(t, "dgx-h100", nodes), machine(t, "dgx-h200", nodes)
		for i, g := range h200.Search.Graphs() {
			require.Equal(t, graphLine(h100.Search.Graphs()[i]), graphLine(g), "nodes %d graph %d", nodes, i)
		}
		s := h200.System
		require.Len(t, s.GPUs(), 8)
		for _, g := range s.GPUs() {
			require.Equal(t, 90, g.GPU.SM)
		}
		p := gpuPath(t, s, 0, 7)
		require.Equal(t, graph.PathNVL, p.Type)
		require.InDelta(t, 18*20.6, p.BW, 1e-3) // SM90_NVLINK_BW × 18
	}
}

// DGX B200: NVLink5 at NCCL's sm100 rate, Emerald Rapids sockets, two GPUs and two NICs per
// switch with each GPU on its own NIC.
func TestDGXB200(t *testing.T) {
	p := machine(t, "dgx-b200", 2)
	s := p.System
	for _, g := range s.GPUs() {
		require.Equal(t, 100, g.GPU.SM)
	}
	nv := gpuPath(t, s, 0, 5)
	require.Equal(t, graph.PathNVL, nv.Type)
	require.InDelta(t, 18*40.1, nv.BW, 1e-3)    // SM100_NVLINK_BW × 18: twice Hopper's 18 × 20.6, nearly
	require.InDelta(t, 40, sysLink(t, s), 1e-9) // ERP_QPI_BW (Intel family 6 model ≥ 0xCF)
	for _, c := range []struct {
		rank, net int
		typ       graph.PathType
	}{{0, 0, graph.PathPIX}, {0, 1, graph.PathPIX}, {1, 0, graph.PathPIX}, {0, 2, graph.PathPXN}, {0, 7, graph.PathPXN}} {
		np := netPath(t, s, c.rank, c.net)
		require.Equal(t, c.typ, np.Type, "GPU %d -> NET %d", c.rank, c.net)
		require.InDelta(t, 48, np.BW, 1e-9, "GPU %d -> NET %d: the x16 Gen5 link caps the 50 GB/s NIC", c.rank, c.net)
	}
	top := p.Search.Topology()
	used := map[int64]bool{}
	for r := 0; r < 8; r++ {
		id, dev, err := top.LocalNet(r, 0)
		require.NoError(t, err)
		require.Equal(t, r, dev, "rank %d uses NET dev %d", r, dev)
		used[id] = true
	}
	require.Len(t, used, 8)
	require.Equal(t, search.PathNVL, p.Search.Ring.TypeIntra)
	require.Equal(t, search.PathPIX, p.Search.Ring.TypeInter)
}

// Two NICs per GPU: 16 NETs, both of a GPU's NICs are its local NICs (it alternates between them
// by channel), and the inter-node ring spreads over all 16.
func TestHGXH100With16NICs(t *testing.T) {
	p := machine(t, "hgx-h100-16nic", 2)
	s := p.System
	require.Len(t, s.NETs(), 16)
	for r := 0; r < 8; r++ {
		for k := 0; k < 2; k++ {
			np := netPath(t, s, r, 2*r+k)
			require.Equal(t, graph.PathPIX, np.Type)
			require.InDelta(t, 25, np.BW, 1e-9) // 200000 Mb/s / 8000
		}
		require.Equal(t, graph.PathPXN, netPath(t, s, r, (2*r+2)%16).Type)
	}
	top := p.Search.Topology()
	for r := 0; r < 8; r++ {
		_, d0, err := top.LocalNet(r, 0)
		require.NoError(t, err)
		_, d1, err := top.LocalNet(r, 1)
		require.NoError(t, err)
		require.ElementsMatch(t, []int{2 * r, 2*r + 1}, []int{d0, d1}, "rank %d's NICs on channels 0 and 1", r)
	}
	ring := p.Search.Ring
	require.Equal(t, search.PathPIX, ring.TypeInter)
	nets := map[int64]bool{}
	for _, in := range ring.Inter {
		nets[in[0]], nets[in[1]] = true, true
	}
	require.Len(t, nets, 16, "the inter-node ring uses every NIC")
	require.LessOrEqual(t, ring.BwInter, 25.0, "a channel cannot go faster than one 200 Gb/s NIC")
}

// GB200 NVL72 as NCCL sees it with MNNVL: one node of 72 GPUs on 18 hosts, every GPU pair NVL
// through the one NVS node, CPUs linked only within a tray.
func TestGB200NVL72(t *testing.T) {
	p := machine(t, "gb200-nvl72", 1)
	s := p.System
	require.Len(t, s.GPUs(), 72)
	require.Len(t, s.HostHashes, 18)
	require.Len(t, s.Nodes[graph.NVS], 1)
	require.Len(t, s.Nodes[graph.CPU], 36)
	for _, b := range []int{1, 4, 35, 71} {
		nv := gpuPath(t, s, 0, b)
		require.Equal(t, graph.PathNVL, nv.Type, "GPU 0 -> GPU %d", b)
		require.InDelta(t, 18*40.1, nv.BW, 1e-3)
	}
	for _, c := range s.Nodes[graph.CPU] {
		for _, l := range c.Links {
			if l.Type == graph.LinkSYS {
				require.Equal(t, c.SystemID(), l.Remote.SystemID(), "SYS link between trays")
			}
		}
	}
	require.Equal(t, 72, p.Search.NGPUs)
	require.Equal(t, 1, p.Search.NNodes)
	ring := p.Search.Ring
	require.Equal(t, search.PathNVL, ring.TypeIntra)
	for _, ch := range ring.Intra {
		require.Len(t, ch, 72)
	}
}
