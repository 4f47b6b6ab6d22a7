package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/realnet"
	"github.com/simccl/simccl/tuning"
)

// ncclFlags are the NCCL settings runccl takes as flags, over the NCCL_* environment: the engines
// run the planner's plan (NCCL's decision for the machine they run on), which these steer as the
// variables steer NCCL.
type ncclFlags struct {
	algo, proto, version *string
	minCh, maxCh         *int
}

func addNCCLFlags(fs *pflag.FlagSet) *ncclFlags {
	return &ncclFlags{
		algo:    fs.String("algo", "", "NCCL_ALGO in NCCL's syntax (ring; tree; allreduce:tree;allgather:pat); default $NCCL_ALGO"),
		proto:   fs.String("proto", "", "NCCL_PROTO in NCCL's syntax; default $NCCL_PROTO (the engines run Simple only: others are excluded, and the output says when NCCL would have chosen one)"),
		version: fs.String("nccl-version", "", "NCCL release whose rules plan the calls ("+strings.Join(planner.Releases(), ", ")+"; default "+tuning.DefaultRelease+")"),
		minCh:   fs.Int("min-nchannels", 0, "NCCL_MIN_NCHANNELS (0: $NCCL_MIN_NCHANNELS or unset)"),
		maxCh:   fs.Int("max-nchannels", 0, "NCCL_MAX_NCHANNELS (0: $NCCL_MAX_NCHANNELS or unset)"),
	}
}

// settings reads NCCL's variables through getenv and applies the flags over them.
func (nf *ncclFlags) settings(fs *pflag.FlagSet, getenv func(string) string) (planner.Settings, error) {
	s, err := planner.SettingsFromEnv(getenv)
	if err != nil {
		return s, fmt.Errorf("%w: %v", errUsage, err)
	}
	if *nf.version != "" {
		if _, err := tuning.ConstantsFor(*nf.version); err != nil {
			return s, fmt.Errorf("%w: --nccl-version: %v", errUsage, err)
		}
		s.Release = *nf.version
	}
	if fs.Changed("algo") {
		s.Tuning.Algo = *nf.algo
	}
	if fs.Changed("proto") {
		s.Tuning.Proto = *nf.proto
	}
	for _, c := range []struct {
		flag string
		v    int
		dst  *int
	}{{"min-nchannels", *nf.minCh, &s.Tuning.MinNChannels}, {"max-nchannels", *nf.maxCh, &s.Tuning.MaxNChannels}} {
		if !fs.Changed(c.flag) {
			continue
		}
		if c.v < 1 || c.v > tuning.MaxChannels {
			return s, fmt.Errorf("%w: --%s %d (want 1..%d)", errUsage, c.flag, c.v, tuning.MaxChannels)
		}
		*c.dst = c.v
	}
	cfg := s.Tuning
	cfg.Version = s.Release
	if err := cfg.Check(); err != nil {
		return s, fmt.Errorf("%w: %v", errUsage, err)
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
