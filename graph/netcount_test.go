package graph_test

import (
	"testing"

	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/topo/ncclxml"
)

// TestLocalNetCountByBw: the NICs a GPU counts towards its bandwidth to its CPU (NCCL's
// ncclTopoGetLocalNetCountByBw), which the channels per network peer start from. On a DGX H100
// each GPU has its own 400 Gb/s NIC behind the PCIe Gen5 switch it shares with it: one NIC, at
// the path's 48 GB/s, whatever the GPU. With two 200 Gb/s NICs a GPU (hgx-h100-16nic) one NIC's
// 25 GB/s does not cover the GPU's 48, and the second makes 50: two. Where the GPU's channels all
// use one NIC, that one counts, however slow (one 100 Gb/s NIC for 2 H200s: 12.5 GB/s).
func TestLocalNetCountByBw(t *testing.T) {
	for _, c := range []struct {
		name  string
		count int
		bw    float64
	}{
		{"dgx-h100", 1, 48},
		{"hgx-h100-16nic", 2, 50},
		{"h200x2-nvlink", 1, 12.5},
		{"dgx1-v100", 1, 12},
		{"gb200-nvl4-tray", 1, 48},
		{"gh200-c2c", 1, 48},
	} {
		data, err := topos.Get(c.name)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := ncclxml.ParseBytes(data, c.name+".xml")
		if err != nil {
			t.Fatal(err)
		}
		s, err := topo.FromXML(doc, graph.Options{NRanks: 2 * 8})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range s.Nodes[graph.GPU] {
			n, bw := s.LocalNetCountByBw(g)
			if n != c.count || bw != c.bw {
				t.Errorf("%s GPU %d: %d NICs, %.1f GB/s; want %d, %.1f", c.name, g.GPU.Dev, n, bw, c.count, c.bw)
			}
		}
	}
	if n, bw := (&graph.System{}).LocalNetCountByBw(nil); n != 0 || bw != 0 {
		t.Errorf("nil GPU: %d, %v", n, bw)
	}
}
