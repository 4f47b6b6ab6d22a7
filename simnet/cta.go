package simnet

import (
	"fmt"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/tuning"
)

// GPUModel is what the simulator knows of a GPU beyond its links: the rate at which one of
// NCCL's thread blocks moves data itself.
//
// NCCL runs each channel of a collective as one CTA (thread block) that executes its primitives in
// program order: for a 2-rank ring all-gather a loop is send(chunk) — read the input, store it into
// the peer's buffer over NVLink — then recv(chunk) — copy the received chunk from the local FIFO
// into the output — and the next send starts only when that copy is done. The link then carries
// data only part of the time, and the collective costs the link time plus the CTA's local copy
// time, not their maximum. The executors (Simulate, SimulateRing) charge it through
// Timing.CTARate: every step's data moves at most at that rate, and a step that only
// receives (Recv, RecvReduceCopy) or works locally (Copy, Reduce) takes its bytes over that rate
// on its own channel instead of completing at once.
type GPUModel struct {
	// SM is the compute capability ×10 (90 for Hopper).
	SM int
	// CTARate is the data rate of one CTA with NCCL's ring thread count: what one channel can copy
	// or reduce in local memory, or store towards a peer, per second.
	CTARate Rate
	// Mem, where set for a protocol, is the rate at which one CTA of that protocol moves memory
	// traffic — every byte it loads plus every byte it stores, locally or into a peer's buffer
	// (ctaTraffic) — and replaces CTARate for that protocol's steps: a primitive then holds its
	// channel for its traffic over Mem instead of its payload over CTARate (docs/cluster.md
	// "GPU-side cost"). Zero: the flat CTARate model. MemModelFor gives the measured rates.
	Mem [coll.NumProtos]Rate
	// Fence is the time one Simple step holds its CTA after its last store into a peer's buffer
	// (Timing.Fence): NCCL's Simple protocol runs a memory fence before it posts the step's tail
	// counter, and the fence waits for the stores to be acknowledged. Zero: not modelled.
	Fence Time
	// Slice is what one Simple primitive of a collective costs its CTA per slice beyond its
	// bytes, its fence included (Timing.Slice; SimpleSlice). Zero: only the fence is charged.
	Slice SliceCost
	// MemLL is the rate Mem would give LL where that protocol's lines stream (Timing.LineStream:
	// Machine.PlanTiming's chains, or LineStream everywhere), zero where it is not measured. A
	// replay that moves each LL step whole counts the step's latency after its copy, so Mem
	// leaves LL out there (hopperMemLLGBps).
	MemLL Rate
	// Copy is the rate of traffic (bytes loaded plus stored) of one CTA copying its source
	// straight into its destination in its own GPU's memory, the copy to self of a point-to-point
	// call (coll.Copy; Timing.CTACopy), where Mem is set; zero: Mem's rate.
	Copy Rate
	// Memory is the GPU's device memory (GPUMemoryFor): a one-rank collective's copy
	// (Timing.Memcpy).
	Memory GPUMemory
	// ChannelSkew is how much later than channel c−1 channel c of a ring call on one node
	// starts its first step after a kernel launch (Timing.ChannelSkew; ChannelSkew). Zero: the
	// channels start together and stay in lockstep.
	ChannelSkew Time
}

// SliceCost is the fixed time one Simple primitive call on one slice holds its CTA beyond the
// time its bytes take, by whether the primitive reduces and by the slice's payload: piecewise
// linear through (0, 0) and the points (Bytes[i], Copy[i]) or (Bytes[i], Reduce[i]), and the last
// point's value past it. A primitive that sends pays at least the fence (Timing.Fence).
type SliceCost struct {
	Bytes        []int64
	Copy, Reduce []Time
	// ChainBytes and Chain, where set, are the cost of one primitive of a ring broadcast per
	// slice (one step there), piecewise linear through (0, 0) and (ChainBytes[i], Chain[i]) and
	// flat past the last point (BroadcastSlice).
	ChainBytes []int64
	Chain      []Time
}

// Of is the cost of primitive p on a slice of payload bytes.
func (c SliceCost) Of(p coll.Prim, bytes int64) Time {
	v := c.Copy
	if p.Reduces() {
		v = c.Reduce
	}
	return piecewise(c.Bytes, v, bytes)
}

