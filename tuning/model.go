package tuning

import (
	"fmt"
	"math"

	"github.com/simccl/simccl/coll"
)

// Table is NCCL's per-communicator cost model: latency (µs) and algorithm bandwidth (GB/s) per
// function × algorithm × protocol, the thread limits, and what selection needs. Values are stored
// as float32, as NCCL stores them. A cell whose bandwidth is 0 is unusable; its latency is kept (NCCL
// prints it: a combination disabled by NCCL_ALGO/NCCL_PROTO or an enable rule keeps the latency the
// model computed, one the model skips has 0/0).
type Table struct {
	Comm   Comm
	Config Config
	K      *Constants

	// NChannels is the communicator channel count used by selection (after ncclTopoPostset);
	// NVLSChannels the NVLS channel count (comm->nvlsChannels).
	NChannels, NVLSChannels int

	Lat [coll.NumTunedFuncs][coll.NumAlgos][coll.NumProtos]float32
	Bw  [coll.NumTunedFuncs][coll.NumAlgos][coll.NumProtos]float32
	// MaxThreads is comm->maxThreads[algo][proto] (NCCL 2.28 tuning.cc), printed in the
	// "Max NThreads" row.
	MaxThreads [coll.NumAlgos][coll.NumProtos]int
	// ThreadThresholds is comm->threadThresholds[algo][proto] (bytes per thread, NCCL 2.28 tuning.cc).
	ThreadThresholds [coll.NumAlgos][coll.NumProtos]int64
	// PATEnabled reports the NCCL_PAT_ENABLE rule (NCCL 2.28 ncclTopoTuneModel).
	PATEnabled bool
}

// Model builds the cost table of a communicator (NCCL 2.28 ncclTopoTuneModel and its enable rules).
func Model(comm *Comm, cfg *Config) (*Table, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if err := comm.Validate(); err != nil {
		return nil, err
	}
	k, err := ConstantsFor(cfg.Version)
	if err != nil {
		return nil, err
	}
	algoEn, err := parseEnableList("NCCL_ALGO", cfg.Algo, algoNames[:])
	if err != nil {
		return nil, err
	}
	protoEn, err := parseEnableList("NCCL_PROTO", cfg.Proto, protoNames[:])
	if err != nil {
		return nil, err
	}
	tt, err := cfg.threadThresholds(comm.NRanks)
	if err != nil {
		return nil, err
	}
	t := &Table{Comm: *comm, Config: *cfg, K: k, ThreadThresholds: tt}
	t.NChannels = comm.NChannels
	if t.NChannels == 0 {
		t.NChannels = DeriveNChannels(comm, cfg)
	} else {
		lo, hi := cfg.ChannelBounds()
		t.NChannels = max(min(t.NChannels, hi), lo)
	}
	t.NVLSChannels = comm.NVLSChannels
	if t.NVLSChannels == 0 {
		t.NVLSChannels = cfg.clampNVLSChannels(defaultNVLSChannels(comm))
	}
	if err := t.setMaxThreads(); err != nil {
		return nil, err
	}
	t.PATEnabled = (cfg.PatEnable == nil || *cfg.PatEnable) && comm.CCMin >= 60 && comm.NRanks == comm.NNodes && !comm.DeviceNet
	if comm.NRanks <= 1 {
		return t, nil // NCCL stops after the thread limits for a single rank
	}
	for f := coll.Func(0); f < coll.NumTunedFuncs; f++ {
		for a := coll.Algo(0); a < coll.NumAlgos; a++ {
			for p := coll.Proto(0); p < coll.NumProtos; p++ {
				if t.skipped(f, a, p) {
					continue
				}
				bw, lat := t.modelCell(f, a, p)
				t.Bw[f][a][p] = float32(bw)
				t.Lat[f][a][p] = float32(lat)
			}
		}
	}
	t.applyEnables(algoEn, protoEn)
	return t, nil
}

// defaultNVLSChannels is comm->nvlsChannels by default (NCCL 2.28 transport/nvls.cc): 16 on sm90,
// 24 on sm100 single node, 32 on sm100 multi-node.
func defaultNVLSChannels(c *Comm) int {
	if c.CCMin >= 100 {
		if c.NNodes > 1 {
			return 32
		}
		return 24
	}
	return 16
}

// getNthreads reproduces NCCL's NCCL_NTHREADS validation: not a multiple of a warp → max, above
// max → max, below min → min, unset → default (NCCL 2.28 ncclTopoTuneModel).
func getNthreads(env, lo, hi, def int) int {
	if env <= 0 {
		return def
	}
	switch {
	case env%warpSize != 0:
		return hi
	case env > hi:
		return hi
	case env < lo:
		return lo
	}
	return env
}

