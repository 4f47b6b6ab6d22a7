package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/simnet"
)

// Topology is the node drawn from the system graph: one entry per node and per undirected link
// (the two directed links of a pair of nodes with the same type), placed for the SVG.
type Topology struct {
	Nodes []TopoNode           `json:"nodes"`
	Links []TopoLink           `json:"links"`
	Paths map[string][]GPUPath `json:"paths"` // per GPU, its paths to the other GPUs
	W, H  float64              `json:"-"`
}

// TopoNode is one vertex.
type TopoNode struct {
	ID    string  `json:"id"` // graph's short name, "GPU/3"
	Type  string  `json:"type"`
	Label string  `json:"label"`
	X, Y  float64 `json:"-"`
}

// TopoLink is one undirected link: BW is A→B, BWBack B→A (GB/s).
type TopoLink struct {
	A      string  `json:"a"`
	B      string  `json:"b"`
	Type   string  `json:"type"`
	BW     float64 `json:"bw"`
	BWBack float64 `json:"bw_back"`
}

// GPUPath is a GPU's path to another GPU as the graph computed it.
type GPUPath struct {
	To   string  `json:"to"`
	Type string  `json:"type"`
	BW   float64 `json:"bw"`
	Hops int     `json:"hops"`
}

const (
	slotW = 80.0
	rowH  = 88.0
	marg  = 40.0
	top   = 70.0 // room above the CPU row for inter-CPU arcs
)

func nodeLabel(n *graph.Node) string {
	switch n.Type {
	case graph.GPU:
		return fmt.Sprintf("GPU %d", n.GPU.Rank)
	case graph.NET:
		if n.NET.Name != "" {
			return n.NET.Name
		}
		return fmt.Sprintf("NET %d", n.NET.Dev)
	case graph.CPU:
		if n.CPU.NumaID >= 0 {
			return fmt.Sprintf("CPU %d", n.CPU.NumaID)
		}
		return fmt.Sprintf("CPU #%d", n.Index)
	case graph.NVS:
		return "NVSwitch"
	case graph.NIC:
		return fmt.Sprintf("NIC %d", n.Index)
	}
	return fmt.Sprintf("PCI %d", n.Index)
}

// buildTopology lists the nodes and links of sys and lays them out: a tree under each CPU through
// PCIe (CPUs on top, switches below, GPUs and NICs at their depth, NETs under their NIC), the
// NVSwitch in a row beneath the GPUs, nodes the tree does not reach in a last row.
func buildTopology(sys *graph.System) Topology {
	var t Topology
	var all []*graph.Node
	for ty := 0; ty < graph.NumNodeTypes; ty++ {
		all = append(all, sys.Nodes[ty]...)
	}
	// Links: one per unordered pair and type.
	type pk struct {
		a, b string
		ty   graph.LinkType
	}
	idx := map[pk]int{}
	for _, n := range all {
		for _, l := range n.Links {
			if l.Remote == n {
				continue
			}
			a, b := n.Name(), l.Remote.Name()
			if i, ok := idx[pk{b, a, l.Type}]; ok {
				t.Links[i].BWBack = l.BW
				continue
			}
			if i, ok := idx[pk{a, b, l.Type}]; ok {
				t.Links[i].BW += l.BW
				continue
			}
			idx[pk{a, b, l.Type}] = len(t.Links)
			t.Links = append(t.Links, TopoLink{A: a, B: b, Type: l.Type.String(), BW: l.BW})
		}
	}
	// Layout: spanning forest from the CPUs over every link except NVLink and SYS, never entering
	// a CPU or the NVSwitch.
	children := map[*graph.Node][]*graph.Node{}
	depth := map[*graph.Node]int{}
	seen := map[*graph.Node]bool{}
	var roots []*graph.Node
	roots = append(roots, sys.Nodes[graph.CPU]...)
	queue := append([]*graph.Node(nil), roots...)
	for _, r := range roots {
		seen[r] = true
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, l := range n.Links {
			c := l.Remote
			if seen[c] || c.Type == graph.CPU || c.Type == graph.NVS || l.Type == graph.LinkNVL || l.Type == graph.LinkSYS || l.Type == graph.LinkC2C && c.Type != graph.GPU {
				continue
			}
			seen[c] = true
			depth[c] = depth[n] + 1
			children[n] = append(children[n], c)
			queue = append(queue, c)
		}
	}
	for _, n := range all {
		sort.SliceStable(children[n], func(i, j int) bool {
			a, b := children[n][i], children[n][j]
			if a.Type != b.Type {
				return a.Type < b.Type
			}
			return a.Index < b.Index
		})
	}
	pos := map[*graph.Node][2]float64{}
	slot := 0.0
	maxDepth := 0
	var place func(n *graph.Node) float64
	place = func(n *graph.Node) float64 {
		if depth[n] > maxDepth {
			maxDepth = depth[n]
		}
		y := top + float64(depth[n])*rowH
		if len(children[n]) == 0 {
			x := marg + slot*slotW
			slot++
			pos[n] = [2]float64{x, y}
			return x
		}
		lo, hi := 0.0, 0.0
		for i, c := range children[n] {
			x := place(c)
			if i == 0 {
				lo = x
			}
			hi = x
		}
		x := (lo + hi) / 2
		pos[n] = [2]float64{x, y}
		return x
	}
	for _, r := range roots {
		place(r)
		slot += 0.5
	}
	// Unreached nodes (no CPU, or GPUs only joined by NVLink) and the NVSwitch go in rows below.
	row := maxDepth + 1
	var rest, nvs []*graph.Node
	for _, n := range all {
		if _, ok := pos[n]; ok {
			continue
		}
		if n.Type == graph.NVS {
			nvs = append(nvs, n)
		} else {
			rest = append(rest, n)
		}
	}
	width := slot
	if len(rest) > 0 {
		for i, n := range rest {
			pos[n] = [2]float64{marg + float64(i)*slotW, top + float64(row)*rowH}
		}
		width = max(width, float64(len(rest)))
		row++
	}
	for i, n := range nvs {
		span := max(width-1, 0) * slotW
		pos[n] = [2]float64{marg + span*float64(i+1)/float64(len(nvs)+1), top + float64(row)*rowH + 20}
	}
	if len(nvs) > 0 {
		row++
	}
	for _, n := range all {
		p := pos[n]
		t.Nodes = append(t.Nodes, TopoNode{ID: n.Name(), Type: n.Type.String(), Label: nodeLabel(n), X: p[0], Y: p[1]})
	}
	t.W = marg*2 + max(width-1, 1)*slotW + 60
	t.H = top + marg + float64(row)*rowH
	// Paths between GPUs.
	t.Paths = map[string][]GPUPath{}
	gpus := sys.GPUs()
	for _, a := range gpus {
		var ps []GPUPath
		for _, b := range gpus {
			if a == b {
				continue
			}
			p := sys.Path(a, b)
			if p == nil {
				ps = append(ps, GPUPath{To: b.Name(), Type: graph.PathDIS.String()})
				continue
			}
			ps = append(ps, GPUPath{To: b.Name(), Type: p.Type.String(), BW: p.BW, Hops: p.Hops()})
		}
		t.Paths[a.Name()] = ps
	}
	return t
}

