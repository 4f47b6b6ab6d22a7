package search

import "strconv"

// speedArrays holds the per-channel bandwidths (GB/s) the search tries, by compute capability
// and intra/inter-node (NCCL 2.28 search.cc speedArray*).
type speedArrays struct {
	intra, inter           []float32 // cc < 90
	sm90Intra, sm90Inter   []float32
	sm100Intra, sm100Inter []float32
}

// Params are the release-dependent constants of the search. Use ParamsFor(version).
type Params struct {
	Version       string
	speeds        speedArrays
	globalTimeout int64
	// rules230 turns on the NCCL 2.30.7 rules beyond the speed arrays: the NVML index taken modulo
	// |localGpus| before mirroring (ncclTopoGetLocalNet), rails and planes in the crossNic=0 end-NET
	// choice (search.cc) and the fallback's NETs (ncclTopoCompute).
	rules230 bool
}

// NCCL 2.28 speed arrays (search.cc, v2.28.x). History (search.cc of each release): sm90 intra
// gained 11 in 2.23; sm90 inter in 2.18 lacked 22, 20 and 17.5; sm100 arrays appeared in 2.25, 2.27
// added 18 to sm100 intra, 2.28 starts sm100 inter at 96,48,45.1; 2.29 adds 45 to sm100 intra and
// 80 to sm100 inter; 2.30.7 adds 86 to sm100 inter.
var (
	speedIntra228      = []float32{40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3}
	speedInter228      = []float32{48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12}
	sm90Intra228       = []float32{60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3}
	sm90Inter228       = []float32{48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12}
	sm100Intra228      = []float32{90, 80, 70, 60, 50, 40, 30, 24, 20, 19, 18}
	sm100Inter228      = []float32{96, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12}
	sm90Intra218       = []float32{60, 40, 30, 24, 20, 15, 12, 6, 3}
	sm90Inter218       = []float32{48, 45, 42, 40, 30, 24, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12}
	sm100Intra225      = []float32{90, 80, 70, 60, 50, 40, 30, 24, 20, 19} // 2.25–2.26 (inter: the sm90 array)
	sm100Intra229      = []float32{90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18}
	sm100Inter229      = []float32{96, 80, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12}
	sm100Inter2307     = []float32{96, 86, 80, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12}
	defaultVersion     = "2.28"
	supportedVersions  = []string{"2.18", "2.26", "2.28", "2.29", "2.30"}
	globalTimeout218   = int64(1) << 18
	globalTimeoutSince = int64(1) << 19 // 2.19+
)

// ParamsFor returns the search constants of an NCCL release. "2.28" is the default and the one
// the golden tests check; "2.18", "2.26" and "2.29" change the speed arrays and budget; "2.30" also turns
// on the 2.30.7 rules of ncclTopoGetLocalNet and search.cc (NIC start index, rails and planes,
// fallback NETs). Other changes of those releases are not modelled.
func ParamsFor(version string) (Params, error) {
	if version == "" {
		version = defaultVersion
	}
	p := Params{Version: version, globalTimeout: globalTimeoutSince, speeds: speedArrays{
		intra: speedIntra228, inter: speedInter228,
		sm90Intra: sm90Intra228, sm90Inter: sm90Inter228,
		sm100Intra: sm100Intra228, sm100Inter: sm100Inter228,
	}}
	switch version {
	case "2.28":
	case "2.26":
		// sm100 arrays as NCCL 2.25 introduced them: no 18 in intra (2.27 added it), inter the sm90
		// array (2.27 gave Blackwell its own).
		p.speeds.sm100Intra, p.speeds.sm100Inter = sm100Intra225, sm90Inter228
	case "2.18":
		p.globalTimeout = globalTimeout218
		p.speeds.sm90Intra, p.speeds.sm90Inter = sm90Intra218, sm90Inter218
		// No sm100 arrays before 2.25: Blackwell used the sm90 ones.
		p.speeds.sm100Intra, p.speeds.sm100Inter = sm90Intra218, sm90Inter218
	case "2.29":
		p.speeds.sm100Intra, p.speeds.sm100Inter = sm100Intra229, sm100Inter229
	case "2.30":
		p.speeds.sm100Intra, p.speeds.sm100Inter = sm100Intra229, sm100Inter2307
		p.rules230 = true
	default:
		return Params{}, errorf("unsupported NCCL version %q (supported: %v)", version, supportedVersions)
	}
	return p, nil
}

// Options steer one search.
type Options struct {
	// CrossNic is NCCL_CROSS_NIC (0, 1 or 2; NCCL's default is 2). Nil means the default.
	CrossNic *int
	// Params are the release constants; the zero value means ParamsFor("2.28").
	Params Params
}

