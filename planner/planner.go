package planner

import (
	"errors"
	"fmt"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/search"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/topo/ncclxml"
	"github.com/simccl/simccl/topo/partial"
	"github.com/simccl/simccl/tuning"
)

// MaxRanks bounds a communicator: nodes × GPUs per node, checked by New once the node's system is
// built and before anything of the communicator's size is (rings and trees over every rank, the
// simulator's links). 131,072 ranks is above the 100,000 GPUs the largest machines simccl is meant
// to simulate have; without a bound, `simccl plan --nodes 1048576` on an 8-GPU node ran out of
// memory after allocating several GB.
const MaxRanks = 1 << 17

// MaxNodes bounds the node count of a machine: MaxRanks nodes of one GPU.
const MaxNodes = MaxRanks

// ErrTooManyRanks is wrapped by New's error for a machine of more than MaxRanks ranks.
var ErrTooManyRanks = errors.New("more ranks than simccl simulates")

// ErrTooFewGPUs is wrapped by New's error where Machine.GPUs (simccl's --gpus) asks for more GPUs
// than the node has.
var ErrTooFewGPUs = errors.New("--gpus")

// Machine describes a communicator: Nodes copies of one node topology, and NCCL's settings.
type Machine struct {
	Name     string            // what errors and reports call the topology
	Doc      *ncclxml.Document // the node topology (LoadTopology)
	Nodes    int               // nodes of the communicator (≥ 1)
	Settings Settings
	// GPUs, when > 0, keeps the first GPUs (ranks 0..GPUs−1) of each node in the communicator.
	GPUs int
	// SearchOnly stops after the channel search (no tuning model, rings or trees): what the
	// search command needs, for releases whose search rules are known but not their tuning.
	SearchOnly bool
}

// Planner is one communicator as NCCL builds it, and NCCL's decisions for its calls. It is
// immutable once built and safe for concurrent use.
type Planner struct {
	Name     string
	Nodes    int // nodes of the communicator
	PPN      int // ranks (GPUs) per node
	Settings Settings
	// System is a node's system as its ranks see it (its NETs kept when Nodes > 1).
	System *graph.System
	// Search is the channel search of the communicator (every graph NCCL searches).
	Search *search.Result
	// Table is the tuning model; Comm the communicator parameters it was built from.
	Table *tuning.Table
	// Rings and Trees are, per channel of the communicator, the ring over all ranks and the
	// tree links (channels repeat the searched ones as NCCL's duplication does).
	Rings [][]int
	Trees []coll.ChannelTree
	// Transports of every pair of a node's GPUs and their NICs.
	Transports *Transports
}

// New builds the communicator of m: the system (twice when there are several nodes, so that the
// node keeps its NETs, as NCCL's ncclTopoTrimSystem does for an inter-node communicator), the
// search over m.Nodes nodes, the communicator parameters, the tuning model, and the rings and
// trees over every rank.
func New(m Machine) (*Planner, error) {
	if m.Doc == nil {
		return nil, fmt.Errorf("planner: no topology")
	}
	if m.Nodes < 1 || m.Nodes > MaxNodes {
		return nil, fmt.Errorf("planner: %d nodes (want 1..%d)", m.Nodes, MaxNodes)
	}
	if m.GPUs < 0 {
		return nil, fmt.Errorf("planner: %d GPUs per node", m.GPUs)
	}
	if m.GPUs > 0 {
		doc, err := firstGPUs(m.Doc, m.GPUs)
		if err != nil {
			return nil, err
		}
		m.Doc = doc
	}
	s := m.Settings
	gv, params, err := s.versions()
	if err != nil {
		return nil, err
	}
	gopt := s.Graph
	gopt.Version = gv
	gopt.NRanks = 0
	cfg := s.Tuning
	cfg.Version = s.Release
	// NCCL_MIN/MAX_NCHANNELS and NCCL_MIN/MAX_CTAS bound the postset's channel count together.
	minCh, maxCh := cfg.ChannelBounds()
	sopt := search.AllOptions{
		Options:     search.Options{CrossNic: s.CrossNic, Params: params},
		NVLS:        s.NVLS,
		CollNet:     s.CollNet,
		MinChannels: minCh,
		MaxChannels: maxCh,
	}
	if !m.SearchOnly {
		if _, err := tuning.ConstantsFor(s.Release); err != nil {
			return nil, fmt.Errorf("planner: NCCL %s: the channel search's rules are known, the tuning model's are not (it has %s)", s.Release, strings.Join(tuning.Releases(), ", "))
		}
	}
	// The system as NCCL builds it; a communicator of several nodes keeps the node's NETs
	// (ncclTopoTrimSystem), so it is built again knowing the communicator's size.
	sys, err := topo.FromXML(m.Doc, gopt)
	if err != nil {
		return nil, err
	}
	if s.CollNet {
		collNetNICs(sys)
	}
	if ppn := len(sys.GPUs()); ppn*m.Nodes > MaxRanks {
		return nil, fmt.Errorf("planner: %d nodes × %d GPUs = %d ranks, %w (%d)", m.Nodes, ppn, m.Nodes*ppn, ErrTooManyRanks, MaxRanks)
	}
	if m.Nodes > 1 {
		gopt.NRanks = len(sys.GPUs()) * m.Nodes
		if sys, err = topo.FromXML(m.Doc, gopt); err != nil {
			return nil, err
		}
		if s.CollNet {
			collNetNICs(sys)
		}
	}
	if m.Nodes > 1 && len(sys.NETs()) == 0 {
		if g := partial.Inspect(m.Doc); len(g.NICStubs) > 0 {
			// A completed partial file: the GPU model gave the GPUs, nothing gave the NICs.
			return nil, fmt.Errorf("%s: %d nodes need NICs and the topology has none: %s, which NCCL fills from its network plugin and a GPU model does not give; name their speed to complete them (--nic-speed 400Gbps) or add <nic><net name=… dev=… speed=…/></nic> to them to simulate several nodes",
				m.Name, m.Nodes, (&partial.Gaps{NICStubs: g.NICStubs}).Describe(m.Doc))
		}
	}
	top, err := search.FromSystem(sys, m.Nodes > 1)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Name, err)
	}
	if s.GraphFile != "" {
		// NCCL_GRAPH_FILE: loaded graphs replace the search's (search.Load checks them against
		// the topology).
		gs, err := ncclxml.ReadGraphsFile(s.GraphFile)
		if err != nil {
			return nil, fmt.Errorf("NCCL_GRAPH_FILE: %w", err)
		}
		if sopt.Loaded, err = search.Load(top, gs, s.GraphFile); err != nil {
			return nil, err
		}
	}
	sopt.Nodes = m.Nodes
	res, err := search.ComputeAll(top, sopt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Name, err)
	}
	comm, err := commOf(res, sys, commOptions{CollNet: s.CollNet})
	if err != nil {
		return nil, err
	}
	if sys.Name == "" {
		sys.Name = m.Name
	}
	p := &Planner{Name: m.Name, Nodes: m.Nodes, PPN: len(sys.GPUs()), Settings: s, System: sys, Search: res}
	if m.SearchOnly {
		return p, nil
	}
	if p.Table, err = tuning.Model(comm, &cfg); err != nil {
		return nil, err
	}
	if err := p.buildRingsTrees(); err != nil {
		return nil, err
	}
	if p.Transports, err = newTransports(sys); err != nil {
		return nil, err
	}
	return p, nil
}

