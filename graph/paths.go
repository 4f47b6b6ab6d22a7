package graph

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/gonum/graph/simple"
	"gonum.org/v1/gonum/graph/topo"
)

// computeAll runs what NCCL runs after building the graph (init.cc initTransportsRank): paths,
// trimming of GPUs outside the local rank's domain (and, in 2.27, of NETs when every rank is
// local), paths again, then maxBw/totalBw (paths.cc ncclTopoComputePaths, ncclTopoTrimSystem,
// search.cc ncclTopoSearchInit).
func (s *System) computeAll() error {
	s.nRanks = s.Options.NRanks
	if s.nRanks <= 0 {
		s.nRanks = len(s.Nodes[GPU])
	}
	if err := s.computePaths(); err != nil {
		return err
	}
	s.findUnreachable()
	s.setInter()
	if !s.Options.NoTrim {
		if err := s.trim(); err != nil {
			return err
		}
		if err := s.computePaths(); err != nil {
			return err
		}
	}
	s.searchInit()
	return nil
}

// setPaths runs NCCL's BFS from base (NCCL 2.28 paths.cc ncclTopoSetPaths): every node that can
// reach base gets a path towards it, made of its own links (the reverse of the links the BFS
// followed).
func (s *System) setPaths(base *Node) error {
	nb := len(s.Nodes[base.Type])
	ensure := func(n *Node) {
		if n.paths[base.Type] == nil {
			n.paths[base.Type] = make([]*Path, nb)
		}
		if n.paths[base.Type][base.Index] == nil {
			n.paths[base.Type][base.Index] = &Path{Type: PathDIS}
		}
	}
	ensure(base)
	bp := base.paths[base.Type][base.Index]
	bp.Links, bp.BW, bp.Type = nil, LocBw, PathLOC

	lexico := s.Version.AtLeast(V2_30)
	nvb := !s.Options.NVBDisable
	frontier := []*Node{base}
	for len(frontier) > 0 {
		var next []*Node
		inNext := map[*Node]bool{}
		for _, node := range frontier {
			path := node.paths[base.Type][base.Index]
			for _, link := range node.Links {
				rem := link.Remote
				ensure(rem)
				rp := rem.paths[base.Type][base.Index]
				bw := link.BW
				if path.BW < bw {
					bw = path.BW
				}
				// A GPU other than the destination relays only NVLink→NVLink traffic, with one
				// intermediate GPU at most (NVB).
				if node != base && node.Type == GPU &&
					(!nvb || link.Type != LinkNVL || rem.Type != GPU || len(path.Links) > 1) {
					continue
				}
				// Hop type: link type, NET counts as LOC, PCI→PCI is PXB, a PCI link touching a
				// CPU is PHB, and an NVLink hop leaving a GPU at the end of an NVL path is NVB.
				hop := PathType(link.Type)
				if link.Type == LinkNET {
					hop = PathLOC
				}
				if node.Type == PCI && rem.Type == PCI {
					hop = PathPXB
				}
				if link.Type == LinkPCI && (node.Type == CPU || rem.Type == CPU) {
					hop = PathPHB
				}
				if node.Type == GPU && path.Type == PathNVL && hop == PathNVL && len(path.Links) > 0 {
					hop = PathNVB
				}
				typ := path.Type
				if hop > typ {
					typ = hop
				}
				hops := len(path.Links) + 1
				var better bool
				if lexico {
					// 2.30.7: lower type, then higher bw, then fewer hops. A 0 GB/s candidate (an
					// NVLink of count 0) is never taken: under 2.28's rule it cannot be, and we
					// assume 2.30.7 keeps that (not checked against a 2.30 log).
					better = bw > 0 && typ < rp.Type ||
						(typ == rp.Type && bw > rp.BW) ||
						(typ == rp.Type && bw == rp.BW && hops < len(rp.Links))
				} else {
					// ≤2.30.4: (no path yet or more hops than X's) and strictly more bandwidth.
					better = (rp.BW == 0 || len(rp.Links) > len(path.Links)) && rp.BW < bw
				}
				if !better {
					continue
				}
				var rev *Link
				for _, l := range rem.Links {
					if l.Remote == node && l.Type == link.Type {
						rev = l
						break
					}
				}
				if rev == nil {
					return &NodeError{Node: node, Msg: fmt.Sprintf(
						"no %s link from %s back to %s: a one-way link (NCCL fails with \"Failed to find reverse path\")",
						link.Type, rem.Label(), node.Label())}
				}
				links := make([]*Link, 0, hops)
				links = append(links, rev)
				links = append(links, path.Links...)
				rp.Links, rp.BW, rp.Type = links, bw, typ
				if !inNext[rem] {
					inNext[rem] = true
					next = append(next, rem)
				}
			}
		}
		frontier = next
	}
	return nil
}

