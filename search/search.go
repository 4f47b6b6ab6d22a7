package search

import (
	"math"
)

// sgraph is the graph while it is searched: NCCL's struct ncclTopoGraph with float32 bandwidths,
// so that products, comparisons and SUB_ROUND behave exactly as in NCCL.
type sgraph struct {
	id           int
	pattern      Pattern
	crossNic     int
	collNet      bool
	minChannels  int
	maxChannels  int
	nChannels    int
	bwIntra      float32
	bwInter      float32
	latencyInter float32
	typeIntra    PathType
	typeInter    PathType
	sameChannels int
	nHops        int
	intra        []int   // MaxChannels × ngpus ranks
	inter        []int64 // MaxChannels × 2 NET ids
}

func newSgraph(ngpus int) *sgraph {
	return &sgraph{intra: make([]int, MaxChannels*max(ngpus, 1)), inter: make([]int64, MaxChannels*2)}
}

// copyFrom is NCCL's memcpy of one graph over another.
func (g *sgraph) copyFrom(o *sgraph) {
	intra, inter := g.intra, g.inter
	*g = *o
	g.intra, g.inter = intra, inter
	copy(g.intra, o.intra)
	copy(g.inter, o.inter)
}

// Search time budgets, counted in calls of the GPU recursion (search.cc).
// 2.28 values; the global budget was 1<<18 up to 2.18.
const (
	timeoutDefault      = 1 << 14
	timeoutTree         = 1 << 14
	timeoutSameChannels = 1 << 8
	timeoutPCIOrder     = 1 << 10 // the first PCI-order try from a NET (RecNet)
)

// Forced orders of ncclTopoSearchRecGpu.
const (
	orderNone   = 0
	orderPCI    = 1
	orderReplay = 2
)

// searcher holds one search: the topology copy whose bandwidths it consumes and the budget.
type searcher struct {
	t     *Topology
	ngpus int
	save  *sgraph
	hasNV bool // an NVSwitch is present
	// Scratch space, so that the hot recursion does not allocate: scores for nextGpuSort and one
	// candidate list per (channel, step), since a list is still being walked while deeper steps
	// and later channels build theirs.
	scores  []gpuScore
	nextBuf [][]int
}

// subRound is SUB_ROUND: a = roundf((a-b)*1000)/1000 in float32.
func subRound(a, b float32) float32 {
	// roundf rounds half away from zero. x has at most 24 significant bits, so x±0.5 is exact in
	// float64 and floor gives the same answer as math.Round, faster (floor is an instruction).
	x := float64((a - b) * 1000)
	if x < 0 {
		x = -math.Floor(-x + 0.5)
	} else {
		x = math.Floor(x + 0.5)
	}
	return float32(x) / 1000
}

// followPathLinks is followPath: walk up to maxSteps links of p from start, consuming bw on each
// (bw×6/5 on PCI links of a PHB path started by a GPU that crosses an Intel x86 CPU; plus bw/8
// on the reverse link when entering a pre-Ampere GPU from a non-GPU start, and bw on the reverse
// link of a POWER CPU's NVLink). It returns how many links it could charge.
func followPathLinks(p *path, start *node, maxSteps int, bw float32) int {
	pciBw := bw
	for _, l := range p.list {
		n := l.rem
		if n.kind == KindCPU && p.typ == PathPHB && start.kind == KindGPU && n.arch == ArchX86 && n.vendor == VendorIntel {
			pciBw = bw * 6 / 5 // INTEL_P2P_OVERHEAD
		}
	}
	cur := start
	for step := 0; step < maxSteps; step++ {
		l := p.list[step]
		fw := bw
		if l.kind == linkPCI {
			fw = pciBw
		}
		var rev float32
		var revLink *link
		if l.rem.kind == KindGPU && l.rem.cc < 80 && start.kind != KindGPU {
			revLink = findLink(l.rem, cur, l.kind)
			rev += fw / 8
		}
		if l.rem.kind == KindCPU && l.rem.arch == ArchPower && l.kind == linkNVL {
			if revLink == nil {
				revLink = findLink(l.rem, cur, l.kind)
			}
			rev += fw
		}
		if rev != 0 && revLink == nil {
			// NCCL fails with "Could not find rev link"; treat it as not enough bandwidth.
			return step
		}
		if l.bw < fw || (rev != 0 && revLink.bw < rev) {
			return step
		}
		l.bw = subRound(l.bw, fw)
		if rev != 0 {
			revLink.bw = subRound(revLink.bw, rev)
		}
		cur = l.rem
	}
	return maxSteps
}

