package graph

import (
	"fmt"
	"strconv"
	"strings"
)

// NodeType is the kind of a topology node. The values are NCCL's node type indices
// (NCCL ≤2.29 topo.h): GPU 0, PCI 1, NVS 2, CPU 3, NIC 4, NET 5.
type NodeType int

const (
	GPU NodeType = iota // one NCCL rank's GPU
	PCI                 // PCIe switch or bridge
	NVS                 // the single, merged NVSwitch node
	CPU                 // a NUMA domain / root complex
	NIC                 // a physical NIC PCI function (ports merged)
	NET                 // a network device as the net plugin sees it

	// NumNodeTypes is the number of node types (NCCL_TOPO_NODE_TYPES in ≤2.29).
	NumNodeTypes = 6
)

var nodeTypeNames = [NumNodeTypes]string{"GPU", "PCI", "NVS", "CPU", "NIC", "NET"}

// String returns the name NCCL prints ("GPU", "PCI", …).
func (t NodeType) String() string {
	if t >= 0 && int(t) < NumNodeTypes {
		return nodeTypeNames[t]
	}
	return fmt.Sprintf("NodeType(%d)", int(t))
}

// LinkType is the type of one link. The numbers are NCCL's (2.27.7+ topo.h LINK_*), chosen so
// that a link type equals the path type it produces and a path's type is the max over its hops.
type LinkType int

const (
	LinkLOC LinkType = 0
	LinkNVL LinkType = 1
	LinkC2C LinkType = 3
	LinkPCI LinkType = 4
	LinkSYS LinkType = 9
	LinkNET LinkType = 10
)

// String returns the name NCCL prints for a link type ("LOC", "NVL", "C2C", "PCI", "SYS", "NET").
func (t LinkType) String() string {
	switch t {
	case LinkLOC:
		return "LOC"
	case LinkNVL:
		return "NVL"
	case LinkC2C:
		return "C2C"
	case LinkPCI:
		return "PCI"
	case LinkSYS:
		return "SYS"
	case LinkNET:
		return "NET"
	}
	return fmt.Sprintf("LinkType(%d)", int(t))
}

// PathType is the type of a path; lower is better. Numbering of NCCL 2.27.7+ (topo.h PATH_*).
type PathType int

const (
	PathLOC PathType = iota // same device
	PathNVL                 // NVLink, possibly through the NVSwitch
	PathNVB                 // NVLink through one intermediate GPU
	PathC2C                 // GPU↔CPU over C2C
	PathPIX                 // at most one PCIe switch
	PathPXB                 // several PCIe switches, no host bridge
	PathP2C                 // GPU→C2C→CPU→PCIe→NIC
	PathPXN                 // GPU→NVLink→peer GPU→PCIe→NIC
	PathPHB                 // crosses a PCIe host bridge
	PathSYS                 // crosses the inter-socket link
	PathNET                 // only through the network
	PathDIS                 // disconnected

	numPathTypes = int(PathDIS) + 1
)

var pathTypeNames = [numPathTypes]string{"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"}

// String returns the name NCCL prints ("LOC", "NVL", … "DIS").
func (t PathType) String() string {
	if t >= 0 && int(t) < numPathTypes {
		return pathTypeNames[t]
	}
	return fmt.Sprintf("PathType(%d)", int(t))
}