// For is the cost of primitive p on a slice of payload bytes in a call of algorithm a and
// collective f, and whether any applies: Of for the ring loops (sliceCosted), the chain's cost
// for a ring broadcast where it is set.
func (c SliceCost) For(a coll.Algo, f coll.Func, p coll.Prim, bytes int64) (Time, bool) {
	switch {
	case c.set() && sliceCosted(a, f):
		return c.Of(p, bytes), true
	case len(c.ChainBytes) > 0 && a == coll.Ring && f == coll.Broadcast:
		return piecewise(c.ChainBytes, c.Chain, bytes), true
	}
	return 0, false
}

// piecewise is the piecewise linear function through (0, 0) and the points (xs[i], v[i]), flat
// past the last point; 0 where the table is empty or malformed or bytes ≤ 0.
func piecewise(xs []int64, v []Time, bytes int64) Time {
	if len(xs) == 0 || len(v) != len(xs) || bytes <= 0 {
		return 0
	}
	x0, y0 := int64(0), Time(0)
	for i, x := range xs {
		if bytes < x {
			return y0 + Time(float64(v[i]-y0)*float64(bytes-x0)/float64(x-x0))
		}
		x0, y0 = x, v[i]
	}
	return y0
}

func (c SliceCost) set() bool { return len(c.Bytes) > 0 }

// sliceCosted reports whether the slice costs (SimpleSlice) apply to a's f: the ring loops they
// were measured on (all-gather, reduce-scatter, all-reduce), where each CTA runs every primitive
// of a slice in turn and waits on its neighbour's. A ring broadcast's or reduce's rank runs one
// primitive per slice, pipelined along the chain (NCCL's slice there is one step): the same scan
// puts their cost per slice at about 2 µs and 1.0–1.3 µs, below a ring loop's primitive, and
// they keep the fence alone. Point-to-point keeps the fence too (its chunks were measured apart:
// SharedCTA), as do trees, NVLS and the rest, which Machine.timing gives no fence.
func sliceCosted(a coll.Algo, f coll.Func) bool {
	return a == coll.Ring && (f == coll.AllGather || f == coll.ReduceScatter || f == coll.AllReduce)
}

// SimpleSlice is GPUModel.Slice where the memory-traffic model applies: what NCCL 2.28.9's Simple
// primitives cost per slice on Hopper beyond their bytes, measured with NCCL itself on 2 and 4 H200
// (testdata/nccl/slicescan.sh; h200x2/ and h200x4/slicescan-2026-11-28.csv). The scan runs one
// Ring/Simple channel, one process per GPU, with NCCL_BUFFSIZE from 64 KiB to 8 MiB: a slice is a
// quarter of the buffer (two of NCCL_STEPS' eight steps), so at 16 MiB the same bytes cross the
// ring in 16 to 2048 KiB slices. Per slice index (every primitive of a loop running one slice)
// the time is a fixed part plus the slice over a rate; the rate of the largest slices (2 H200:
// 16.2 GB/s all_gather, 19.5 reduce_scatter, 11.1 all_reduce, where the memory-traffic model
// gives 15.9, 18.0 and 11.0) leaves as fixed part, for slices of 16, 32, 64, 128 and 256 KiB:
//
//	                                     2 H200                         4 H200
//	all_gather (copies: 2 | 4)           3.20 3.55 3.99 4.87 5.31       6.90 7.47 8.37 9.97 10.17
//	reduce_scatter (1 copy + 1 | 3 red.) 2.84 2.66 2.55 3.36 3.87       6.32 5.83 5.60 6.84 7.81
//	all_reduce (2 | 4 copies + 1 | 3)    4.91 4.86 5.05 5.67 6.29       11.57 11.59 12.76 13.45 14.41
//
// µs (flat from 256 KiB on: 5.26–5.33, 3.86–4.10, 5.96–6.64 on 2 GPUs). A least-squares split of
// each size's six into a cost C of a primitive that copies (send, recv, copySend,
// recvCopySend) and R of one that reduces gives C = 1.70, 1.85, 2.11, 2.40, 2.48 µs (2.45–2.50
// from 256 KiB to 1 MiB) and R = 1.54, 1.32, 1.24, 1.33, 1.61 µs (1.66–1.70 at 512 KiB and
// 1 MiB): the copy's cost grows with the slice up to 256 KiB, the reduction's shows no trend and
// is taken as its mean over 16 KiB–1 MiB, 1.49 µs. The residuals are within ±0.8 µs of the
// per-slice-index figures. Below 16 KiB the cost falls to nothing: a 4 KiB all_gather (2 KiB
// slices) took 14.16 µs where the simulation without it gave 14.12 (ringscan-2026-11-28.csv). The
// costs contain the flag waits and posts, the fence (SimpleFence, 1.28 µs, measured apart) and
// what else a slice costs beyond its bytes; a probe of the bare protocol put its part at 2.2–2.8 µs
// per send and receive pair of large slices (bench/gpuprobe/slice.cu). The scans are not
// validation rows (testdata/nccl/*/nccl_perf.csv run NCCL's own choices on up to 24 channels).
// Ampere takes Hopper's (no measurement here), as it takes the fence.
//
// A ring broadcast's primitive (Chain) was measured by the same scans: NCCL's broadcast runs one
// step per slice, so the scan's slices are an eighth of the buffer, 8 KiB to 1 MiB. Fitting each
// buffer's time against the size (4–64 MiB) gives a per-byte cost, and those costs against one over
// the slice give, for slices of 128 KiB to 1 MiB, 24.9 GB/s and 2.09 µs a slice on 2 H200, 24.9 and
// 2.06 on 4 (the chain's slowest rank, the root's copySend, binds on both). Below 128 KiB, the time
// less the bytes at 24.9 GB/s, per slice, at 16 MiB: 1.46 / 1.52 µs (8 KiB), 1.33 / 1.43 (16 KiB),
// 1.30 / 1.42 (32 KiB), 1.99 / 1.99 (64 KiB) on 2 / 4 GPUs. Chain takes the mean of the two
// machines. The rate stays the traffic model's (a copySend's three bytes per byte at Mem: 26.6
// GB/s), so one simulated broadcast channel is about 6% faster than the scan at large slices.
// Reduce keeps the fence alone: its fitted per-slice cost, 0.83 / 0.94 µs, is below the fence.
var SimpleSlice = SliceCost{
	Bytes:      []int64{16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10},
	Copy:       []Time{1700 * Nanosecond, 1850 * Nanosecond, 2110 * Nanosecond, 2400 * Nanosecond, 2480 * Nanosecond},
	Reduce:     []Time{1490 * Nanosecond, 1490 * Nanosecond, 1490 * Nanosecond, 1490 * Nanosecond, 1490 * Nanosecond},
	ChainBytes: []int64{8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10},
	Chain:      []Time{1490 * Nanosecond, 1380 * Nanosecond, 1360 * Nanosecond, 1990 * Nanosecond, 2075 * Nanosecond},
}

