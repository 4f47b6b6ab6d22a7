package planner

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/search"
	"github.com/simccl/simccl/topo/partial"
)

var update = flag.Bool("update", false, "rewrite planner/testdata/partial/*.golden")

// Partial vendor files, before and after completion from a GPU model: without a model each is
// refused with what it lacks; with one, the planner's view (its name, the system's bounds, every
// graph of the search, AllReduce choices) goes to testdata/partial/<file>.<model>.golden
// (rewrite with go test ./planner -run TestPartialFiles -update and review the diff).
//
// What NCCL's rules say about these results, checked below: the intra-node channel search on an
// NVSwitch board depends on the GPUs' count, sm and NVLink bandwidth (every GPU pair is one NVL
// path through the NVS node; totalBw is the GPU's NVLink sum, above any PCIe link), and the tuning
// model on one node on the graphs, sm and rank count. So a completed Azure NDv5 (8 H100, 18
// links) searches and tunes as the DGX H100 example does, and the completed NDv4 and p4d (8 A100,
// 12 links) as the DGX A100 example, whatever their PCIe trees and CPUs.
func TestPartialFiles(t *testing.T) {
	cases := []struct {
		file, model string
		twin        string // embedded example the completed file must search and tune like ("" = none)
		err         string // the completion's error, when it cannot complete
	}{
		{file: "azure-ndv5-h100-partial", model: "h100", twin: "dgx-h100"},
		{file: "azure-ndv5-h100-partial", model: "h200", twin: "dgx-h200"},
		{file: "azure-ndv4-a100-partial", model: "a100", twin: "dgx-a100"},
		{file: "aws-p4d-24xl-a100-partial", model: "a100", twin: "dgx-a100"},
		{file: "azure-ndv2-v100-partial", model: "v100", err: "hybrid cube mesh"},
		{file: "aws-p5-48xl-h100-partial-2023", model: "h100", err: "32 PCI devices have no class"},
	}
	for _, c := range cases {
		path := filepath.Join("..", "testdata", "topos", c.file+".xml")
		_, _, err := LoadTopology(path, Settings{})
		require.Error(t, err, c.file)
		require.ErrorContains(t, err, "a partial topology, which NCCL completes from the hardware it detects", c.file)
		require.ErrorContains(t, err, "name the GPU model to complete it (--gpu-model: "+strings.Join(partial.ModelNames(), ", "), c.file)

		name, doc, err := LoadTopology(path, Settings{GPUModel: c.model})
		if c.err != "" {
			require.ErrorContains(t, err, c.err, c.file)
			continue
		}
		require.NoError(t, err, c.file)
		require.Equal(t, path+" (GPU model "+c.model+")", name)
		p, err := New(Machine{Name: name, Doc: doc, Nodes: 1})
		require.NoError(t, err, c.file)

		// Across nodes the NICs are missing, and the error says which and why.
		_, err = New(Machine{Name: name, Doc: doc, Nodes: 2})
		require.ErrorContains(t, err, "2 nodes need NICs and the topology has none", c.file)
		require.ErrorContains(t, err, "NIC devices without <nic><net>", c.file)
		require.ErrorContains(t, err, "--nic-speed", c.file)

		// With their speed named, NCCL's plugin's view of them is filled in and the nodes plan
		// across the network: one NET per NIC device, as the twin's.
		nname, ndoc, err := LoadTopology(path, Settings{GPUModel: c.model, NICs: partial.NIC{Speed: 200000, GDR: true}})
		require.NoError(t, err, c.file)
		require.Contains(t, nname, "NICs at 200 Gb/s, GPUDirect RDMA", c.file)
		pn, err := New(Machine{Name: nname, Doc: ndoc, Nodes: 2})
		require.NoError(t, err, c.file)
		require.Equal(t, len(partial.Inspect(doc).NICStubs), len(pn.System.NETs()), c.file)
		require.Positive(t, pn.Search.Ring.NChannels, c.file)

		// The search stops once its channels carry a GPU's whole NVLink bandwidth (search.cc
		// ncclTopoCompute: nChannels × bw ≥ totalBw), and never asks for more.
		ring := p.Search.Ring
		require.LessOrEqual(t, float64(ring.NChannels)*ring.BwIntra, p.Search.TotalBw+1e-3, c.file)

		got := partialView(t, p)
		golden := filepath.Join("testdata", "partial", c.file+"."+c.model+".golden")
		if *update {
			require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
			require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
		} else {
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test ./planner -run TestPartialFiles -update")
			require.Equal(t, string(want), got, "%s differs (rewrite with -update and review the diff)", golden)
		}

		if c.twin != "" {
			tn, tdoc, err := LoadTopology(c.twin, Settings{})
			require.NoError(t, err)
			twin, err := New(Machine{Name: tn, Doc: tdoc, Nodes: 1})
			require.NoError(t, err)
			// The channel count, bandwidths and path types are the twin's; the order in which a
			// ring visits the ranks is not always: the search tries GPUs in the order of the
			// file's PCI tree first, and on NDv4 that is not the bus-id order that numbers the
			// ranks (rank 0 = 0001:00:00.0 sits on NUMA node 1), so its rings run 2 3 0 1 6 7 4 5.
			require.Equal(t, graphLines(twin), graphLines(p), "%s + %s searches unlike %s", c.file, c.model, c.twin)
			require.Equal(t, choices(t, twin), choices(t, p), "%s + %s tunes unlike %s", c.file, c.model, c.twin)
		}
	}
}