// computePaths is ncclTopoComputePaths (NCCL 2.28 paths.cc).
func (s *System) computePaths() error {
	for t := range s.Nodes {
		for _, n := range s.Nodes[t] {
			n.paths = [NumNodeTypes][]*Path{}
		}
	}
	for _, t := range []NodeType{CPU, GPU, NET, NVS} {
		for _, n := range s.Nodes[t] {
			if err := s.setPaths(n); err != nil {
				return err
			}
		}
	}
	// Tables a BFS touched are complete (NCCL allocates them whole, DIS); a node no BFS of a
	// type reached has no table for that type, and prints none.
	for t := range s.Nodes {
		for _, n := range s.Nodes[t] {
			for dt := range n.paths {
				for i := range n.paths[dt] {
					if n.paths[dt][i] == nil {
						n.paths[dt][i] = &Path{Type: PathDIS}
					}
				}
			}
		}
	}

	gpus := s.Nodes[GPU]
	// 1. P2P not possible or not wanted: route p→g through g's local CPU; pairs that neither
	// P2P nor SHM can connect (other hosts) become NET.
	for _, g := range gpus {
		for _, p := range gpus {
			if !s.checkP2P(p, g) {
				if cpu := s.localCPU(g); cpu != nil {
					s.addInterStep(cpu, p, g)
				}
			}
		}
		for _, p := range gpus {
			if p == g {
				continue
			}
			if p.SystemID() != g.SystemID() && !s.checkP2P(p, g) {
				p.path(GPU, g.Index).Type = PathNET
			}
		}
	}
	nets := s.Nodes[NET]
	// 2. P2C: GPUs with a C2C path to their CPU reach the NETs that hang off that CPU as P2C
	// (since 2.27.3; before, such a path stays PHB).
	for _, g := range gpus {
		if !s.Version.AtLeast(V2_27) {
			break
		}
		cpu := s.localCPU(g)
		if cpu == nil {
			continue
		}
		gc := g.path(CPU, cpu.Index)
		for _, ni := range s.local(g, NET) {
			n := nets[ni]
			if gc.Type == PathC2C && n.path(CPU, cpu.Index).Type == PathPHB {
				if p := g.path(NET, ni); p.Type > PathP2C {
					p.Type = PathP2C
				}
				if p := n.path(GPU, g.Index); p.Type > PathP2C {
					p.Type = PathP2C
				}
			}
		}
	}
	// 3 and 4, per NET and per GPU in this order, as NCCL interleaves them (a GPU's rewrite is
	// seen by the GPUs after it):
	// PXN: reach the NET through the NVLink peer that drives it (GPU→NET only), if that peer is
	// close to the NET (≤ P2C with NCCL_PXN_C2C=1, the 2.28 default; else ≤ PXB) and may use
	// GDR for reads, and the peer has more bandwidth or our path is worse than PXN.
	// No GDR: if the GPU is closer than PHB but GDR (write) is refused, route both directions
	// through the GPU's local CPU.
	pxnLevel := PathP2C
	if s.Options.PXNC2CDisable || !s.Version.AtLeast(V2_28) { // NCCL_PXN_C2C: default 1 since 2.28
		pxnLevel = PathPXB
	}
	for ni, n := range nets {
		// NCCL recomputes n's local GPU for every g. It depends on n→GPU paths and on the
		// GPU→NET paths of n's closest GPUs only, so it is recomputed when one of those changed.
		pi, dirty := -1, true
		var cands []int
		for _, g := range gpus {
			if !s.Options.PXNDisable {
				if dirty {
					pi, dirty = s.LocalGPU(n), false
					cands = s.local(n, GPU)
				}
				if pi >= 0 && pi != g.Index {
					p := gpus[pi]
					pn, gn := p.path(NET, ni), g.path(NET, ni)
					if pn.Type <= pxnLevel && s.checkGDR(p, n, true) &&
						p.path(GPU, g.Index).Type <= PathNVL && p.SystemID() == g.SystemID() &&
						(pn.BW > gn.BW || gn.Type > PathPXN) {
						s.addInterStep(p, g, n)
						dirty = slices.Contains(cands, g.Index)
					}
				}
			}
			if g.path(NET, ni).Type < PathPHB && !s.checkGDR(g, n, false) {
				if cpu := s.localCPU(g); cpu != nil {
					s.addInterStep(cpu, n, g)
					s.addInterStep(cpu, g, n)
					dirty = true
				}
			}
		}
	}
	return nil
}