// FabricSum summarises the network between nodes, counted from the links the simulator builds.
type FabricSum struct {
	Topology     string   `json:"topology"`
	Tiers        int      `json:"tiers"`
	Routing      string   `json:"routing"`
	ECMPSeed     uint64   `json:"ecmp_seed,omitempty"`
	QPs          int      `json:"qps_per_connection,omitempty"` // queue pairs ECMP hashes apart (NCCL_IB_QPS_PER_CONNECTION > 1)
	Nodes        int      `json:"nodes"`
	NICsPerNode  int      `json:"nics_per_node"`
	Rails        int      `json:"rails"`
	HostsPerLeaf int      `json:"hosts_per_leaf"`
	Leaves       int      `json:"leaves"`
	Upper        int      `json:"upper_switch_ports"` // distinct spine (or aggregation) ports
	Cores        int      `json:"core_ports"`
	NICLinks     int      `json:"nic_links"`
	UpLinks      int      `json:"switch_links"`
	NICGBps      float64  `json:"nic_gbps"`
	Oversub      float64  `json:"oversubscription"`
	LeafNames    []string `json:"-"`
}

func summariseFabric(m *simnet.Machine) (*FabricSum, error) {
	e := simnet.NewEngine(nil)
	if _, err := simnet.NewCluster(e, m.Node, m.Nodes, m.Fabric); err != nil {
		return nil, err
	}
	f := m.Fabric
	fs := &FabricSum{Topology: f.Topology, Tiers: f.Tiers, Routing: f.Routing, ECMPSeed: f.ECMPSeed, Nodes: m.Nodes, NICsPerNode: len(m.Node.NICs),
		HostsPerLeaf: f.HostsPerLeaf, Oversub: f.Oversub, QPs: f.Header().QPs}
	if f.Topology == "rail" {
		fs.Rails = len(m.Node.NICs)
	} else {
		fs.Rails = 1
	}
	if len(m.Node.NICs) > 0 {
		fs.NICGBps = m.Node.NICs[0].GBps
	}
	if f.NICGBps > 0 {
		fs.NICGBps = f.NICGBps
	}
	leaves, upper, cores := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for l := 0; l < e.NumLinks(); l++ {
		name := e.LinkName(simnet.LinkID(l))
		from, to, ok := strings.Cut(name, "->")
		if !ok {
			continue
		}
		for _, s := range []string{from, to} {
			switch {
			case strings.HasPrefix(s, "leaf"):
				leaves[s] = true
			case strings.HasPrefix(s, "spine") || strings.Contains(s, ".agg"):
				upper[s] = true
			case strings.HasPrefix(s, "core"):
				cores[s] = true
			}
		}
		if strings.HasPrefix(from, "n") && strings.Contains(from, ".") && strings.HasPrefix(to, "leaf") {
			fs.NICLinks++
		} else if strings.HasPrefix(from, "leaf") && !strings.HasPrefix(to, "n") || strings.Contains(from, "agg") && strings.HasPrefix(to, "core") {
			fs.UpLinks++
		}
	}
	fs.Leaves, fs.Upper, fs.Cores = len(leaves), len(upper), len(cores)
	if fs.Leaves == 0 {
		fs.Leaves = 1 // every node under one leaf: the simulator builds no switch-to-switch link
	}
	return fs, nil
}
