package topo

import (
	"strconv"
	"testing"

	"github.com/simccl/simccl/graph"
)

// TestPCIGenCode: NCCL's link_speed table, matched by prefix, first match wins (NCCL 2.28 topo.cc
// kvDictPciGen).
func TestPCIGenCode(t *testing.T) {
	for speed, want := range map[string]int{
		"2.5 GT/s": 15, "2.5 GT/s PCIe": 15, "5 GT/s": 30, "5.0 GT/s PCIe": 30, "8 GT/s": 60, "8.0 GT/s PCIe": 60,
		"16 GT/s": 120, "16.0 GT/s PCIe": 120, "32 GT/s": 240, "32.0 GT/s PCIe": 240, "64.0 GT/s PCIe": 480,
		"32 GT/s PCIe/s": 240, // malformed AWS string: the "32 GT/s" prefix matches
		"16.0 GT/s":      60,  // NVML's fallback string matches no key
		"":               60, "64 GT/s": 60, "garbage": 60,
	} {
		if got := pciGenCode(speed); got != want {
			t.Errorf("%q: %d, want %d", speed, got, want)
		}
	}
}

// TestInterCPUBw: the inter-socket table (NCCL 2.28 topo.cc ncclTopoGetInterCpuBw).
func TestInterCPUBw(t *testing.T) {
	cases := []struct {
		arch, vendor string
		fam, model   int
		want         float64
	}{
		{"x86_64", "GenuineIntel", 6, 0xCF, 40}, {"x86_64", "GenuineIntel", 6, 207, 40}, {"x86_64", "GenuineIntel", 6, 0x8F, 22},
		{"x86_64", "GenuineIntel", 6, 0x55, 10}, {"x86_64", "GenuineIntel", 6, 79, 6}, {"x86_64", "GenuineIntel", 15, 0xCF, 6},
		{"x86_64", "AuthenticAMD", 25, 17, 16}, {"x86_64", "CentaurHauls", 7, 0x5B, 9}, {"x86_64", "  Shanghai  ", 7, 1, 6},
		{"ppc64", "", 0, 0, 32}, {"arm64", "", 0, 0, 6}, {"", "", 0, 0, 5000}, {"x86_64", "HygonGenuine", 24, 1, 5000},
	}
	for _, c := range cases {
		text := `<system version="1"><cpu numaid="0" arch="` + c.arch + `" vendor="` + c.vendor + `" familyid="` + strconv.Itoa(c.fam) + `" modelid="` + strconv.Itoa(c.model) + `">` +
			gpuPCI("0000:01:00.0", 0, "") + `</cpu><cpu numaid="1" arch="` + c.arch + `" vendor="` + c.vendor + `" familyid="` + strconv.Itoa(c.fam) + `" modelid="` + strconv.Itoa(c.model) + `"/></system>`
		s, err := build(t, text, graph.Options{})
		if err != nil {
			t.Fatal(err)
		}
		l := s.Nodes[graph.CPU][0].Links
		var got float64
		for _, x := range l {
			if x.Type == graph.LinkSYS {
				got = x.BW
			}
		}
		if got != c.want {
			t.Errorf("%s %q %d/%d: %v, want %v", c.arch, c.vendor, c.fam, c.model, got, c.want)
		}
	}
}

func TestNVLinkBw(t *testing.T) {
	for sm, want := range map[int]float64{100: 40.1, 103: 40.1, 90: 20.6, 89: 20, 86: 12, 80: 20, 70: 20, 60: 18, 52: 20} {
		if got := graph.V2_28.NVLinkBw(sm); float32(got) != float32(want) {
			t.Errorf("sm %d: %v, want %v", sm, got, want)
		}
	}
	// 2.25–2.27: Blackwell's links were 40.0 GB/s; other generations as in 2.28.
	for _, v := range []graph.Version{graph.V2_26, graph.V2_27} {
		for sm, want := range map[int]float64{100: 40, 103: 40, 90: 20.6} {
			if got := v.NVLinkBw(sm); float32(got) != float32(want) {
				t.Errorf("%v sm %d: %v, want %v", v, sm, got, want)
			}
		}
	}
}