// path returns n's stored path to node i of type t, or a fresh DIS path when none is stored.
func (n *Node) path(t NodeType, i int) *Path {
	if i >= 0 && i < len(n.paths[t]) && n.paths[t][i] != nil {
		return n.paths[t][i]
	}
	return &Path{Type: PathDIS}
}

// pathRef returns n's stored path to node i of type t, creating the table when missing.
func (n *Node) pathRef(t NodeType, i, count int) *Path {
	if n.paths[t] == nil {
		n.paths[t] = make([]*Path, count)
		for j := range n.paths[t] {
			n.paths[t][j] = &Path{Type: PathDIS}
		}
	}
	return n.paths[t][i]
}

// addInterStep replaces src's path to dst by src→mid followed by mid→dst: type = max of both
// (PXN when mid is a GPU), bw = min of both (NCCL 2.28 paths.cc addInterStep, whose
// mergePathType also makes C2C with PHB a P2C path; here that pair stays PHB).
func (s *System) addInterStep(mid, src, dst *Node) {
	a := src.path(mid.Type, mid.Index)
	b := mid.path(dst.Type, dst.Index)
	if a.Type == PathDIS || b.Type == PathDIS {
		return // no route through mid; NCCL would fail earlier (no local CPU / GPU)
	}
	p := src.pathRef(dst.Type, dst.Index, len(s.Nodes[dst.Type]))
	links := make([]*Link, 0, len(a.Links)+len(b.Links))
	links = append(links, a.Links...)
	links = append(links, b.Links...)
	p.Links = links
	p.Type = max(a.Type, b.Type)
	if mid.Type == GPU {
		p.Type = PathPXN
	}
	p.BW = min(a.BW, b.BW)
}

// localCPU is the CPU closest to a GPU (ncclGetLocalCpu), or nil: ≤2.29 the CPU with the fewest
// hops; 2.30.7 the fewest hops among the CPUs of best bandwidth (then type) from the GPU.
func (s *System) localCPU(g *Node) *Node {
	cands := make([]int, 0, len(s.Nodes[CPU]))
	if s.Version.AtLeast(V2_30) {
		cands = s.local(g, CPU)
	} else {
		for i := range s.Nodes[CPU] {
			cands = append(cands, i)
		}
	}
	var best *Node
	min := 0
	for _, i := range cands {
		h := len(g.path(CPU, i).Links)
		if h > 0 && (min == 0 || h < min) {
			best, min = s.Nodes[CPU][i], h
		}
	}
	return best
}

// local returns the indices of the nodes of type rt with the best path from n: highest bw,
// then lowest type (ncclTopoGetLocal).
func (s *System) local(n *Node, rt NodeType) []int {
	ps := n.paths[rt]
	if ps == nil {
		return nil
	}
	minType, maxBw := PathDIS, 0.0
	out := make([]int, 0, 8)
	for i, p := range ps {
		if p.BW > maxBw || (p.BW == maxBw && p.Type < minType) {
			maxBw, minType = p.BW, p.Type
			out = out[:0]
		}
		if p.BW == maxBw && p.Type == minType && p.BW > 0 {
			out = append(out, i)
		}
	}
	return out
}