// searchView is every graph of the search with its channels as ranks (bus ids differ between
// machines; ranks and bandwidths are what the comparison is about). maxBw and totalBw are
// rounded to 1e-3: NCCL sums a GPU's NVLinks to NVSwitches in float, so 5+4+4+5 links on four
// switches make 370.79999 GB/s and 18 links to one (the sentinel) 370.80002.
func searchView(p *Planner) string {
	var b strings.Builder
	fmt.Fprintf(&b, "maxBw %.3f totalBw %.3f, %d coll channels (%d search channels)\n", p.Search.MaxBw, p.Search.TotalBw, p.Search.NChannels, p.Search.SearchChannels)
	for _, g := range p.Search.Graphs() {
		if g == nil || g.NChannels == 0 {
			continue
		}
		fmt.Fprintf(&b, "Pattern %d, crossNic %d, nChannels %d, bw %g/%g, type %s/%s, sameChannels %d\n",
			g.Pattern, g.CrossNic, g.NChannels, g.BwIntra, g.BwInter, g.TypeIntra, g.TypeInter, g.SameChannels)
		for i, ch := range g.Intra {
			fmt.Fprintf(&b, "%2d : %v\n", i, ch)
		}
	}
	return b.String()
}

// graphLines is searchView without the channels' rank orders.
func graphLines(p *Planner) string {
	var out []string
	for _, l := range strings.Split(searchView(p), "\n") {
		if !strings.Contains(l, " : [") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// choices are NCCL's AllReduce choice lines, 8 B to 1 GiB by 16×.
func choices(t *testing.T, p *Planner) string {
	t.Helper()
	var b strings.Builder
	for size := int64(8); size <= 1<<30; size *= 16 {
		d, err := p.Decide(coll.TestCall(coll.AllReduce, size, coll.Float32, coll.Sum, p.NRanks()))
		require.NoError(t, err)
		fmt.Fprintf(&b, "%s  (%.2f us)\n", d.Choice.Line(), d.Choice.TimeUs)
	}
	return b.String()
}

func partialView(t *testing.T, p *Planner) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s, %d ranks on %d node\n", filepath.ToSlash(p.Name), p.NRanks(), p.Nodes)
	fmt.Fprintf(&b, "== search (NCCL's log format)\n")
	for _, g := range p.Search.Graphs() {
		if g != nil && g.NChannels > 0 {
			search.Format(&b, p.Search.Topology(), g)
		}
	}
	fmt.Fprintf(&b, "== search (ranks)\n%s", searchView(p))
	fmt.Fprintf(&b, "== AllReduce\n%s", choices(t, p))
	return b.String()
}
