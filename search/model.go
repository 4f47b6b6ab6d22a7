package search

import (
	"fmt"
	"math"
)

// NodeKind is the type of a node in the search's view of a topology (NCCL's GPU, PCI, NVS, CPU,
// NIC, NET; topo.h, ≤2.29 numbering).
type NodeKind int

// Node kinds.
const (
	KindGPU NodeKind = iota
	KindPCI
	KindNVS
	KindCPU
	KindNIC
	KindNET
	numKinds
)

var kindNames = [...]string{"GPU", "PCI", "NVS", "CPU", "NIC", "NET"}

func (k NodeKind) String() string {
	if k >= 0 && k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("NodeKind(%d)", int(k))
}

// CPU architecture and vendor, as NCCL tells them apart (topo.h).
const (
	ArchUnknown = 0
	ArchX86     = 1
	ArchPower   = 2
	ArchARM     = 3

	VendorUnknown = 0
	VendorIntel   = 1
	VendorAMD     = 2
	VendorZhaoxin = 3
)

// NetInfo is what the search needs of a NET node (the XML `net` element).
type NetInfo struct {
	Dev     int     // plugin device index
	Bw      float64 // GB/s (speed/8000)
	Latency float64 // µs
	GUID    uint64  // ASIC guid: NETs with the same guid and port share bandwidth
	Port    int
	Coll    bool // CollNet support
	GDR     bool
	// Rail and Plane (NCCL 2.30 <net rail plane>; -1 when absent): with 2.30 rules a crossNic=0
	// channel must end on its start NET's rail (or guid+port), and never changes plane. Set
	// them to -1 when the topology has none.
	Rail, Plane int
}

// node is one vertex. Bandwidths are float32 like NCCL's, so that the search's comparisons and
// its rounding (SUB_ROUND) give the same answers at the same boundaries.
type node struct {
	kind  NodeKind
	index int // index within its kind
	id    int64
	links []*link
	// paths[k][i] is the path from this node to node i of kind k.
	paths [numKinds][]path

	// GPU
	rank, dev, cc int
	used          uint64 // one bit per channel being built

	// CPU
	arch, vendor int

	// NET
	net      NetInfo
	netBw    float32 // remaining NET bandwidth during the search (net.bw in NCCL)
	localGpu int
}

type link struct {
	kind int
	rem  *node
	bw   float32
}

type path struct {
	list []*link
	typ  PathType
	bw   float32
	set  bool
}

func (p *path) count() int { return len(p.list) }

// Topology is the search's own copy of one node's (or one NVLink domain's) system: nodes, links
// with bandwidth the search may consume, and the paths package graph computed. Build it with
// the Add*/Connect/SetPath methods (FromSystem does it from a graph.System); Compute never
// changes the caller's copy: it works on a clone.
type Topology struct {
	nodes  [numKinds][]*node
	all    []*node
	nHosts int
	// MaxBw and TotalBw as ncclTopoSearchInit computes them (set by Finish).
	maxBw, totalBw float32
	finished       bool
	// Caches of values that depend only on paths (never on the bandwidth the search consumes):
	// localNet per GPU and channel, selectNets per (typeInter, GPU).
	localNetCache  map[[2]int]int
	selectNetCache map[[2]int][]int
	// rules230: the NIC choice and end-NET rules of NCCL 2.30.7 (set per search from Params).
	rules230 bool
}

// NewTopology returns an empty topology.
func NewTopology() *Topology { return &Topology{nHosts: 1} }

// SetHosts records how many hosts (distinct host hashes) the topology spans; >1 is MNNVL.
func (t *Topology) SetHosts(n int) {
	if n < 1 {
		n = 1
	}
	t.nHosts = n
}

func (t *Topology) add(k NodeKind, id int64) *node {
	n := &node{kind: k, index: len(t.nodes[k]), id: id, localGpu: -1}
	t.nodes[k] = append(t.nodes[k], n)
	t.all = append(t.all, n)
	return n
}

// Handle names a node of a Topology.
type Handle struct {
	Kind  NodeKind
	Index int
}

// AddGPU adds a GPU with its NCCL id (systemId<<56 | busid), rank, NVML index and compute
// capability ×10.
func (t *Topology) AddGPU(id int64, rank, dev, cc int) Handle {
	n := t.add(KindGPU, id)
	n.rank, n.dev, n.cc = rank, dev, cc
	return Handle{KindGPU, n.index}
}

