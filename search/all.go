package search

import "fmt"

// AllOptions steer ComputeAll.
type AllOptions struct {
	Options
	// Nodes is the number of nodes of the communicator (each with this topology). 1 means a
	// single-node communicator; the caller builds the Topology without NETs then (FromSystem).
	Nodes int
	// CollNet says a CollNet (SHARP) plugin is present: the CollNet chain and direct graphs are
	// searched (NCCL_COLLNET_ENABLE=1 and collNetSupport).
	CollNet bool
	// NVLS says whether to search the NVLS graph: nil = NCCL's rule (an NVSwitch, every GPU
	// sm ≥ 90 and more than two GPUs; NCCL_NVLS_ENABLE left at its default); false =
	// NCCL_NVLS_ENABLE=0.
	NVLS *bool
	// Loaded holds graphs read from NCCL_GRAPH_FILE (--graph): a graph with the same id and at
	// least one channel replaces the search (ncclTopoCompute's NCCL_GRAPH_FILE branch).
	Loaded []*Graph
	// MinChannels/MaxChannels are NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS (0 = unset).
	MinChannels, MaxChannels int
}

// Result is what NCCL's init computes from the search (init.cc initTransportsRank, 2.28).
type Result struct {
	Ring          *Graph `json:"ring"`
	Tree          *Graph `json:"tree"`
	CollNetChain  *Graph `json:"collnet_chain"`
	CollNetDirect *Graph `json:"collnet_direct"`
	NVLS          *Graph `json:"nvls"`
	// NNodes is the number of nodes of the communicator.
	NNodes int `json:"nodes"`
	// SearchChannels is min(ring, tree) nChannels, before the postset doubling (comm->nChannels
	// before ncclTopoPostset).
	SearchChannels int `json:"search_channels"`
	// NChannels is the communicator's channel count after ncclTopoPostset's rules (connect.cc).
	NChannels int `json:"nchannels"`
	// NGPUs is the number of GPUs (ranks) of node 0; NRanks the number of ranks of all nodes.
	NGPUs  int `json:"gpus_per_node"`
	NRanks int `json:"nranks"`
	// MaxBw, TotalBw are the search's bounds ("=== System : maxBw … totalBw … ===").
	MaxBw   float64 `json:"max_bw"`
	TotalBw float64 `json:"total_bw"`
	// top is the topology the graphs were searched on (for printing and dumping).
	top *Topology
}

// Graphs returns the graphs in the order NCCL 2.28 dumps them: ring, tree, CollNet direct,
// CollNet chain, NVLS.
func (r *Result) Graphs() []*Graph {
	return []*Graph{r.Ring, r.Tree, r.CollNetDirect, r.CollNetChain, r.NVLS}
}

// Topology returns the topology the result was computed on.
func (r *Result) Topology() *Topology { return r.top }

// emptyGraph is a graph NCCL never searched (CollNet without a plugin, NVLS unsupported): every
// field zero, as NCCL dumps it (nchannels 0, typeintra LOC).
func emptyGraph(id int, p Pattern) *Graph { return &Graph{ID: id, Pattern: p} }

// ComputeAll runs the searches NCCL's init runs (ring; tree with ring's channel count; CollNet
// chain and direct when CollNet is on; NVLS when supported) on opts.Nodes nodes that all have
// this topology, reduces them across the nodes (init.cc AllGather3; identical nodes keep each graph) and
// applies ncclTopoPostset's channel rules.
func ComputeAll(top *Topology, opts AllOptions) (*Result, error) {
	nodes := opts.Nodes
	if nodes < 1 {
		nodes = 1
	}
	tops := make([]*Topology, nodes)
	for i := range tops {
		tops[i] = top
	}
	return ComputeNodes(tops, opts)
}

