package tuning

import (
	"fmt"
	"sort"
	"strings"

	"github.com/simccl/simccl/coll"
)

// Hardware classes of NCCL's latency table (NCCL 2.28 tuning.cc: NVLINK, PCI, NET).
const (
	hwNVLink = 0
	hwPCI    = 1
	hwNet    = 2
)

// Constants are the numbers of NCCL's cost model that a release fixes (tuning.cc, the
// ncclTunerConstants of 2.28+), plus the few scheduling constants that changed between releases.
// Indices: [algo][proto], [hw][algo][proto], [compCapIndex][scale].
type Constants struct {
	Release string

	BaseLat [coll.NumAlgos][coll.NumProtos]float64
	HwLat   [3][coll.NumAlgos][coll.NumProtos]float64

	LLMaxBws             [4][3]float64
	PerChMaxRingLL128Bws [4][3]float64
	PerChMaxTreeLL128Bws [4][3]float64
	PerChMaxTreeBws      [4][3]float64
	PerChMaxNVLSTreeBws  [4][3]float64
	NVLSEfficiency       [4]float64

	// LL128AnyCCAtLeast90: the LL128 auto rule accepts mixed compute capabilities when all are ≥ 90
	// (2.30; 2.27–2.29 require a uniform cc; tuning.cc LL128 rule).
	LL128AnyCCAtLeast90 bool
	// MinTrafficPerChannel is scheduleCollTasksToPlan's smallest per-channel traffic (enqueue.cc);
	// TrafficPerChannelRoundUp selects the 2.29+ rule trafficPerChannel = roundUp16(traffic/nCh)
	// instead of the 2.28 rule max(MinTrafficPerChannel, traffic/nCh).
	MinTrafficPerChannel     int64
	TrafficPerChannelRoundUp bool
	// NVLSBw227 selects NCCL ≤2.27's NVLS and NVLSTree bandwidth (ncclTopoTuneModel): NVLS
	// AllReduce min(bwIntra, bwInter), NVLS AllGather/ReduceScatter min(bwIntra×(ppn−1)/ppn,
	// 0.9×bwInter), NVLSTree min(bwIntra, bwInter on ≤ 2 nodes, else bwInter/2), converted to an
	// algorithm bandwidth by 5/6 instead of nRanks/nsteps; nvlsEfficiency and
	// perChMaxNVLSTreeBws (2.28) take no part.
	NVLSBw227 bool
	// NetPeerByBw selects NCCL 2.29+'s channels per network peer, max(NICs, ⌈their bandwidth / 14
	// GB/s⌉) (NCCL_P2P_PER_CHANNEL_NET_BW), instead of ≤2.28's 2 halved while 2 × nRanks passes 4 ×
	// p2pnChannels, at least the NICs (paths.cc ncclTopoGetNchannels; Table.P2PChannels).
	NetPeerByBw bool
	// PeersHalving: 2.30 halves the channels per peer across nodes while they times ⌈maxP2pPeers /
	// 8⌉ pass p2pnChannels (paths.cc; maxP2pPeers, a 2.30 communicator setting, defaults to the
	// ranks).
	PeersHalving bool
}

// hopper etc. are the compCapIndex rows.
const (
	ccVolta = iota
	ccAmpere
	ccHopper
	ccBlackwell
)

// releases is the one table of versioned constants, keyed by NCCL release. 2.30 is written out in
// full from NCCL 2.30.7's ncclTunerConstantsDefaults (tuning.cc); 2.28 is derived from it where the
// 2.28 source differs (each difference is named in newReleases below).
var releases = newReleases()

// DefaultRelease is the release Config uses when Version is empty.
const DefaultRelease = "2.28"