// follow is ncclTopoFollowPath: try to go from (k1,i1) to (k2,i2), charging the graph's bandwidth
// times mult (negative mult gives it back). k1 < 0 means "no origin" and always succeeds.
func (s *searcher) follow(g *sgraph, k1 NodeKind, i1 int, k2 NodeKind, i2 int, mult float32) *node {
	dst := s.t.nodes[k2][i2]
	if k1 < 0 {
		return dst
	}
	src := s.t.nodes[k1][i1]
	p := &src.paths[k2][i2]
	rev := &dst.paths[k1][i1]
	intra := (k1 == KindGPU || k1 == KindNVS) && (k2 == KindGPU || k2 == KindNVS)
	bw, typ := g.bwInter, g.typeInter
	if intra {
		bw, typ = g.bwIntra, g.typeIntra
	}
	if p.typ >= PathDIS {
		return nil
	}
	if mult == 1 && p.typ > typ {
		return nil
	}
	if mult == 1 && g.pattern.isTree() && rev.typ > typ {
		return nil
	}
	bw *= mult
	step := followPathLinks(p, src, p.count(), bw)
	if step < p.count() {
		followPathLinks(p, src, step, -bw)
		return nil
	}
	g.nHops = int(float32(g.nHops) + mult*float32(p.count()))
	return dst
}

// gpuPciBw is the GPU's PCI link bandwidth: min of both directions, truncated to an int.
func gpuPciBw(gpu *node) int {
	for _, l := range gpu.links {
		if l.kind != linkPCI {
			continue
		}
		for _, r := range l.rem.links {
			if r.rem == gpu {
				return int(min(l.bw, r.bw))
			}
		}
	}
	return -1
}

type gpuScore struct {
	g                               int
	startIndex                      int
	intraNhops, intraBw             int
	interNhops, interPciBw, interBw int
}

// nextGpuSort is ncclTopoSearchNextGpuSort: the order in which to try the GPUs after gpu.
// sortNet 0: intra only; 1: also sort by the channel's start NET; -1: the same, and reverse the
// order when every candidate has the same intra score. With an NVSwitch only the index
// neighbours are tried (neighbourGpus; ring: previous then next; balanced/split tree: next then
// previous; other patterns: next).
func (s *searcher) nextGpuSort(g *sgraph, gpu *node, sortNet int) []int {
	flag := uint64(1) << uint(g.nChannels)
	ngpus := s.ngpus
	if s.hasNV {
		// Only the neighbours are tried, and their order does not depend on the scores: skip
		// scoring and sorting every GPU (72 of them on a GB200 NVL72 rack, at every step of the
		// search).
		return s.neighbourGpus(g, gpu, flag)
	}
	var netPaths []path
	if sortNet != 0 {
		ni := s.t.netIndexOfID(g.inter[g.nChannels*2])
		if ni >= 0 {
			netPaths = s.t.nodes[KindNET][ni].paths[KindGPU]
		}
	}
	start := gpu.index
	scores := s.scores[:0]
	for i := 1; i < ngpus; i++ {
		gi := (start + i) % ngpus
		p := &gpu.paths[KindGPU][gi]
		if p.count() == 0 {
			continue
		}
		if s.t.nodes[KindGPU][gi].used&flag != 0 {
			continue
		}
		sc := gpuScore{g: gi, startIndex: i, intraNhops: p.count(), intraBw: int(p.bw)}
		if netPaths != nil {
			sc.interNhops = netPaths[gi].count()
			sc.interPciBw = gpuPciBw(s.t.nodes[KindGPU][gi])
			sc.interBw = int(netPaths[gi].bw)
		}
		scores = append(scores, sc)
	}
	// qsort is not stable, but startIndex is unique so the order is total.
	sortScores(scores)
	s.scores = scores
	next := s.nextSlot(g, gpu)[:len(scores)]
	sameIntra := true
	for i := 1; i < len(scores); i++ {
		if scores[i].intraBw != scores[0].intraBw || scores[i].intraNhops != scores[0].intraNhops {
			sameIntra = false
		}
	}
	if sortNet == -1 && sameIntra {
		for i := range scores {
			next[i] = scores[len(scores)-1-i].g
		}
	} else {
		for i := range scores {
			next[i] = scores[i].g
		}
	}
	return next
}

