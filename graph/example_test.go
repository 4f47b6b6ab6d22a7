package graph_test

import (
	"fmt"
	"testing"

	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/topo/ncclxml"
)

func dgxH100(t testing.TB, opt graph.Options) *graph.System {
	name, data := topos.Default()
	doc, err := ncclxml.ParseBytes(data, name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := topo.FromXML(doc, opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDGXH100Paths encodes what NCCL 2.28's rules give on a DGX H100 seen as one node of two:
// GPU↔GPU NVL 370.8 through the merged NVSwitch; GPU→its own NIC PIX 48 (one PEX switch);
// GPU→any other NIC PXN 48 (NVLink to the NIC's own GPU, then PIX), because the direct route
// crosses the CPU (PHB, same socket) or the inter-socket link (SYS 22, Sapphire Rapids);
// NIC→GPU stays direct (PXN is only GPU→NIC); GDR on every local pair.
func TestDGXH100Paths(t *testing.T) {
	s := dgxH100(t, graph.Options{NRanks: 16})
	gpus, nets := s.GPUs(), s.NETs()
	if len(gpus) != 8 || len(nets) != 8 {
		t.Fatalf("%d GPUs %d NETs", len(gpus), len(nets))
	}
	if s.MaxBw != 48 || float32(s.TotalBw) != float32(370.8) {
		t.Errorf("maxBw %.1f totalBw %.1f, want 48 370.8", s.MaxBw, s.TotalBw)
	}
	for i, a := range gpus {
		for j, b := range gpus {
			p := s.Path(a, b)
			if i != j && (p.Type != graph.PathNVL || float32(p.BW) != float32(370.8) || p.Hops() != 2) {
				t.Errorf("GPU%d→GPU%d %s %.1f/%d hops, want NVL 370.8/2", i, j, p.Type, p.BW, p.Hops())
			}
		}
		for j, n := range nets {
			p := s.Path(a, n)
			want := graph.PathPXN
			if i == j {
				want = graph.PathPIX
			}
			if p.Type != want || p.BW != 48 {
				t.Errorf("GPU%d→NET%d %s %.1f, want %s 48", i, j, p.Type, p.BW, want)
			}
			back := s.Path(n, a)
			wantBack := map[bool]graph.PathType{true: graph.PathPHB, false: graph.PathSYS}[(i < 4) == (j < 4)]
			if i == j {
				wantBack = graph.PathPIX
			}
			if back.Type != wantBack {
				t.Errorf("NET%d→GPU%d %s, want %s", j, i, back.Type, wantBack)
			}
		}
		if got := s.LocalGPU(nets[i]); got != i {
			t.Errorf("NET%d local GPU %d, want %d", i, got, i)
		}
	}
	// With PXN disabled the non-local NICs are reached directly: PHB on the socket, SYS 22 across.
	s = dgxH100(t, graph.Options{NRanks: 16, PXNDisable: true})
	if p := s.Path(s.GPUs()[0], s.NETs()[1]); p.Type != graph.PathPHB || p.BW != 48 {
		t.Errorf("PXN off: GPU0→NET1 %s %.1f, want PHB 48", p.Type, p.BW)
	}
	if p := s.Path(s.GPUs()[0], s.NETs()[7]); p.Type != graph.PathSYS || p.BW != 22 {
		t.Errorf("PXN off: GPU0→NET7 %s %.1f, want SYS 22", p.Type, p.BW)
	}
	// GDR off (as with gdr="0" on every NIC): GPU→NET goes through the GPU's CPU.
	s = dgxH100(t, graph.Options{NRanks: 16, NetGDRDisable: true, PXNDisable: true})
	if p := s.Path(s.GPUs()[0], s.NETs()[0]); p.Type != graph.PathPHB {
		t.Errorf("GDR off: GPU0→NET0 %s, want PHB (through the CPU)", p.Type)
	}
	// NCCL_P2P_DISABLE=1 (level LOC) applies to NVLink pairs too: GPU pairs go through the
	// CPU (PHB 48, or SYS 22 across sockets).
	s = dgxH100(t, graph.Options{P2PDisable: true})
	if p := s.Path(s.GPUs()[0], s.GPUs()[1]); p.Type != graph.PathPHB || p.BW != 48 {
		t.Errorf("P2P off: GPU0→GPU1 %s %.1f, want PHB 48", p.Type, p.BW)
	}
	if p := s.Path(s.GPUs()[0], s.GPUs()[7]); p.Type != graph.PathSYS || p.BW != 22 {
		t.Errorf("P2P off: GPU0→GPU7 %s %.1f, want SYS 22", p.Type, p.BW)
	}
}

// TestLocalNet: NIC assignment per channel (NCCL 2.28 topo.cc ncclTopoGetLocalNet). On a DGX
// H100 each GPU has one local NIC at 48 GB/s PIX, so every channel uses that NIC.
func TestLocalNet(t *testing.T) {
	s := dgxH100(t, graph.Options{NRanks: 16})
	for i, g := range s.GPUs() {
		for c := 0; c < 4; c++ {
			if n, ok := s.LocalNet(g, c); !ok || n != i {
				t.Errorf("GPU%d channel %d → NET %d, want %d", i, c, n, i)
			}
		}
	}
}

// TestVersions: the 2.30.7 BFS (lexicographic type, bw, hops) gives the same paths as 2.28 on
// the DGX H100; the node limit differs.
func TestVersions(t *testing.T) {
	a := dgxH100(t, graph.Options{NRanks: 16})
	b := dgxH100(t, graph.Options{NRanks: 16, Version: graph.V2_30})
	la, lb := a.Lines(), b.Lines()
	if len(la) != len(lb) {
		t.Fatalf("%d vs %d lines", len(la), len(lb))
	}
	for i := range la {
		if la[i] != lb[i] {
			t.Errorf("line %d:\n2.28 %s\n2.30 %s", i, la[i], lb[i])
		}
	}
	if graph.V2_28.MaxNodes() != 576 || graph.V2_30.MaxNodes() != 640 {
		t.Error("NCCL_TOPO_MAX_NODES")
	}
}

func ExampleSystem_Path() {
	name, data := topos.Default()
	doc, _ := ncclxml.ParseBytes(data, name)
	s, _ := topo.FromXML(doc, graph.Options{NRanks: 16})
	g0, g1, n0, n4 := s.GPUs()[0], s.GPUs()[1], s.NETs()[0], s.NETs()[4]
	for _, p := range [][2]*graph.Node{{g0, g1}, {g0, n0}, {g0, n4}, {n4, g0}} {
		path := s.Path(p[0], p[1])
		fmt.Printf("%s→%s %s %.1f GB/s %d hops\n", p[0].Name(), p[1].Name(), path.Type, path.BW, path.Hops())
	}
	// Output:
	// GPU/0→GPU/1 NVL 370.8 GB/s 2 hops
	// GPU/0→NET/0 PIX 48.0 GB/s 3 hops
	// GPU/0→NET/4 PXN 48.0 GB/s 5 hops
	// NET/4→GPU/0 SYS 22.0 GB/s 6 hops
}
