package planner

import (
	"fmt"
	"math"

	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/search"
	"github.com/simccl/simccl/tuning"
)

// commOptions carry what the search result does not say.
type commOptions struct {
	// CollNet: a CollNet (SHARP) plugin is present (the search was run with AllOptions.CollNet).
	CollNet bool
	// CollNetAGRS: the plugin provides iallgather/ireducescatter (NCCL 2.28 tuning.cc
	// ncclTopoTuneModel).
	CollNetAGRS bool
	// DeviceNet: device-driven networking (GIN/UNPACK); disables PAT.
	DeviceNet bool
}

func graphInfo(g *search.Graph) tuning.GraphInfo {
	if g == nil {
		return tuning.GraphInfo{}
	}
	return tuning.GraphInfo{
		Pattern:      int(g.Pattern),
		NChannels:    g.NChannels,
		BwIntra:      g.BwIntra,
		BwInter:      g.BwInter,
		TypeIntra:    graph.PathType(int(g.TypeIntra)),
		TypeInter:    graph.PathType(int(g.TypeInter)),
		LatencyInter: g.LatencyInter,
		SameChannels: g.SameChannels != 0,
		CrossNic:     g.CrossNic,
	}
}

func pow2Up(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// commOf assembles the tuning model's input (tuning.Comm) from the channel search and the system
// it ran on, as NCCL's init fills its communicator. Every node of the communicator is taken to be the system sys
// (res.NNodes copies of it).
func commOf(res *search.Result, sys *graph.System, opt commOptions) (*tuning.Comm, error) {
	if res == nil || sys == nil {
		return nil, fmt.Errorf("planner: nil search result or system")
	}
	gpus := sys.Nodes[graph.GPU]
	if len(gpus) == 0 {
		return nil, fmt.Errorf("planner: %s: no GPU", sys.Name)
	}
	nodes := max(1, res.NNodes)
	c := &tuning.Comm{
		NRanks:         len(gpus) * nodes,
		NNodes:         nodes,
		NChannels:      res.NChannels,
		MaxLocalRanks:  len(gpus),
		CollNetSupport: opt.CollNet && res.CollNetChain != nil && res.CollNetChain.NChannels > 0,
		CollNetAGRS:    opt.CollNetAGRS,
		DeviceNet:      opt.DeviceNet,
		HasNVSwitch:    len(sys.Nodes[graph.NVS]) > 0,
	}
	c.CCMin, c.CCMax = math.MaxInt, 0
	for _, g := range gpus {
		c.CCMin = min(c.CCMin, g.GPU.SM)
		c.CCMax = max(c.CCMax, g.GPU.SM)
	}
	// The CPU names are those of the codes the builder set as NCCL does (graph.CPUInfo): an
	// unknown arch or vendor (HygonGenuine, say) is "", as NCCL counts it as neither Intel nor AMD.
	vendors := map[string]bool{}
	for _, cpu := range sys.Nodes[graph.CPU] {
		if c.CPUArch == "" {
			c.CPUArch = cpu.CPU.ArchName()
		}
		vendors[cpu.CPU.VendorName()] = true
	}
	for v := range vendors {
		c.CPUVendor = v
	}
	if len(vendors) > 1 {
		c.CPUVendor = "mixed"
	}
	c.Graphs[tuning.GraphRing] = graphInfo(res.Ring)
	c.Graphs[tuning.GraphTree] = graphInfo(res.Tree)
	c.Graphs[tuning.GraphCollNetChain] = graphInfo(res.CollNetChain)
	c.Graphs[tuning.GraphNVLS] = graphInfo(res.NVLS)
	c.Graphs[tuning.GraphCollNetDirect] = graphInfo(res.CollNetDirect)
	c.CollNetChainSupport = c.CollNetSupport
	c.MaxTreePattern = c.Graphs[tuning.GraphTree].Pattern
	c.NVLSSupport = res.NVLS != nil && res.NVLS.NChannels > 0
	c.NVLSHeads = c.Graphs[tuning.GraphNVLS].NChannels
	if c.NVLSHeads == 0 {
		c.NVLSHeads = len(gpus)
	}

	// P2P channels (NCCL 2.30.7 paths.cc ncclTopoGetNchannels, ncclTopoComputeP2pChannels): per
	// peer NVL/NVB → 2×max(1, floor(path bw / NVLink bw)), PCI/SHM → 2; the minimum over the
	// node's peers rounded up to a power of two, capped by p2pnChannels = pow2Up(nChannels); with
	// no peer, p2pnChannels. A peer on another node has the release's own rule, which
	// tuning.Table.P2PChannels applies from the NICs a GPU counts (NetPeerNICs, NetPeerBw: the
	// least over the node's GPUs; until stop 53 every network peer was taken as 2, which NCCL 2.28
	// gives only while 2 × ranks ≤ 4 × p2pnChannels).
	allNVL := true
	perPeer := math.MaxInt
	nvl := sys.Version.NVLinkBw(c.CCMin)
	for _, a := range gpus {
		for _, b := range gpus {
			if a == b {
				continue
			}
			p := sys.Path(a, b)
			n := 2
			if p != nil && (p.Type == graph.PathNVL || p.Type == graph.PathNVB) {
				n = 2 * max(1, int(math.Floor(p.BW/nvl+1e-6)))
			}
			if p == nil || p.Type != graph.PathNVL {
				allNVL = false
			}
			perPeer = min(perPeer, n)
		}
	}
	c.NetPeerNICs, c.NetPeerBw = math.MaxInt, math.Inf(1)
	for _, g := range gpus {
		n, bw := sys.LocalNetCountByBw(g)
		c.NetPeerNICs, c.NetPeerBw = min(c.NetPeerNICs, n), min(c.NetPeerBw, bw)
	}
	// With one GPU there is no pair to break the rule: NCCL then takes the NVLink chunk (one H200:
	// "P2P Chunksize set to 524288", testdata/nccl/h200x1/onerank-2026-11-29-init.log).
	c.AllNVLink = allNVL
	c.P2PNChannels = pow2Up(min(max(c.NChannels, 1), tuning.MaxChannels))
	if perPeer == math.MaxInt {
		// No peer on the node (one GPU a node): nothing here lowers the count. One rank alone
		// gives its copy to itself every p2p channel (one H200: "64 p2p channels, 64 p2p channels
		// per peer", testdata/nccl/h200x1/onerank-2026-11-29-init.log; until 2026-11-30 this was 2,
		// and a one-GPU all-to-all of 1 GiB took 13.5 ms where NCCL takes 0.57); one GPU a node
		// takes the network peers' count (tuning.Table.P2PChannels).
		perPeer = tuning.MaxChannels
	}
	// Not capped here by p2pnChannels: NCCL caps the channels per peer with p2pnChannels after
	// NCCL_MIN/MAX_P2P_NCHANNELS, which tuning.Table.P2PChannels applies (2 H200: 2 × 18 links →
	// 64, printed as the 32 of p2pnChannels; with NCCL_MIN_P2P_NCHANNELS=64, 64 per peer:
	// testdata/nccl/h200x2/netpeerscan-2026-11-30b, where a cap at the search's 32 gave 32).
	c.P2PChannelsPerPeer = pow2Up(perPeer)
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("planner: %s: %w", sys.Name, err)
	}
	return c, nil
}
