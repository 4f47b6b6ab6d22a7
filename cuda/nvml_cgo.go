//go:build cgo

package cuda

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVMLDevices lists the GPUs NVML sees, with their active NVLink links. It initialises NVML and
// shuts it down again; without libnvidia-ml.so.1 it returns an error wrapping ErrNoNVML.
func NVMLDevices() ([]GPUInfo, error) {
	if r := nvml.Init(); r != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: nvmlInit: %v", ErrNoNVML, nvml.ErrorString(r))
	}
	defer nvml.Shutdown()
	n, r := nvml.DeviceGetCount()
	if r != nvml.SUCCESS {
		return nil, fmt.Errorf("cuda: nvmlDeviceGetCount: %v", nvml.ErrorString(r))
	}
	var out []GPUInfo
	for i := 0; i < n; i++ {
		d, r := nvml.DeviceGetHandleByIndex(i)
		if r != nvml.SUCCESS {
			return nil, fmt.Errorf("cuda: nvmlDeviceGetHandleByIndex(%d): %v", i, nvml.ErrorString(r))
		}
		g := GPUInfo{Index: i, NVLinks: map[string]int{}}
		if g.Name, r = d.GetName(); r != nvml.SUCCESS {
			return nil, fmt.Errorf("cuda: nvmlDeviceGetName(%d): %v", i, nvml.ErrorString(r))
		}
		if g.UUID, r = d.GetUUID(); r != nvml.SUCCESS {
			return nil, fmt.Errorf("cuda: nvmlDeviceGetUUID(%d): %v", i, nvml.ErrorString(r))
		}
		pci, r := d.GetPciInfo()
		if r != nvml.SUCCESS {
			return nil, fmt.Errorf("cuda: nvmlDeviceGetPciInfo(%d): %v", i, nvml.ErrorString(r))
		}
		g.PCIBusID = NormalizeBusID(cstr(pci.BusId[:]))
		for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
			st, r := d.GetNvLinkState(l)
			if r != nvml.SUCCESS || st != nvml.FEATURE_ENABLED {
				continue // no such link, link down, or no NVLink at all
			}
			rp, r := d.GetNvLinkRemotePciInfo(l)
			if r != nvml.SUCCESS {
				continue
			}
			g.NVLinks[NormalizeBusID(cstr(rp.BusId[:]))]++
		}
		out = append(out, g)
	}
	return out, nil
}

func cstr(b []uint8) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
