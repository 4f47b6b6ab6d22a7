package discover

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/simccl/simccl/internal/input"
)

// ErrNoNVML reports that NVML could not be used: no NVIDIA driver (libnvidia-ml.so.1 missing),
// nvmlInit failing, or a binary built without cgo.
var ErrNoNVML = errors.New("discover: NVML unavailable")

// NVML is the part of NVIDIA's management library that discovery asks. Indices are NVML's.
type NVML interface {
	DeviceCount() (int, error)
	Device(index int) (GPU, error)
	Close() error
}

// GPU is one NVML device. Each method is one NVML query (named in its comment), so that the
// rules NCCL applies to the answers live in this package's plain Go code, where tests reach them.
type GPU interface {
	// BusID is nvmlDeviceGetPciInfo's bus id, e.g. "00000000:0F:00.0".
	BusID() (string, error)
	// ComputeCapability is nvmlDeviceGetCudaComputeCapability.
	ComputeCapability() (major, minor int, err error)
	// NvLinkP2P is nvmlDeviceGetNvLinkCapability(link, NVML_NVLINK_CAP_P2P_SUPPORTED) != 0.
	NvLinkP2P(link int) (bool, error)
	// NvLinkActive is nvmlDeviceGetNvLinkState(link) == NVML_FEATURE_ENABLED when field is false,
	// and the field value NVML_FI_DEV_NVLINK_GET_STATE (scope link) when field is true.
	NvLinkActive(link int, field bool) (bool, error)
	// NvLinkRemoteBusID is nvmlDeviceGetNvLinkRemotePciInfo's legacy bus id (busIdLegacy), as
	// NVML wrote it; NCCL lower-cases it and uses it as the <nvlink target>.
	NvLinkRemoteBusID(link int) (string, error)
	// C2CLinkCount is the field NVML_FI_DEV_C2C_LINK_COUNT.
	C2CLinkCount() (int, error)
	// C2CLink is the fields NVML_FI_DEV_C2C_LINK_GET_STATUS and NVML_FI_DEV_C2C_LINK_GET_MAX_BW
	// (MB/s) for one C2C link.
	C2CLink(link int) (up bool, maxBW int, err error)
	// PCIeLink is nvmlDeviceGetCurrPcieLinkGeneration and nvmlDeviceGetCurrPcieLinkWidth.
	PCIeLink() (gen, width int, err error)
	// GDRSupported is the CUDA device attribute CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED,
	// which NCCL 2.28 (CUDA >= 11.3) puts in <gpu gdr>. An error means it could not be asked.
	GDRSupported() (bool, error)
}

// FakeNVML is an NVML described by a JSON file, for tests and for replaying a machine offline
// (simccl topo dump --nvml-json). Its fields mirror the GPU methods.
type FakeNVML struct {
	GPUs []FakeGPU `json:"gpus"`
}

// FakeGPU is one device of a FakeNVML.
type FakeGPU struct {
	BusID string `json:"busid"`
	SM    int    `json:"sm"` // compute capability ×10
	// Links lists the NVLinks in link order; an entry with Repeat > 1 stands for that many links.
	Links []FakeLink `json:"links"`
	// C2C lists the C2C links (their count is len(C2C)); absent = the field is not supported.
	C2C       []FakeC2C `json:"c2c,omitempty"`
	PCIeGen   int       `json:"pcie_gen"`
	PCIeWidth int       `json:"pcie_width"`
	GDR       *bool     `json:"gdr,omitempty"` // nil = cannot be asked
}

// FakeLink is one NVLink (or Repeat identical ones) of a FakeGPU.
type FakeLink struct {
	P2P    bool   `json:"p2p"`
	Active bool   `json:"active"`
	Remote string `json:"remote"`
	Repeat int    `json:"repeat,omitempty"`
}

// FakeC2C is one C2C link of a FakeGPU.
type FakeC2C struct {
	Up bool `json:"up"`
	BW int  `json:"bw"`
}

// LoadFakeNVML reads a FakeNVML from a JSON file.
func LoadFakeNVML(path string) (*FakeNVML, error) {
	data, err := input.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseFakeNVML(data, path)
}

// ParseFakeNVML reads a FakeNVML from JSON; name is used in errors. Unknown fields, bad bus ids
// and impossible values are errors.
func ParseFakeNVML(data []byte, name string) (*FakeNVML, error) {
	var f FakeNVML
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(f.GPUs) > maxFakeGPUs {
		return nil, fmt.Errorf("%s: %d GPUs, at most %d", name, len(f.GPUs), maxFakeGPUs)
	}
	for i, g := range f.GPUs {
		if _, err := parseBusID(g.BusID); err != nil {
			return nil, fmt.Errorf("%s: gpus[%d]: %v", name, i, err)
		}
		if g.SM <= 0 || g.SM > 1000 {
			return nil, fmt.Errorf("%s: gpus[%d]: sm %d out of range 1..1000 (compute capability ×10)", name, i, g.SM)
		}
		if len(g.Links) > 64 || len(g.C2C) > 64 {
			return nil, fmt.Errorf("%s: gpus[%d]: more than 64 link entries", name, i)
		}
		for j, l := range g.Links {
			if l.Repeat < 0 || l.Repeat > 64 {
				return nil, fmt.Errorf("%s: gpus[%d].links[%d]: repeat %d out of range 0..64", name, i, j, l.Repeat)
			}
		}
	}
	return &f, nil
}

