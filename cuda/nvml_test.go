package cuda

import (
	"errors"
	"testing"
)

func TestNormalizeBusID(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:07:00.0":     "0000:07:00.0",
		"0000:9A:00.0":         "0000:9a:00.0",
		"9a:00.0":              "0000:9a:00.0",
		"00000001:00:06.0\x00": "0001:00:06.0",
		"garbage":              "garbage",
	} {
		if got := NormalizeBusID(in); got != want {
			t.Errorf("NormalizeBusID(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNVML lists the GPUs through NVML and checks that they are the GPUs CUDA sees (by PCI
// address); on a machine with two or more GPUs it logs the NVLink links between them.
func TestNVML(t *testing.T) {
	gpus, err := NVMLDevices()
	if errors.Is(err, ErrNoNVML) {
		t.Skipf("NVML test skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) == 0 {
		t.Fatal("NVML reports no GPU")
	}
	byBus := map[string]GPUInfo{}
	for _, g := range gpus {
		if g.Name == "" || g.UUID == "" || g.PCIBusID == "" {
			t.Errorf("GPU %d: incomplete %+v", g.Index, g)
		}
		byBus[g.PCIBusID] = g
		t.Logf("nvml %d: %s %s %s, NVLink %v", g.Index, g.Name, g.PCIBusID, g.UUID, g.NVLinks)
	}
	if Init() != nil {
		return
	}
	ds := needDevices(t, 1)
	for _, d := range devs {
		if _, ok := byBus[NormalizeBusID(d.PCIBusID)]; !ok {
			t.Errorf("CUDA device %v (bus %s) is not among NVML's GPUs", d, NormalizeBusID(d.PCIBusID))
		}
	}
	if len(ds) > 0 && len(gpus) >= 2 {
		t.Logf("NVLink links GPU %d → GPU %d: %d", gpus[0].Index, gpus[1].Index, gpus[0].LinksTo(gpus[1]))
	}
}
