package topo

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/topo/ncclxml"
)

// corpus holds the real topologies of testdata/topos.
const corpus = "../testdata/topos/"

// TestCorpusOutcomes: every topology of testdata/topos either loads (with the GPU count and
// maxBw/totalBw of rank 0's single-node view, NCCL 2.28) or fails with the one-line error
// given here. Graph dumps (<graphs>) are not topologies and are skipped.
func TestCorpusOutcomes(t *testing.T) {
	type outcome struct {
		gpus           int
		maxBw, totalBw float64
		err            string // substring of the one-line error, when it fails
	}
	noGPU := "no GPU with a rank"
	want := map[string]outcome{
		"a100pcie-2gpu-nvlink-bridge-dump-FAULT-asym-nvlink.xml": {2, 240, 240, ""},
		"a100pcie-2gpu-nvlink-bridge-dump-normal.xml":            {2, 240, 240, ""},
		"a100pcie-2gpu-nvlink-bridge-fused-nic-input.xml":        {2, 240, 240, ""},
		// Partial skeletons: <pci> stubs that NCCL fills from the live machine.
		"aws-g5-48xl-a10g-pcie-partial.xml":      {err: noGPU},
		"aws-p4d-24xl-a100-partial.xml":          {err: noGPU},
		"aws-p5-48xl-h100-partial-2023.xml":      {err: noGPU},
		"azure-ndv2-v100-partial.xml":            {err: noGPU},
		"azure-ndv4-a100-partial-orig2023.xml":   {err: noGPU},
		"azure-ndv4-a100-partial.xml":            {err: noGPU},
		"azure-ndv5-h100-partial.xml":            {err: noGPU},
		"rtp-llm-8gpu-pcie-gen6-cx8-minimal.xml": {err: noGPU}, // <gpu dev="N"/> without rank or sm
		// Hand-written: 8 H100 without NVLink, PCIe only; GPUs at Gen5 x16 behind Gen4 switches.
		"aws-p5-48xl-h100-32efa-2026.xml":  {8, 24, 48, ""},
		"azure-ncv4-a100pcie-orig2023.xml": {4, 240, 240, ""},
		// Self-targeted NVLinks are ignored (warning); x16 Gen3 default for link_width 0/empty speed.
		"azure-ncv4-a100pcie.xml": {4, 12, 12, ""},
		// 7 "NVSwitch" targets per GPU all merge into one NVS link of 7×18×40.1 GB/s.
		"b200-8gpu-gvisor-handedited-nvlink-mesh.xml": {8, 5000, 5052.6, ""},
		"b200-8gpu-gvisor-sandbox-flat.xml":           {8, 721.8, 721.8, ""},
		"dgx1-v100-8gpu-hybrid-cube-mesh.xml":         {8, 40, 120, ""},
		// GPU1 has count 0: a 0 GB/s link (warning), GPU1 reaches the others over C2C/PCI.
		"gb300-nvl72-1tray-FAULT-gpu1-nvlink-count0.xml": {4, 721.8, 721.8, ""},
		"gb300-nvl72-1tray-c2c.xml":                      {4, 721.8, 721.8, ""},
		"gb300-nvl72-2tray-mnnvl-fused.xml":              {8, 721.8, 721.8, ""},
		"h100-4gpu-vm-flat-nvswitch-sentinel.xml":        {4, 370.8, 370.8, ""},
		"h800-8gpu-nvswitch-8x400g-ib.xml":               {8, 164.8, 164.8, ""},
		"ibm-vpc-gx3d-h100-roce.xml":                     {8, 370.8, 370.8, ""},
		"l20-16gpu-pcie-2level-switch-8x400g.xml":        {16, 24, 24, ""},
		// RCCL dialect: <system version="2">.
		"rccl-mi300x-8gpu-vm-xgmi-azure-like.xml":              {err: `only version 1 is understood`},
		"rtx3090-8gpu-pcie-2socket-ib56g.xml":                  {8, 24, 24, ""},
		"rtx4090-2gpu-amd-numa23-cx4.xml":                      {2, 16, 24, ""},
		"rtx4090-4gpu-amd-nps4-calico-vnics.xml":               {4, 16, 24, ""},
		"rtxa6000-2gpu-nvlink-bridge-numa-minus1.xml":          {2, 48, 48, ""},
		"rtxa6000-4gpu-pcie-2socket-vnics-INPUT-truncated.xml": {2, 12, 12, ""},
		"rtxa6000-4gpu-pcie-2socket-vnics.xml":                 {4, 12, 12, ""},
		"simai-simccl-topo_1A100_1CX6.xml":                     {1, 5000, 5000, ""},
		"simai-simccl-topo_4A100_2CX6.xml":                     {4, 240, 240, ""},
		"simai-simccl-topo_8A100_4CX6.xml":                     {8, 240, 240, ""},
		"v100-8gpu-vm-flat-hybrid-cube-mesh.xml":               {8, 40, 120, ""},
	}
	files, _ := filepath.Glob(corpus + "*.xml")
	seen := 0
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasSuffix(name, "-graph.xml") {
			continue
		}
		seen++
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: no expected outcome in the table", name)
			continue
		}
		doc, err := ncclxml.ReadFile(f)
		var s *graph.System
		if err == nil {
			s, err = FromXML(doc, graph.Options{})
		}
		if w.err != "" {
			if err == nil || !strings.Contains(err.Error(), w.err) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: got error %v, want one line containing %q", name, err, w.err)
			} else if !strings.HasPrefix(err.Error(), f+":") {
				t.Errorf("%s: error %q does not name the file", name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(s.Nodes[graph.GPU]) != w.gpus || math.Abs(w.maxBw-s.MaxBw) > 0.05 || math.Abs(w.totalBw-s.TotalBw) > 0.05 {
			t.Errorf("%s: got %d GPUs maxBw %.1f totalBw %.1f, want %d %.1f %.1f", name, len(s.Nodes[graph.GPU]), s.MaxBw, s.TotalBw, w.gpus, w.maxBw, w.totalBw)
		}
	}
	if seen != len(want) {
		t.Errorf("table has %d entries, corpus %d topologies", len(want), seen)
	}
}