// ParsePathType reads a level the way NCCL reads NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL (NCCL 2.28
// paths.cc ncclGetLevel): a name (LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS) or a legacy integer
// 0..5 meaning LOC, PIX, PXB, PHB, SYS, SYS (larger integers clamp to SYS). Unlike NCCL, which
// compares names exactly and stops at SYS, it ignores case and also accepts NET and DIS.
func ParsePathType(s string) (PathType, error) {
	s = strings.TrimSpace(s)
	for i, n := range pathTypeNames {
		if strings.EqualFold(s, n) {
			return PathType(i), nil
		}
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 0 {
		legacy := []PathType{PathLOC, PathPIX, PathPXB, PathPHB, PathSYS, PathSYS}
		if n >= len(legacy) {
			return PathSYS, nil
		}
		return legacy[n], nil
	}
	return 0, fmt.Errorf("graph: unknown path level %q (want LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS, or NCCL's old numbers: 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and above SYS)", s)
}

// Bandwidth constants in GB/s (NCCL 2.28 topo.h).
const (
	LocBw = 5000.0 // LOC_BW: self, pcilink, CPU-attached NIC, unknown CPU pairs
	PciBw = 12.0   // PCI_BW: Gen3 x16 reference (tuning thresholds)
)

// Link is one directed link of a node. BW is in GB/s; links to the same remote node with the
// same type are aggregated into one (NCCL 2.28 topo.cc ncclTopoConnectNodes).
type Link struct {
	Type   LinkType
	BW     float64
	Remote *Node
}

// GPUInfo is what NCCL keeps for a GPU node.
type GPUInfo struct {
	Dev  int  // NVML index (<gpu dev>)
	Rank int  // NCCL rank
	SM   int  // compute capability ×10 (<gpu sm>)
	GDR  bool // GPUDirect RDMA usable (<gpu gdr>)
	// PCIDevice is the device id of the GPU's <pci> element (NVIDIA's product id: 0x2330 H100
	// SXM5, 0x2335 H200, …; 0 where the file has none). NCCL does not use it; the simulator
	// takes the GPU's memory figures by it (simnet.GPUMemoryFor).
	PCIDevice uint16
}

// NetInfo is what NCCL keeps for a NET node (<net> attributes).
type NetInfo struct {
	Dev     int     // plugin device index
	Name    string  // plugin device name
	Speed   float64 // bandwidth in GB/s (speed attribute Mb/s / 8000)
	Port    int
	GUID    uint64
	Latency float64 // µs
	MaxConn int
	GDR     bool
	Coll    bool
	Rail    int // 2.30: rail id (-1 when absent)
	Plane   int // 2.30: plane id (-1 when absent)
}

// CPUInfo is what NCCL keeps for a CPU node.
type CPUInfo struct {
	Arch     string // x86_64, arm64, ppc64 (as written in the XML)
	Vendor   string // CPUID vendor string
	Family   int    // familyid (decimal)
	Model    int    // modelid (decimal)
	Affinity string // cpuset string, informational
	NumaID   int    // numaid (-1 unknown)
	// ArchID, VendorID and ModelID are NCCL's codes (topo.h; 0 = unknown), as printed in
	// "CPU/0-0 (arch/vendor/model)": arch x86 1, POWER 2, ARM 3; vendor Intel 1, AMD 2,
	// Zhaoxin 3; model Intel BDW 1, SKL 2, SRP 3, ERP 4, Zhaoxin Yongfeng 1.
	ArchID, VendorID, ModelID int
}

// PCIInfo is what NCCL keeps for a PCI switch node.
type PCIInfo struct {
	// Device packs vendor<<48 | device<<32 | subsystem_vendor<<16 | subsystem_device (NCCL 2.28
	// topo.cc ncclTopoAddPci).
	Device uint64
}

// Node is one vertex of the system graph.
type Node struct {
	Type NodeType
	// ID is NCCL's id: systemId<<56 | localId (NCCL 2.28 topo.h NCCL_TOPO_ID). localId is the
	// numaid (CPU), the busid as an integer (PCI, NIC, GPU ≤2.29), the plugin dev (NET) or 0 (NVS).
	ID int64
	// Index is the position of the node in System.Nodes[Type].
	Index int
	// Links are sorted as NCCL sorts them: by bandwidth descending, then each PCI node's
	// upward link moved to the end (NCCL 2.28 topo.cc ncclTopoConnectNodes, ncclTopoSortSystem).
	Links []*Link

	GPU GPUInfo // Type == GPU
	NET NetInfo // Type == NET
	CPU CPUInfo // Type == CPU
	PCI PCIInfo // Type == PCI

	// paths[t][i] is this node's path to System.Nodes[t][i] (nil where NCCL stores none).
	paths [NumNodeTypes][]*Path
}

// SystemID returns the host index encoded in the top byte of ID.
func (n *Node) SystemID() int { return int(uint64(n.ID) >> 56) }

// LocalID returns the low 56 bits of ID.
func (n *Node) LocalID() int64 { return n.ID & (1<<56 - 1) }

// Name returns "TYPE/index" (e.g. "GPU/3"), the short name used in JSON and messages.
func (n *Node) Name() string { return fmt.Sprintf("%s/%d", n.Type, n.Index) }

// Path is a directed path from one node to another: the links followed in order, its type
// (the worst hop, with NCCL's adjustments) and its bandwidth (the bottleneck, GB/s).
type Path struct {
	Links []*Link
	Type  PathType
	BW    float64
}

// Hops returns the number of links in the path (0 for a node's path to itself).
func (p *Path) Hops() int {
	if p == nil {
		return 0
	}
	return len(p.Links)
}

// Version selects the NCCL release whose rules are reproduced.
type Version struct{ Major, Minor, Patch int }

var (
	// V2_26 is NCCL 2.26.2 (what NCCL's release history records against 2.28): no P2C path type
	// (GPU→C2C→CPU→PCIe→NIC is PHB, so neither GPUDirect RDMA nor PXN by default reaches a NIC
	// behind a Grace CPU), Blackwell NVLinks at 40.0 GB/s, and 2.27's NET-node removal.
	V2_26 = Version{2, 26, 2}
	// V2_27 is NCCL 2.27.7, kept to compare with logs of that release: it removes the NET nodes
	// when every rank is in the system (2.28.9 keeps them, as its logs show).
	V2_27 = Version{2, 27, 7}
	// V2_28 is NCCL 2.28.9, the default.
	V2_28 = Version{2, 28, 9}
	// V2_30 is NCCL 2.30.7 (the lexicographic BFS update of paths.cc ncclTopoSetPaths,
	// NCCL_TOPO_MAX_NODES 640).
	V2_30 = Version{2, 30, 7}
)

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports whether v is the release o or later.
func (v Version) AtLeast(o Version) bool {
	if v.Major != o.Major {
		return v.Major > o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor > o.Minor
	}
	return v.Patch >= o.Patch
}

// ParseVersion accepts "2.26", "2.28", "2.30" (and 2.27 for old logs), or a full "2.30.7".
func ParseVersion(s string) (Version, error) {
	switch strings.TrimSpace(s) {
	case "", "2.28", "2.28.9":
		return V2_28, nil
	case "2.30", "2.30.7":
		return V2_30, nil
	case "2.27", "2.27.7":
		return V2_27, nil
	case "2.26", "2.26.2":
		return V2_26, nil
	}
	return Version{}, fmt.Errorf("graph: unsupported NCCL version %q (want 2.26, 2.28 or 2.30; 2.27 for old logs)", s)
}

// Options are the knobs NCCL takes from its environment. The zero value is NCCL's default.
type Options struct {
	// Version is the NCCL release to reproduce; zero means V2_28.
	Version Version
	// P2PLevel is NCCL_P2P_LEVEL ("" = default: PXB, or SYS on AMD x86 with ≤2 GPUs; NCCL 2.28
	// paths.cc ncclTopoCheckP2p).
	P2PLevel string
	// P2PDisable is NCCL_P2P_DISABLE=1 (P2P level LOC).
	P2PDisable bool
	// NVBDisable is NCCL_NVB_DISABLE=1 (no GPU relays NVLink traffic).
	NVBDisable bool
	// PXNDisable is NCCL_PXN_DISABLE=1.
	PXNDisable bool
	// PXNC2CDisable is NCCL_PXN_C2C=0 (the default is 1 since 2.28; paths.cc ncclTopoComputePaths).
	PXNC2CDisable bool
	// NetGDRLevel is NCCL_NET_GDR_LEVEL ("" = default P2C/PXB; NCCL 2.28 paths.cc ncclTopoCheckGdr).
	NetGDRLevel string
	// NetGDRDisable forces GDR off for every GPU/NET pair (as if every gdr attribute were 0).
	NetGDRDisable bool
	// LocalRank is the rank whose view is built: GPUs outside its P2P domain are trimmed (NCCL
	// 2.28 paths.cc ncclTopoTrimSystem). When it is 0 and no GPU has rank 0, the first GPU's view
	// is built; another rank that is not in the topology is an error.
	LocalRank int
	// NoTrim keeps every GPU (no domain trimming) and every NET.
	NoTrim bool
	// P2PUnsupported says the driver reports no P2P between GPUs over PCIe (GeForce boards):
	// NCCL then routes those pairs through the CPU (the NVML check of NCCL 2.28 paths.cc
	// ncclTopoCheckP2p).
	P2PUnsupported bool
	// Strict turns warnings (inputs NCCL accepts silently, such as an NVLink to a GPU that is
	// not in the topology or an NVLink count of 0) into errors.
	Strict bool
	// NRanks, when > 0, is the communicator size; System.Inter is set when the kept GPUs are
	// fewer. 0 means "the GPUs of this topology" (one node). NCCL ≤2.27 removes the NET nodes
	// when every rank is in this system (ncclTopoTrimSystem); 2.28.9 keeps them.
	NRanks int
}

// System is the graph NCCL builds from a topology (ncclTopoSystem).
type System struct {
	// Nodes holds the nodes of each type, indexed by NodeType.
	Nodes [NumNodeTypes][]*Node
	// MaxBw and TotalBw are the values NCCL prints on "=== System : maxBw X totalBw Y ===" (NCCL
	// 2.28 search.cc ncclTopoSearchInit computes them, topo.cc ncclTopoPrint prints them).
	MaxBw, TotalBw float64
	// Version is the NCCL release whose rules built this system.
	Version Version
	// Options the system was built with.
	Options Options
	// HostHashes lists the distinct <cpu host_hash> values; a node's SystemID indexes it.
	HostHashes []uint64
	// Inter is true when some ranks live outside this system (NCCL's system->inter).
	Inter bool
	// Name is the input's name (file) for messages.
	Name string
	// Unreachable lists GPU pairs with no path (reported, never fatal for the build).
	Unreachable []string
	// Warnings lists inputs NCCL accepts silently but that are probably mistakes, each located
	// ("file:line: ...").
	Warnings []string

	nRanks int
}

// Path returns the stored path from one node to another, or nil when NCCL stores none
// (paths exist towards CPU, GPU, NET and NVS nodes; NCCL 2.28 paths.cc ncclTopoComputePaths).
func (s *System) Path(from, to *Node) *Path {
	if from == nil || to == nil {
		return nil
	}
	ps := from.paths[to.Type]
	if to.Index < 0 || to.Index >= len(ps) {
		return nil
	}
	return ps[to.Index]
}

// GPUs returns the GPU nodes, in NCCL's order (by busid).
func (s *System) GPUs() []*Node { return s.Nodes[GPU] }

// NETs returns the NET nodes.
func (s *System) NETs() []*Node { return s.Nodes[NET] }

// GPUByRank returns the GPU of a rank, or nil.
func (s *System) GPUByRank(rank int) *Node {
	for _, g := range s.Nodes[GPU] {
		if g.GPU.Rank == rank {
			return g
		}
	}
	return nil
}