// p2pLevel is the highest path type P2P may use (NCCL 2.28 paths.cc ncclTopoCheckP2p).
func (s *System) p2pLevel() PathType {
	if s.Options.P2PDisable {
		return PathLOC
	}
	if s.Options.P2PLevel != "" {
		if l, err := ParsePathType(s.Options.P2PLevel); err == nil {
			return l
		}
	}
	level := PathPXB
	if len(s.Nodes[CPU]) > 0 {
		c := s.Nodes[CPU][0].CPU
		if c.ArchID == CPUArchX86 && c.VendorID == CPUVendorAMD && len(s.Nodes[GPU]) <= 2 {
			level = PathSYS
		}
	}
	return level
}

// checkP2P says whether GPU p may reach GPU g directly (ncclTopoCheckP2p).
func (s *System) checkP2P(p, g *Node) bool {
	path := p.path(GPU, g.Index)
	if p == g {
		return true
	}
	if p.SystemID() != g.SystemID() && path.Type > PathNVL {
		return false // other hosts: only MNNVL (NVLink) reaches them
	}
	if s.Options.P2PUnsupported && path.Type > PathNVB {
		return false // the driver reports no PCIe P2P (GeForce)
	}
	return path.Type <= s.p2pLevel()
}

// gdrLevel is the highest GPU→NET distance for GPUDirect RDMA (NCCL 2.28 paths.cc ncclTopoCheckGdr).
func (s *System) gdrLevel() PathType {
	if s.Options.NetGDRLevel != "" {
		if l, err := ParsePathType(s.Options.NetGDRLevel); err == nil {
			return l
		}
	}
	if s.Version.AtLeast(V2_30) {
		return PathP2C // NCCL_NET_GDR_C2C=1
	}
	return PathPXB // 2.27–2.29: PXB, with a P2C distance counted as C2C
}

// checkGDR is ncclTopoCheckGdr for (GPU, NET, direction); read means the GPU sends.
func (s *System) checkGDR(g, n *Node, read bool) bool {
	if s.Options.NetGDRDisable || !n.NET.GDR || !g.GPU.GDR {
		return false
	}
	if read && g.GPU.SM < 80 {
		// NCCL_NET_GDR_READ left at default: pre-Ampere GPUs read only with an NVLink peer.
		nvl := len(s.Nodes[GPU]) == 1
		for i, p := range g.paths[GPU] {
			if i != g.Index && p.Type == PathNVL {
				nvl = true
			}
		}
		if !nvl {
			return false
		}
	}
	d := g.path(NET, n.Index).Type
	if d == PathPXN {
		if p := intermediateGPU(g.path(NET, n.Index), n); p != nil {
			d = p.path(NET, n.Index).Type
		}
	}
	if !s.Version.AtLeast(V2_30) && d == PathP2C {
		d = PathC2C // 2.27–2.29 ncclTopoCheckGdr: a P2C distance counts as C2C against the level
	}
	return d <= s.gdrLevel()
}

// intermediateGPU returns the first GPU a path goes through (ncclTopoGetIntermediateRank).
func intermediateGPU(p *Path, dst *Node) *Node {
	for _, l := range p.Links {
		if l.Remote.Type == GPU && l.Remote != dst {
			return l.Remote
		}
	}
	return nil
}

// LocalGPU returns the index of the GPU that drives NET n on some channel, or -1
// (NCCL 2.28 topo.cc ncclTopoGetLocalGpu): the first of n's closest GPUs, channel by channel,
// whose LocalNet is n.
func (s *System) LocalGPU(n *Node) int {
	type cand struct {
		gi        int
		nets      []int
		base, per int
	}
	var cs []cand
	maxPer := 0
	for _, gi := range s.local(n, GPU) {
		nets, base, per, ok := s.localNetInfo(s.Nodes[GPU][gi])
		if !ok {
			continue
		}
		cs = append(cs, cand{gi, nets, base, per})
		maxPer = max(maxPer, per)
	}
	// NCCL tries channels 0..MAXCHANNELS-1; a GPU's NET repeats with period per, so channels
	// beyond the largest period cannot match first.
	for c := 0; c < min(64, maxPer); c++ {
		for _, x := range cs {
			if x.nets[(x.base+c%x.per)%len(x.nets)] == n.Index {
				return x.gi
			}
		}
	}
	return -1
}