func (o Options) crossNicParam() int {
	if o.CrossNic == nil {
		return 2
	}
	return *o.CrossNic
}

// Request says which graph to compute (the inputs of struct ncclTopoGraph).
type Request struct {
	ID          int
	Pattern     Pattern
	CollNet     bool
	MinChannels int
	MaxChannels int
}

// gpuMinMaxPath is ncclTopoGetGpuMinPath/MaxPath: the best and worst path type from any GPU to
// any node of kind k (other GPUs when k is GPU). Defaults: min SYS, max LOC.
func (t *Topology) gpuMinMaxPath(k NodeKind) (PathType, PathType) {
	minT, maxT := PathSYS, PathLOC
	for i, g := range t.nodes[KindGPU] {
		for j := range g.paths[k] {
			if k == KindGPU && i == j {
				continue
			}
			pt := g.paths[k][j].typ
			minT = min(minT, pt)
			maxT = max(maxT, pt)
		}
	}
	return minT, maxT
}

// splitNvLink is ncclTopoSplitNvLink: exactly two NVLink islands of two or more GPUs (e.g. two
// sockets, each with NVLinked GPUs, joined by QPI).
func (t *Topology) splitNvLink() bool {
	gpus := t.nodes[KindGPU]
	dom := make([]int, len(gpus))
	for i := range dom {
		dom[i] = i
	}
	for g := range gpus {
		for p := g + 1; p < len(gpus); p++ {
			if gpus[g].paths[KindGPU][p].typ == PathNVL {
				dom[p] = dom[g]
			}
		}
	}
	count := make([]int, len(gpus))
	for _, d := range dom {
		count[d]++
	}
	// Domains of a single GPU do not count.
	n := 0
	for _, c := range count {
		if c > 1 {
			n++
		}
	}
	return n == 2
}

// dupChannels is ncclTopoDupChannels (NCCL 2.28 search.cc).
func dupChannels(g *sgraph, ccMin, ngpus int) {
	if g.nChannels == 0 || g.pattern == PatternNVLS || g.bwIntra < 25 {
		return
	}
	if ccMin > 80 && g.bwIntra < 50 && g.nChannels > 4 {
		return
	}
	dup := min(g.nChannels*2, g.maxChannels)
	copy(g.intra[g.nChannels*ngpus:dup*ngpus], g.intra[:(dup-g.nChannels)*ngpus])
	copy(g.inter[g.nChannels*2:dup*2], g.inter[:(dup-g.nChannels)*2])
	div := float32((dup + g.nChannels - 1) / g.nChannels)
	g.bwIntra /= div
	g.bwInter /= div
	g.nChannels = dup
}

// maxGPUs is NCCL_TOPO_MAX_NODES of 2.30 (640), the largest any supported release accepts.
const maxGPUs = 640

// Compute searches one graph on a topology: ncclTopoCompute of NCCL 2.28 (search.cc).
// The topology is not changed.
func Compute(top *Topology, req Request, opts Options) (*Graph, error) {
	if top == nil {
		return nil, errorf("no topology")
	}
	if !top.finished {
		if err := top.finish(); err != nil {
			return nil, err
		}
	}
	if len(top.nodes[KindGPU]) == 0 {
		return nil, errorf("topology has no GPU with a rank")
	}
	// NCCL_TOPO_MAX_NODES (576 in 2.28, 640 in 2.30) bounds the GPUs of one system; package graph
	// enforces it on XML input. Hand-built topologies get the same bound here.
	if n := len(top.nodes[KindGPU]); n > maxGPUs {
		return nil, errorf("%d GPUs in one node: NCCL allows at most %d (NCCL_TOPO_MAX_NODES)", n, maxGPUs)
	}
	params := opts.Params
	if params.Version == "" {
		var err error
		if params, err = ParamsFor(""); err != nil {
			return nil, err
		}
	}
	if req.MaxChannels <= 0 || req.MaxChannels > MaxChannels {
		return nil, errorf("graph %d: maxChannels %d out of 1..%d", req.ID, req.MaxChannels, MaxChannels)
	}
	t := top.clone()
	t.rules230 = params.rules230
	sg, err := compute(t, req, opts.crossNicParam(), params)
	if err != nil {
		return nil, err
	}
	return exportGraph(t, sg), nil
}

