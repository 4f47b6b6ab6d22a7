package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/simnet"
	"github.com/simccl/simccl/topo/partial"
	"github.com/simccl/simccl/tuning"
)

// machineFlags are the flags of every command that plans: the machine (topology, nodes) and
// NCCL's settings. Each flag stands for an NCCL variable and overrides it; variables a flag does
// not cover are read from the environment as NCCL reads them (planner.SettingsFromEnv).
type machineFlags struct {
	topo      *string
	nodes     *int
	gpus      *int
	version   *string
	algo      *string
	proto     *string
	minCh     *int
	maxCh     *int
	nvls      *string
	collNet   *bool
	tunerFile *string
	gpuModel  *string
	// searchOnly: the command needs the channel search, not the tuning model (more releases).
	searchOnly bool
}

// addMachineFlags registers the machine and NCCL-setting flags on fs.
func addMachineFlags(fs *pflag.FlagSet) *machineFlags {
	return &machineFlags{
		topo:      fs.String("topo", "", "NCCL topology XML or an embedded name ("+strings.Join(topos.Names(), ", ")+"); default: $NCCL_TOPO_FILE, else "+topos.DefaultName),
		nodes:     fs.Int("nodes", 1, "number of nodes of the communicator, each with this topology"),
		gpus:      fs.Int("gpus", 0, "use the first N GPUs of each node (ranks 0..N-1, as CUDA_VISIBLE_DEVICES would); 0: all"),
		version:   fs.String("nccl-version", "", "NCCL release whose rules apply ("+strings.Join(planner.Releases(), ", ")+"; default "+tuning.DefaultRelease+")"),
		algo:      fs.String("algo", "", "NCCL_ALGO in NCCL's syntax (ring,tree; ^nvls; allreduce:tree;allgather:^pat); default $NCCL_ALGO"),
		proto:     fs.String("proto", "", "NCCL_PROTO in NCCL's syntax (simple; ^LL128); default $NCCL_PROTO"),
		minCh:     fs.Int("min-nchannels", 0, "NCCL_MIN_NCHANNELS (0: $NCCL_MIN_NCHANNELS or unset)"),
		maxCh:     fs.Int("max-nchannels", 0, "NCCL_MAX_NCHANNELS (0: $NCCL_MAX_NCHANNELS or unset)"),
		nvls:      fs.String("nvls", "", "NCCL_NVLS_ENABLE: auto (NCCL's rule: NVSwitch, sm >= 90, more than 2 GPUs), on or off; default $NCCL_NVLS_ENABLE"),
		collNet:   fs.Bool("collnet", false, "a CollNet (SHARP) plugin is present (NCCL_COLLNET_ENABLE=1; NICs need coll=\"1\")"),
		tunerFile: fs.String("tuner-file", "", "tuner rules (CSV: collective,minBytes,maxBytes,algorithm,protocol,channels)"),
		gpuModel: fs.String("gpu-model", "", "complete a partial topology (GPUs left to NCCL's detection, as in cloud VM files) as NCCL would on these GPUs: "+
			strings.Join(partial.ModelNames(), ", ")+"; default: take the file as it is"),
	}
}

