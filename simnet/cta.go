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
}

// Per-CTA memory-traffic rates of one Hopper CTA by protocol (GB/s of bytes loaded plus bytes
// stored, ctaTraffic), from the channel-pinned sweeps of NCCL 2.28.9 on 4 H200 with a process per
// GPU (testdata/nccl/h200x4/smallmsg.csv, tags mp_ring_{Simple,LL128,LL}_ch1: Ring all-reduce on
// one channel). One channel of a 4-rank ring all-reduce runs, per chunk c of its loop, send,
// 2 × recvReduceSend, recvReduceCopySend, 2 × recvCopySend and recv, and moves 6c of bus bytes;
// its traffic is 20c under Simple (w = 1), 20.8c under LL128 (w = 128/120) and 32c under LL
// (w = 2), w the FIFO's wire bytes per payload byte. The measured marginal busbw of those rows
// (Simple and LL128 between 2 and 4 MiB: 26.4 and 19.5 GB/s; LL between 512 KiB and 1 MiB:
// 8.3 GB/s — sizes where the chunk count per channel is the same at both ends, so only the
// per-byte cost enters the difference) gives traffic × busbw / 6: Simple 88, LL128 68, LL 44.
// Checks, not inputs: the same sweeps' Ring reduce (a middle rank runs recvReduceSend, 2c + w c)
// gives 97 (Simple), 78 (LL128), 51 (LL); and bench/gpuprobe measured one H100 CTA of 512
// threads copying with four 16-byte loads in flight at 96 GB/s read plus written (NCCL's Simple
// unroll), reducing at 119.
const (
	hopperMemSimpleGBps = 88
	hopperMemLL128GBps  = 68
	hopperMemLLGBps     = 44
)

// MemModelFor returns the per-protocol memory-traffic rates of one CTA (GPUModel.Mem) on
// compute capability sm, zero where nothing was measured: only Hopper (sm 90) was.
func MemModelFor(sm int) [coll.NumProtos]Rate {
	var m [coll.NumProtos]Rate
	if smIndex(sm) == 2 {
		m[coll.LL] = GBps(hopperMemLLGBps)
		m[coll.LL128] = GBps(hopperMemLL128GBps)
		m[coll.Simple] = GBps(hopperMemSimpleGBps)
	}
	return m
}

// ctaTraffic is the memory traffic (bytes loaded plus bytes stored) of one CTA running primitive
// p on a step of payload bytes whose FIFO form is wire bytes, storing into sends peers' buffers:
// a received step is loaded from the FIFO as it lies there (wire), a local source is loaded and a
// local destination stored as payload, every send stores the wire form into its peer's FIFO (P2P
// write mode, NCCL's default off Ampere: the sender's stores cross NVLink), and a local reduction
// without a receive loads its second input too.
func ctaTraffic(p coll.Prim, payload, wire float64, sends int) float64 {
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
	return GPUModel{SM: sm, CTARate: GBps(v), Mem: MemModelFor(sm)}, nil
}

// localWork reports whether a primitive that sends nothing still moves data through its CTA: it
// copies or reduces received or local data into its destination.
func localWork(p coll.Prim) bool { return p.WritesDst() || p.Reduces() }