func newReleases() map[string]*Constants {
	v230 := &Constants{
		Release: "2.30",
		// Base latency µs [LL, LL128, Simple] (2.30.7 baseLat). Tree Simple base is 8.4 since 2.23
		// (≤2.22: 0).
		BaseLat: [coll.NumAlgos][coll.NumProtos]float64{
			coll.Tree:          {6.8, 14.0, 8.4},
			coll.Ring:          {6.6, 14.0, 8.4},
			coll.CollNetDirect: {0, 0, 0},
			coll.CollNetChain:  {0, 0, 0},
			coll.NVLS:          {0, 0, 0},
			coll.NVLSTree:      {0, 0, 0},
			coll.PAT:           {8.0, 8.0, 8.0}, // PAT row since 2.28 (2.23–2.27 added a literal 8 µs)
		},
		// Hardware latency µs [hw][algo][LL, LL128, Simple] (2.30.7 hwLat).
		HwLat: [3][coll.NumAlgos][coll.NumProtos]float64{
			hwNVLink: {
				coll.Tree: {0.6, 1.25, 4.0}, coll.Ring: {0.6, 1.9, 3.4},
				coll.CollNetDirect: {0, 0, 3.7}, coll.CollNetChain: {0, 0, 2.8},
				coll.NVLS: {0, 0, 25}, coll.NVLSTree: {0, 0, 25}, coll.PAT: {0, 0, 4.0},
			},
			hwPCI: {
				coll.Tree: {1.0, 1.9, 4.0}, coll.Ring: {1.0, 2.5, 5.7},
				coll.CollNetDirect: {0, 0, 3.7}, coll.CollNetChain: {0, 0, 2.8},
				coll.NVLS: {0, 0, 0}, coll.NVLSTree: {0, 0, 0}, coll.PAT: {0, 0, 4.0},
			},
			hwNet: {
				coll.Tree: {5.0, 8.5, 14}, coll.Ring: {2.7, 4.0, 14.0},
				coll.CollNetDirect: {0, 0, 31}, coll.CollNetChain: {0, 0, 30},
				coll.NVLS:     {0, 0, 18},
				coll.NVLSTree: {0, 0, 20.9}, // 20.9 from 2.29 (14 until 2.28)
				coll.PAT:      {0, 0, 14},
			},
		},
		// Per-channel caps GB/s [compCapIndex][s] (2.30.7 tuning.cc). llMaxBws rows are indexed by
		// index1 (single node: compCapIndex; multi-node: 0 Intel, 1 AMD/mixed).
		LLMaxBws: [4][3]float64{
			{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0},
		},
		PerChMaxRingLL128Bws: [4][3]float64{
			{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7},
			{40, 40, 40}, // Blackwell: 40 in 2.30 (2×36.7 in 2.28, 34.5/34.6/34.5 in 2.29)
		},
		PerChMaxTreeLL128Bws: [4][3]float64{
			{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0},
		},
		PerChMaxTreeBws: [4][3]float64{
			{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0},
		},
		PerChMaxNVLSTreeBws: [4][3]float64{ // since 2.28
			{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 80.0},
		},
		NVLSEfficiency:      [4]float64{0, 0, 0.85, 0.74}, // since 2.28
		LL128AnyCCAtLeast90: true,                         // 2.30 LL128 auto rule (tuning.cc)
		// 2.29+ scheduleCollTasksToPlan: 32 KiB minimal traffic per channel, trafficPerChannel rounded
		// up to 16 B (checked against a public NCCL 2.29.7 log: Broadcast 32 KiB Simple on 4 channels
		// uses channel{0..0}).
		MinTrafficPerChannel:     32 << 10,
		TrafficPerChannelRoundUp: true,
		// Channels per network peer by the NICs' bandwidth since 2.29 (NCCL 2.29.7 on 2 H200 with
		// ranks on separate hosts and a 400 Gb/s NIC: 4 per peer where 2.28.9 gives 2;
		// testdata/nccl/h200x2/netpeerscan-2026-11-30).
		NetPeerByBw:  true,
		PeersHalving: true,
	}

	// 2.29: 2.30's table but for the Blackwell ring LL128 cap and the LL128 auto rule (the two
	// differences the release history records between 2.29 and 2.30). NCCL 2.29.7's own printout on
	// the 2×H200 machine (testdata/nccl/h200x2/releasescan-2.29.7-rank0.log.gz) checks it there.
	v229 := *v230
	v229.Release = "2.29"
	v229.PerChMaxRingLL128Bws[ccBlackwell] = [3]float64{34.5, 34.6, 34.5} // 2.29 tuning.cc
	v229.LL128AnyCCAtLeast90 = false                                      // 2.27–2.29: uniform cc
	v229.PeersHalving = false                                             // maxP2pPeers is 2.30's

	v228 := *v230
	v228.Release = "2.28"
	v228.HwLat[hwNet][coll.NVLSTree][coll.Simple] = 14 // NVLSTree NET latency 14 until 2.28 (20.9 from 2.29)
	// Blackwell ring LL128 per-channel cap was 2×36.7 in 2.28 (tuning.cc).
	v228.PerChMaxRingLL128Bws[ccBlackwell] = [3]float64{2 * 36.7, 2 * 36.7, 2 * 36.7}
	// 2.27–2.29: the LL128 auto rule needs a uniform compute capability (tuning.cc).
	v228.LL128AnyCCAtLeast90 = false
	// 2.28 enqueue.cc: MinTrafficPerChannel 16 KiB and trafficPerChannel = max(16 KiB, traffic/nCh)
	// (NCCL 2.28.9's logs on 2×H200 confirm it: the 2.29+ rule misplaces 32 of 725 channel ranges).
	v228.MinTrafficPerChannel = 16 << 10
	v228.TrafficPerChannelRoundUp = false
	// ≤2.28 paths.cc: 2 channels per network peer, halved with the ranks (netpeerscan: 2.28.9 gives
	// 2 at 100–800 Gb/s and 1 with 8 ranks on 2 p2p channels).
	v228.NetPeerByBw = false
	v228.PeersHalving = false

	// 2.26: 2.28's constants but for the NVLS rule above (what NCCL's release history records: NVLSTree's
	// NET latency was 14 until 2.28, PAT's 8 µs base a literal 8 in 2.23–2.27 with the same result,
	// the 2.28 traffic-per-channel rule; the LL128 rule's cc whitelist of ≤2.26 admits every GPU
	// the uniform-cc rule of 2.27–2.29 does at cc 70–120). The Blackwell ring LL128 cap is 2.28's
	// 2×36.7: no earlier value is recorded. nvlsEfficiency and perChMaxNVLSTreeBws did not exist
	// in 2.26; their 2.28 values stay in the table for the simulator, which takes them as
	// properties of the hardware (simnet: the NVLink share multimem reaches, the NVLSTree channel
	// ceiling), not as 2.26's model.
	v226 := v228
	v226.Release = "2.26"
	v226.NVLSBw227 = true

	return map[string]*Constants{"2.26": &v226, "2.28": &v228, "2.29": &v229, "2.30": v230}
}