// nextSlot is the buffer of nextGpuSort's result for gpu at g's channel (the recursion holds one
// per step).
func (s *searcher) nextSlot(g *sgraph, gpu *node) []int {
	ngpus := s.ngpus
	slot := g.nChannels*ngpus + gpu.index
	if s.nextBuf == nil {
		s.nextBuf = make([][]int, MaxChannels*ngpus)
	}
	if s.nextBuf[slot] == nil {
		s.nextBuf[slot] = make([]int, ngpus)
	}
	return s.nextBuf[slot]
}

// neighbourGpus is nextGpuSort with an NVSwitch: NVSwitches prefer a limited set of peers, so
// only the index neighbours are tried, those gpu reaches and that g's channel has not used. Each
// is moved to the front of the sorted candidates in turn, so the last of them comes first
// whatever the scores.
func (s *searcher) neighbourGpus(g *sgraph, gpu *node, flag uint64) []int {
	ngpus := s.ngpus
	prev := (gpu.index - 1 + ngpus) % ngpus
	nxt := (gpu.index + 1) % ngpus
	var firstBuf [2]int
	first := firstBuf[:]
	switch g.pattern {
	case PatternRing:
		firstBuf = [2]int{nxt, prev}
	case PatternSplitTree, PatternBalancedTree:
		firstBuf = [2]int{prev, nxt}
	default:
		first = first[:1]
		firstBuf[0] = nxt
	}
	if len(first) == 2 && nxt == prev {
		first = first[:1]
	}
	next := s.nextSlot(g, gpu)[:0]
	for _, f := range first {
		if f == gpu.index || gpu.paths[KindGPU][f].count() == 0 || s.t.nodes[KindGPU][f].used&flag != 0 {
			continue
		}
		next = append(next, 0)
		copy(next[1:], next)
		next[0] = f
	}
	return next
}

func sortScores(sc []gpuScore) {
	less := func(a, b gpuScore) bool {
		if a.interBw != b.interBw {
			return a.interBw > b.interBw
		}
		if a.interPciBw != b.interPciBw {
			return a.interPciBw > b.interPciBw
		}
		if a.interNhops != b.interNhops {
			return a.interNhops < b.interNhops
		}
		if a.intraBw != b.intraBw {
			return a.intraBw > b.intraBw
		}
		if a.intraNhops != b.intraNhops {
			return a.intraNhops < b.intraNhops
		}
		return a.startIndex < b.startIndex
	}
	for i := 1; i < len(sc); i++ {
		for j := i; j > 0 && less(sc[j], sc[j-1]); j-- {
			sc[j], sc[j-1] = sc[j-1], sc[j]
		}
	}
}

// replayGpu is ncclTopoReplayGetGpu: the GPU at position step+1 of the previous channel.
func (s *searcher) replayGpu(g *sgraph, step int) int {
	if g.nChannels == 0 {
		return -1
	}
	rank := g.intra[(g.nChannels-1)*s.ngpus+step+1]
	return s.t.gpuIndexOfRank(rank)
}

// tryGpu is ncclTopoSearchTryGpu.
func (s *searcher) tryGpu(g *sgraph, step, backToNet, backToFirstRank, order int, time *int, k NodeKind, index, gi int) {
	if gi < 0 {
		return
	}
	flag := uint64(1) << uint(g.nChannels)
	gpu := s.follow(g, k, index, KindGPU, gi, 1)
	if gpu == nil {
		return
	}
	gpu.used ^= flag
	s.recGpu(g, gpu, step, backToNet, backToFirstRank, order, time)
	gpu.used ^= flag
	s.follow(g, k, index, KindGPU, gi, -1)
}