// settings reads NCCL's variables from the environment and applies the flags over them.
func (mf *machineFlags) settings(fs *pflag.FlagSet) (planner.Settings, error) {
	s, err := planner.SettingsFromEnv(os.Getenv)
	if err != nil {
		return s, err
	}
	if *mf.version != "" {
		if err := s.SetRelease(*mf.version); err != nil {
			return s, fmt.Errorf("%w: --nccl-version: %v", errUsage, err)
		}
		if _, err := tuning.ConstantsFor(s.Release); err != nil && !mf.searchOnly {
			return s, fmt.Errorf("%w: --nccl-version %s: the tuning model has %s (simccl search also takes %s)", errUsage, s.Release,
				strings.Join(planner.Releases(), ", "), strings.Join(planner.SearchReleases(), ", "))
		}
	}
	if fs.Changed("algo") {
		s.Tuning.Algo = *mf.algo
	}
	if fs.Changed("proto") {
		s.Tuning.Proto = *mf.proto
	}
	for _, c := range []struct {
		flag string
		v    int
		dst  *int
	}{{"min-nchannels", *mf.minCh, &s.Tuning.MinNChannels}, {"max-nchannels", *mf.maxCh, &s.Tuning.MaxNChannels}} {
		if !fs.Changed(c.flag) {
			continue
		}
		if c.v < 1 || c.v > tuning.MaxChannels {
			return s, fmt.Errorf("%w: --%s %d (want 1..%d)", errUsage, c.flag, c.v, tuning.MaxChannels)
		}
		*c.dst = c.v
	}
	switch strings.ToLower(*mf.nvls) {
	case "":
	case "auto", "2":
		s.NVLS = nil
	case "on", "1", "true":
		t := true
		s.NVLS = &t
	case "off", "0", "false":
		f := false
		s.NVLS = &f
	default:
		return s, fmt.Errorf("%w: --nvls %q (want auto, on or off)", errUsage, *mf.nvls)
	}
	if *mf.collNet {
		s.CollNet = true
	}
	if *mf.tunerFile != "" {
		f, err := os.Open(*mf.tunerFile)
		if err != nil {
			return s, err
		}
		s.Tuning.Overrides, err = tuning.ParseOverrides(*mf.tunerFile, f)
		f.Close()
		if err != nil {
			return s, err
		}
	}
	if *mf.gpuModel != "" {
		m, err := partial.Lookup(*mf.gpuModel)
		if err != nil {
			return s, fmt.Errorf("%w: --gpu-model: %v", errUsage, err)
		}
		s.GPUModel = m.Name
	}
	if !mf.searchOnly {
		// Check NCCL_ALGO / NCCL_PROTO syntax now, as a usage error.
		cfg := s.Tuning
		cfg.Version = s.Release
		if err := cfg.Check(); err != nil {
			return s, fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	return s, nil
}

// planner builds the communicator the flags describe.
func (mf *machineFlags) planner(fs *pflag.FlagSet) (*planner.Planner, error) {
	if *mf.nodes < 1 || *mf.nodes > planner.MaxNodes {
		return nil, fmt.Errorf("%w: --nodes %d (want 1..%d)", errUsage, *mf.nodes, planner.MaxNodes)
	}
	if *mf.gpus < 0 {
		return nil, fmt.Errorf("%w: --gpus %d (want ≥ 0)", errUsage, *mf.gpus)
	}
	build, err := mf.builder(fs)
	if err != nil {
		return nil, err
	}
	return build(*mf.nodes)
}

// builder reads the settings and the topology once and returns a function that builds the
// communicator of any node count.
func (mf *machineFlags) builder(fs *pflag.FlagSet) (func(nodes int) (*planner.Planner, error), error) {
	s, err := mf.settings(fs)
	if err != nil {
		return nil, err
	}
	name, doc, err := planner.LoadTopology(*mf.topo, s)
	if err != nil {
		return nil, err
	}
	return func(nodes int) (*planner.Planner, error) {
		p, err := planner.New(planner.Machine{Name: name, Doc: doc, Nodes: nodes, GPUs: *mf.gpus, Settings: s, SearchOnly: mf.searchOnly})
		return p, nodesError(err)
	}, nil
}

// nodesError makes planner.New's refusal of a communicator over planner.MaxRanks a usage error
// naming --nodes; other errors are returned as they are.
func nodesError(err error) error {
	if errors.Is(err, planner.ErrTooManyRanks) {
		return fmt.Errorf("%w: --nodes: %v", errUsage, err)
	}
	return err
}

// simMachine is the simulator's machine of a planner.
func simMachine(p *planner.Planner, fab *simnet.Fabric) (*simnet.Machine, error) {
	return simnet.NewMachine(p.System, p.Nodes, fab, p, p.Settings.Release)
}

// sweepFlags are nccl-tests' flags of a command that sweeps collectives and sizes: -c, -b, -e, -f,
// -d and, where the command reduces, the reduction (addOp).
type sweepFlags struct {
	coll, minB, maxB, dt, op *string
	factor                   *int64
}

// addSweepFlags defines -c (default defColl, help collHelp), -b, -e, -f and -d on fs.
func addSweepFlags(fs *pflag.FlagSet, defColl, collHelp string) *sweepFlags {
	return &sweepFlags{
		coll:   fs.StringP("collective", "c", defColl, collHelp),
		minB:   fs.StringP("minbytes", "b", "8", "smallest size (nccl-tests size: the total buffer)"),
		maxB:   fs.StringP("maxbytes", "e", "1G", "largest size"),
		factor: fs.Int64P("stepfactor", "f", 2, "size multiplication factor"),
		dt:     fs.StringP("datatype", "d", "float", "data type (float, half, bfloat16, double, int8, …)"),
	}
}

// addOp defines the reduction flag, --op with the shorthand short ("" for none).
func (sf *sweepFlags) addOp(fs *pflag.FlagSet, short string) {
	sf.op = fs.StringP("op", short, "sum", "reduction (sum, prod, max, min, avg)")
}

// parse reads the flags: the collectives (among all for "all"), the sizes, the data type and the
// reduction (sum where the command has no reduction flag).
func (sf *sweepFlags) parse(all []coll.Func) (funcs []coll.Func, sizes []int64, dt coll.DataType, op coll.RedOp, err error) {
	if funcs, err = parseColls(*sf.coll, all); err != nil {
		return
	}
	if sizes, err = parseSweep(*sf.minB, *sf.maxB, *sf.factor); err != nil {
		return
	}
	if dt, err = coll.ParseDataType(*sf.dt); err != nil {
		err = fmt.Errorf("%w: -d: %v", errUsage, err)
		return
	}
	if sf.op != nil {
		if op, err = coll.ParseRedOp(*sf.op); err != nil {
			err = fmt.Errorf("%w: --op: %v", errUsage, err)
		}
	}
	return
}

// parseSweep reads -b, -e and -f as nccl-tests does (-e empty: -b alone), each size within
// units.MaxSize.
func parseSweep(minB, maxB string, factor int64) ([]int64, error) {
	lo, err := units.ParseSize(minB)
	if err != nil {
		return nil, fmt.Errorf("%w: -b: %v", errUsage, err)
	}
	hi := lo
	if maxB != "" {
		if hi, err = units.ParseSize(maxB); err != nil {
			return nil, fmt.Errorf("%w: -e: %v", errUsage, err)
		}
	}
	for _, f := range []struct {
		flag string
		v    int64
	}{{"-b", lo}, {"-e", hi}} {
		if err := units.CheckSize(f.flag, f.v); err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	sizes, err := units.Sweep(lo, hi, factor)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return sizes, nil
}

// parseColls reads -c: a collective, a comma-separated list, or "all" (every collective of all).
func parseColls(s string, all []coll.Func) ([]coll.Func, error) {
	var out []coll.Func
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if strings.EqualFold(name, "all") {
			out = append(out, all...)
			continue
		}
		f, err := coll.ParseFunc(name)
		if err != nil {
			return nil, fmt.Errorf("%w: -c: %v", errUsage, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// readFabric reads --fabric and applies --fabric-set.
func readFabric(file string, sets []string) (*simnet.Fabric, error) {
	fab := simnet.DefaultFabric()
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		fab, err = simnet.ParseFabric(f, file)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%w: --fabric-set %q: want key=value", errUsage, kv)
		}
		if err := fab.Set(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			return nil, fmt.Errorf("%w: --fabric-set: %v", errUsage, err)
		}
	}
	if err := fab.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return fab, nil
}
