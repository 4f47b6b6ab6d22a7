package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm/perf"
	"github.com/simccl/simccl/cuda"
	"github.com/simccl/simccl/cuda/engine"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/topo/discover"
)

// EmulateEnv, set to a number of devices, runs --backend cuda on the emulated driver (package
// cuda's CPU stand-in for libcuda.so.1): for tests and development on machines without a GPU.
const EmulateEnv = "SIMCCL_CUDA_EMULATE"

// runCUDA runs the sweep on -g GPUs of this machine with the cuda/engine backend: one process,
// one communicator per GPU, the same table and JSON as the cpu backend.
func runCUDA(opt *options, stdout, stderr io.Writer, getenv func(string) string) error {
	if opt.procs {
		return fmt.Errorf("%w: --procs: the cuda backend runs one process driving -g GPUs", errUsage)
	}
	if _, launched, _ := resolveRanks(opt, getenv, stderr); launched {
		return errors.New("--backend cuda: one process per GPU under a launcher is not supported yet; run one process with -g N")
	}
	if v := getenv(EmulateEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%w: %s=%q: want a number of devices", errUsage, EmulateEnv, v)
		}
		if err := cuda.Emulate(n); err != nil {
			return err
		}
	}
	if err := cuda.Init(); err != nil {
		return fmt.Errorf("--backend cuda: %s", oneLine(err.Error()))
	}
	have, err := cuda.DeviceCount()
	if err != nil {
		return err
	}
	if opt.nranks > have && !opt.shareGPUs {
		return fmt.Errorf("--backend cuda: -g %d: this machine has %d GPUs (--share-gpus runs several ranks on one)", opt.nranks, have)
	}
	if have == 0 {
		return errors.New("--backend cuda: this machine has no GPU")
	}
	var devs []*cuda.Device
	defer func() {
		for _, d := range devs {
			_ = d.Close()
		}
	}()
	for i := 0; i < opt.nranks; i++ {
		d, err := cuda.Open(i % have)
		if err != nil {
			return err
		}
		devs = append(devs, d)
	}
	pl, where, err := gpuPlanner(opt, getenv)
	if err != nil {
		return err
	}
	ecfg := &engine.Config{Planner: pl, Timeout: opt.timeout, ShareGPUs: opt.shareGPUs}
	if b := opt.settings.Tuning.BuffSize; b > 0 {
		ecfg.SlotBytes = int(b / coll.NCCLSteps)
	}
	comms, err := engine.InitAll(devs, ecfg)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range comms {
			_ = c.Destroy()
		}
	}()
	n := len(comms)
	if err := opt.checkRoot(n); err != nil {
		return err
	}
	// nccl-tests' -d all leaves out fp8 below compute capability 9.0 (src/common.cu, run).
	if len(opt.dtypes) > 1 {
		for _, d := range devs {
			if d.Major < 9 {
				opt.dtypes = slices.DeleteFunc(opt.dtypes, func(t coll.DataType) bool { return t == coll.Float8e4m3 || t == coll.Float8e5m2 })
				break
			}
		}
	}
	transport := "cuda-p2p"
	if cuda.Emulated() {
		transport += " (emulated)"
	}
	host, _ := os.Hostname()
	var ds []perf.Device
	for r, d := range devs {
		ds = append(ds, perf.Device{Rank: r, Pid: os.Getpid(), Host: host, Device: d.Ordinal, Bus: busOf(d.PCIBusID), Name: d.Name})
	}
	opt.flags.NGpus = n
	w, err := opt.writer(stdout, opt.header("cuda", transport, where, n, ds))
	if err != nil {
		return err
	}
	// Bench runs one cycle (warming up at every size); -N repeats it.
	bench := func(p perf.Options) (*perf.Result, error) {
		var wrong int64
		var res *perf.Result
		for cycle := 0; p.Cycles == perf.Forever || cycle < max(p.Cycles, 1); cycle++ {
			r, err := engine.Bench(comms, p)
			if err != nil {
				return nil, err
			}
			wrong += r.Wrong
			res = r
		}
		res.Wrong = wrong
		return res, nil
	}
	return runTests(opt, n, w, bench, nil)
}

// busOf is a PCI bus id as nccl-tests prints it ("0000:19:00.0" → "0000:19:00").
func busOf(id string) string {
	if i := strings.LastIndexByte(id, '.'); i > 0 {
		return strings.ToLower(id[:i])
	}
	return strings.ToLower(id)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// gpuPlanner is the planner of the GPUs the engine runs on, and what it describes: the live
// machine's topology (discovered as NCCL_TOPO_DUMP_FILE would write it, the ranks on its first -g
// GPUs), or, where that cannot describe the ranks (the emulator, ranks sharing GPUs, no NVML),
// planner.CPUMachine's GPUs straight under one CPU — said in the output's header.
func gpuPlanner(opt *options, getenv func(string) string) (*planner.Planner, string, error) {
	build := func(m planner.Machine) (*planner.Planner, error) { return planner.New(m) }
	fallback := func(why string) (*planner.Planner, string, error) {
		m, err := planner.CPUMachine(opt.nranks, 1, opt.settings)
		if err != nil {
			return nil, "", err
		}
		p, err := build(m)
		return p, fmt.Sprintf("planned for %d GPUs under one CPU without NVLink (%s)", opt.nranks, why), err
	}
	switch {
	case opt.settings.TopoFile != "":
		// NCCL_TOPO_FILE: NCCL reads the machine from the file instead of detecting it.
		name, doc, err := planner.LoadTopology("", opt.settings)
		if err != nil {
			return nil, "", err
		}
		p, err := build(planner.Machine{Name: name, Doc: doc, Nodes: 1, GPUs: opt.nranks, Settings: opt.settings})
		if err != nil {
			return nil, "", fmt.Errorf("planning on NCCL_TOPO_FILE: %w", err)
		}
		return p, "planned on NCCL_TOPO_FILE " + name, nil
	case cuda.Emulated():
		return fallback("the emulator")
	case opt.shareGPUs:
		return fallback("ranks share GPUs")
	}
	lib, err := discover.OpenNVML()
	if err != nil {
		return fallback("no NVML: " + oneLine(err.Error()))
	}
	defer lib.Close()
	res, err := discover.Discover(discover.Options{NVML: lib, Getenv: getenv})
	if err != nil {
		return fallback("discovery failed: " + oneLine(err.Error()))
	}
	p, err := build(planner.Machine{Name: "this machine", Doc: res.Doc, Nodes: 1, GPUs: opt.nranks, Settings: opt.settings})
	if err != nil {
		return nil, "", fmt.Errorf("planning on this machine's topology: %w", err)
	}
	return p, "planned on this machine's topology (discovered)", nil
}