func compute(t *Topology, req Request, crossNicParam int, params Params) (*sgraph, error) {
	ngpus := len(t.nodes[KindGPU])
	nnets := len(t.nodes[KindNET])
	g := newSgraph(ngpus)
	g.id, g.pattern, g.collNet = req.ID, req.Pattern, req.CollNet
	g.minChannels, g.maxChannels = req.MinChannels, req.MaxChannels
	if g.minChannels < 0 {
		g.minChannels = 0
	}

	crossNic := 0
	if nnets > 1 && (g.pattern == PatternRing || g.pattern == PatternBalancedTree || g.pattern == PatternSplitTree) {
		crossNic = crossNicParam
	}
	if crossNic == 1 {
		g.crossNic = 1
	}
	minTypeIntra, minTypeInter := PathLOC, PathPIX
	maxTypeIntra, maxTypeInter := PathSYS, PathSYS
	if ngpus > 1 {
		minTypeIntra, maxTypeIntra = t.gpuMinMaxPath(KindGPU)
	}
	if nnets > 0 {
		minTypeInter, maxTypeInter = t.gpuMinMaxPath(KindNET)
		maxTypeIntra = maxTypeInter
	}
	g.typeIntra, g.typeInter = minTypeIntra, minTypeInter
	trySame := 1
	if g.pattern == PatternNVLS {
		trySame = 0
	}
	g.sameChannels = trySame
	cpuArch, cpuVendor := t.cpuType()

	ccMin := t.ccMin()
	if g.pattern == PatternNVLS && (len(t.nodes[KindNVS]) == 0 || ccMin < 90) {
		return g, nil
	}
	// NVLS and CollNet direct have at most ngpus heads (NCCL_MAX_NVLS_ARITY 32,
	// NCCL_MAX_DIRECT_ARITY+1 = 8).
	if g.pattern == PatternNVLS {
		g.maxChannels = min(32, ngpus)
	}
	if g.pattern == PatternCollNetDirect {
		g.maxChannels = min(8, ngpus)
	}
	if ngpus == 1 && g.pattern != PatternRing {
		g.pattern = PatternTree
	}
	if nnets == 0 && g.pattern == PatternNVLS {
		// Intra-node NVLS pulls evenly from all GPUs.
		g.minChannels = g.maxChannels
	}
	if g.pattern == PatternRing && t.splitNvLink() && g.maxChannels >= 2 && g.minChannels == 1 {
		g.minChannels = 2
	}

	tmp := newSgraph(ngpus)
	tmp.copyFrom(g)

	sp := params.speeds
	var speeds []float32
	switch {
	case nnets == 0 && ccMin >= 100:
		speeds = sp.sm100Intra
	case nnets == 0 && ccMin >= 90:
		speeds = sp.sm90Intra
	case nnets == 0:
		speeds = sp.intra
	case ccMin >= 100:
		speeds = sp.sm100Inter
	case ccMin >= 90:
		speeds = sp.sm90Inter
	default:
		speeds = sp.inter
	}
	nspeeds := len(speeds)
	maxBw := t.maxBw
	totalBw := t.totalBw
	if ngpus > 1 && g.pattern != PatternRing {
		totalBw = float32(float64(totalBw) * (float64(ngpus) * 1.0 / float64(ngpus-1)))
	}
	si := 0
	for (speeds[si] > maxBw || speeds[si]*float32(g.minChannels) > totalBw) && si < nspeeds-1 {
		si++
	}
	tmp.bwIntra, tmp.bwInter = speeds[si], speeds[si]
	globalTimeout := params.globalTimeout

	s := &searcher{t: t, ngpus: ngpus, save: g, hasNV: len(t.nodes[KindNVS]) > 0}
	pass := 1
	var time int
	for {
		// search:
		switch {
		case tmp.sameChannels != 0:
			time = timeoutSameChannels
		case tmp.pattern == PatternTree:
			time = timeoutTree
		default:
			time = timeoutDefault
		}
		tmp.nChannels = 0
		globalTimeout -= int64(time)
		s.rec(tmp, &time)

		done := time == -1 || float32(g.nChannels)*g.bwInter >= t.totalBw
		if !done && pass == 1 {
			if tmp.sameChannels == 1 && !(cpuArch == ArchX86 && cpuVendor == VendorAMD && tmp.typeIntra == PathSYS) {
				tmp.sameChannels = 0
				continue
			}
			tmp.sameChannels = trySame
			if time != -1 {
				globalTimeout += int64(time)
			} else {
				globalTimeout = params.globalTimeout
			}
			if globalTimeout < 0 && g.nChannels > 0 {
				done = true
			}
			if !done {
				if ccMin >= 90 && tmp.pattern == PatternBalancedTree {
					tmp.pattern = PatternTree
					continue
				}
				tmp.pattern = g.pattern
				maxIntra := maxTypeIntra
				if nnets > 0 {
					maxIntra = tmp.typeInter
				}
				if tmp.typeIntra < maxIntra && (g.nChannels == 0 || tmp.typeIntra < g.typeIntra) {
					tmp.typeIntra++
					if tmp.typeIntra < PathDIS {
						continue
					}
				}
				tmp.typeIntra = minTypeIntra
				if nnets > 0 && tmp.typeInter < maxTypeInter && (g.nChannels == 0 || tmp.typeInter < g.typeInter || tmp.typeInter < PathPXN) {
					tmp.typeInter++
					if tmp.typeInter < PathDIS {
						continue
					}
				}
				tmp.typeInter = minTypeInter
				if crossNic == 2 && tmp.crossNic == 0 && (g.pattern == PatternRing || g.pattern == PatternBalancedTree) {
					tmp.crossNic = 2
					continue
				}
				tmp.crossNic = 0
				if crossNic == 1 {
					tmp.crossNic = 1
				}
				if si < nspeeds-1 && (g.nChannels == 0 || speeds[si+1]/g.bwInter > .49) {
					si++
					tmp.bwInter, tmp.bwIntra = speeds[si], speeds[si]
					continue
				}
				si = 0
				for speeds[si] > maxBw && si < nspeeds-1 {
					si++
				}
				tmp.bwIntra, tmp.bwInter = speeds[si], speeds[si]
			}
		}
		// done:
		if pass == 1 {
			time = -1
			dupChannels(g, ccMin, ngpus)
			tmp.copyFrom(g)
			si = 0
			for speeds[si] > g.bwInter && si < nspeeds-1 {
				si++
			}
			tmp.bwIntra, tmp.bwInter = speeds[si], speeds[si]
			tmp.minChannels = g.nChannels
			pass = 2
		}
		// pass 2: see whether the bandwidth can go up.
		if time != 0 && si > 0 {
			if g.pattern == PatternRing {
				si--
				tmp.bwIntra, tmp.bwInter = speeds[si], speeds[si]
				continue
			} else if g.pattern == PatternNVLS && tmp.bwInter == g.bwInter && tmp.bwInter < tmp.bwIntra*2 {
				tmp.minChannels, tmp.maxChannels = g.nChannels, g.nChannels
				si--
				tmp.bwInter = speeds[si]
				continue
			} else if tmp.bwIntra == g.bwIntra && tmp.bwIntra < tmp.bwInter*2 {
				si--
				tmp.bwIntra = speeds[si]
				continue
			}
		}
		break
	}

	if g.nChannels == 0 && !g.collNet && g.pattern != PatternNVLS {
		// Fallback: one channel, GPUs in index order, SYS at 0.1 GB/s.
		for i, gpu := range t.nodes[KindGPU] {
			g.intra[i] = gpu.rank
		}
		g.inter[0], g.inter[1] = 0, 0
		if params.rules230 && nnets > 0 {
			// 2.30.7: the first preferred NET of GPU 0 and of the last GPU.
			if n, err := t.localNet(0, 0); err == nil {
				g.inter[0] = t.nodes[KindNET][n].id
			}
			if n, err := t.localNet(ngpus-1, 0); err == nil {
				g.inter[1] = t.nodes[KindNET][n].id
			}
		}
		g.bwIntra, g.bwInter = 0.1, 0.1
		g.typeIntra, g.typeInter = PathSYS, PathSYS
		g.nChannels = 1
	}
	return g, nil
}

