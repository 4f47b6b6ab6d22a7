package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/simccl/simccl/topo/discover"
)

// `simccl topo dump`: the live machine as NCCL topology XML, a subcommand of `topo` (topo.go);
// all the work is in package topo/discover.
var topoDumpCommand = &command{
	name:  "dump",
	short: "write the live machine's topology as NCCL XML",
	long: `simccl topo dump [-o FILE] [--sysfs ROOT]: writes this machine's topology (NVML + sysfs) the
way NCCL_TOPO_DUMP_FILE does for a communicator of all its GPUs (rank = NVML index). Needs the
NVIDIA driver.`,
	define: defineTopoDump,
}

func defineTopoDump(fs *pflag.FlagSet) runFunc {
	out := fs.StringP("output", "o", "", "write the XML to `FILE` instead of stdout")
	root := fs.String("sysfs", "/", "read /sys and /proc below `ROOT` (a copy of another machine's)")
	nvmlJSON := fs.String("nvml-json", "", "answer NVML queries from a JSON description in `FILE` instead of the driver (tests, offline replays)")
	gpuLink := fs.String("gpu-link", "sysfs", "where a GPU's link_speed/link_width come from: sysfs (NCCL 2.28) or nvml (NCCL 2.30)")
	return func(stdout, stderr io.Writer) error {
		if *gpuLink != "sysfs" && *gpuLink != "nvml" {
			return fmt.Errorf("%w: --gpu-link %q: want sysfs or nvml", errUsage, *gpuLink)
		}
		if st, err := os.Stat(*root); err != nil || !st.IsDir() {
			return fmt.Errorf("%w: --sysfs %q is not a directory", errUsage, *root)
		}
		var lib discover.NVML
		var err error
		if *nvmlJSON != "" {
			lib, err = discover.LoadFakeNVML(*nvmlJSON)
		} else {
			lib, err = discover.OpenNVML()
		}
		if err != nil {
			return err
		}
		defer lib.Close()
		res, err := discover.Discover(discover.Options{
			Root:            *root,
			NVML:            lib,
			Getenv:          os.Getenv,
			GPULinkFromNVML: *gpuLink == "nvml",
		})
		if err != nil {
			return err
		}
		for _, w := range res.Warnings {
			fmt.Fprintf(stderr, "simccl topo dump: approximated: %s\n", w)
		}
		data, err := res.Doc.Bytes()
		if err != nil {
			return err
		}
		if *out == "" {
			_, err = stdout.Write(data)
			return err
		}
		if err := os.WriteFile(*out, data, 0o644); err != nil {
			return fmt.Errorf("writing %s: %v", *out, err)
		}
		return nil
	}
}
