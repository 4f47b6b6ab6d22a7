// Package tuning reproduces NCCL's cost model (src/graph/tuning.cc, src/enqueue.cc of NCCL 2.28):
// per function × algorithm × protocol a latency (µs) and an algorithm bandwidth (GB/s), the
// enable rules (NCCL_ALGO, NCCL_PROTO, the LL128 auto rule, NVLS/CollNet/PAT), the selection of
// one call (smallest predicted time, NCCL's index-order tie-break), the channel and thread counts,
// the scheduler's channel range (channel{Lo..Hi}), chunk sizes, grouped calls and send/recv.
//
// An NCCL release is a parameter: Config.Version selects one table of versioned constants
// ("2.28", the default, "2.26", "2.29" or "2.30"; consts.go names each difference and the rule it comes from).
//
// The input is a Comm: ranks, nodes, compute capabilities, CPU, and one GraphInfo per search graph
// (ring, tree, CollNet chain, NVLS, CollNet direct) — the "Pattern …, nChannels …, bw …/…, type
// …/…, sameChannels …" values NCCL prints. It can be written by hand (what-if studies, tests) or
// built from the channel search by package planner.
//
// Usage:
//
//	comm := &tuning.Comm{NRanks: 8, NNodes: 1, CCMin: 90, CCMax: 90, CPUArch: "x86", CPUVendor: "intel"}
//	comm.Graphs[tuning.GraphRing] = tuning.GraphInfo{Pattern: 4, NChannels: 12, BwIntra: 30, BwInter: 30,
//		TypeIntra: tuning.PathNVL, TypeInter: tuning.PathPIX, SameChannels: true}
//	comm.Graphs[tuning.GraphTree] = tuning.GraphInfo{Pattern: 1, NChannels: 12, BwIntra: 30, BwInter: 30,
//		TypeIntra: tuning.PathNVL, TypeInter: tuning.PathPIX}
//	cfg, err := tuning.ConfigFromEnv(os.Getenv) // NCCL_ALGO, NCCL_PROTO, NCCL_MAX_NCHANNELS, …
//	table, err := tuning.Model(comm, cfg)
//	table.WriteText(os.Stdout, "")                   // NCCL's TUNING table
//	ch, err := table.Select(tuning.Call{Func: tuning.AllReduce, Count: 1 << 18, ElemSize: 4})
//	fmt.Println(ch.Line())                           // AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}
//
// Sizes: Call.Count is the count NCCL's API takes (per rank for AllGather/ReduceScatter); the
// choice line prints count × element size as NCCL does, while the cost model uses the total
// (ncclFuncMaxSendRecvCount: ×nRanks for AllGather and ReduceScatter).
//
// # Tuner file
//
// Config.Overrides holds rules in the spirit of NCCL's tuner plugins (ParseOverrides reads them):
//
//	# collective,minBytes,maxBytes,algorithm,protocol,channels
//	allreduce,0,64K,ring,ll,4
//	allreduce,64K,*,tree,simple,*
//	*,1G,*,*,simple,
//
// collective is allreduce, allgather, reducescatter, broadcast, reduce or * (any); minBytes and
// maxBytes bound, inclusively, the size the cost model uses (plain bytes or K/M/G; * or empty for
// no bound); algorithm and protocol are NCCL's names or *; channels is 1..64, or * / empty / 0 for
// the model's count. The first rule matching a call's collective and size applies: combinations
// outside (algorithm, protocol) get a cost of -1 (forbidden) and selection picks the fastest
// remaining one; channels replaces the channel count as a plugin's nChannels does. A rule whose
// combinations are all unusable for that call is ignored. Errors name the file and line.
//
// # Fidelity
//
// Tested against NCCL 2.28.9's own logs on a 2×H200 machine (real topology, three NCCL_TOPO_FILE
// variants, two processes taken for two hosts): every table line is byte-identical and all 725
// per-call choices (algorithm, protocol, channel range) equal, end to end from the topology XML
// through packages graph, search and planner too; 524 more choice lines captured with
// testdata/capture.sh (grouped calls, half/int8, NCCL_PROTO/NCCL_ALGO per function,
// NCCL_MAX_NCHANNELS, NCCL_NTHREADS) equal; a hand-computed 8-rank Hopper example; and a public
// NCCL 2.29.7 log (2 ranks, 2 hosts, Blackwell) and NCCL 2.29.7's own on the 2×H200 machine (release
// 2.29: the table byte-identical, 26 choices equal). The 2.30 constants are read from NCCL 2.30.7's
// tuning.cc only (no 2.30 log checks them), and 2.26 is 2.28 with the ≤2.27 NVLS and NVLSTree
// bandwidth rule of the release history (no 2.26 log checks it either; packages graph and search
// apply 2.26's P2C-less paths, 40.0 GB/s Blackwell NVLinks and speed arrays). Not modelled: the sm90 + CUDA 11.8 LL128 exclusion,
// user-buffer registration (NVLS/CollNet registered paths, the CTA efficiency policy), the u32fp8
// rounding of P2P chunk sizes (exact for powers of two), plans that overflow the per-launch work
// budget, 2.30's per-call CTA limits and " cgaClusterSize" suffix of the choice line.
package tuning
