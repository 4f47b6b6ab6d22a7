package simnet

import (
	"fmt"
	"sort"

	"github.com/simccl/simccl/graph"
)

// NodeFromGraph builds the node template of a graph.System: one simulated link per directed link
// of the system graph (NVLink ports, NVSwitch ports, PCIe links and switches, the CPU
// interconnect, NIC-to-NET links) with the bandwidth graph assigned it, and for every GPU pair and
// GPU/NET pair the links of the path graph computed. GPUs are ordered by rank; NETs are the
// node's network ports.
func NodeFromGraph(sys *graph.System) (*NodeModel, error) {
	if sys == nil {
		return nil, fmt.Errorf("simnet: no system")
	}
	gpus := append([]*graph.Node(nil), sys.GPUs()...)
	if len(gpus) == 0 {
		return nil, fmt.Errorf("simnet: system %q has no GPU", sys.Name)
	}
	sort.SliceStable(gpus, func(i, j int) bool { return gpus[i].GPU.Rank < gpus[j].GPU.Rank })
	m := &NodeModel{Name: sys.Name, NumGPUs: len(gpus)}
	idx := map[*graph.Link]int{}
	for t := 0; t < graph.NumNodeTypes; t++ {
		for _, n := range sys.Nodes[t] {
			for _, l := range n.Links {
				if l == nil || l.Remote == nil {
					continue
				}
				c := ClassPCI
				if l.Type == graph.LinkNVL || l.Type == graph.LinkC2C {
					c = ClassNVLink
				}
				bw := l.BW
				if !(bw > 0) {
					// A link of no bandwidth (an NVLink of count 0) carries nothing: paths do not
					// use it, and one that did is refused below.
					continue
				}
				idx[l] = len(m.Links)
				m.Links = append(m.Links, LinkSpec{Name: fmt.Sprintf("%s->%s(%s)", n.Name(), l.Remote.Name(), l.Type), Class: c, GBps: bw})
			}
		}
	}
	conv := func(p *graph.Path, what string) ([]int, error) {
		if p == nil {
			return nil, fmt.Errorf("simnet: system %q: no path %s", sys.Name, what)
		}
		out := make([]int, 0, len(p.Links))
		for _, l := range p.Links {
			i, ok := idx[l]
			if !ok {
				return nil, fmt.Errorf("simnet: system %q: path %s crosses a link outside the system or of no bandwidth", sys.Name, what)
			}
			out = append(out, i)
		}
		return out, nil
	}
	m.GPUPaths = make([][][]int, len(gpus))
	for a, ga := range gpus {
		m.GPUPaths[a] = make([][]int, len(gpus))
		for b, gb := range gpus {
			if a == b {
				continue
			}
			r, err := conv(sys.Path(ga, gb), fmt.Sprintf("from %s to %s", ga.Name(), gb.Name()))
			if err != nil {
				return nil, err
			}
			m.GPUPaths[a][b] = r
		}
	}
	if err := nvsLinks(m, gpus, idx); err != nil {
		return nil, err
	}
	// The NETs every GPU of the communicator reaches both ways. A GPU left out of the
	// communicator (--gpus, CUDA_VISIBLE_DEVICES) can leave NETs that only it reached (a GB200
	// NVL72 tray's NICs hang off that tray's CPU, and trays meet only through NVLink): NCCL's
	// search never picks those, and neither do the routes here.
	var nets []*graph.Node
	for _, n := range sys.NETs() {
		ok := true
		for _, g := range gpus {
			if sys.Path(g, n) == nil || sys.Path(n, g) == nil {
				ok = false
				break
			}
		}
		if ok {
			nets = append(nets, n)
		}
	}
	if len(nets) == 0 {
		return m, m.Validate()
	}
	m.GPUToNIC = make([][][]int, len(gpus))
	m.NICToGPU = make([][][]int, len(nets))
	m.NICOrder = make([][]int, len(gpus))
	m.NICOwn = make([][]int, len(gpus))
	m.NICViaPXN = make([][]bool, len(gpus))
	for k, n := range nets {
		m.NICs = append(m.NICs, NICSpec{Name: n.Name(), GBps: n.NET.Speed, LatUs: n.NET.Latency})
		m.NICToGPU[k] = make([][]int, len(gpus))
	}
	for g, gn := range gpus {
		m.GPUToNIC[g] = make([][]int, len(nets))
		m.NICViaPXN[g] = make([]bool, len(nets))
		type cand struct {
			k  int
			t  graph.PathType
			bw float64
		}
		var cs []cand
		for k, n := range nets {
			p := sys.Path(gn, n)
			r, err := conv(p, fmt.Sprintf("from %s to %s", gn.Name(), n.Name()))
			if err != nil {
				return nil, err
			}
			m.GPUToNIC[g][k] = r
			m.NICViaPXN[g][k] = p.Type <= graph.PathPXN
			back, err := conv(sys.Path(n, gn), fmt.Sprintf("from %s to %s", n.Name(), gn.Name()))
			if err != nil {
				return nil, err
			}
			m.NICToGPU[k][g] = back
			cs = append(cs, cand{k, p.Type, p.BW})
		}
		// The GPU's local NETs: the best bandwidth, then the best path type (NCCL 2.28
		// ncclTopoGetLocalNet); channel c uses the (c mod n)-th.
		best := cs[0]
		for _, c := range cs[1:] {
			if c.bw > best.bw || (c.bw == best.bw && c.t < best.t) {
				best = c
			}
		}
		for _, c := range cs {
			if c.bw == best.bw && c.t == best.t {
				m.NICOrder[g] = append(m.NICOrder[g], c.k)
			}
		}
		m.NICOwn[g] = m.NICOrder[g]
		if ord := localNetOrder(sys, gn, nets); ord != nil {
			m.NICOwn[g] = ord
		}
	}
	return m, m.Validate()
}