// TestCPUNicAndPciLink: a <nic> under <cpu> hangs off the CPU with LOC_BW PCI links; a
// <pcilink> adds a LOC link of LOC_BW between two switches (one direction per element).
func TestCPUNicAndPciLink(t *testing.T) {
	text := cpuOpen + `<pci busid="0000:10:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16"><pcilink target="0000:20:00.0"/>` +
		gpuPCI("0000:11:00.0", 0, "") + `</pci><pci busid="0000:20:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16"><pcilink target="0000:10:00.0"/>` +
		gpuPCI("0000:21:00.0", 1, "") + `</pci><nic><net name="eth0" dev="0" speed="100000"/></nic></cpu></system>`
	s, err := build(t, text, graph.Options{NRanks: 4})
	if err != nil {
		t.Fatal(err)
	}
	nic := s.Nodes[graph.NIC][0]
	if nic.ID != 0 || nic.Links[0].Type != graph.LinkNET || nic.Links[len(nic.Links)-1].BW != graph.LocBw {
		t.Errorf("CPU NIC links %+v", nic.Links)
	}
	sw := s.Nodes[graph.PCI][0]
	if sw.Links[0].Type != graph.LinkLOC || sw.Links[0].BW != graph.LocBw || sw.Links[0].Remote != s.Nodes[graph.PCI][1] {
		t.Errorf("pcilink: %+v", sw.Links[0])
	}
	// GPU0→GPU1 crosses the pcilink: PCI, LOC, PCI — PXB at 48 GB/s, without the CPU.
	if p := s.Path(s.GPUByRank(0), s.GPUByRank(1)); p.Type != graph.PathPXB || p.BW != 48 || p.Hops() != 3 {
		t.Errorf("GPU0→GPU1 over pcilink %s %.1f/%d", p.Type, p.BW, p.Hops())
	}
	if p := s.Path(s.GPUByRank(0), s.NETs()[0]); p.Type != graph.PathPHB || p.BW != 12.5 {
		t.Errorf("GPU0→CPU NIC %s %.1f", p.Type, p.BW)
	}
}

