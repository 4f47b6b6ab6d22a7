package topo

import (
	"fmt"

	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/topo/ncclxml"
)

// NewCluster builds a cluster of nodes copies of the topology in doc. opt.NRanks is set to the
// cluster's size, so that with nodes > 1 the node is inter-node (maxBw is the GPU→NET
// bandwidth, as NCCL prints it on a multi-node job).
func NewCluster(doc *ncclxml.Document, nodes int, opt graph.Options) (*graph.Cluster, error) {
	if nodes < 1 || nodes > graph.MaxClusterNodes {
		return nil, fmt.Errorf("graph: %d nodes: want 1..%d", nodes, graph.MaxClusterNodes)
	}
	probe := opt
	probe.NRanks = 0
	one, err := FromXML(doc, probe)
	if err != nil {
		return nil, err
	}
	ppn := len(one.Nodes[graph.GPU])
	for i, g := range one.Nodes[graph.GPU] {
		if g.GPU.Rank != i {
			// Ranks in the file must be 0..ppn-1 to be replicated as r = node*ppn + local.
			return nil, fmt.Errorf("%s: GPU ranks must be 0..%d for a cluster (found rank %d at GPU index %d)", doc.Name, ppn-1, g.GPU.Rank, i)
		}
	}
	if nodes == 1 {
		return &graph.Cluster{Node: one, Nodes: 1, PPN: ppn, NRanks: ppn}, nil
	}
	opt.NRanks = nodes * ppn
	s, err := FromXML(doc, opt)
	if err != nil {
		return nil, err
	}
	if s.Inter && len(s.Nodes[graph.NET]) == 0 {
		return nil, fmt.Errorf("%s: %d nodes but the node topology has no NET: nodes cannot reach each other", doc.Name, nodes)
	}
	return &graph.Cluster{Node: s, Nodes: nodes, PPN: ppn, NRanks: nodes * ppn}, nil
}