// tryCollnetDirect is ncclTopoSearchTryCollnetDirect: every GPU↔head path needs
// bwIntra/(ngpus−1) in both directions.
func (s *searcher) tryCollnetDirect(g *sgraph, gi int, time *int) {
	n := len(s.t.nodes[KindGPU])
	mul := float32(1.0) / float32(n-1)
	fwd, bwd := 0, 0
	var ok *node
	for {
		ok = s.follow(g, KindGPU, gi, KindGPU, fwd, mul)
		if ok == nil {
			break
		}
		fwd++
		if fwd >= n {
			break
		}
	}
	if ok != nil {
		for {
			ok = s.follow(g, KindGPU, bwd, KindGPU, gi, mul)
			if ok == nil {
				break
			}
			bwd++
			if bwd >= n {
				break
			}
		}
		if ok != nil {
			step := 1
			for i := 0; i < s.ngpus; i++ {
				if i != gi {
					g.intra[g.nChannels*s.ngpus+step] = s.t.nodes[KindGPU][i].rank
					step++
				}
			}
			s.recGpu(g, nil, s.ngpus, -1, -1, orderNone, time)
		}
		for bwd > 0 {
			bwd--
			s.follow(g, KindGPU, bwd, KindGPU, gi, -mul)
		}
	}
	for fwd > 0 {
		fwd--
		s.follow(g, KindGPU, gi, KindGPU, fwd, -mul)
	}
}

// tryNvls is ncclTopoSearchTryNvls: NVS→each GPU and each GPU→NVS need bwIntra, twice for the
// head GPU gi.
func (s *searcher) tryNvls(g *sgraph, gi int, time *int) {
	n := len(s.t.nodes[KindGPU])
	m := func(d int, sign float32) float32 {
		if d == gi {
			return 2 * sign
		}
		return sign
	}
	d0 := 0
	var ok *node
	for {
		ok = s.follow(g, KindNVS, 0, KindGPU, d0, m(d0, 1))
		d0++
		if ok == nil || d0 >= n {
			break
		}
	}
	if ok == nil {
		d0--
	} else {
		d1 := 0
		var nvs *node
		for {
			nvs = s.follow(g, KindGPU, d1, KindNVS, 0, m(d1, 1))
			d1++
			if nvs == nil || d1 >= n {
				break
			}
		}
		if nvs == nil {
			d1--
		} else {
			s.recGpu(g, nil, s.ngpus, -1, -1, orderNone, time)
		}
		for d1 > 0 {
			d1--
			s.follow(g, KindGPU, d1, KindNVS, 0, m(d1, -1))
		}
	}
	for d0 > 0 {
		d0--
		s.follow(g, KindNVS, 0, KindGPU, d0, m(d0, -1))
	}
}

// compare is ncclTopoCompareGraphs: should g replace ref?
func (s *searcher) compare(g, ref *sgraph) bool {
	if g.nChannels < g.minChannels {
		return false
	}
	if g.pattern == PatternNVLS {
		better := false
		if g.nChannels > ref.nChannels && g.nChannels <= len(s.t.nodes[KindGPU]) {
			better = true
		}
		if float32(g.nChannels)*g.bwInter > float32(ref.nChannels)*ref.bwInter {
			better = true
		}
		return better
	}
	a, b := float32(g.nChannels)*g.bwIntra, float32(ref.nChannels)*ref.bwIntra
	if a > b {
		return true
	}
	if a < b {
		return false
	}
	return g.pattern == ref.pattern && g.crossNic == ref.crossNic && g.nHops < ref.nHops
}

