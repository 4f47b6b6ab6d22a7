package comm_test

import (
	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/realnet"
)

// cpuPlanners plans with NCCL's rules for the engine's machine (planner.CPU) under NCCL_ALGO algo
// and NCCL_MAX_NCHANNELS maxCh ("" and 0 leave NCCL's defaults).
func cpuPlanners(algo string, maxCh int) planner.CPU {
	var s planner.Settings
	s.Tuning.Algo, s.Tuning.MaxNChannels = algo, maxCh
	// NCCL runs PAT with one rank per node only: the machine says so.
	return planner.CPU{Settings: s, RankPerHost: algo == "pat"}
}

// withSlots makes cfg's planners plan for connections of NCCL_STEPS slots of cfg.SlotBytes (as
// NCCL_BUFFSIZE does), the buffers the engine's connections have.
func withSlots(cfg *comm.Config) {
	if p, ok := cfg.Planners.(planner.CPU); ok && cfg.SlotBytes > 0 {
		p.Settings.Tuning.BuffSize = int64(realnet.Steps * cfg.SlotBytes)
		cfg.Planners = p
	}
}

// slotted is &c with its planners' buffers matched to its slots (withSlots).
func slotted(c comm.Config) *comm.Config {
	withSlots(&c)
	return &c
}
