package partial

import (
	"fmt"
	"sort"
	"strings"
)

// Fabric says what a GPU's NVLinks connect to on the board the model ships on.
type Fabric int

const (
	// NoNVLink: a PCIe card without NVLink. NCCL's probe finds no active link and writes none.
	NoNVLink Fabric = iota
	// NVSwitch: every link goes to an NVSwitch of the baseboard (HGX). NCCL merges all the
	// links to NVSwitches into one NVS node (NCCL 2.28 topo.cc ncclTopoAddNvLinks), so which
	// switch each link reaches does not change the model.
	NVSwitch
	// GPUMesh: links go from GPU to GPU (the hybrid cube mesh of 8-GPU V100 SXM2 boards).
	// Which GPU each link reaches is read from NVML link by link; a file that does not list the
	// links does not say it.
	GPUMesh
)

func (f Fabric) String() string {
	switch f {
	case NVSwitch:
		return "NVSwitch"
	case GPUMesh:
		return "GPU-to-GPU mesh"
	}
	return "none"
}

// Model is a GPU as NCCL's detection describes it in the topology XML (NCCL 2.28 xml.cc
// ncclTopoGetXmlFromGpu): its compute capability, its active NVLinks and what they reach, and
// whether CUDA reports GPUDirect RDMA support (the <gpu gdr> NCCL 2.28 writes, init.cc).
type Model struct {
	Name    string // what --gpu-model takes
	Part    string // the product
	SM      int    // compute capability × 10, <gpu sm>
	NVLinks int    // active NVLinks per GPU on its board (0: none)
	Fabric  Fabric
	GDR     bool   // cudaDevAttrGPUDirectRDMASupported
	Source  string // where SM and NVLinks come from
}

// nvswitchClass is the PCI class NCCL reads for an NVSwitch (NCCL 2.28 xml.h, "0x068000" → NVS).
const nvswitchClass = "0x068000"

// models are the GPUs completion knows. SM is CUDA's compute capability of the part (NVIDIA's
// "CUDA GPUs" table); NVLinks the links per GPU of its datasheet's NVLink bandwidth at 50 GB/s
// per link for NVLink 2-4 and 100 GB/s for NVLink 5, checked against a real NCCL dump where
// testdata has one. GDR: every real dump of these GPUs in testdata has gdr="1".
var models = []Model{
	{Name: "v100", Part: "Tesla V100 SXM2", SM: 70, NVLinks: 6, Fabric: GPUMesh, GDR: true,
		Source: "V100 datasheet: NVLink 300 GB/s = 6 links; testdata/topos/dgx1-v100-8gpu-hybrid-cube-mesh.xml (sm 70, 6 links GPU to GPU)"},
	{Name: "a100", Part: "A100 SXM4 on an HGX A100 board", SM: 80, NVLinks: 12, Fabric: NVSwitch, GDR: true,
		Source: "A100 datasheet: NVLink 600 GB/s = 12 links; testdata/topos/simai-simccl-topo_8A100_4CX6.xml (sm 80, 6 NVSwitches x 2 links)"},
	{Name: "h100", Part: "H100 SXM5 on an HGX H100 board", SM: 90, NVLinks: 18, Fabric: NVSwitch, GDR: true,
		Source: "H100 datasheet: NVLink 900 GB/s = 18 links; testdata/topos/h100-4gpu-vm-flat-nvswitch-sentinel.xml (sm 90, 18 links to the sentinel)"},
	{Name: "h800", Part: "H800 SXM5 on an HGX H800 board", SM: 90, NVLinks: 8, Fabric: NVSwitch, GDR: true,
		Source: "H800 datasheet: NVLink 400 GB/s = 8 links; testdata/topos/h800-8gpu-nvswitch-8x400g-ib.xml (sm 90, 4 NVSwitches x 2 links)"},
	{Name: "h200", Part: "H200 SXM on an HGX H200 board", SM: 90, NVLinks: 18, Fabric: NVSwitch, GDR: true,
		Source: "H200 datasheet: NVLink 900 GB/s = 18 links; testdata/nccl/h200x2/nvswitch_topo.xml (NCCL 2.28.9: sm 90, 18 links to the sentinel)"},
	{Name: "b200", Part: "B200 on an HGX B200 board", SM: 100, NVLinks: 18, Fabric: NVSwitch, GDR: true,
		Source: "B200 datasheet: NVLink 1.8 TB/s = 18 NVLink5 links; testdata/topos/b200-8gpu-gvisor-sandbox-flat.xml (sm 100, 18 links to the sentinel)"},
	{Name: "l40s", Part: "L40S PCIe card", SM: 89, NVLinks: 0, Fabric: NoNVLink, GDR: true,
		Source: "L40S datasheet: PCIe Gen4 x16, no NVLink; compute capability 8.9"},
	{Name: "l20", Part: "L20 PCIe card", SM: 89, NVLinks: 0, Fabric: NoNVLink, GDR: true,
		Source: "L20: PCIe, no NVLink; testdata/topos/l20-16gpu-pcie-2level-switch-8x400g.xml (sm 89, no NVLink)"},
}

// Models returns the GPU models completion knows, by name.
func Models() []Model {
	out := append([]Model(nil), models...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ModelNames lists the names Lookup accepts, sorted.
func ModelNames() []string {
	var names []string
	for _, m := range Models() {
		names = append(names, m.Name)
	}
	return names
}

// Lookup finds a model by name (case and surrounding blanks ignored).
func Lookup(name string) (Model, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, m := range models {
		if m.Name == n {
			return m, nil
		}
	}
	return Model{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownModel, name, strings.Join(ModelNames(), ", "))
}