// LocalNet returns the index of the NET a GPU uses on a channel (NCCL 2.28 topo.cc
// ncclTopoGetLocalNet): localNets = NETs with max bw (tie: min type) from the GPU, localGpus =
// GPUs with max bw from localNets[0], netsPerGpu = ceil(nets/gpus), NET = localNets[(mirror(dev %
// gpus) + c % netsPerGpu) % nets], mirror bit-reversing when the number of local NETs is a power
// of two.
func (s *System) LocalNet(g *Node, channel int) (int, bool) {
	nets, base, per, ok := s.localNetInfo(g)
	if !ok || channel < 0 {
		return -1, false
	}
	return nets[(base+channel%per)%len(nets)], true
}

// LocalNetCountByBw is how many of the NETs a GPU's channels use (LocalNet, channel 0 on, until
// the first repeats) it takes for their bandwidth from the GPU to reach the GPU's own bandwidth to
// its local CPU, and the bandwidth they sum to (GB/s); 0, 0 without a NET. NCCL's point-to-point
// channel count per network peer starts from it (NCCL 2.29+ paths.cc ncclTopoGetLocalNetCountByBw,
// used by ncclTopoGetNchannels; 2.28 counts the NICs the same way before its rank rule:
// tuning.Table.P2PChannels). A DGX H100 GPU: one NIC, 48 GB/s (its PCIe Gen5 path).
func (s *System) LocalNetCountByBw(g *Node) (count int, bw float64) {
	if g == nil || g.Type != GPU {
		return 0, 0
	}
	nets, base, per, ok := s.localNetInfo(g)
	if !ok {
		return 0, 0
	}
	var gpuBw float64
	if c := s.localCPU(g); c != nil {
		gpuBw = g.path(CPU, c.Index).BW
	}
	// Channels 0..per-1 use per different NETs (LocalNet), then channel per repeats channel 0's.
	for c := 0; c < per && (count == 0 || bw < gpuBw); c++ {
		bw += g.path(NET, nets[(base+c)%len(nets)]).BW
		count++
	}
	return count, bw
}

func (s *System) localNetInfo(g *Node) (nets []int, base, per int, ok bool) {
	nets = s.local(g, NET)
	if len(nets) == 0 {
		return nil, 0, 0, false
	}
	gpus := s.local(s.Nodes[NET][nets[0]], GPU)
	if len(gpus) == 0 {
		return nil, 0, 0, false
	}
	base = g.GPU.Dev % len(gpus)
	if isPow2(len(nets)) {
		base = mirrorBits(base, len(nets))
	}
	per = (len(nets) + len(gpus) - 1) / len(gpus)
	return nets, base, per, true
}

func isPow2(v int) bool { return v > 0 && v&(v-1) == 0 }

func mirrorBits(val, pow2 int) int {
	m := 0
	for b, mb := 1, pow2>>1; b < pow2; b, mb = b<<1, mb>>1 {
		if val&b != 0 {
			m |= mb
		}
	}
	return m
}

// findUnreachable records GPU pairs without any route (DIS, or NET with no links: other hosts
// with nothing between them), so that callers can report them.
func (s *System) findUnreachable() {
	s.Unreachable = nil
	gpus := s.Nodes[GPU]
	if len(gpus) < 2 {
		return
	}
	// GPUs that reach each other form groups (connected components of the "has a path" relation,
	// gonum's topo.ConnectedComponents); one line names every pair of groups that cannot meet.
	g := simple.NewUndirectedGraph()
	for i := range gpus {
		g.AddNode(simple.Node(i))
	}
	for i, a := range gpus {
		for j := i + 1; j < len(gpus); j++ {
			if p := a.path(GPU, gpus[j].Index); p.Type != PathDIS && len(p.Links) > 0 {
				g.SetEdge(g.NewEdge(simple.Node(i), simple.Node(j)))
			}
		}
	}
	comps := topo.ConnectedComponents(g)
	if len(comps) < 2 {
		return
	}
	groups := make([][]int, len(comps))
	for c, comp := range comps {
		for _, nd := range comp {
			groups[c] = append(groups[c], int(nd.ID()))
		}
		sort.Ints(groups[c])
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i][0] < groups[j][0] })
	name := func(grp []int) string {
		var parts []string
		for _, i := range grp {
			parts = append(parts, fmt.Sprintf("%d (%s)", gpus[i].GPU.Rank, gpus[i].Label()))
		}
		return strings.Join(parts, ", ")
	}
	for i := range groups {
		for j := i + 1; j < len(groups); j++ {
			s.Unreachable = append(s.Unreachable, fmt.Sprintf("GPU rank %s has no path to GPU rank %s", name(groups[i]), name(groups[j])))
		}
	}
}

