package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/internal/cli"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/realnet"
)

// ncclFlags are the NCCL settings runccl takes as flags, over the NCCL_* environment: the engines
// run the planner's plan (NCCL's decision for the machine they run on), which these steer as the
// variables steer NCCL. They are simccl's (internal/cli).
type ncclFlags struct{ *cli.NCCL }

func addNCCLFlags(fs *pflag.FlagSet) *ncclFlags {
	nf := &ncclFlags{cli.AddNCCL(fs)}
	cli.Explain(fs, "proto", "the cpu engine runs Simple only and the cuda engine LL, LL128 and Simple: the others are excluded, and the output says when NCCL would have chosen one")
	return nf
}

// settings reads NCCL's variables through getenv and applies the flags over them.
func (nf *ncclFlags) settings(fs *pflag.FlagSet, getenv func(string) string) (planner.Settings, error) {
	s, err := cli.Settings(getenv)
	if err != nil {
		return s, err
	}
	if err := nf.Apply(fs, &s, false); err != nil {
		return s, err
	}
	if b := s.Tuning.BuffSize; b > 0 && (b%int64(realnet.Steps) != 0 || (b/int64(realnet.Steps))%16 != 0) {
		return s, fmt.Errorf("%w: NCCL_BUFFSIZE=%d: the CPU engine needs a multiple of %d bytes (%d slots of 16-byte multiples)", errUsage, b, 16*realnet.Steps, realnet.Steps)
	}
	return s, nil
}

// cpuConfig is the CPU engine's configuration for settings s: its planners, and connections of
// NCCL_BUFFSIZE (NCCL_STEPS slots).
func cpuConfig(s planner.Settings) comm.Config {
	cfg := comm.Config{Planners: planner.CPU{Settings: s}}
	if s.Tuning.BuffSize > 0 {
		cfg.SlotBytes = int(s.Tuning.BuffSize / int64(realnet.Steps))
	}
	return cfg
}