// Per-CTA memory-traffic rates of one Hopper CTA by protocol: GB/s of copy-equivalent traffic
// (ctaTraffic: bytes loaded plus bytes stored, a reduction's divided by reduceSpeedup). Inputs:
// the channel-pinned sweeps of NCCL 2.28.9 on 4 H200 with a process per GPU
// (testdata/nccl/h200x4/smallmsg.csv, tags mp_ring_{Simple,LL128,LL}_ch1: Ring all-reduce on one
// channel). Per chunk c of its loop one channel of a 4-rank ring all-reduce runs send,
// 2 × recvReduceSend, recvReduceCopySend, 2 × recvCopySend and recv and moves 6c of bus bytes; its
// traffic is, with w the FIFO's wire bytes per payload byte (Simple 1, LL128 128/120, LL 2),
// (4 + 4w)c of copies and (5 + 5w)c of reductions. The measured marginal busbw of those rows
// (Simple and LL128 between 2 and 4 MiB: 26.4 and 19.5 GB/s; LL between 512 KiB and 1 MiB:
// 8.3 GB/s — sizes with the same number of chunks per channel at both ends, so that only the
// per-byte cost enters the difference) gives the copy rate ((4 + 4w) + (5 + 5w)/reduceSpeedup) ×
// busbw / 6: Simple 79.7, LL128 61.2, LL 40.1 GB/s. Checks, not inputs: the same sweeps' Ring reduce
// (a middle rank runs recvReduceSend: (1 + 2w)c of reduction per c) predicts 32.8, 24.1 and 9.9 GB/s
// where 32.4, 25.0 and 10.2 were measured; bench/gpuprobe measured one H100 CTA of 512 threads
// copying with four 16-byte loads in flight (NCCL's unroll) at 96 GB/s, locally — the ring's stores
// cross NVLink. The LL rate applies only where LL lines stream (GPUModel.MemLL: the chains of
// Machine.PlanTiming, or LineStream everywhere): elsewhere the executors move an LL step as one
// message, where NCCL's LL streams 8-byte lines whose flags the receiver polls as they land, so the
// step's latency is paid after its copy in the simulation and under it in NCCL; a per-byte cost
// measured over whole ring steps then counts that latency twice (with it, the 4×H200 all-reduce
// below 1 MiB went from 18.7% to 21.9% median error, 2×H200 all-to-all at 1 MiB from +5% to +26%).
const (
	hopperMemSimpleGBps = 79.7
	hopperMemLL128GBps  = 61.2
	hopperMemLLGBps     = 40.1 // applied where LL lines stream (above)
)