// trim keeps the GPUs of the local rank's domain (GPUs linked by paths below NET) and removes
// the NETs when every rank is in the system (NCCL 2.27 paths.cc ncclTopoTrimSystem; 2.28 keeps
// them).
func (s *System) trim() error {
	gpus := s.Nodes[GPU]
	domains := make([]int, len(gpus))
	my := -1
	for g, gpu := range gpus {
		domains[g] = g
		for p := 0; p < g; p++ {
			if gpu.path(GPU, p).Type < PathNET {
				domains[g] = min(domains[g], domains[p])
			}
		}
		if gpu.GPU.Rank == s.Options.LocalRank {
			my = domains[g]
		}
	}
	if my < 0 && s.Options.LocalRank == 0 && len(gpus) > 0 {
		// The zero value asks for "rank 0"; a node file of a later node (ranks 8..15) has none,
		// so the view is that of its first GPU.
		my = domains[0]
	}
	if my < 0 {
		ranks := make([]int, len(gpus))
		for i, g := range gpus {
			ranks[i] = g.GPU.Rank
		}
		sort.Ints(ranks)
		return fmt.Errorf("local rank %d is not in the topology (ranks %v)", s.Options.LocalRank, ranks)
	}
	var drop []*Node
	for g, gpu := range gpus {
		if domains[g] != my {
			drop = append(drop, gpu)
		}
	}
	for _, n := range drop {
		s.RemoveNode(n)
	}
	s.setInter()
	if !s.Inter && !s.Version.AtLeast(V2_28) {
		for len(s.Nodes[NET]) > 0 {
			s.RemoveNode(s.Nodes[NET][len(s.Nodes[NET])-1])
		}
	}
	return nil
}

// setInter sets Inter: some ranks live outside this system (fewer GPUs than ranks).
func (s *System) setInter() {
	s.Inter = len(s.Nodes[GPU]) != s.nRanks
}

// searchInit computes maxBw and totalBw (NCCL 2.28 search.cc ncclTopoSearchInit): maxBw = best
// path bw from a GPU to a NET (inter-node) or to another GPU; totalBw = max over GPUs of max(PCI
// link bw, sum of NVLink bw); a single GPU that is not inter-node (≤2.27: has no NET) gets LOC_BW
// for both.
func (s *System) searchInit() {
	s.MaxBw, s.TotalBw = 0, 0
	// 2.28 uses system->inter; ≤2.27 the NET count (NETs were removed when not inter).
	inter := s.Inter
	if !s.Version.AtLeast(V2_28) {
		inter = len(s.Nodes[NET]) > 0
	}
	if !inter && len(s.Nodes[GPU]) == 1 {
		s.MaxBw, s.TotalBw = LocBw, LocBw
		return
	}
	t := GPU
	if inter {
		t = NET
	}
	for _, g := range s.Nodes[GPU] {
		for _, p := range g.paths[t] {
			if len(p.Links) > 0 && p.BW > s.MaxBw {
				s.MaxBw = p.BW
			}
		}
		var nvl, pci float64
		for _, l := range g.Links {
			switch l.Type {
			case LinkNVL:
				nvl = f32(nvl + l.BW)
			case LinkPCI:
				pci = l.BW
			}
		}
		s.TotalBw = max(s.TotalBw, pci, nvl)
	}
}
