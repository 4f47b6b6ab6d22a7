package graph_test

import (
	"strconv"
	"testing"

	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/internal/topogen"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/topo/ncclxml"
)

const cpuOpen = topogen.CPUOpen

var gpuPCI = topogen.GPUPCI

// build reads a topology given as text (named t.xml) into a system.
func build(t *testing.T, text string, opt graph.Options) (*graph.System, error) {
	t.Helper()
	doc, err := ncclxml.ParseBytes([]byte(text), "t.xml")
	if err != nil {
		return nil, err
	}
	return topo.FromXML(doc, opt)
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
		v    graph.Version
		typ  graph.PathType
		bw   float64
		hops int
	}{{graph.V2_28, graph.PathPIX, 24, 2}, {graph.V2_30, graph.PathNVB, 20, 2}} {
		s, err := build(t, text, graph.Options{Version: c.v})
		if err != nil {
			t.Fatal(err)
		}
		p := s.Path(s.GPUByRank(0), s.GPUByRank(1))
		if p.Type != c.typ || p.BW != c.bw || p.Hops() != c.hops {
			t.Errorf("%s: A→B %s %.1f/%d, want %s %.1f/%d", c.v, p.Type, p.BW, p.Hops(), c.typ, c.bw, c.hops)
		}
	}
	// NCCL_NVB_DISABLE: no GPU relays, so both versions take the switch.
	s, _ := build(t, text, graph.Options{Version: graph.V2_30, NVBDisable: true})
	if p := s.Path(s.GPUByRank(0), s.GPUByRank(1)); p.Type != graph.PathPIX {
		t.Errorf("NVB disabled: %s", p.Type)
	}
}

// TestP2PLevel: on AMD x86 with ≤2 GPUs the default P2P level is SYS (NCCL 2.28 paths.cc
// ncclTopoCheckP2p), so GPUs on two sockets keep their direct SYS path; on Intel it is PXB and
// the pair goes through the destination's CPU (same links here, the CPU of the destination
// being on the path). NCCL_P2P_LEVEL overrides both.
func TestP2PLevel(t *testing.T) {
	mk := func(vendor string) string {
		return `<system version="1"><cpu numaid="0" arch="x86_64" vendor="` + vendor + `" familyid="25" modelid="1">` + gpuPCI("0000:01:00.0", 0, "") +
			`</cpu><cpu numaid="1" arch="x86_64" vendor="` + vendor + `" familyid="25" modelid="1">` + gpuPCI("0000:81:00.0", 1, "") + `</cpu></system>`
	}
	s, _ := build(t, mk("AuthenticAMD"), graph.Options{})
	if l := s.P2PLevel(); l != graph.PathSYS {
		t.Errorf("AMD 2 GPUs: level %s", l)
	}
	s, _ = build(t, mk("GenuineIntel"), graph.Options{})
	if l := s.P2PLevel(); l != graph.PathPXB {
		t.Errorf("Intel: level %s", l)
	}
	s, _ = build(t, mk("AuthenticAMD"), graph.Options{P2PLevel: "PIX"})
	if l := s.P2PLevel(); l != graph.PathPIX {
		t.Errorf("override: level %s", l)
	}
}