// recGpu is ncclTopoSearchRecGpu.
func (s *searcher) recGpu(g *sgraph, gpu *node, step, backToNet, backToFirstRank, order int, time *int) {
	if *time <= 0 {
		return
	}
	*time--
	ngpus := s.ngpus
	if step == ngpus {
		g.nChannels++
		if s.compare(g, s.save) {
			s.save.copyFrom(g)
			if g.nChannels == g.maxChannels {
				*time = -1
			}
		}
		if g.nChannels < g.maxChannels {
			s.rec(g, time)
		}
		g.nChannels--
		return
	}
	g.intra[g.nChannels*ngpus+step] = gpu.rank
	gi := gpu.index
	switch {
	case step == backToNet:
		if len(s.t.nodes[KindNET]) == 0 {
			return
		}
		si := s.t.netIndexOfID(g.inter[g.nChannels*2])
		if si < 0 {
			return
		}
		startNet := s.t.nodes[KindNET][si]
		for _, ni := range s.t.selectNets(g.typeInter, gi) {
			net := s.t.nodes[KindNET][ni]
			if g.pattern == PatternTree && net.id != startNet.id {
				continue // trees are symmetric
			}
			if g.pattern == PatternRing && g.crossNic == 2 {
				if g.nChannels&1 == 1 && net.id != g.inter[(g.nChannels-1)*2] {
					continue
				}
			} else if g.crossNic == 0 && !s.sameNic(net, startNet) {
				continue
			}
			if s.t.rules230 && net.net.Plane >= 0 && startNet.net.Plane >= 0 && net.net.Plane != startNet.net.Plane {
				continue // 2.30.7: different planes are never connected
			}
			nextBackToNet := -1
			saveBw := g.bwInter
			if g.pattern == PatternBalancedTree {
				// Count half of the bandwidth on each of the first two GPUs.
				if step == 0 {
					nextBackToNet = 1
				} else if net.id != g.inter[g.nChannels*2+1] {
					continue
				}
				g.bwInter /= 2
			}
			reached := s.follow(g, KindGPU, gi, KindNET, ni, 1)
			g.bwInter = saveBw
			if reached != nil {
				g.inter[g.nChannels*2+1] = net.id
				s.recGpu(g, gpu, step, nextBackToNet, backToFirstRank, order, time)
				if g.pattern == PatternBalancedTree {
					g.bwInter /= 2
				}
				s.follow(g, KindGPU, gi, KindNET, ni, -1)
				g.bwInter = saveBw
			}
		}
	case g.pattern == PatternNVLS:
		s.tryNvls(g, gi, time)
	case g.pattern == PatternCollNetDirect:
		s.tryCollnetDirect(g, gi, time)
	case step < ngpus-1:
		var next []int
		switch order {
		case orderPCI:
			next = []int{step + 1}
		case orderReplay:
			next = []int{s.replayGpu(g, step)}
		default:
			sortNet := -1
			if backToNet == -1 {
				sortNet = 0
			} else if backToNet == step+1 {
				sortNet = 1
			}
			next = s.nextGpuSort(g, gpu, sortNet)
		}
		for _, n := range next {
			s.tryGpu(g, step+1, backToNet, backToFirstRank, order, time, KindGPU, gi, n)
		}
	case step == backToFirstRank:
		p := s.t.gpuIndexOfRank(g.intra[g.nChannels*ngpus])
		if p < 0 {
			return
		}
		if first := s.follow(g, KindGPU, gi, KindGPU, p, 1); first != nil {
			s.recGpu(g, first, step+1, backToNet, -1, order, time)
			s.follow(g, KindGPU, gi, KindGPU, p, -1)
		}
	default:
		s.recGpu(g, gpu, ngpus, -1, -1, order, time)
	}
}

// sameNic is the crossNic=0 test for an end NET: the start NET's guid and port (2.28); 2.30.7
// also accepts a NET of the same rail.
func (s *searcher) sameNic(net, start *node) bool {
	if net.net.GUID == start.net.GUID && net.net.Port == start.net.Port {
		return true
	}
	return s.t.rules230 && net.net.Rail >= 0 && net.net.Rail == start.net.Rail
}

