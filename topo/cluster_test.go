package topo_test

import (
	"strings"
	"testing"

	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/topo/ncclxml"
)

func TestCluster(t *testing.T) {
	name, data := topos.Default()
	doc, err := ncclxml.ParseBytes(data, name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := topo.NewCluster(doc, 12500, graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.NRanks != 100000 || c.PPN != 8 || !c.Node.Inter || c.Node.MaxBw != 48 {
		t.Fatalf("nranks %d ppn %d inter %v maxBw %.1f", c.NRanks, c.PPN, c.Node.Inter, c.Node.MaxBw)
	}
	n, l, err := c.NodeOf(99999)
	if err != nil || n != 12499 || l != 7 || c.Rank(n, l) != 99999 {
		t.Fatalf("rank 99999 → node %d local %d (%v)", n, l, err)
	}
	g, err := c.GPU(17)
	if err != nil || g.GPU.Rank != 1 {
		t.Fatalf("rank 17 → %v %v", g, err)
	}
	if _, _, err := c.NodeOf(100000); err == nil {
		t.Error("rank 100000 accepted")
	}
	one, err := topo.NewCluster(doc, 1, graph.Options{})
	if err != nil || one.Node.Inter || float32(one.Node.MaxBw) != float32(370.8) {
		t.Fatalf("1 node: %v inter %v", err, one.Node.Inter)
	}
	if _, err := topo.NewCluster(doc, 0, graph.Options{}); err == nil || !strings.Contains(err.Error(), "0 nodes") {
		t.Errorf("0 nodes: %v", err)
	}
	// A node without NIC cannot be part of a cluster.
	nonet := `<system version="1"><cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
<pci busid="0000:01:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"><gpu dev="0" sm="90" rank="0"/></pci></cpu></system>`
	d2, _ := ncclxml.ParseBytes([]byte(nonet), "nonet.xml")
	if _, err := topo.NewCluster(d2, 2, graph.Options{}); err == nil || !strings.Contains(err.Error(), "no NET") {
		t.Errorf("2 nodes without NET: %v", err)
	}
}