func (t *Table) setMaxThreads() error {
	ring := t.Comm.Graphs[GraphRing]
	simpleDef := simpleMaxThread
	if ring.BwIntra*float64(ring.NChannels) <= pciBw {
		simpleDef = 256 // slow PCI rings (ring bw ≤ PCI_BW)
	}
	nt, ll128nt := t.Config.NThreads, t.Config.LL128NThreads
	m := &t.MaxThreads
	m[coll.Ring][coll.Simple] = getNthreads(nt, 2*warpSize, simpleMaxThread, simpleDef)
	m[coll.Tree][coll.Simple] = getNthreads(nt, 2*warpSize, simpleMaxThread, simpleMaxThread)
	m[coll.Ring][coll.LL] = getNthreads(nt, 2*warpSize, llMaxThreads, llMaxThreads)
	m[coll.Tree][coll.LL] = m[coll.Ring][coll.LL]
	m[coll.Ring][coll.LL128] = getNthreads(ll128nt, ll128MaxThreads/4, ll128MaxThreads, ll128MaxThreads)
	m[coll.Tree][coll.LL128] = m[coll.Ring][coll.LL128]
	for _, a := range []coll.Algo{coll.CollNetDirect, coll.CollNetChain, coll.NVLS, coll.NVLSTree} {
		m[a][coll.Simple] = maxNThreads
	}
	// PAT keeps 0 (printed as 0 in NCCL 2.29's table); selection runs it on NCCL_MAX_NTHREADS.
	return nil
}

// skipped reports the combinations the model never computes (ncclTopoTuneModel skips them): they
// print 0/0.
func (t *Table) skipped(f coll.Func, a coll.Algo, p coll.Proto) bool {
	switch f {
	case coll.Broadcast, coll.Reduce:
		if a != coll.Ring {
			return true
		}
	case coll.AllGather, coll.ReduceScatter:
		if a != coll.Ring && a != coll.PAT && a != coll.NVLS && a != coll.CollNetDirect {
			return true
		}
	case coll.AllReduce:
		if a == coll.PAT {
			return true
		}
	}
	if (a == coll.NVLS || a == coll.NVLSTree) && (p != coll.Simple || t.Comm.Graphs[GraphNVLS].NChannels < 2) {
		return true
	}
	if a == coll.PAT && (p != coll.Simple || !t.PATEnabled) {
		return true
	}
	return false
}