// recNet is ncclTopoSearchRecNet: start a channel from a NET.
func (s *searcher) recNet(g *sgraph, backToNet, backToFirstRank int, time *int) {
	// Quirk kept from NCCL: the NET-level reservation uses bwInter truncated to an integer.
	bw := float32(int(g.bwInter))
	nets := s.t.selectNets(g.typeInter, -1)
	found := false
	netNodes := s.t.nodes[KindNET]
	for i := range nets {
		if (g.pattern == PatternNVLS || g.pattern == PatternCollNetDirect) && found {
			break
		}
		n := nets[(g.nChannels+i)%len(nets)]
		net := netNodes[n]
		if g.collNet && !net.net.Coll {
			continue
		}
		if net.netBw < bw {
			continue
		}
		if g.pattern == PatternRing && g.crossNic == 2 && g.nChannels&1 == 1 && net.id != g.inter[(g.nChannels-1)*2+1] {
			continue
		}
		g.inter[g.nChannels*2] = net.id
		g.latencyInter = float32(net.net.Latency)
		for _, o := range netNodes {
			if o.net.GUID == net.net.GUID && o.net.Port == net.net.Port {
				o.netBw -= bw
			}
		}
		restore := true
		if g.pattern == PatternNVLS || g.pattern == PatternCollNetDirect {
			// NVLS/CollNet direct only look for NIC:GPU pairs to pick the heads.
			if g.nChannels < len(nets) {
				if lg := net.localGpu; lg != -1 {
					dup := false
					for c := 0; c < g.nChannels; c++ {
						if g.intra[c*s.ngpus] == s.t.nodes[KindGPU][lg].rank {
							dup = true
							break
						}
					}
					if !dup {
						s.tryGpu(g, 0, backToNet, backToFirstRank, orderNone, time, KindNET, n, lg)
						found = true
					}
				}
			}
		} else if g.nChannels > 0 && g.sameChannels == 1 {
			s.tryGpu(g, 0, backToNet, backToFirstRank, orderReplay, time, KindNET, n, s.replayGpu(g, -1))
		} else {
			if g.nChannels == 0 && !s.hasNV {
				// Try the PCI order first to set a reference, on its own small budget.
				t := timeoutPCIOrder
				s.tryGpu(g, 0, backToNet, backToFirstRank, orderPCI, &t, KindNET, n, 0)
				if t == -1 {
					*time = -1
				}
			}
			lg := net.localGpu
			if lg != -1 {
				s.tryGpu(g, 0, backToNet, backToFirstRank, orderNone, time, KindNET, n, lg)
			}
			locals, ptype := getLocal(net, KindGPU)
			if ptype == PathDIS {
				// Quirk kept from NCCL 2.28: this `continue` skips giving the NET bandwidth back.
				restore = false
			} else {
				for _, lgi := range locals {
					if lgi == lg {
						continue
					}
					s.tryGpu(g, 0, backToNet, backToFirstRank, orderNone, time, KindNET, n, lgi)
				}
			}
		}
		if restore {
			for _, o := range netNodes {
				if o.net.GUID == net.net.GUID && o.net.Port == net.net.Port {
					o.netBw += bw
				}
			}
		}
	}
}

// searchParams is ncclTopoSearchParams: at which step a channel goes back to a NET (ring: last
// GPU; split tree: 1; other trees: 0) or, intra-node, back to the first rank (ring only).
func (s *searcher) searchParams(p Pattern) (backToNet, backToFirstRank int) {
	if len(s.t.nodes[KindNET]) > 0 {
		switch p {
		case PatternRing:
			backToNet = s.ngpus - 1
		case PatternSplitTree:
			backToNet = 1
		default:
			backToNet = 0
		}
		return backToNet, -1
	}
	if p == PatternRing {
		return -1, s.ngpus - 1
	}
	return -1, -1
}

// rec is ncclTopoSearchRec: search the next channel.
func (s *searcher) rec(g *sgraph, time *int) {
	btn, btf := s.searchParams(g.pattern)
	if len(s.t.nodes[KindNET]) > 0 {
		s.recNet(g, btn, btf, time)
		return
	}
	if g.pattern == PatternNVLS {
		if g.nChannels < s.ngpus {
			s.tryGpu(g, 0, btn, btf, orderNone, time, -1, -1, g.nChannels)
		}
		return
	}
	if g.nChannels == 0 {
		s.tryGpu(g, 0, btn, btf, orderPCI, time, -1, -1, 0)
	} else {
		s.tryGpu(g, 0, btn, btf, orderReplay, time, -1, -1, s.replayGpu(g, -1))
	}
	if g.sameChannels == 0 || g.nChannels == 0 {
		for gi := 0; gi < s.ngpus; gi++ {
			s.tryGpu(g, 0, btn, btf, orderNone, time, -1, -1, gi)
		}
	}
}
