package tuning

import (
	"fmt"
	"math"

	"github.com/simccl/simccl/coll"
)

// Graph ids, as NCCL numbers its per-communicator search graphs (NCCL 2.28 init.cc).
const (
	GraphRing          = 0
	GraphTree          = 1
	GraphCollNetChain  = 2
	GraphNVLS          = 3
	GraphCollNetDirect = 4
	NumGraphs          = 5
)

// Tree patterns (NCCL_TOPO_PATTERN_*, NCCL 2.28 graph.h).
const (
	PatternBalancedTree  = 1
	PatternSplitTree     = 2
	PatternTree          = 3
	PatternRing          = 4
	PatternNVLS          = 5
	PatternCollNetDirect = 6
)

// GraphInfo is what the tuning model reads from one search graph (NCCL 2.28 struct ncclTopoGraph):
// the values the ranks agreed on in init.cc's AllGather3 (min channels and bandwidths, max path
// types). NChannels is the search channel count, before ncclTopoPostset twins every channel.
type GraphInfo struct {
	Pattern      int
	NChannels    int
	BwIntra      float64 // GB/s per channel on GPU↔GPU hops
	BwInter      float64 // GB/s per channel on GPU↔NET hops
	TypeIntra    PathType
	TypeInter    PathType
	LatencyInter float64 // µs, the start NET's latency
	SameChannels bool
	CrossNic     int
}

// Comm describes one communicator as the tuning model sees it. Build it by hand (tests, what-if
// studies) or from the search result.
type Comm struct {
	NRanks, NNodes int
	// CCMin and CCMax are the smallest and largest CUDA compute capability over the ranks
	// (90 for H100/H200, 100 for B200).
	CCMin, CCMax int
	// CPUArch is "x86", "arm", "power" (or ""), CPUVendor "intel", "amd", "zhaoxin", "mixed" (or "").
	CPUArch, CPUVendor string
	// Graphs by id: GraphRing, GraphTree, GraphCollNetChain, GraphNVLS, GraphCollNetDirect.
	// A graph that was not searched has NChannels 0.
	Graphs [NumGraphs]GraphInfo
	// NChannels is the communicator's collective channel count after the postset twin and the
	// duplication rules of ncclTopoPostset; 0 means derive it with DeriveNChannels.
	NChannels int
	// NVLSSupport: NVLS multicast available (NVSwitch, cc ≥ 90, NCCL_NVLS_ENABLE). NVLSChannels is
	// comm->nvlsChannels (0 → NCCL 2.28's default for the compute capability).
	NVLSSupport  bool
	NVLSChannels int
	NVLSHeads    int // NVLS heads per channel (calcCollChunking); 0 → NRanks/NNodes
	// CollNetSupport: a CollNet (SHARP) plugin is usable. CollNetChainSupport: the chain graph was
	// found. CollNetAGRS: the plugin provides iallgather/ireducescatter and every node has at most
	// collNetHeadsNum local ranks (ncclTopoTuneModel's last bandwidth rule). CollNetDirectHeads/Depth
	// and CollNetChainDepth feed calcCollChunking.
	CollNetSupport      bool
	CollNetChainSupport bool
	CollNetAGRS         bool
	CollNetDirectHeads  int
	CollNetDirectDepth  int
	CollNetChainDepth   int
	// HasNVSwitch: the node has an NVSwitch (CollNetDirect needs one, NCCL 2.28 ncclTopoTuneModel).
	HasNVSwitch bool
	// MaxTreePattern is the largest tree pattern over ranks (init.cc AllGather3);
	// 0 → Graphs[GraphTree].Pattern.
	MaxTreePattern int
	// DeviceNet: the network is device-driven (GIN/UNPACK); PAT needs host-side networking.
	DeviceNet bool
	// MaxLocalRanks is the largest number of ranks on one node; 0 → ceil(NRanks/NNodes).
	MaxLocalRanks int
	// P2P (NCCL 2.28 ncclTopoComputeP2pChannels): channels per peer of the node's own peers (the
	// least over its GPU pairs: NVLink 2 × links, PCI/SHM 2) and in total; 0 → derived defaults.
	// Network peers have their own rule (Table.P2PChannels, from NetPeerNICs and NetPeerBw).
	P2PChannelsPerPeer int
	P2PNChannels       int
	// NetPeerNICs and NetPeerBw: the NICs a GPU's channels use that it takes to cover the GPU's
	// bandwidth to its CPU, and their bandwidth in GB/s (graph.System.LocalNetCountByBw; the least
	// over the node's GPUs); 0 where there is no NET. They feed the channels per network peer.
	NetPeerNICs int
	NetPeerBw   float64
	// AllNVLink: every intra-node peer is reached over NVLink (P2P chunk size, NCCL 2.28 p2pChunkSize).
	AllNVLink bool
}

// ppn is ranks per node as NCCL 2.28 ncclTopoTuneModel computes it (a float).
func (c *Comm) ppn() float64 { return float64(c.NRanks) / float64(c.NNodes) }

func (c *Comm) maxLocalRanks() int {
	if c.MaxLocalRanks > 0 {
		return c.MaxLocalRanks
	}
	return (c.NRanks + c.NNodes - 1) / c.NNodes
}