// Ampere (sm 80) has no measurement of its own here (the device machine has H100/H200s only). Its
// rates are Hopper's measured ones scaled by the ratio of NCCL's own per-channel ceilings for the
// two generations (NCCL 2.28 tuning.cc, single-node column; reference/nccl-model.md "perChMax"):
// Simple by perChMaxTreeBws (a CTA receiving, reducing and forwarding: Ampere 24.0, Hopper 38.7
// GB/s, the figure the flat model already takes as the CTA rate), LL128 by perChMaxRingLL128Bws
// (Ampere 20, Hopper 36.7). NCCL's constants say how fast NVIDIA lets one channel of each
// generation go relative to the other; the scaling assumes a CTA's memory traffic scales the same
// way. 49.4 and 33.4 GB/s; nothing here was fitted to a measurement of an A100.
const (
	ampereMemSimpleGBps = hopperMemSimpleGBps * 24.0 / 38.7
	ampereMemLL128GBps  = hopperMemLL128GBps * 20.0 / 36.7
)

// SimpleFence is GPUModel.Fence where the memory-traffic model applies: the round trip of a step
// flag between two CTAs with a __threadfence() between the data and the flag (Simple's ordering),
// measured on one H100 SXM by bench/gpuprobe (results/h100-sxm-2026-11-25.csv: 1.28 µs; without
// the fence, LL's ordering, 0.54 µs). A fence waits for the CTA's outstanding stores to be
// acknowledged, a round trip to where they land; the probe's is the one measured figure of it (the
// stores of a real step cross NVLink, whose acknowledgement is not measured and is not faster).
// Ampere runs the same fence in the same protocol; its round trip is not measured and is taken as
// Hopper's (A100's SM clock, 1.41 GHz boost, is lower than H100's 1.98, so not shorter on that
// account). The same probe on H200s, the GPU of testdata/nccl's validation rows, gave 1.30 µs
// (bench/gpuprobe/results/h200-probe-2026-11-28.csv) and 1.23 µs on another lease
// (testdata/nccl/h200x2/hostscan-2026-11-28b-launch.csv): the figure holds there.
const SimpleFence = 1280 * Nanosecond

// ChannelSkew is GPUModel.ChannelSkew, for every GPU: the CTAs of one kernel do not start at
// one instant. bench/gpuprobe/ctastart.cu on one H200 (results/h200-ctastart-2026-11-28.csv):
// over 2,000 launches of 24 CTAs of 512 threads, the latest CTA starts 32 ns after the earliest at
// the median launch (the timer's step; 64 ns at the 90th percentile), 1.4 ns a CTA on average.
// It matters because the channels of a ring call are otherwise identical state machines on
// identical links, which a max-min fair replay keeps in step for ever — every channel storing into
// the NVLink at once, then every one copying locally while the link idles — an equilibrium that
// any skew breaks (a channel ahead finds the link freer and stays ahead) and NCCL's measured rates
// do not show (docs/cluster.md "Channels do not start in lockstep"). On 4 H200 the replay is
// insensitive to the figure (1.4 or 2.8 ns: within 1% at 64 MiB–8 GiB); on 2 H200 all_gather
// and reduce_scatter from 2 GiB stay 10–16% slow and larger skews move them, so what else keeps
// NCCL's channels apart is not modelled. The block scheduler is the same part on other
// generations; this is the one measurement of it and they take it too.
const ChannelSkew = 1400 * Picosecond

// MemModel turns the memory-traffic model (GPUModel.Mem, Fence) on for the GPUs it has figures
// for; false gives the flat CTARate model of before 2026-11-28 (bench/sim/compare -flat-cta).
var MemModel = true