// TestClassifyCPU: the arch and vendor dictionaries of NCCL 2.28 (kvDictCpuArch, kvDictCpuVendor,
// prefix match, anything else unknown; the vendor read on x86 only), the Intel and Zhaoxin
// models, and the names package tuning gets from them (graph.CPUInfo.ArchName, VendorName).
func TestClassifyCPU(t *testing.T) {
	cases := []struct {
		arch, vendor          string
		fam, model            int64
		archID, vendorID, mdl int
		archName, vendorName  string
	}{
		{"x86_64", "GenuineIntel", 6, 0x8F, graph.CPUArchX86, graph.CPUVendorIntel, modelSRP, "x86", "intel"},
		{"x86_64", "GenuineIntel", 6, 0x4F, graph.CPUArchX86, graph.CPUVendorIntel, modelBDW, "x86", "intel"},
		{"x86_64", "AuthenticAMD", 25, 17, graph.CPUArchX86, graph.CPUVendorAMD, 0, "x86", "amd"},
		// Hygon's Dhyana is Zen, but NCCL's dictionary does not know the string.
		{"x86_64", "HygonGenuine", 24, 1, graph.CPUArchX86, 0, 0, "x86", ""},
		{"x86_64", "CentaurHauls", 7, 0x5B, graph.CPUArchX86, graph.CPUVendorZhaoxin, modelYongfeng, "x86", "zhaoxin"},
		{"x86_64", "  Shanghai  ", 7, 1, graph.CPUArchX86, graph.CPUVendorZhaoxin, 0, "x86", "zhaoxin"},
		{"x86_64", "Shanghai", 7, 1, graph.CPUArchX86, 0, 0, "x86", ""}, // the CPUID string has the spaces
		{"x86_64", "genuineintel", 6, 0x8F, graph.CPUArchX86, 0, 0, "x86", ""},
		{"x86_64", "", 0, 0, graph.CPUArchX86, 0, 0, "x86", ""},
		{"x86_64_v3", "GenuineIntel", 6, 0xCF, graph.CPUArchX86, graph.CPUVendorIntel, modelERP, "x86", "intel"}, // prefix
		{"arm64", "GenuineIntel", 6, 0x8F, graph.CPUArchARM, 0, 0, "arm", ""},                                    // vendor read on x86 only
		{"ppc64", "", 0, 0, graph.CPUArchPower, 0, 0, "power", ""},
		{"ppc64le", "", 0, 0, graph.CPUArchPower, 0, 0, "power", ""},
		{"aarch64", "", 0, 0, 0, 0, 0, "", ""},
		{"amd64", "AuthenticAMD", 25, 17, 0, 0, 0, "", ""},
		{"", "", 0, 0, 0, 0, 0, "", ""},
	}
	for _, c := range cases {
		got := classifyCPU(c.arch, c.vendor, c.fam, c.model)
		if got != (cpuCodes{c.archID, c.vendorID, c.mdl}) {
			t.Errorf("%q %q %d/%d: codes %+v, want %d/%d/%d", c.arch, c.vendor, c.fam, c.model, got, c.archID, c.vendorID, c.mdl)
		}
		info := graph.CPUInfo{ArchID: got.arch, VendorID: got.vendor, ModelID: got.model}
		if info.ArchName() != c.archName || info.VendorName() != c.vendorName {
			t.Errorf("%q %q: names %q %q, want %q %q", c.arch, c.vendor, info.ArchName(), info.VendorName(), c.archName, c.vendorName)
		}
	}
	// The builder sets the codes of every <cpu> from its attributes.
	s, err := build(t, `<system version="1"><cpu numaid="0" arch="x86_64" vendor="HygonGenuine" familyid="24" modelid="1">`+
		gpuPCI("0000:01:00.0", 0, "")+`</cpu><cpu numaid="1" arch="x86_64" vendor="AuthenticAMD" familyid="25" modelid="17"/></system>`, graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c0, c1 := s.Nodes[graph.CPU][0].CPU, s.Nodes[graph.CPU][1].CPU; c0.VendorID != 0 || c0.ArchID != graph.CPUArchX86 || c1.VendorID != graph.CPUVendorAMD {
		t.Errorf("CPU codes %d/%d and %d/%d", c0.ArchID, c0.VendorID, c1.ArchID, c1.VendorID)
	}
}

// TestParseBusID: busIdToInt64 through ncclxml.ParseBusID, spaces around the id ignored, and the
// builder's message for what is not a bus id.
func TestParseBusID(t *testing.T) {
	for in, want := range map[string]int64{"0000:1b:00.0": 0x1b000, " 0000:1B:00.0\t": 0x1b000, "fffffff:ff:ff.0": 0xfffffffffff0, "1": 1} {
		if got, err := parseBusID(in); err != nil || got != want {
			t.Errorf("%q: %#x %v, want %#x", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"":                     `bad busid "" (want dddd:bb:dd.f in hex)`,
		" 0000:zz:00.0 ":       `bad busid "0000:zz:00.0" (want dddd:bb:dd.f in hex)`,
		"::.":                  `bad busid "::." (want dddd:bb:dd.f in hex)`,
		"00000000:000000:00.0": `bad busid "00000000:000000:00.0" (want dddd:bb:dd.f in hex)`,
	} {
		if _, err := parseBusID(in); err == nil || err.Error() != want {
			t.Errorf("%q: error %v, want %s", in, err, want)
		}
	}
}