// AddCPU adds a CPU (NUMA domain) with its arch and vendor (ArchX86, VendorIntel, …).
func (t *Topology) AddCPU(id int64, arch, vendor int) Handle {
	n := t.add(KindCPU, id)
	n.arch, n.vendor = arch, vendor
	return Handle{KindCPU, n.index}
}

// AddNET adds a network device.
func (t *Topology) AddNET(id int64, info NetInfo) Handle {
	n := t.add(KindNET, id)
	n.net = info
	n.netBw = float32(info.Bw)
	return Handle{KindNET, n.index}
}

// AddNode adds a node that carries no attributes the search reads (PCI, NVS, NIC).
func (t *Topology) AddNode(k NodeKind, id int64) Handle {
	n := t.add(k, id)
	return Handle{k, n.index}
}

func (t *Topology) get(h Handle) (*node, error) {
	if h.Kind < 0 || h.Kind >= numKinds || h.Index < 0 || h.Index >= len(t.nodes[h.Kind]) {
		return nil, errorf("no node %v/%d in the topology", h.Kind, h.Index)
	}
	return t.nodes[h.Kind][h.Index], nil
}

// Connect adds a directed link a→b of the given link type (the path-type numbering: 0 LOC,
// 1 NVL, 3 C2C, 4 PCI, 9 SYS, 10 NET) and bandwidth in GB/s.
func (t *Topology) Connect(a, b Handle, linkType int, bw float64) error {
	na, err := t.get(a)
	if err != nil {
		return err
	}
	nb, err := t.get(b)
	if err != nil {
		return err
	}
	if bw < 0 || math.IsNaN(bw) || math.IsInf(bw, 0) {
		return errorf("link %v/%d→%v/%d: bad bandwidth %v", a.Kind, a.Index, b.Kind, b.Index, bw)
	}
	na.links = append(na.links, &link{kind: linkType, rem: nb, bw: float32(bw)})
	return nil
}

// SetPath records the path from→to as the node sequence hops (from first, to last), with NCCL's
// path type and bottleneck bandwidth. Consecutive hops must be connected by a link.
func (t *Topology) SetPath(from, to Handle, hops []Handle, typ PathType, bw float64) error {
	nf, err := t.get(from)
	if err != nil {
		return err
	}
	nt, err := t.get(to)
	if err != nil {
		return err
	}
	p := path{typ: typ, bw: float32(bw), set: true}
	if len(hops) > 0 {
		if hops[0] != from || hops[len(hops)-1] != to {
			return errorf("path %v/%d→%v/%d: hops do not start and end at its ends", from.Kind, from.Index, to.Kind, to.Index)
		}
		for i := 0; i+1 < len(hops); i++ {
			a, err := t.get(hops[i])
			if err != nil {
				return err
			}
			b, err := t.get(hops[i+1])
			if err != nil {
				return err
			}
			l := findLink(a, b, -1)
			if l == nil {
				return errorf("path %v/%d→%v/%d: no link %v/%d→%v/%d", from.Kind, from.Index, to.Kind, to.Index,
					a.kind, a.index, b.kind, b.index)
			}
			p.list = append(p.list, l)
		}
	}
	ps := nf.paths[nt.kind]
	for len(ps) < len(t.nodes[nt.kind]) {
		ps = append(ps, path{typ: PathDIS})
	}
	ps[nt.index] = p
	nf.paths[nt.kind] = ps
	return nil
}

// findLink returns the link a→b of the given type (any type when typ < 0; then the widest).
func findLink(a, b *node, typ int) *link {
	var best *link
	for _, l := range a.links {
		if l.rem != b || (typ >= 0 && l.kind != typ) {
			continue
		}
		if best == nil || l.bw > best.bw {
			best = l
		}
	}
	return best
}

// finish fills missing paths as disconnected, computes each NET's local GPU and the search's
// maxBw/totalBw (ncclTopoSearchInit, NCCL 2.28 search.cc).
func (t *Topology) finish() error {
	for _, n := range t.all {
		for k := NodeKind(0); k < numKinds; k++ {
			for len(n.paths[k]) < len(t.nodes[k]) {
				n.paths[k] = append(n.paths[k], path{typ: PathDIS})
			}
		}
		// A node's path to itself is LOC with no hops.
		if !n.paths[n.kind][n.index].set {
			n.paths[n.kind][n.index] = path{typ: PathLOC, bw: locBw, set: true}
		}
	}
	seenRank := map[int]bool{}
	for _, g := range t.nodes[KindGPU] {
		if seenRank[g.rank] {
			return errorf("two GPUs have rank %d", g.rank)
		}
		seenRank[g.rank] = true
	}
	for _, n := range t.nodes[KindNET] {
		g, err := t.localGpuOfNet(n)
		if err != nil {
			return err
		}
		n.localGpu = g
	}
	t.searchInit()
	t.finished = true
	return nil
}