// ComputeNodes is ComputeAll for nodes that differ: tops[i] is node i's topology (its NETs
// included when there is more than one node). Every node searches its own graphs, then each
// graph takes AllGather3's minimum/maximum over the nodes; the channel orders printed and dumped are
// node 0's. opts.Nodes is ignored.
func ComputeNodes(tops []*Topology, opts AllOptions) (*Result, error) {
	if len(tops) == 0 {
		return nil, errorf("no node")
	}
	var per [][]*Graph
	res := &Result{NNodes: len(tops)}
	ccMin := 0
	// The search is deterministic, so nodes that share one *Topology (ComputeAll's N identical
	// nodes) share one search: a 1,024-node cluster searches once, not 1,024 times.
	searched := make(map[*Topology][]*Graph)
	for i, top := range tops {
		if top == nil {
			return nil, errorf("node %d: no topology", i)
		}
		if !top.finished {
			if err := top.finish(); err != nil {
				return nil, fmt.Errorf("node %d: %w", i, err)
			}
		}
		if len(tops) > 1 && top.NumNETs() == 0 {
			return nil, errorf("%d nodes but node %d's topology has no NET to reach the others", len(tops), i)
		}
		gs, ok := searched[top]
		if !ok {
			var err error
			if gs, err = nodeGraphs(top, opts); err != nil {
				return nil, fmt.Errorf("node %d: %w", i, err)
			}
			searched[top] = gs
		}
		per = append(per, gs)
		res.NRanks += top.NumGPUs()
		if i == 0 || top.ccMin() < ccMin {
			ccMin = top.ccMin()
		}
	}
	top := tops[0]
	res.NGPUs, res.MaxBw, res.TotalBw, res.top = top.NumGPUs(), top.MaxBw(), top.TotalBw(), top
	red := ReduceAcrossNodes(per)
	res.Ring, res.Tree, res.CollNetDirect, res.CollNetChain, res.NVLS = red[0], red[1], red[2], red[3], red[4]
	res.SearchChannels = min(res.Ring.NChannels, res.Tree.NChannels)
	res.NChannels = postsetChannels(res, opts, ccMin)
	return res, nil
}

// nodeGraphs is one node's share of init: its graphs in dump order (ring, tree, CollNet direct,
// CollNet chain, NVLS).
func nodeGraphs(top *Topology, opts AllOptions) ([]*Graph, error) {
	run := func(req Request) (*Graph, error) {
		for _, l := range opts.Loaded {
			if l.ID == req.ID && l.NChannels > 0 {
				if opts.crossNicParam() == 0 && l.CrossNic == 1 {
					continue // NCCL ignores a crossnic=1 graph when NCCL_CROSS_NIC=0
				}
				c := *l
				c.MinChannels, c.MaxChannels, c.CollNet = req.MinChannels, req.MaxChannels, req.CollNet
				return &c, nil
			}
		}
		return Compute(top, req, opts.Options)
	}
	ring, err := run(Request{ID: IDRing, Pattern: PatternRing, MinChannels: 1, MaxChannels: MaxChannels / 2})
	if err != nil {
		return nil, err
	}
	tree, err := run(Request{ID: IDTree, Pattern: PatternBalancedTree, MinChannels: ring.NChannels, MaxChannels: ring.NChannels})
	if err != nil {
		return nil, err
	}
	chain := emptyGraph(IDCollNetChain, PatternTree)
	direct := emptyGraph(IDCollNetDirect, PatternCollNetDirect)
	if opts.CollNet {
		if chain, err = run(Request{ID: IDCollNetChain, Pattern: PatternTree, CollNet: true, MinChannels: ring.NChannels, MaxChannels: ring.NChannels}); err != nil {
			return nil, err
		}
		if direct, err = run(Request{ID: IDCollNetDirect, Pattern: PatternCollNetDirect, CollNet: true, MinChannels: 1, MaxChannels: MaxChannels}); err != nil {
			return nil, err
		}
	}
	nvlsGraph := emptyGraph(IDNVLS, PatternNVLS)
	// NCCL's NVLS support (nvls.cc ncclNvlsInit): an NVSwitch, sm ≥ 90, more than two GPUs.
	nvls := top.HasNVSwitch() && top.ccMin() >= 90 && top.NumGPUs() > 2
	if opts.NVLS != nil {
		nvls = nvls && *opts.NVLS
	}
	if nvls {
		if nvlsGraph, err = run(Request{ID: IDNVLS, Pattern: PatternNVLS, MinChannels: 1, MaxChannels: MaxChannels}); err != nil {
			return nil, err
		}
	}
	return []*Graph{ring, tree, direct, chain, nvlsGraph}, nil
}

