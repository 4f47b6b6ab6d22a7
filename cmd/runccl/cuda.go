package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/simccl/simccl/comm/perf"
	"github.com/simccl/simccl/cuda"
	"github.com/simccl/simccl/cuda/engine"
)

// EmulateEnv, set to a number of devices, runs --backend cuda on the emulated driver (package
// cuda's CPU stand-in for libcuda.so.1): for tests and development on machines without a GPU.
const EmulateEnv = "SIMCCL_CUDA_EMULATE"

// runCUDA runs the sweep on -g GPUs of this machine with the cuda/engine backend: one process,
// one communicator per GPU, the same table and JSON as the cpu backend.
func runCUDA(opt *options, stdout io.Writer, getenv func(string) string) error {
	if opt.procs {
		return fmt.Errorf("%w: --procs: the cuda backend runs one process driving -g GPUs", errUsage)
	}
	if _, launched, _ := perf.DetectLaunch(getenv); launched {
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
	comms, err := engine.InitAll(devs, &engine.Config{NChannels: opt.channels, Algo: opt.algo, Timeout: opt.timeout, ShareGPUs: opt.shareGPUs})
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range comms {
			_ = c.Destroy()
		}
	}()
	res, err := engine.Bench(comms, opt.perf)
	if err != nil {
		return err
	}
	if cuda.Emulated() {
		res.Transport += " (emulated)"
	}
	if opt.json {
		if err := perf.WriteJSON(stdout, res); err != nil {
			return err
		}
	} else {
		perf.WriteTable(stdout, res)
	}
	if res.Wrong > 0 {
		return fmt.Errorf("%d wrong elements", res.Wrong)
	}
	return nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
