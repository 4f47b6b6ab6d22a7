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
	return GPUModel{SM: sm, CTARate: GBps(v)}, nil
}

// localWork reports whether a primitive that sends nothing still moves data through its CTA: it
// copies or reduces received or local data into its destination.
func localWork(p coll.Prim) bool { return p.WritesDst() || p.Reduces() }