// locBw is NCCL's LOC_BW (5000 GB/s, NCCL 2.28 topo.h).
const locBw = 5000

// searchInit is ncclTopoSearchInit (2.28): maxBw is the best path bandwidth from a GPU to a NET
// (to another GPU when there is no NET); totalBw the largest max(PCI link, sum of NVLinks) of a
// GPU. One GPU and no NET: both LOC_BW.
func (t *Topology) searchInit() {
	t.maxBw, t.totalBw = 0, 0
	inter := len(t.nodes[KindNET]) > 0
	if !inter && len(t.nodes[KindGPU]) == 1 {
		t.maxBw, t.totalBw = locBw, locBw
		return
	}
	k := KindGPU
	if inter {
		k = KindNET
	}
	for _, g := range t.nodes[KindGPU] {
		for i := range g.paths[k] {
			p := &g.paths[k][i]
			if p.count() == 0 {
				continue
			}
			if p.bw > t.maxBw {
				t.maxBw = p.bw
			}
		}
		var nvl, pci float32
		for _, l := range g.links {
			if l.kind == linkNVL {
				nvl += l.bw
			}
			if l.kind == linkPCI {
				pci = l.bw
			}
		}
		if tb := max(nvl, pci); tb > t.totalBw {
			t.totalBw = tb
		}
	}
}

// clone deep-copies the topology so that a search can consume link bandwidth.
func (t *Topology) clone() *Topology {
	c := &Topology{nHosts: t.nHosts, maxBw: t.maxBw, totalBw: t.totalBw, finished: t.finished}
	nm := make(map[*node]*node, len(t.all))
	lm := map[*link]*link{}
	for _, n := range t.all {
		m := *n
		m.links = nil
		nm[n] = &m
		c.nodes[n.kind] = append(c.nodes[n.kind], &m)
		c.all = append(c.all, &m)
	}
	for _, n := range t.all {
		m := nm[n]
		for _, l := range n.links {
			nl := &link{kind: l.kind, rem: nm[l.rem], bw: l.bw}
			lm[l] = nl
			m.links = append(m.links, nl)
		}
	}
	for _, n := range t.all {
		m := nm[n]
		for k := range n.paths {
			m.paths[k] = make([]path, len(n.paths[k]))
			for i, p := range n.paths[k] {
				np := p
				np.list = make([]*link, len(p.list))
				for j, l := range p.list {
					np.list[j] = lm[l]
				}
				m.paths[k][i] = np
			}
		}
	}
	return c
}

// NumGPUs is the number of GPUs (ranks) in the topology.
func (t *Topology) NumGPUs() int { return len(t.nodes[KindGPU]) }

// NumNETs is the number of network devices in the topology.
func (t *Topology) NumNETs() int { return len(t.nodes[KindNET]) }

// HasNVSwitch says whether the topology has an NVSwitch node.
func (t *Topology) HasNVSwitch() bool { return len(t.nodes[KindNVS]) > 0 }

// MaxBw and TotalBw are the search's bandwidth bounds (ncclTopoSearchInit), as NCCL prints them
// in "=== System : maxBw … totalBw … ===".
func (t *Topology) MaxBw() float64 { return float64(t.maxBw) }

// TotalBw: see MaxBw.
func (t *Topology) TotalBw() float64 { return float64(t.totalBw) }

// ccMin is the smallest compute capability of the GPUs (ncclTopoGetCompCap).
func (t *Topology) ccMin() int {
	m := 0
	for i, g := range t.nodes[KindGPU] {
		if i == 0 || g.cc < m {
			m = g.cc
		}
	}
	return m
}

// cpuType is the arch and vendor of the first CPU (ncclTopoCpuType).
func (t *Topology) cpuType() (arch, vendor int) {
	if len(t.nodes[KindCPU]) == 0 {
		return ArchUnknown, VendorUnknown
	}
	c := t.nodes[KindCPU][0]
	return c.arch, c.vendor
}

func (t *Topology) gpuIndexOfRank(rank int) int {
	for i, g := range t.nodes[KindGPU] {
		if g.rank == rank {
			return i
		}
	}
	return -1
}

func (t *Topology) netIndexOfID(id int64) int {
	for i, n := range t.nodes[KindNET] {
		if n.id == id {
			return i
		}
	}
	return -1
}
