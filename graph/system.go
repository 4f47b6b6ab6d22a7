package graph

import (
	"errors"
	"fmt"
)

// Building a system: a builder (package topo reads NCCL's topology XML) makes an empty system
// with NewSystem, adds the nodes with AddNode and the links with Connect in the order NCCL adds
// them (links of equal bandwidth keep their insertion order), may drop nodes with RemoveNode, and
// then calls Compute once. Rules that interpret an input format (PCI generations, NVLink
// bandwidth per compute capability, inter-socket bandwidth, CPU codes) belong to the builder;
// what NCCL does on the built graph (link aggregation and order, paths, trimming, maxBw/totalBw)
// is here.

// ErrTopology is wrapped by every error a builder returns for a topology it cannot build
// (topo.FromXML, topo.NewCluster).
var ErrTopology = errors.New("graph: bad topology")

// NodeError is a problem Compute finds with one node (a link without its reverse). Node is the
// node concerned, so that the builder that made it can name its place in the input; Error
// returns Msg alone.
type NodeError struct {
	Node *Node
	Msg  string
}

func (e *NodeError) Error() string { return e.Msg }

// Limits of NCCL_TOPO_MAX_NODES (nodes of one type) and NCCL_TOPO_MAX_LINKS (links of one node):
// max nodes 576 in NCCL 2.27–2.29, 640 in 2.30; max links 576 since 2.25 (topo.h).
const (
	maxNodes228 = 576
	maxNodes230 = 640
	maxLinks    = 576
)

// MaxNodes returns NCCL_TOPO_MAX_NODES for a release.
func (v Version) MaxNodes() int {
	if v.AtLeast(V2_30) {
		return maxNodes230
	}
	return maxNodes228
}

// NVLinkBw is the bandwidth of one NVLink of a GPU of compute capability sm, GB/s, under release
// v's rules (ncclTopoNVLinkBw, NCCL 2.28): cc≥100 40.1 (40.0 in 2.25–2.27), ≥90 20.6, ==86 12, ≥80
// 20, ≥70 20, ≥60 18, else 20. The value as NCCL's float holds it.
func (v Version) NVLinkBw(sm int) float64 {
	switch {
	case sm >= 100 && !v.AtLeast(V2_28):
		return 40
	case sm >= 100:
		return f32(40.1)
	case sm >= 90:
		return f32(20.6)
	case sm == 86:
		return 12
	case sm >= 60 && sm < 70:
		return 18
	}
	return 20
}

// f32 rounds to float32, as NCCL keeps bandwidths in floats; printing "%.1f" of the same
// numbers then gives the same digits.
func f32(x float64) float64 { return float64(float32(x)) }

// NewSystem returns an empty system built under opt's rules (a zero opt.Version is V2_28);
// name names the input in messages.
func NewSystem(name string, opt Options) *System {
	if opt.Version == (Version{}) {
		opt.Version = V2_28
	}
	return &System{Version: opt.Version, Options: opt, Name: name}
}

// AddNode appends a node of type t with NCCL's id (systemId<<56 | localId) and returns it. It
// fails when the system already holds MaxNodes nodes of type t (NCCL_TOPO_MAX_NODES).
func (s *System) AddNode(t NodeType, id int64) (*Node, error) {
	if max := s.Version.MaxNodes(); len(s.Nodes[t]) >= max {
		return nil, fmt.Errorf("more than %d %s nodes (NCCL_TOPO_MAX_NODES of NCCL %d.%d)", max, t, s.Version.Major, s.Version.Minor)
	}
	n := &Node{Type: t, ID: id, Index: len(s.Nodes[t])}
	s.Nodes[t] = append(s.Nodes[t], n)
	return n, nil
}

// Connect adds a link node→remote of type t and bandwidth bw (GB/s), aggregating it with an
// existing link of the same type and remote, and keeps node's links sorted by bandwidth
// descending, a new link going after links of equal bandwidth (NCCL 2.28
// ncclTopoConnectNodes). It fails when node already has NCCL_TOPO_MAX_LINKS links.
func Connect(node, remote *Node, t LinkType, bw float64) error {
	var link *Link
	pos := -1
	for i, l := range node.Links {
		if l.Remote == remote && l.Type == t {
			link, pos = l, i
			break
		}
	}
	if link == nil {
		if len(node.Links) >= maxLinks {
			return fmt.Errorf("%s has more than %d links (NCCL_TOPO_MAX_LINKS)", node.Label(), maxLinks)
		}
		link = &Link{Type: t, Remote: remote}
		node.Links = append(node.Links, link)
		pos = len(node.Links) - 1
	}
	link.BW = f32(link.BW + bw)
	for pos > 0 && node.Links[pos-1].BW < link.BW {
		node.Links[pos] = node.Links[pos-1]
		pos--
	}
	node.Links[pos] = link
	return nil
}

// RemoveNode deletes a node and every link to it, and renumbers the nodes of its type (NCCL
// 2.28 ncclTopoRemoveNode).
func (s *System) RemoveNode(n *Node) {
	for t := range s.Nodes {
		for _, m := range s.Nodes[t] {
			kept := m.Links[:0]
			for _, l := range m.Links {
				if l.Remote != n {
					kept = append(kept, l)
				}
			}
			m.Links = kept
		}
	}
	list := s.Nodes[n.Type]
	for i, m := range list {
		if m == n {
			s.Nodes[n.Type] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	for i, m := range s.Nodes[n.Type] {
		m.Index = i
	}
}

// Compute runs what NCCL runs once the graph is built (init.cc): paths, trimming of the GPUs
// outside the local rank's domain (and, before 2.28, of the NETs when every rank is local),
// paths again, then maxBw/totalBw (ncclTopoComputePaths, ncclTopoTrimSystem,
// ncclTopoSearchInit). A one-way link is a *NodeError.
func (s *System) Compute() error { return s.computeAll() }

// Label returns the node's id as NCCL prints it: "TYPE/sys-local" in hex (e.g. "GPU/0-1b000").
func (n *Node) Label() string {
	return fmt.Sprintf("%s/%x-%x", n.Type, n.SystemID(), n.LocalID())
}

// CPU architecture and vendor codes NCCL keeps in CPUInfo.ArchID and VendorID and prints in
// "CPU/0-0 (arch/vendor/model)" (NCCL 2.28 topo.h NCCL_TOPO_CPU_ARCH_*, NCCL_TOPO_CPU_VENDOR_*;
// 0 is unknown). NCCL sets a vendor for x86 CPUs only.
const (
	CPUArchX86   = 1
	CPUArchPower = 2
	CPUArchARM   = 3

	CPUVendorIntel   = 1
	CPUVendorAMD     = 2
	CPUVendorZhaoxin = 3
)

// ArchName returns the architecture of ArchID as package tuning names it in Comm.CPUArch:
// "x86", "power", "arm", or "" when unknown.
func (c CPUInfo) ArchName() string {
	switch c.ArchID {
	case CPUArchX86:
		return "x86"
	case CPUArchPower:
		return "power"
	case CPUArchARM:
		return "arm"
	}
	return ""
}

// VendorName returns the vendor of VendorID as package tuning names it in Comm.CPUVendor:
// "intel", "amd", "zhaoxin", or "" when unknown (any other vendor string, such as HygonGenuine,
// and every CPU that is not x86).
func (c CPUInfo) VendorName() string {
	switch c.VendorID {
	case CPUVendorIntel:
		return "intel"
	case CPUVendorAMD:
		return "amd"
	case CPUVendorZhaoxin:
		return "zhaoxin"
	}
	return ""
}