// modelCell computes algorithm bandwidth (GB/s) and latency (µs) of one cell (NCCL 2.28
// ncclTopoTuneModel).
func (t *Table) modelCell(f coll.Func, a coll.Algo, p coll.Proto) (bw, lat float64) {
	c, k := &t.Comm, t.K
	g := c.Graphs[algoGraph(a)]
	nRanks, nNodes := float64(c.NRanks), c.NNodes
	ppn := c.ppn()
	cci := compCapIndex(c.CCMin)
	s := c.scaleIndex()
	nCh := float64(g.NChannels)

	nsteps := nRanks
	switch f {
	case coll.AllReduce:
		nsteps = 2 * (nRanks - 1)
	case coll.AllGather, coll.ReduceScatter:
		nsteps = nRanks - 1
	}
	collNet := a == coll.CollNetDirect || a == coll.CollNetChain

	// Per-channel bandwidth of the graph (NVLS: its own intra/inter rule).
	b := g.BwInter
	if nNodes <= 2 || collNet {
		b = g.BwIntra
	}
	if (a == coll.NVLS || a == coll.NVLSTree) && k.NVLSBw227 {
		switch {
		case a == coll.NVLSTree && nNodes <= 2:
			b = math.Min(g.BwIntra, g.BwInter)
		case a == coll.NVLSTree:
			b = math.Min(g.BwIntra, g.BwInter/2)
		case f == coll.AllReduce:
			b = math.Min(g.BwIntra, g.BwInter)
		default:
			b = math.Min(g.BwIntra*(ppn-1)/ppn, g.BwInter*0.9)
		}
	} else if a == coll.NVLS || a == coll.NVLSTree {
		intra := g.BwIntra * k.NVLSEfficiency[cci] * (nCh - 1) / nCh
		if f == coll.AllReduce {
			intra *= 2
		} else {
			intra *= (ppn - 1) / ppn
		}
		inter := g.BwInter
		if a == coll.NVLSTree && nNodes <= 2 {
			inter *= 2
		}
		b = math.Min(intra, inter)
		if a == coll.NVLSTree {
			b = math.Min(b, k.PerChMaxNVLSTreeBws[cci][s])
		}
	}
	busBw := nCh * b

	// Refinements of busBw, in NCCL's order.
	index1 := cci
	if nNodes > 1 {
		index1 = 0
		if c.isAMD() {
			index1 = 1
		}
	}
	llMaxBw := k.LLMaxBws[index1][s]
	if a == coll.Ring && p == coll.LL {
		busBw = math.Min(llMaxBw, busBw*0.5)
	}
	if a == coll.Ring && p == coll.LL128 {
		busBw = math.Min(busBw*0.92, nCh*k.PerChMaxRingLL128Bws[cci][s])
	}
	if a == coll.Tree && f == coll.AllReduce {
		busBw = math.Min(busBw*0.92, nCh*k.PerChMaxTreeBws[cci][s])
	}
	if a == coll.Tree && p == coll.LL {
		busBw = math.Min(busBw/3.8, llMaxBw)
	}
	if a == coll.Tree && p == coll.LL128 {
		fac := 120.0 / 128.0
		if nNodes == 1 {
			fac = 7.0 / 9.0
		}
		busBw = math.Min(busBw*fac, nCh*k.PerChMaxTreeLL128Bws[cci][s])
	}
	if a == coll.Tree && c.maxTreePattern() == PatternTree {
		busBw *= 0.85
	}
	if a == coll.PAT {
		busBw *= 0.75
	}
	if collNet && p != coll.Simple {
		busBw = 0
	}
	if a == coll.CollNetDirect && p == coll.Simple {
		if f == coll.AllGather || f == coll.ReduceScatter {
			busBw = ppn * math.Min(g.BwIntra, 0.9*g.BwInter)
		} else {
			r := ppn / nCh
			r -= (r - 1) / 2
			busBw /= r
			if c.CCMin >= 90 {
				busBw *= 0.85
			}
		}
	}
	if (a == coll.NVLS || a == coll.CollNetDirect) && p == coll.Simple && (f == coll.AllGather || f == coll.ReduceScatter) && nNodes > 1 {
		if !(c.CollNetSupport && c.CollNetAGRS) {
			busBw = 0
		}
	}

	// To algorithm bandwidth.
	ratio := 1.0
	switch {
	case (f == coll.AllGather || f == coll.ReduceScatter) && a != coll.Ring:
		ratio = 1
	case (a == coll.NVLS || a == coll.NVLSTree) && k.NVLSBw227:
		ratio = 5.0 / 6.0 // ≤2.27
	case a == coll.Ring || a == coll.NVLS || a == coll.NVLSTree:
		ratio = nRanks / nsteps
	default:
		ratio = 0.5
	}
	bw = busBw * ratio

	// Latency.
	intraHw := hwPCI
	if g.TypeIntra == PathNVL {
		intraHw = hwNVLink
	}
	hw := intraHw
	if nNodes > 1 {
		hw = hwNet
	}
	hwLat := k.HwLat
	if c.CPUArch == "power" {
		hwLat[hwPCI][coll.Tree][coll.Simple] = hwLat[hwPCI][coll.Ring][coll.Simple]
	}
	intraLat := hwLat[intraHw][a][p]
	interLat := hwLat[hwNet][a][p]
	if ppn == 1 {
		interLat = hwLat[hwNet][coll.Tree][p]
	}
	interLat += g.LatencyInter
	if p == coll.Simple {
		interLat += g.LatencyInter // flush
	}
	lat = k.BaseLat[a][p]
	log2Nodes := float64(log2i(int64(nNodes)))
	switch a {
	case coll.Ring:
		if f == coll.Broadcast || f == coll.Reduce {
			l := hwLat[hw][coll.Ring][p]
			if c.Graphs[GraphRing].SameChannels {
				lat += l
			} else {
				if p == coll.Simple {
					l = hwLat[hw][coll.Tree][coll.Simple]
				}
				lat += nsteps * l
			}
		} else {
			nInter := 0.0
			if nNodes > 1 {
				if f == coll.AllReduce {
					nInter = 2 * float64(nNodes-1)
				} else {
					nInter = float64(nNodes - 1)
				}
			}
			netOH := 0.0
			if nNodes > 1 {
				netOH = t.netOverhead()
				if p == coll.Simple {
					netOH *= 3
				}
			}
			lat += (nsteps-nInter)*math.Max(intraLat, netOH) + nInter*interLat
		}
	case coll.Tree:
		if f == coll.AllReduce {
			lat += 2 * ((ppn-1)*intraLat + log2Nodes*interLat)
		}
	case coll.CollNetDirect:
		lat += 2*(math.Min(1, ppn-1)*intraLat+(ppn-1)*0.4) + interLat
	case coll.CollNetChain:
		lat += 2*(ppn-1)*intraLat + interLat
	case coll.NVLS:
		lat = intraLat
		if nNodes > 1 {
			lat += interLat
		}
	case coll.NVLSTree:
		lat += intraLat + 2*log2Nodes*interLat
	case coll.PAT:
		lat += log2Nodes*interLat/3.5 + 2.8*nRanks
	}
	return bw, lat
}