// NRanks is the communicator's size.
func (p *Planner) NRanks() int { return p.PPN * p.Nodes }

// Channels is the communicator's collective channel count.
func (p *Planner) Channels() int { return max(p.Table.NChannels, 1) }

// buildRingsTrees expands the searched per-node chains (the ring and tree graphs hold NChannels
// of them; the communicator runs Table.NChannels channels, repeating them as NCCL's duplication
// does) into rings and trees over every rank.
func (p *Planner) buildRingsTrees() error {
	G := p.PPN
	nch := p.Channels()
	rep := func(ch [][]int) [][]int {
		if len(ch) == 0 {
			id := make([]int, G)
			for i := range id {
				id[i] = i
			}
			ch = [][]int{id}
		}
		out := make([][]int, nch)
		for c := range out {
			out[c] = ch[c%len(ch)]
		}
		return out
	}
	var ringChains, treeChains [][]int
	crossNic := false
	pat := coll.PatternBalancedTree
	if g := p.Search.Ring; g != nil {
		// NCCL 2.28 alternates the rings of odd nodes (channel pairs c, c^1 swapped) where the
		// ring graph has crossNic 2 and an even channel count, so that a ring leaves a node and
		// enters the next on one rail (connect.cc ncclTopoPostset; the reference's §4.5). Until
		// 2026-11-30 this took crossNic 1, and the DGX H100 rings (crossNic 2) crossed rails: every
		// message into a node took another GPU's NIC, then PCIe and the CPU to its GPU.
		ringChains, crossNic = g.Intra, g.CrossNic == 2
	}
	if g := p.Search.Tree; g != nil {
		treeChains = g.Intra
		if tp := coll.TreePattern(g.Pattern); tp >= coll.PatternBalancedTree && tp <= coll.PatternTree {
			pat = tp
		}
	}
	rings, err := coll.BuildRings(rep(ringChains), p.Nodes, G, crossNic)
	if err != nil {
		return fmt.Errorf("planner: %s: rings: %w", p.Name, err)
	}
	trees, err := coll.BuildTrees(rep(treeChains)[:(nch+1)/2], p.Nodes, G, pat)
	if err != nil {
		return fmt.Errorf("planner: %s: trees: %w", p.Name, err)
	}
	p.Rings, p.Trees = rings, trees[:nch]
	return nil
}

// TuningTable is the communicator's tuning model (Table), for executors that take a constant of
// NCCL's cost model from it (simnet's NVLSTree channel ceiling).
func (p *Planner) TuningTable() *tuning.Table { return p.Table }

// IBQPsPerConnection is NCCL_IB_QPS_PER_CONNECTION of the settings (0: unset), for the simulation.
func (p *Planner) IBQPsPerConnection() int { return p.Settings.IBQPs }

// collNetNICs makes every NET of sys a CollNet device when none is marked (coll="1"): with
// NCCL_COLLNET_ENABLE=1 NCCL asks its CollNet plugin which NICs it serves and marks them in the
// topology, and the SHARP plugin serves every InfiniBand HCA. A topology that marks some NICs (a
// dump taken with the plugin loaded) keeps its marks.
func collNetNICs(sys *graph.System) {
	nets := sys.NETs()
	for _, n := range nets {
		if n.NET.Coll {
			return
		}
	}
	for _, n := range nets {
		n.NET.Coll = true
	}
}