// ReduceAcrossNodes is init.cc's AllGather3 agreement (NCCL 2.28): per graph, nChannels,
// sameChannels, bwIntra and bwInter take the minimum over the nodes, typeIntra, typeInter and
// crossNic the maximum. Channel orders stay those of the first node (each node keeps its own in
// NCCL; the first is the one printed). perNode[i] lists node i's graphs in one fixed order.
func ReduceAcrossNodes(perNode [][]*Graph) []*Graph {
	if len(perNode) == 0 {
		return nil
	}
	out := make([]*Graph, len(perNode[0]))
	for a := range perNode[0] {
		c := *perNode[0][a]
		for _, gs := range perNode[1:] {
			o := gs[a]
			c.NChannels = min(c.NChannels, o.NChannels)
			c.SameChannels = min(c.SameChannels, o.SameChannels)
			c.BwIntra = min(c.BwIntra, o.BwIntra)
			c.BwInter = min(c.BwInter, o.BwInter)
			c.TypeIntra = max(c.TypeIntra, o.TypeIntra)
			c.TypeInter = max(c.TypeInter, o.TypeInter)
			c.CrossNic = max(c.CrossNic, o.CrossNic)
		}
		if len(c.Intra) > c.NChannels {
			c.Intra = c.Intra[:c.NChannels]
		}
		if len(c.Inter) > c.NChannels {
			c.Inter = c.Inter[:c.NChannels]
		}
		out[a] = &c
	}
	return out
}

// postsetChannels applies ncclTopoPostset's channel rules (NCCL 2.28 connect.cc); the doubling
// for device (UNPACK) networking is not modelled.
func postsetChannels(res *Result, opts AllOptions, ccMin int) int {
	n := res.SearchChannels
	// Every channel gets a twin (ring: same ring; tree: the second binary tree).
	n = min(MaxChannels, 2*n)
	nRanks := res.NRanks
	// CollNet (chain graph bwIntra > bwInter): more channels to saturate intra-node bandwidth,
	// except with one rank per node.
	if opts.CollNet && res.CollNetChain.BwIntra > res.CollNetChain.BwInter && nRanks > res.NNodes {
		n = min(MaxChannels, n+n/2)
	}
	// sm90+, multi-node, ring bwIntra > 45 and fewer than 16: 4 compute channels per search channel.
	if ccMin >= 90 && res.NNodes > 1 && res.Ring.BwIntra > 45.0 && n < 16 {
		n = 2 * n
	}
	// NCCL_MAX_NCHANNELS then NCCL_MIN_NCHANNELS (duplicating channels up to the minimum).
	maxC := MaxChannels
	if opts.MaxChannels > 0 {
		maxC = min(opts.MaxChannels, MaxChannels)
	}
	n = min(n, maxC)
	if opts.MinChannels > n {
		n = min(opts.MinChannels, MaxChannels)
	}
	return n
}

// ChannelSource returns, for each of the communicator's channels, the search channel it copies:
// the postset twins (c+n copies c) and the NCCL_MIN_NCHANNELS copies repeat the search channels
// in order, so comm channel c runs search channel c mod SearchChannels (connect.cc copyChannels).
func (r *Result) ChannelSource() []int {
	out := make([]int, r.NChannels)
	for c := range out {
		if r.SearchChannels > 0 {
			out[c] = c % r.SearchChannels
		}
	}
	return out
}