func exportGraph(t *Topology, g *sgraph) *Graph {
	ngpus := len(t.nodes[KindGPU])
	out := &Graph{
		ID: g.id, Pattern: g.pattern, CrossNic: g.crossNic, CollNet: g.collNet,
		MinChannels: g.minChannels, MaxChannels: g.maxChannels, NChannels: g.nChannels,
		BwIntra: roundF32(g.bwIntra), BwInter: roundF32(g.bwInter), LatencyInter: roundF32(g.latencyInter),
		TypeIntra: g.typeIntra, TypeInter: g.typeInter, SameChannels: g.sameChannels, NHops: g.nHops,
	}
	hasNet := len(t.nodes[KindNET]) > 0
	for c := 0; c < g.nChannels; c++ {
		order := g.intra[c*ngpus : (c+1)*ngpus]
		if g.pattern == PatternNVLS {
			// An NVLS channel is its head GPU only; NCCL leaves whatever earlier attempts wrote
			// in the rest of the channel's slots and never reads them.
			order = order[:1]
		}
		out.Intra = append(out.Intra, append([]int(nil), order...))
		if hasNet {
			out.Inter = append(out.Inter, [2]int64{g.inter[2*c], g.inter[2*c+1]})
		}
	}
	return out
}

// roundF32 converts a float32 to the float64 with the shortest decimal form that reads back as
// the same float32 (so 17.5 stays 17.5 and 45.1 prints as 45.1, not 45.099998).
func roundF32(f float32) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	return v
}