// Releases lists the releases with a constants table.
func Releases() []string {
	out := make([]string, 0, len(releases))
	for r := range releases {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// ConstantsFor returns a copy of the constants of release v ("2.26", "2.28", "2.29", "2.30"; a patch level such as
// "2.28.9" selects its minor release).
func ConstantsFor(v string) (*Constants, error) {
	key := strings.TrimSpace(v)
	if key == "" {
		key = DefaultRelease
	}
	if parts := strings.Split(key, "."); len(parts) > 2 {
		key = parts[0] + "." + parts[1]
	}
	c, ok := releases[key]
	if !ok {
		return nil, fmt.Errorf("tuning: no constants for NCCL release %q (have %s)", v, strings.Join(Releases(), ", "))
	}
	cp := *c
	return &cp, nil
}

// Protocol and thread constants that did not change across 2.28–2.30 (device.h, enqueue.cc).
const (
	warpSize        = 32
	maxNThreads     = 640 // NCCL_MAX_NTHREADS
	simpleMaxThread = 512 // NCCL_SIMPLE_MAX_NTHREADS
	llMaxThreads    = 512 // NCCL_LL_MAX_NTHREADS
	ll128MaxThreads = 640 // NCCL_LL128_MAX_NTHREADS
	pciBw           = 12  // PCI_BW, GB/s (topo.h): Ring Simple threads threshold

	ncclSteps = 8 // NCCL_STEPS

	defaultLLBuffSize     = 524288  // 8 lines/thr × 512 thr × 8 steps × 16 B (DEFAULT_LL_BUFFSIZE)
	defaultLL128BuffSize  = 4915200 // 120 u64/thr × 640 thr × 8 steps × 8 B (DEFAULT_LL128_BUFFSIZE)
	defaultSimpleBuffSize = 4 << 20 // DEFAULT_BUFFSIZE (device.h)

	llThreadThreshold     = 8  // bytes per thread (tuning.cc threadThresholds)
	ll128ThreadThreshold  = 8  //
	simpleThreadThreshold = 64 //
	collNetThreadThresh   = 512

	p2pLLThreshold       = 16384 // NCCL_P2P_LL_THRESHOLD (enqueue.cc addP2pToPlan)
	nvlsChunkSize        = 128 << 10
	maxDevWorkBatchColls = 8 // 1024-B work batch / 128-B ncclDevWorkColl (ncclTopoGetAlgoTime's latCount)
)

// grainSize is ncclProtoGrainSize (NCCL 2.28): LL 16 B, LL128 1920 B, Simple 512 B.
func grainSize(p coll.Proto) int64 {
	switch p {
	case coll.LL:
		return 16
	case coll.LL128:
		return 1920
	}
	return 512
}

// treeCorrectionFactor[p][logSize], logSize 0..23 = 64 B … 512 MiB (NCCL 2.28 tuning.cc).
var treeCorrectionFactor = [coll.NumProtos][24]float32{
	coll.LL:     {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
	coll.LL128:  {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
	coll.Simple: {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9},
}