// netOverhead is NCCL_NET_OVERHEAD in µs, or 1 µs (Intel, other) / 2 µs (AMD x86) (NCCL 2.28 tuning.cc).
func (t *Table) netOverhead() float64 {
	if t.Config.NetOverheadNs != nil {
		return *t.Config.NetOverheadNs / 1000
	}
	if (t.Comm.CPUArch == "x86" || t.Comm.CPUArch == "") && t.Comm.CPUVendor == "amd" {
		return 2.0
	}
	return 1.0
}

// ll128Auto is the LL128 "auto" rule for one algorithm's graph (NCCL 2.28 tuning.cc).
func (t *Table) ll128Auto(a coll.Algo) bool {
	c := &t.Comm
	g := c.Graphs[algoGraph(a)]
	c2c := t.Config.LL128C2C == nil || *t.Config.LL128C2C
	interOK := g.TypeInter <= PathPXB
	if c2c && c.CCMin >= 90 {
		interOK = g.TypeInter <= PathPXN
	}
	ccOK := c.CCMin == c.CCMax || (t.K.LL128AnyCCAtLeast90 && c.CCMin >= 90)
	return interOK && g.TypeIntra <= PathNVB && ccOK && c.CCMin >= 70
}

// algoHardwareEnabled reports the algorithm rules of ncclTopoTuneModel that no user setting overrides.
func (t *Table) algoHardwareEnabled(a coll.Algo) bool {
	c := &t.Comm
	switch a {
	case coll.NVLSTree:
		return c.NNodes > 1 && c.NVLSSupport
	case coll.NVLS:
		return c.NVLSSupport && (c.NNodes == 1 || c.CollNetSupport)
	case coll.CollNetChain:
		return c.CollNetSupport && c.CollNetChainSupport
	case coll.CollNetDirect:
		return c.CollNetSupport && c.HasNVSwitch
	}
	return true
}

func (t *Table) applyEnables(algoEn, protoEn [coll.NumTunedFuncs][]int) {
	for f := coll.Func(0); f < coll.NumTunedFuncs; f++ {
		for a := coll.Algo(0); a < coll.NumAlgos; a++ {
			aOn := t.algoHardwareEnabled(a) && algoEn[f][a] != 0
			for p := coll.Proto(0); p < coll.NumProtos; p++ {
				pOn := protoEn[f][p] != 0
				if p == coll.LL128 && protoEn[f][p] == -1 {
					pOn = t.ll128Auto(a)
				}
				if !aOn || !pOn {
					t.Bw[f][a][p] = 0
				}
			}
		}
	}
}

// Enabled reports whether the cell can be selected (non-zero bandwidth).
func (t *Table) Enabled(f coll.Func, a coll.Algo, p coll.Proto) bool {
	if f < 0 || f >= coll.NumTunedFuncs || a < 0 || a >= coll.NumAlgos || p < 0 || p >= coll.NumProtos {
		return false
	}
	return t.Bw[f][a][p] != 0
}

// log2i is floor(log2(n)) for n ≥ 1 and -1 for n ≤ 0 (NCCL's log2i).
func log2i(n int64) int {
	if n <= 0 {
		return -1
	}
	l := -1
	for n > 0 {
		n >>= 1
		l++
	}
	return l
}

func checkFunc(f coll.Func) error {
	if f < 0 || f >= coll.NumTunedFuncs {
		return fmt.Errorf("tuning: %v has no row in NCCL's cost table (want Broadcast, Reduce, AllGather, ReduceScatter, AllReduce)", f)
	}
	return nil
}

// Without returns a copy of t in which the excluded algorithms and protocols cannot be selected,
// as if NCCL_ALGO=^… and NCCL_PROTO=^… had disabled them on top of t's settings. An executor that
// cannot run an algorithm or protocol asks for the decision NCCL would make without it.
func (t *Table) Without(ex coll.Exclude) *Table {
	if ex.Empty() {
		return t
	}
	out := *t
	for f := coll.Func(0); f < coll.NumTunedFuncs; f++ {
		for a := coll.Algo(0); a < coll.NumAlgos; a++ {
			for p := coll.Proto(0); p < coll.NumProtos; p++ {
				if ex.Algos[a] || ex.Protos[p] {
					out.Bw[f][a][p] = 0
				}
			}
		}
	}
	return &out
}