// localNetOrder is NodeModel.NICOwn of GPU g: the NICs (indexes into nets) it uses channel after
// channel, one period of NCCL's choice (graph.System.LocalNet, ncclTopoGetLocalNet): where several
// GPUs share their local NICs each takes its own share of them (two GPUs and two NICs on one PCIe
// switch: one NIC each, every channel), where one GPU has several it takes them in turn by channel.
// Nil where NCCL's choice is not among nets (a GPU left out of the communicator reached it alone).
func localNetOrder(sys *graph.System, g *graph.Node, nets []*graph.Node) []int {
	k := map[int]int{}
	for i, n := range nets {
		k[n.Index] = i
	}
	var seq []int
	for c := 0; c < max(len(nets), 1); c++ {
		n, ok := sys.LocalNet(g, c)
		if !ok {
			return nil
		}
		i, ok := k[n]
		if !ok {
			return nil
		}
		seq = append(seq, i)
	}
	// The shortest period of the sequence (netsPerGpu).
	for p := 1; p <= len(seq); p++ {
		periodic := true
		for c := p; c < len(seq) && periodic; c++ {
			periodic = seq[c] == seq[c%p]
		}
		if periodic {
			return seq[:p]
		}
	}
	return seq
}

// nvsLinks fills m's GPU↔NVSwitch links when every GPU has an NVLink to the system's (merged)
// NVSwitch node and back; it leaves them nil on machines without one.
func nvsLinks(m *NodeModel, gpus []*graph.Node, idx map[*graph.Link]int) error {
	up := make([]int, len(gpus))
	down := make([]int, len(gpus))
	for g, gn := range gpus {
		up[g], down[g] = -1, -1
		for _, l := range gn.Links {
			if l == nil || l.Remote == nil || l.Remote.Type != graph.NVS {
				continue
			}
			if i, ok := idx[l]; ok {
				up[g] = i
			}
			for _, b := range l.Remote.Links {
				if b != nil && b.Remote == gn {
					if i, ok := idx[b]; ok {
						down[g] = i
					}
				}
			}
		}
		if up[g] < 0 || down[g] < 0 {
			return nil // not every GPU is on the NVSwitch: no NVLS on this machine
		}
	}
	m.GPUToNVS, m.NVSToGPU = up, down
	return nil
}