// SharedCTA makes the lanes of one channel's CTA share its memory-traffic rate (GPUModel.Mem)
// as they need it, instead of each holding a fixed share (rate / lanes) whether or not the others
// are busy: a CTA is one link of that rate that every step of the channel crosses, a send with
// its traffic per wire byte, a receive's or a copy's local work alone, and max-min sharing gives a
// lane that runs alone the whole rate. Both executors apply it (SimulateP2P and the schedule
// replay, Simulate, which give the same times: TestP2PMatchesSchedule); where no op is recorded
// Machine.Run times send/recv and all-to-all on SimulateP2P, since the replay's CTA links join a
// rank's lanes into large rate computations (docs/cluster.md "GPU-side cost": the measurements it
// was checked against).
//
// Why: NCCL 2.28 runs a channel's point-to-point work in one CTA of NCCL_MAX_NTHREADS threads
// whose warps it splits between the send and the receive of each work (sendrecv.h
// RunWorkBatch: about half each), and the measurements say that a group running alone moves
// data at the whole CTA's rate. 4×H200 nccl_perf.csv send/recv on 8 channels (one 512 KiB
// chunk per channel at 4 MiB, each chunk sent whole before its receiver copies it out of the
// FIFO: Simple's store and forward) takes 35.6 µs at 4 MiB and 25–27 µs more per further chunk
// of each channel from 8 to 128 MiB. A pipelined chunk costs its send's and its receive's traffic
// (2 + 2 bytes per byte) at the CTA rate measured on ring channels (79.7 GB/s: 26.3 µs); a lone
// chunk costs the same only if each of its two halves, the send and then the copy, runs at the
// whole CTA's rate. With fixed half shares the lone chunk would take two periods (52.6 µs plus
// the fixed costs), 17 µs more than NCCL's whole call.
var SharedCTA = true

// MemModelFor returns the per-protocol memory-traffic rates of one CTA (GPUModel.Mem) on
// compute capability sm, zero where there is no figure: Hopper (sm 90) was measured, Ampere (sm
// 80) is Hopper scaled by NCCL's per-generation channel ceilings; Volta and Blackwell have none.
func MemModelFor(sm int) [coll.NumProtos]Rate {
	if !MemModel {
		return [coll.NumProtos]Rate{}
	}
	var m [coll.NumProtos]Rate
	switch smIndex(sm) {
	case 2:
		if LineStream {
			m[coll.LL] = memLLFor(sm)
		}
		m[coll.LL128] = GBps(hopperMemLL128GBps)
		m[coll.Simple] = GBps(hopperMemSimpleGBps)
	case 1:
		m[coll.LL128] = GBps(ampereMemLL128GBps)
		m[coll.Simple] = GBps(ampereMemSimpleGBps)
	}
	return m
}

// Direct copies: one CTA copying from a local source to a local destination, four 16-byte loads
// in flight per thread (NCCL's unroll), 512 threads — a copy to self needs no FIFO, no flag and
// no fence, and NCCL's moves what this probe does: bench/gpuprobe measured 95.80 GB/s of traffic on
// one H200 (results/h200-probe-2026-11-28.csv, copy_u4 at 1 CTA; 96.22 on one H100). Checks, not
// inputs: a one-rank all-to-all on one H200 copies 48.6–48.8 GB/s per p2p channel up to 16 channels
// (testdata/nccl/h200x1/selfcopy-2026-11-28.csv: 97.2–97.6 of traffic), and the copy to self of a
// 2-H200 all-to-all moved 93 GB/s per channel (testdata/nccl/h200x2/selfscan-2026-11-29.csv), where
// the ring-derived rate (hopperMemSimpleGBps, 79.7) made it 18–21% slow. Ampere takes Hopper's
// scaled as its other rates are (no measurement here).
const (
	hopperCopyGBps = 95.80
	ampereCopyGBps = hopperCopyGBps * 24.0 / 38.7
)

// copyRateFor is GPUModel.Copy on compute capability sm: zero where the memory-traffic model is
// off or has no figure for the generation.
func copyRateFor(sm int) Rate {
	if !MemModel {
		return 0
	}
	switch smIndex(sm) {
	case 2:
		return GBps(hopperCopyGBps)
	case 1:
		return GBps(ampereCopyGBps)
	}
	return 0
}

// memLLFor is GPUModel.MemLL on compute capability sm: Hopper's measured LL rate, zero elsewhere
// or with the memory-traffic model off.
func memLLFor(sm int) Rate {
	if !MemModel || smIndex(sm) != 2 {
		return 0
	}
	return GBps(hopperMemLLGBps)
}

