package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/internal/cli"
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
	nccl      *cli.NCCL // --algo, --proto, --nccl-version, --min/--max-nchannels
	nvls      *string
	collNet   *bool
	tunerFile *string
	gpuModel  *string
	nic       *cli.NICFlags
	// searchOnly: the command needs the channel search, not the tuning model (more releases).
	searchOnly bool
}

// addMachineFlags registers the machine and NCCL-setting flags on fs: --topo, --nodes and the
// NCCL flags as internal/cli defines them for both binaries, then simccl's own.
func addMachineFlags(fs *pflag.FlagSet) *machineFlags {
	mf := &machineFlags{topo: cli.AddTopo(fs), nodes: cli.AddNodes(fs)}
	mf.gpus = fs.Int("gpus", 0, "use the first N GPUs of each node (ranks 0..N-1, as CUDA_VISIBLE_DEVICES would); 0: all. One GPU on one node is a one-rank communicator, which NCCL runs as a device memcpy (its copy to itself on every p2p channel for all-to-all and send/recv)")
	mf.nccl = cli.AddNCCL(fs)
	mf.nvls = fs.String("nvls", "", "NCCL_NVLS_ENABLE: auto (NCCL's rule: NVSwitch, sm >= 90, more than 2 GPUs), on or off; default $NCCL_NVLS_ENABLE")
	mf.collNet = fs.Bool("collnet", false, "a CollNet (SHARP) plugin is present (NCCL_COLLNET_ENABLE=1): every NIC reduces in the network unless the topology marks some with coll=\"1\"; CollNetDirect, CollNetChain and NVLS across nodes are simulated")
	mf.tunerFile = fs.String("tuner-file", "", "tuner rules (CSV: collective,minBytes,maxBytes,algorithm,protocol,channels)")
	mf.gpuModel = cli.AddGPUModel(fs)
	mf.nic = cli.AddNIC(fs)
	return mf
}

// settings reads NCCL's variables from the environment and applies the flags over them.
func (mf *machineFlags) settings(fs *pflag.FlagSet) (planner.Settings, error) {
	s, err := cli.Settings(os.Getenv)
	if err != nil {
		return s, err
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
	if err := mf.nic.Apply(fs, &s); err != nil {
		return s, err
	}
	return s, mf.nccl.Apply(fs, &s, mf.searchOnly)
}

// planner builds the communicator the flags describe.
func (mf *machineFlags) planner(fs *pflag.FlagSet) (*planner.Planner, error) {
	if err := cli.CheckNodes(*mf.nodes); err != nil {
		return nil, err
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
	name, doc, err := cli.LoadTopology(*mf.topo, "", s) // s holds --gpu-model
	if err != nil {
		return nil, err
	}
	return func(nodes int) (*planner.Planner, error) {
		p, err := planner.New(planner.Machine{Name: name, Doc: doc, Nodes: nodes, GPUs: *mf.gpus, Settings: s, SearchOnly: mf.searchOnly})
		return p, nodesError(err)
	}, nil
}

// nodesError makes planner.New's refusal of a communicator over planner.MaxRanks a usage error
// naming --nodes, and of more GPUs than a node has one naming --gpus; other errors are returned
// as they are.
func nodesError(err error) error {
	if errors.Is(err, planner.ErrTooManyRanks) {
		return fmt.Errorf("%w: --nodes: %v", errUsage, err)
	}
	if errors.Is(err, planner.ErrTooFewGPUs) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return err
}

// simMachine is the simulator's machine of a planner.
func simMachine(p *planner.Planner, fab *simnet.Fabric) (*simnet.Machine, error) {
	return simnet.NewMachine(p.System, p.Nodes, fab, p, p.Settings.Release)
}

// sweepFlags are nccl-tests' flags of a command that sweeps collectives and sizes: -c, -b, -e, -f,
// -d and, where the command reduces, the reduction (addOp), as internal/cli defines them for both
// binaries.
type sweepFlags struct {
	coll, dt, op *string
	sizes        *cli.Sizes
}

// addSweepFlags defines -c (default defColl), -b, -e, -f and -d on fs.
func addSweepFlags(fs *pflag.FlagSet, defColl string) *sweepFlags {
	return &sweepFlags{
		coll:  cli.AddCollective(fs, "c", defColl),
		sizes: cli.AddSizes(fs, "8", "1G", 2),
		dt:    cli.AddDataType(fs, "float"),
	}
}

// addOp defines the reduction flag, --op with the shorthand short ("" for none).
func (sf *sweepFlags) addOp(fs *pflag.FlagSet, short string) {
	sf.op = cli.AddOp(fs, short)
}

// parse reads the flags: the collectives (among all for "all"), the sizes, the data type and the
// reduction (sum where the command has no reduction flag).
func (sf *sweepFlags) parse(all []coll.Func) (funcs []coll.Func, sizes []int64, dt coll.DataType, op coll.RedOp, err error) {
	if funcs, err = cli.ParseColls(*sf.coll, all); err != nil {
		return
	}
	if sizes, err = sf.sizes.Sweep(0); err != nil {
		return
	}
	dts, err := cli.ParseDataTypes(*sf.dt, false)
	if err != nil {
		return
	}
	dt = dts[0]
	if sf.op != nil {
		ops, err := cli.ParseOps(*sf.op, false)
		if err != nil {
			return funcs, sizes, dt, op, err
		}
		op = ops[0]
	}
	return
}
