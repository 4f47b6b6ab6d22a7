package planner

import "github.com/simccl/simccl/graph"

// Transports says how the GPUs of a node connect to each other and to their NICs, as NCCL's
// transport selection decides at connection time (NCCL 2.28 p2p.cc p2pCanConnect/p2pUseRead,
// net.cc with ncclTopoCheckGdr): peer-to-peer or through host memory, read or write mode, and
// GPUDirect RDMA. Indices are local ranks (GPU order of the node).
type Transports struct {
	// P2P[a][b]: GPU a reaches GPU b by peer access (NVLink or a PCIe switch); otherwise through
	// shared host memory (SHM).
	P2P [][]bool
	// Read[a][b]: the P2P connection uses read mode (both GPUs sm80 and an NVLink path).
	Read [][]bool
	// GDR[g]: GPU g uses GPUDirect RDMA with a NIC.
	GDR []bool
}

func newTransports(sys *graph.System) (*Transports, error) {
	gpus := sys.GPUs()
	G := len(gpus)
	t := &Transports{P2P: make([][]bool, G), Read: make([][]bool, G), GDR: make([]bool, G)}
	for a, ga := range gpus {
		t.P2P[a], t.Read[a] = make([]bool, G), make([]bool, G)
		for b, gb := range gpus {
			p := sys.Path(ga, gb)
			if a == b || p == nil {
				continue
			}
			// After path computation a pair that may not use P2P is routed through its CPU (PHB
			// or worse); P2P stays on NVLink and PCIe switches (NCCL 2.28 ncclTopoCheckP2p).
			t.P2P[a][b] = p.Type <= graph.PathPXB
			// P2P read: both GPUs sm80 and an NVLink path (NCCL 2.28 p2pUseRead).
			t.Read[a][b] = p.Type == graph.PathNVL && ga.GPU.SM == 80 && gb.GPU.SM == 80
		}
		// GPUDirect RDMA with a NIC close enough (NCCL 2.28 ncclTopoCheckGdr, simplified: the GPU
		// and NET gdr flags and a PCIe-switch or C2C distance; NCCL_NET_GDR_LEVEL and the PXN
		// rewrites are not applied).
		for _, n := range sys.NETs() {
			p := sys.Path(ga, n)
			if p != nil && ga.GPU.GDR && n.NET.GDR && (p.Type <= graph.PathPXB || p.Type == graph.PathP2C) {
				t.GDR[a] = true
			}
		}
	}
	return t, nil
}
