package graph

import "fmt"

// MaxClusterNodes bounds the nodes of a Cluster (topo.NewCluster); far above any machine
// simulated (100,000 GPUs at 8 per node is 12,500 nodes).
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
