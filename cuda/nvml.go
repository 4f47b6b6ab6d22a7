package cuda

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoNVML is returned (wrapped) by NVMLDevices when libnvidia-ml.so.1 cannot be used.
var ErrNoNVML = errors.New("cuda: no NVML")

// GPUInfo is one GPU as NVML sees it (github.com/NVIDIA/go-nvml, loaded at run time).
type GPUInfo struct {
	Index    int    // NVML index (PCI order; CUDA's order may differ: match by PCIBusID)
	Name     string // e.g. "NVIDIA H200"
	UUID     string
	PCIBusID string // normalized, see NormalizeBusID
	// NVLinks counts the active NVLink links of this GPU by the PCI bus ID of their far end (a GPU,
	// or an NVSwitch on switched systems), normalized.
	NVLinks map[string]int
}

// LinksTo is the number of active NVLink links from g straight to the GPU other.
func (g GPUInfo) LinksTo(other GPUInfo) int { return g.NVLinks[other.PCIBusID] }

// NormalizeBusID writes a PCI address as domain:bus:device.function in lower case with a 4-digit
// domain, so that NVML's "00000000:07:00.0" and CUDA's "0000:07:00.0" compare equal. An address
// it cannot parse is returned lower-cased and trimmed.
func NormalizeBusID(s string) string {
	s = strings.ToLower(strings.TrimSpace(strings.TrimRight(s, "\x00")))
	parts := strings.Split(s, ":")
	if len(parts) == 2 {
		parts = append([]string{"0"}, parts...)
	}
	if len(parts) != 3 {
		return s
	}
	dom, err := strconv.ParseUint(parts[0], 16, 32)
	if err != nil {
		return s
	}
	return fmt.Sprintf("%04x:%s:%s", dom, parts[1], parts[2])
}