func (c *Comm) maxTreePattern() int {
	if c.MaxTreePattern > 0 {
		return c.MaxTreePattern
	}
	return c.Graphs[GraphTree].Pattern
}

// compCapIndex is NCCL's compute-capability class (NCCL 2.28 tuning.cc): 0 Volta, 1 Ampere,
// 2 Hopper, 3 Blackwell.
func compCapIndex(cc int) int {
	switch {
	case cc >= 100:
		return 3
	case cc >= 90:
		return 2
	case cc >= 80:
		return 1
	}
	return 0
}

// scaleIndex is the node-count index of NCCL 2.28's tuning tables: 0 one node, 1 two nodes, 2 three
// or more.
func (c *Comm) scaleIndex() int {
	switch {
	case c.NNodes <= 1:
		return 0
	case c.NNodes == 2:
		return 1
	}
	return 2
}

func (c *Comm) isAMD() bool { return c.CPUVendor == "amd" || c.CPUVendor == "mixed" }

// Validate reports impossible inputs by field name.
func (c *Comm) Validate() error {
	if c == nil {
		return fmt.Errorf("tuning: nil Comm")
	}
	if c.NRanks < 1 || c.NRanks > 1<<24 {
		return fmt.Errorf("tuning: Comm.NRanks %d out of range 1..%d", c.NRanks, 1<<24)
	}
	if c.NNodes < 1 || c.NNodes > c.NRanks {
		return fmt.Errorf("tuning: Comm.NNodes %d out of range 1..NRanks (%d)", c.NNodes, c.NRanks)
	}
	if c.NRanks > 1 && (c.CCMin <= 0 || c.CCMax < c.CCMin) {
		return fmt.Errorf("tuning: Comm.CCMin/CCMax %d/%d invalid (want 0 < CCMin <= CCMax, e.g. 90)", c.CCMin, c.CCMax)
	}
	if c.NChannels < 0 || c.NChannels > MaxChannels {
		return fmt.Errorf("tuning: Comm.NChannels %d out of range 0..%d", c.NChannels, MaxChannels)
	}
	for i, g := range c.Graphs {
		if g.NChannels < 0 || g.NChannels > MaxChannels {
			return fmt.Errorf("tuning: Comm.Graphs[%d] (%s) nChannels %d out of range 0..%d", i, graphNames[i], g.NChannels, MaxChannels)
		}
		for _, v := range []float64{g.BwIntra, g.BwInter, g.LatencyInter} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("tuning: Comm.Graphs[%d] (%s) has a negative or non-finite bandwidth/latency", i, graphNames[i])
			}
		}
	}
	if c.NRanks > 1 && c.Graphs[GraphRing].NChannels == 0 {
		return fmt.Errorf("tuning: Comm.Graphs[GraphRing] has no channel (a communicator of %d ranks needs a ring)", c.NRanks)
	}
	return nil
}

var graphNames = [NumGraphs]string{"ring", "tree", "collnet chain", "nvls", "collnet direct"}

// MaxChannels is NCCL's MAXCHANNELS (NCCL 2.28 device.h).
const MaxChannels = 64

// algoGraph maps an algorithm to the graph its model reads (NCCL 2.28 ncclTopoTuneModel).
func algoGraph(a coll.Algo) int {
	switch a {
	case coll.Tree, coll.PAT:
		return GraphTree
	case coll.Ring:
		return GraphRing
	case coll.CollNetDirect:
		return GraphCollNetDirect
	case coll.CollNetChain:
		return GraphCollNetChain
	}
	return GraphNVLS // NVLS, NVLSTree
}

// DeriveNChannels applies NCCL 2.28 ncclTopoPostset's channel rules to the ring graph: the postset
// twin, the CollNet ×1.5, the Hopper multi-node ×2 and the clamp to NCCL_MIN/MAX_NCHANNELS. The
// device-networking ×2 is applied when c.DeviceNet is set.
func DeriveNChannels(c *Comm, cfg *Config) int {
	ring := c.Graphs[GraphRing]
	n := ring.NChannels
	if tree := c.Graphs[GraphTree].NChannels; tree > 0 && tree < n {
		n = tree // ring and tree share min(tree, ring) (init.cc AllGather3)
	}
	n = min(MaxChannels, 2*n) // postset twin
	chain := c.Graphs[GraphCollNetChain]
	if c.CollNetSupport && chain.NChannels > 0 && chain.BwIntra > chain.BwInter && c.NRanks != c.NNodes {
		n = min(MaxChannels, n*3/2) // CollNet ×1.5
	}
	if c.CCMin >= 90 && c.NNodes > 1 && ring.BwIntra > 45 && n < 16 {
		n = min(MaxChannels, 2*n) // Hopper multi-node ×2
	}
	if c.DeviceNet && c.NNodes > 1 && n < 16 {
		n = min(MaxChannels, 2*n) // device networking (NCCL_UNPACK_DOUBLE_NCHANNELS)
	}
	// The clamp: NCCL_MAX_NCHANNELS and maxCTAs first, then NCCL_MIN_NCHANNELS and minCTAs
	// (duplicating channels up to it).
	lo, hi := cfg.ChannelBounds()
	n = max(min(n, hi), lo)
	return max(n, 1)
}