// ctaTraffic is the memory traffic (bytes loaded plus bytes stored, in copy-equivalent bytes) of
// one CTA running primitive p on a step of payload bytes whose FIFO form is wire bytes, storing
// into sends peers' buffers: a received step is loaded from the FIFO as it lies there (wire), a local source is loaded and a
// local destination stored as payload, every send stores the wire form into its peer's FIFO (P2P
// write mode, NCCL's default off Ampere: the sender's stores cross NVLink), and a local reduction
// without a receive loads its second input too.
func ctaTraffic(p coll.Prim, payload, wire float64, sends int) float64 {
	t := ctaBytes(p, payload, wire, sends)
	if p.Reduces() {
		return t / reduceSpeedup
	}
	return t
}

// reduceSpeedup is how much faster one CTA moves the traffic of a reduction than that of a copy:
// bench/gpuprobe measured one H100 CTA of 512 threads with four 16-byte loads in flight (NCCL's
// unroll) at 118.64 GB/s reducing (a+b→c, bytes read plus written) and 96.22 GB/s copying
// (results/h100-sxm-2026-11-25.csv, reduce_u4 and copy_u4 at 1 CTA): a reduction issues two
// independent loads per store, so more of its traffic is in flight. ctaTraffic divides a reducing
// primitive's bytes by it, so that GPUModel.Mem is a copy's rate. One H200 gives the same ratio
// (118.13 / 95.80 = 1.233; bench/gpuprobe/results/h200-probe-2026-11-28.csv).
const reduceSpeedup = 118.64 / 96.22

// ctaBytes is the bytes ctaTraffic counts before the reduction's speed-up.
func ctaBytes(p coll.Prim, payload, wire float64, sends int) float64 {
	var t float64
	if p.Receives() {
		t += wire
	}
	if p.ReadsSrc() {
		t += payload
	}
	if p.Reduces() && !p.Receives() {
		t += payload
	}
	if p.WritesDst() {
		t += payload
	}
	if p.Sends() {
		t += wire * float64(max(sends, 1))
	}
	return t
}

// CTARateGBps returns the per-CTA data rate (GB/s) of SM generation sm (compute capability ×10)
// under NCCL release's constants ("" = tuning.DefaultRelease).
//
// Source: NCCL's own per-channel bandwidth ceiling for a channel that receives, reduces and
// forwards in local memory — perChMaxTreeBws of ncclTunerConstants, single-node column (NCCL
// 2.28 tuning.cc: Volta 26.5, Ampere 24.0, Hopper 38.7, Blackwell 70.0 GB/s). It is the
// rate NCCL's cost model lets one tree channel (one CTA doing recvReduceSend on NVLink) reach, a
// figure set by NVIDIA independently of this project's measurements, and it depends on the SM
// generation only. It is not fitted to the 2×H200 measurements; bench/sim/compare's -cta-rate
// flag shows how the accuracy moves with it (bench/sim/README.md).
func CTARateGBps(release string, sm int) (float64, error) {
	if release == "" {
		release = tuning.DefaultRelease
	}
	k, err := tuning.ConstantsFor(release)
	if err != nil {
		return 0, err
	}
	if sm <= 0 {
		return 0, fmt.Errorf("simnet: GPU compute capability %d", sm)
	}
	v := k.PerChMaxTreeBws[smIndex(sm)][0]
	if !(v > 0) {
		return 0, fmt.Errorf("simnet: NCCL %s has no per-channel rate for compute capability %d", release, sm)
	}
	return v, nil
}

// smIndex is NCCL's compute-capability class of the tuning tables (Volta 0, Ampere 1, Hopper 2,
// Blackwell 3; NCCL 2.28 tuning.cc).
func smIndex(sm int) int {
	switch {
	case sm >= 100:
		return 3
	case sm >= 90:
		return 2
	case sm >= 80:
		return 1
	}
	return 0
}

// GPUModelFor returns the GPU model of compute capability sm under release's constants.
func GPUModelFor(release string, sm int) (GPUModel, error) {
	v, err := CTARateGBps(release, sm)
	if err != nil {
		return GPUModel{}, err
	}
	g := GPUModel{SM: sm, CTARate: GBps(v), Mem: MemModelFor(sm), MemLL: memLLFor(sm), Copy: copyRateFor(sm), ChannelSkew: ChannelSkew}
	if g.Mem[coll.Simple] > 0 {
		g.Fence = SimpleFence
		g.Slice = SimpleSlice
	}
	return g, nil
}

// localWork reports whether a primitive that sends nothing still moves data through its CTA: it
// copies or reduces received or local data into its destination.
func localWork(p coll.Prim) bool { return p.WritesDst() || p.Reduces() }
