package graph

import (
	"strconv"
	"testing"
)

// TestPCIGenCode: NCCL's link_speed table, matched by prefix, first match wins (§1.3).
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

// TestInterCPUBw: the inter-socket table (§1.3).
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
		s, err := build(t, text, Options{})
		if err != nil {
			t.Fatal(err)
		}
		l := s.Nodes[CPU][0].Links
		var got float64
		for _, x := range l {
			if x.Type == LinkSYS {
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
		if got := nvlinkBw(sm); float32(got) != float32(want) {
			t.Errorf("sm %d: %v, want %v", sm, got, want)
		}
	}
}

func TestParsePathType(t *testing.T) {
	for in, want := range map[string]PathType{"LOC": PathLOC, "nvl": PathNVL, "PXN": PathPXN, "SYS": PathSYS, "0": PathLOC, "1": PathPIX, "2": PathPXB, "3": PathPHB, "4": PathSYS, "5": PathSYS, "9": PathSYS} {
		if got, err := ParsePathType(in); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	if _, err := ParsePathType("-1"); err == nil {
		t.Error("-1 accepted")
	}
}

func TestMirrorBits(t *testing.T) {
	for _, c := range [][3]int{{0, 8, 0}, {1, 8, 4}, {2, 8, 2}, {3, 8, 6}, {1, 4, 2}, {1, 2, 1}, {5, 1, 0}} {
		if got := mirrorBits(c[0], c[1]); got != c[2] {
			t.Errorf("mirror(%d,%d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
}

// TestBFSRuleByVersion: A and B share a PCIe switch (24 GB/s) and are also linked through GPU C
// by single NVLinks (20 GB/s, sm 80). NCCL 2.28's BFS keeps the first path with the best
// bandwidth (PIX 24 via the switch); 2.30.7's lexicographic rule prefers the better type (NVB 20
// through C).
func TestBFSRuleByVersion(t *testing.T) {
	gpu := func(bus string, rank int, links string) string {
		return `<pci busid="` + bus + `" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16"><gpu dev="` + strconv.Itoa(rank) + `" sm="80" rank="` + strconv.Itoa(rank) + `">` + links + `</gpu></pci>`
	}
	nv := func(bus string) string { return `<nvlink target="` + bus + `" count="1" tclass="0x030200"/>` }
	text := cpuOpen + `<pci busid="0000:10:00.0" class="0x060400" link_speed="16.0 GT/s PCIe" link_width="16">` +
		gpu("0000:11:00.0", 0, nv("0000:30:00.0")) + gpu("0000:12:00.0", 1, nv("0000:30:00.0")) + `</pci>` +
		gpu("0000:30:00.0", 2, nv("0000:11:00.0")+nv("0000:12:00.0")) + `</cpu></system>`
	for _, c := range []struct {
		v    Version
		typ  PathType
		bw   float64
		hops int
	}{{V2_28, PathPIX, 24, 2}, {V2_30, PathNVB, 20, 2}} {
		s, err := build(t, text, Options{Version: c.v})
		if err != nil {
			t.Fatal(err)
		}
		p := s.Path(s.GPUByRank(0), s.GPUByRank(1))
		if p.Type != c.typ || p.BW != c.bw || p.Hops() != c.hops {
			t.Errorf("%s: A→B %s %.1f/%d, want %s %.1f/%d", c.v, p.Type, p.BW, p.Hops(), c.typ, c.bw, c.hops)
		}
	}
	// NCCL_NVB_DISABLE: no GPU relays, so both versions take the switch.
	s, _ := build(t, text, Options{Version: V2_30, NVBDisable: true})
	if p := s.Path(s.GPUByRank(0), s.GPUByRank(1)); p.Type != PathPIX {
		t.Errorf("NVB disabled: %s", p.Type)
	}
}

// TestP2PLevelAMD: on AMD x86 with ≤2 GPUs the default P2P level is SYS (§3.4), so GPUs on
// two sockets keep their direct SYS path; on Intel it is PXB and the pair goes through the
// destination's CPU (same links here, the CPU of the destination being on the path).
// NCCL_P2P_LEVEL overrides both.
func TestP2PLevel(t *testing.T) {
	mk := func(vendor string) string {
		return `<system version="1"><cpu numaid="0" arch="x86_64" vendor="` + vendor + `" familyid="25" modelid="1">` + gpuPCI("0000:01:00.0", 0, "") +
			`</cpu><cpu numaid="1" arch="x86_64" vendor="` + vendor + `" familyid="25" modelid="1">` + gpuPCI("0000:81:00.0", 1, "") + `</cpu></system>`
	}
	s, _ := build(t, mk("AuthenticAMD"), Options{})
	if l := s.p2pLevel(); l != PathSYS {
		t.Errorf("AMD 2 GPUs: level %s", l)
	}
	s, _ = build(t, mk("GenuineIntel"), Options{})
	if l := s.p2pLevel(); l != PathPXB {
		t.Errorf("Intel: level %s", l)
	}
	s, _ = build(t, mk("AuthenticAMD"), Options{P2PLevel: "PIX"})
	if l := s.p2pLevel(); l != PathPIX {
		t.Errorf("override: level %s", l)
	}
}

// TestCPUNicAndPciLink: a <nic> under <cpu> hangs off the CPU with LOC_BW PCI links; a
// <pcilink> adds a LOC link of LOC_BW between two switches (one direction per element).
func TestCPUNicAndPciLink(t *testing.T) {
	text := cpuOpen + `<pci busid="0000:10:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16"><pcilink target="0000:20:00.0"/>` +
		gpuPCI("0000:11:00.0", 0, "") + `</pci><pci busid="0000:20:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16"><pcilink target="0000:10:00.0"/>` +
		gpuPCI("0000:21:00.0", 1, "") + `</pci><nic><net name="eth0" dev="0" speed="100000"/></nic></cpu></system>`
	s, err := build(t, text, Options{NRanks: 4})
	if err != nil {
		t.Fatal(err)
	}
	nic := s.Nodes[NIC][0]
	if nic.ID != 0 || nic.Links[0].Type != LinkNET || nic.Links[len(nic.Links)-1].BW != LocBw {
		t.Errorf("CPU NIC links %+v", nic.Links)
	}
	sw := s.Nodes[PCI][0]
	if sw.Links[0].Type != LinkLOC || sw.Links[0].BW != LocBw || sw.Links[0].Remote != s.Nodes[PCI][1] {
		t.Errorf("pcilink: %+v", sw.Links[0])
	}
	// GPU0→GPU1 crosses the pcilink: PCI, LOC, PCI — PXB at 48 GB/s, without the CPU.
	if p := s.Path(s.GPUByRank(0), s.GPUByRank(1)); p.Type != PathPXB || p.BW != 48 || p.Hops() != 3 {
		t.Errorf("GPU0→GPU1 over pcilink %s %.1f/%d", p.Type, p.BW, p.Hops())
	}
	if p := s.Path(s.GPUByRank(0), s.NETs()[0]); p.Type != PathPHB || p.BW != 12.5 {
		t.Errorf("GPU0→CPU NIC %s %.1f", p.Type, p.BW)
	}
}
