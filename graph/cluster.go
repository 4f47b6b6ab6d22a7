package graph

import (
	"fmt"

	"github.com/simccl/simccl/topo/ncclxml"
)

// MaxClusterNodes bounds NewCluster; far above any machine simulated (100,000 GPUs at 8 per
// node is 12,500 nodes).
const MaxClusterNodes = 1 << 20

// Cluster is N identical nodes built from one node topology. Rank r lives on node r/PPN as
// local rank r%PPN. Each node sees what NCCL sees from inside it: its own System (GPUs, NICs,
// paths), with every other node reachable only through its NETs. The fabric between nodes is
// not modelled here (it belongs to the simulator).
type Cluster struct {
	// Node is the system of one node as its ranks see it, with the node's local ranks
	// 0..PPN-1; every node is identical, so one System serves them all.
	Node *System
	// Nodes is the number of nodes, PPN the ranks (GPUs) per node, NRanks = Nodes × PPN.
	Nodes, PPN, NRanks int
}

// NewCluster builds a cluster of nodes copies of the topology in doc. opt.NRanks is set to the
// cluster's size, so that with nodes > 1 the node is inter-node (maxBw is the GPU→NET
// bandwidth, as NCCL prints it on a multi-node job).
func NewCluster(doc *ncclxml.Document, nodes int, opt Options) (*Cluster, error) {
	if nodes < 1 || nodes > MaxClusterNodes {
		return nil, fmt.Errorf("graph: %d nodes: want 1..%d", nodes, MaxClusterNodes)
	}
	probe := opt
	probe.NRanks = 0
	one, err := FromXML(doc, probe)
	if err != nil {
		return nil, err
	}
	ppn := len(one.Nodes[GPU])
	for i, g := range one.Nodes[GPU] {
		if g.GPU.Rank != i {
			// Ranks in the file must be 0..ppn-1 to be replicated as r = node*ppn + local.
			return nil, fmt.Errorf("%s: GPU ranks must be 0..%d for a cluster (found rank %d at GPU index %d)", doc.Name, ppn-1, g.GPU.Rank, i)
		}
	}
	if nodes == 1 {
		return &Cluster{Node: one, Nodes: 1, PPN: ppn, NRanks: ppn}, nil
	}
	opt.NRanks = nodes * ppn
	s, err := FromXML(doc, opt)
	if err != nil {
		return nil, err
	}
	if s.Inter && len(s.Nodes[NET]) == 0 {
		return nil, fmt.Errorf("%s: %d nodes but the node topology has no NET: nodes cannot reach each other", doc.Name, nodes)
	}
	return &Cluster{Node: s, Nodes: nodes, PPN: ppn, NRanks: nodes * ppn}, nil
}

// NodeOf returns the node of a rank and its local rank there.
func (c *Cluster) NodeOf(rank int) (node, local int, err error) {
	if rank < 0 || rank >= c.NRanks {
		return 0, 0, fmt.Errorf("graph: rank %d out of 0..%d", rank, c.NRanks-1)
	}
	return rank / c.PPN, rank % c.PPN, nil
}

// Rank returns the global rank of local rank l on node n.
func (c *Cluster) Rank(n, l int) int { return n*c.PPN + l }

// GPU returns the GPU node (in c.Node) of a global rank.
func (c *Cluster) GPU(rank int) (*Node, error) {
	_, l, err := c.NodeOf(rank)
	if err != nil {
		return nil, err
	}
	return c.Node.GPUByRank(l), nil
}