// maxFakeGPUs bounds a FakeNVML (NCCL 2.28 keeps at most 576 nodes of one type).
const maxFakeGPUs = 576

// DeviceCount implements NVML.
func (f *FakeNVML) DeviceCount() (int, error) { return len(f.GPUs), nil }

// Device implements NVML.
func (f *FakeNVML) Device(i int) (GPU, error) {
	if i < 0 || i >= len(f.GPUs) {
		return nil, fmt.Errorf("fake NVML: no device %d", i)
	}
	g := &f.GPUs[i]
	return fakeGPU{g: g, links: g.expand()}, nil
}

// Close implements NVML.
func (f *FakeNVML) Close() error { return nil }

func (g *FakeGPU) expand() []FakeLink {
	var out []FakeLink
	for _, l := range g.Links {
		n := l.Repeat
		if n == 0 {
			n = 1
		}
		for k := 0; k < n; k++ {
			out = append(out, l)
		}
	}
	return out
}

type fakeGPU struct {
	g     *FakeGPU
	links []FakeLink
}

var errNotSupported = errors.New("not supported")

func (f fakeGPU) BusID() (string, error) { return f.g.BusID, nil }
func (f fakeGPU) ComputeCapability() (int, int, error) {
	return f.g.SM / 10, f.g.SM % 10, nil
}
func (f fakeGPU) link(l int) (FakeLink, error) {
	if l < 0 || l >= len(f.links) {
		return FakeLink{}, errNotSupported
	}
	return f.links[l], nil
}
func (f fakeGPU) NvLinkP2P(l int) (bool, error) {
	k, err := f.link(l)
	return k.P2P, err
}
func (f fakeGPU) NvLinkActive(l int, _ bool) (bool, error) {
	k, err := f.link(l)
	return k.Active, err
}
func (f fakeGPU) NvLinkRemoteBusID(l int) (string, error) {
	k, err := f.link(l)
	return k.Remote, err
}
func (f fakeGPU) C2CLinkCount() (int, error) {
	if f.g.C2C == nil {
		return 0, errNotSupported
	}
	return len(f.g.C2C), nil
}
func (f fakeGPU) C2CLink(l int) (bool, int, error) {
	if l < 0 || l >= len(f.g.C2C) {
		return false, 0, errNotSupported
	}
	return f.g.C2C[l].Up, f.g.C2C[l].BW, nil
}
func (f fakeGPU) PCIeLink() (int, int, error) {
	if f.g.PCIeGen == 0 {
		return 0, 0, errNotSupported
	}
	return f.g.PCIeGen, f.g.PCIeWidth, nil
}
func (f fakeGPU) GDRSupported() (bool, error) {
	if f.g.GDR == nil {
		return false, errNotSupported
	}
	return *f.g.GDR, nil
}

// pciAddr is a PCI address domain:bus:device.function.
type pciAddr struct{ domain, bus, dev, fn uint64 }

// parseBusID reads "dddd:bb:dd.f" or NVML's "dddddddd:bb:dd.f" (any case).
func parseBusID(s string) (pciAddr, error) {
	var a pciAddr
	bad := fmt.Errorf("bus id %q: want domain:bus:device.function in hex", s)
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return a, bad
	}
	df := strings.Split(parts[2], ".")
	if len(df) != 2 {
		return a, bad
	}
	fields := []string{parts[0], parts[1], df[0], df[1]}
	widths := []int{32, 8, 8, 8}
	var vals [4]uint64
	for i, f := range fields {
		if f == "" {
			return a, bad
		}
		v, err := strconv.ParseUint(f, 16, widths[i])
		if err != nil {
			return a, bad
		}
		vals[i] = v
	}
	if vals[2] > 31 || vals[3] > 7 {
		return a, bad
	}
	return pciAddr{vals[0], vals[1], vals[2], vals[3]}, nil
}

// String formats the address the way NCCL writes a busid (int64ToBusId, 2.28): "%04lx:%02lx:%02lx.%01lx".
func (a pciAddr) String() string {
	return fmt.Sprintf("%04x:%02x:%02x.%x", a.domain, a.bus, a.dev, a.fn)
}

// maxNvLinks is how many links NCCL 2.28 probes for a compute capability (ncclTopoGetXmlFromGpu):
// 4 for sm6x, 6 for sm7x, 12 for sm8x, 18 from sm90; none below sm60.
func maxNvLinks(sm int) int {
	switch {
	case sm < 60:
		return 0
	case sm < 70:
		return 4
	case sm < 80:
		return 6
	case sm < 90:
		return 12
	}
	return 18
}

// nvlinkSentinel is the target NCCL 2.30 writes when NVML returns an empty or unprintable remote
// bus id; such a target has no sysfs path and is taken for an NVSwitch (ncclTopoAddNvLinks).
const nvlinkSentinel = "fffffff:ffff:ff"

// nvlinkTarget turns NVML's remote bus id into NCCL's <nvlink target>: lower-cased as NVML wrote
// it (NCCL 2.28 keeps NVML's text, which is why dumps show "fffffff:ff:ff.0" for an NVSwitch that
// a VM cannot see).
func nvlinkTarget(remote string) string {
	if remote == "" {
		return nvlinkSentinel
	}
	for _, c := range remote {
		if c < 0x20 || c > 0x7e {
			return nvlinkSentinel
		}
	}
	return strings.ToLower(remote)
}
