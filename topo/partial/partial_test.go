package partial

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/topo/ncclxml"
)

const corpus = "../../testdata/topos/"

func read(t *testing.T, name string) *ncclxml.Document {
	t.Helper()
	if data, err := topos.Get(name); err == nil {
		doc, err := ncclxml.ParseBytes(data, name+".xml")
		require.NoError(t, err)
		return doc
	}
	doc, err := ncclxml.ReadFile(corpus + name + ".xml")
	require.NoError(t, err)
	return doc
}

// NCCL 2.28 probes NVML for at most 4 links on sm6x, 6 on sm7x, 12 on sm8x and 18 from sm90
// (xml.cc ncclTopoGetXmlFromGpu, maxNvLinks): a model with more would be one NCCL cannot see.
func maxNvLinks(sm int) int {
	switch {
	case sm < 60:
		return 0
	case sm < 70:
		return 4
	case sm < 80:
		return 6
	case sm < 90:
		return 12
	}
	return 18
}

func TestModels(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range Models() {
		require.False(t, seen[m.Name], "%s twice", m.Name)
		seen[m.Name] = true
		require.Equal(t, strings.ToLower(m.Name), m.Name)
		require.Positive(t, m.SM, m.Name)
		require.LessOrEqual(t, m.NVLinks, maxNvLinks(m.SM), "%s: more NVLinks than NCCL probes for sm %d", m.Name, m.SM)
		require.Equal(t, m.NVLinks == 0, m.Fabric == NoNVLink, m.Name)
		require.NotEmpty(t, m.Part, m.Name)
		require.NotEmpty(t, m.Source, m.Name)
		got, err := Lookup(" " + strings.ToUpper(m.Name) + " ")
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
	_, err := Lookup("h100x")
	require.ErrorIs(t, err, ErrUnknownModel)
	require.ErrorContains(t, err, strings.Join(ModelNames(), ", "))
	_, err = Lookup("")
	require.ErrorIs(t, err, ErrUnknownModel)
}

// What each partial file of the corpus leaves to detection; every other topology of the corpus
// and every example can be simulated as it is.
func TestInspect(t *testing.T) {
	type counts struct{ gpuStubs, noSM, nicStubs, unclassified, usable int }
	want := map[string]counts{
		"aws-g5-48xl-a10g-pcie-partial":               {unclassified: 9},
		"aws-p4d-24xl-a100-partial":                   {gpuStubs: 8, nicStubs: 4},
		"aws-p5-48xl-h100-partial-2023":               {unclassified: 32},
		"azure-ndv2-v100-partial":                     {gpuStubs: 8, nicStubs: 1},
		"azure-ndv4-a100-partial":                     {gpuStubs: 8, nicStubs: 8},
		"azure-ndv4-a100-partial-orig2023":            {gpuStubs: 8, nicStubs: 8},
		"azure-ndv5-h100-partial":                     {gpuStubs: 8, nicStubs: 8},
		"rtp-llm-8gpu-pcie-gen6-cx8-minimal":          {noSM: 8},
		"aws-p5-48xl-h100-32efa-2026":                 {usable: 8},
		"h100-4gpu-vm-flat-nvswitch-sentinel":         {usable: 4},
		"rtxa6000-4gpu-pcie-2socket-vnics":            {usable: 4},
		"gb300-nvl72-2tray-mnnvl-fused":               {usable: 8},
		"simai-simccl-topo_1A100_1CX6":                {usable: 1},
		"a100pcie-2gpu-nvlink-bridge-fused-nic-input": {usable: 2},
	}
	files, err := filepath.Glob(corpus + "*.xml")
	require.NoError(t, err)
	names := topos.Names()
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".xml"))
	}
	checked := 0
	for _, name := range names {
		var doc *ncclxml.Document
		if data, err := topos.Get(name); err == nil {
			doc, err = ncclxml.ParseBytes(data, name+".xml")
			require.NoError(t, err)
		} else if doc, err = ncclxml.ReadFile(corpus + name + ".xml"); err != nil {
			continue // files the reader refuses (RCCL's version 2) have their own tests
		}
		if doc.Kind() != ncclxml.KindSystem {
			continue
		}
		g := Inspect(doc)
		got := counts{len(g.GPUStubs), len(g.GPUsWithoutSM), len(g.NICStubs), len(g.Unclassified), g.UsableGPUs}
		if w, ok := want[name]; ok {
			require.Equal(t, w, got, name)
			checked++
		}
		partialFile := strings.Contains(name, "partial") || strings.Contains(name, "minimal")
		require.Equal(t, partialFile, g.NeedsModel(), "%s: %s", name, g.Describe(doc))
		if !g.NeedsModel() && got.gpuStubs+got.noSM+got.unclassified == 0 {
			require.Equal(t, "nothing missing", g.Describe(doc), name)
		}
	}
	require.Equal(t, len(want), checked)

	doc := read(t, "azure-ndv2-v100-partial")
	require.Equal(t, "8 GPU devices without <gpu> (0001:00:00.0 line 3, 0002:00:00.0 line 4, 0003:00:00.0 line 5, …); "+
		"1 NIC device without <nic><net> (0101:00:00.0 line 7)", Inspect(doc).Describe(doc))
}

// nvlBW is NCCL 2.28's per-link NVLink bandwidth by sm (topo.h SM*_NVLINK_BW,
// ncclTopoNVLinkBw), for the models of the table.
var nvlBW = map[int]float64{70: 20, 80: 20, 90: 20.6, 100: 40.1}

func TestComplete(t *testing.T) {
	cases := []struct {
		file, model string
		err         error
		errHas      string
		ranks       []string // bus ids in rank order
		added       int      // <gpu> elements created
		nvlinks     int      // NVLinks added per GPU
		left        string   // substring of Result.Left ("" = nothing left)
	}{
		{file: "azure-ndv5-h100-partial", model: "h100", added: 8, nvlinks: 18, left: "8 NIC devices without <nic><net>",
			ranks: []string{"0001:00:00.0", "0002:00:00.0", "0003:00:00.0", "0008:00:00.0", "0009:00:00.0", "000a:00:00.0", "000b:00:00.0", "000c:00:00.0"}},
		{file: "azure-ndv5-h100-partial", model: "H200", added: 8, nvlinks: 18, left: "8 NIC devices"},
		{file: "azure-ndv5-h100-partial", model: "b200", added: 8, nvlinks: 18, left: "8 NIC devices"},
		{file: "azure-ndv5-h100-partial", model: "h800", added: 8, nvlinks: 8, left: "8 NIC devices"},
		// NVML numbers GPUs in bus-id order: on NDv4 GPU 0 is 0001:00:00.0, on NUMA node 1.
		{file: "azure-ndv4-a100-partial", model: "a100", added: 8, nvlinks: 12, left: "8 NIC devices",
			ranks: []string{"0001:00:00.0", "0002:00:00.0", "0003:00:00.0", "0004:00:00.0", "000b:00:00.0", "000c:00:00.0", "000d:00:00.0", "000e:00:00.0"}},
		{file: "azure-ndv4-a100-partial-orig2023", model: "a100", added: 8, nvlinks: 12, left: "8 NIC devices"},
		{file: "aws-p4d-24xl-a100-partial", model: "a100", added: 8, nvlinks: 12, left: "4 NIC devices without <nic><net> (0000:10:1b.0 line 20",
			ranks: []string{"0000:10:1c.0", "0000:10:1d.0", "0000:20:1c.0", "0000:20:1d.0", "0000:90:1c.0", "0000:90:1d.0", "0000:a0:1c.0", "0000:a0:1d.0"}},
		{file: "azure-ndv2-v100-partial", model: "v100", err: ErrIncomplete,
			errHas: "azure-ndv2-v100-partial.xml:3: GPU 0001:00:00.0: Tesla V100 SXM2 GPUs are joined GPU to GPU (6 NVLinks each"},
		{file: "azure-ndv2-v100-partial", model: "l40s", added: 8, nvlinks: 0, left: "1 NIC device without"},
		{file: "aws-p5-48xl-h100-partial-2023", model: "h100", err: ErrIncomplete,
			errHas: "no PCI device of the file is a GPU: 32 PCI devices have no class (0000:4f:00.0 line 18"},
		{file: "aws-g5-48xl-a10g-pcie-partial", model: "l40s", err: ErrIncomplete, errHas: "9 PCI devices have no class"},
		// <gpu dev="N"/> without sm, rank or gdr: NCCL fills the three, the file's devs stay.
		{file: "rtp-llm-8gpu-pcie-gen6-cx8-minimal", model: "l20", added: 0, nvlinks: 0},
		// The hand-written p5 file has <gpu sm="90"> but no <nvlink>: NCCL would probe NVML.
		{file: "aws-p5-48xl-h100-32efa-2026", model: "h100", added: 0, nvlinks: 18},
		// A complete dump: nothing to fill.
		{file: "dgx-h100", model: "h100", added: 0, nvlinks: 0},
		{file: "dgx-h100", model: "a100", err: ErrMismatch, errHas: `dgx-h100.xml:31: <gpu sm="90">, but GPU model a100 (A100 SXM4 on an HGX A100 board) has sm 80`},
		{file: "azure-ndv5-h100-partial", model: "mi300x", err: ErrUnknownModel, errHas: "known: a100,"},
	}
	for _, c := range cases {
		name := c.file + "/" + c.model
		doc := read(t, c.file)
		before, err := doc.Bytes()
		require.NoError(t, err)
		done, res, err := Complete(doc, c.model)
		after, _ := doc.Bytes()
		require.Equal(t, before, after, "%s: Complete changed its input", name)
		if c.err != nil {
			require.ErrorIs(t, err, c.err, name)
			require.ErrorContains(t, err, c.errHas, name)
			continue
		}
		require.NoError(t, err, name)
		m, _ := Lookup(c.model)
		require.Equal(t, m, res.Model)
		added := 0
		for i, g := range res.GPUs {
			require.Equal(t, i, g.Rank, "%s: GPUs in rank order", name)
			if g.Added {
				added++
			}
			require.Equal(t, c.nvlinks, g.NVLinks, "%s: GPU %s", name, g.BusID)
			if c.ranks != nil {
				require.Equal(t, c.ranks[i], g.BusID, "%s: rank %d", name, i)
			}
		}
		require.Equal(t, c.added, added, name)
		if c.left == "" {
			require.Empty(t, res.Left, name)
		} else {
			require.Len(t, res.Left, 1, name)
			require.Contains(t, res.Left[0], c.left, name)
		}

		// The completed file is whole (no GPU left to detection) and completing it again
		// changes nothing.
		require.False(t, Inspect(done).NeedsModel(), name)
		again, res2, err := Complete(done, c.model)
		require.NoError(t, err, name)
		b1, _ := done.Bytes()
		b2, _ := again.Bytes()
		require.Equal(t, string(b1), string(b2), "%s: completion is not idempotent", name)
		for _, g := range res2.GPUs {
			require.False(t, g.Added, name)
			require.Zero(t, g.NVLinks, name)
		}

		// The system NCCL builds from it: every GPU of the model's sm, GPU pairs on NVLink at
		// the model's links × NCCL's per-link rate when it has NVLinks.
		sys, err := topo.FromXML(done, graph.Options{})
		require.NoError(t, err, name)
		require.Len(t, sys.GPUs(), len(res.GPUs), name)
		for _, g := range sys.GPUs() {
			require.Equal(t, m.SM, g.GPU.SM, name)
			require.True(t, g.GPU.GDR, name)
		}
		p := sys.Path(sys.GPUByRank(0), sys.GPUByRank(len(res.GPUs)-1))
		if m.NVLinks > 0 {
			require.Equal(t, graph.PathNVL, p.Type, name)
			require.InDelta(t, float64(m.NVLinks)*nvlBW[m.SM], p.BW, 1e-3, name)
		} else {
			require.Greater(t, p.Type, graph.PathNVL, name)
		}
	}
}

// Completion fills only what is missing: the file's devs stay, and its ranks, when it has
// some, are kept (a rank-less <gpu> there is outside the communicator and stays so); the GPUs it
// adds take the next ranks. Numbers that would repeat are an error at the element.
func TestCompleteKeepsTheFile(t *testing.T) {
	doc := read(t, "rtp-llm-8gpu-pcie-gen6-cx8-minimal")
	done, res, err := Complete(doc, "l20")
	require.NoError(t, err)
	origDevs := []string{}
	for _, g := range doc.Root().FindElements("//gpu") {
		origDevs = append(origDevs, g.SelectAttrValue("dev", ""))
	}
	var devs []string
	for _, g := range done.Root().FindElements("//gpu") {
		devs = append(devs, g.SelectAttrValue("dev", ""))
		require.Equal(t, "89", g.SelectAttrValue("sm", ""))
		require.Equal(t, "1", g.SelectAttrValue("gdr", ""))
	}
	require.Equal(t, origDevs, devs)
	require.Len(t, res.GPUs, 8)

	mixed := `<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:10:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="90" rank="0" gdr="1"/>
    </pci>
    <pci busid="0000:20:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="1" sm="90" gdr="1"/>
    </pci>
    <pci busid="0000:30:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
  </cpu>
</system>
`
	doc, err = ncclxml.ParseBytes([]byte(mixed), "mixed.xml")
	require.NoError(t, err)
	done, res, err = Complete(doc, "h100")
	require.NoError(t, err)
	gpus := done.Root().FindElements("//gpu")
	require.Len(t, gpus, 3)
	require.Equal(t, "0", gpus[0].SelectAttrValue("rank", ""))
	require.Nil(t, gpus[1].SelectAttr("rank"), "a rank-less GPU of a ranked file stays outside the communicator")
	require.Equal(t, "1", gpus[2].SelectAttrValue("rank", ""))
	require.Equal(t, "2", gpus[2].SelectAttrValue("dev", ""))
	require.Equal(t, []GPU{
		{BusID: "0000:20:00.0", Rank: -1, Dev: 1, Line: 6, NVLinks: 18},
		{BusID: "0000:10:00.0", Rank: 0, Dev: 0, Line: 3, NVLinks: 18},
		{BusID: "0000:30:00.0", Rank: 1, Dev: 2, Line: 9, Added: true, NVLinks: 18},
	}, res.GPUs)

	dup := strings.Replace(mixed, `<gpu dev="1" sm="90" gdr="1"/>`, `<gpu dev="2" sm="90" gdr="1"/>`, 1)
	doc, err = ncclxml.ParseBytes([]byte(dup), "dup.xml")
	require.NoError(t, err)
	_, _, err = Complete(doc, "h100")
	require.ErrorIs(t, err, ErrMismatch)
	require.ErrorContains(t, err, "dup.xml:9: GPU 0000:30:00.0 would have dev 2, which the GPU at line 7 has")
}

func TestCompleteBadInput(t *testing.T) {
	_, _, err := Complete(nil, "h100")
	require.Error(t, err)
	g, err := ncclxml.ParseBytes([]byte(`<graphs version="1"></graphs>`), "g.xml")
	require.NoError(t, err)
	_, _, err = Complete(g, "h100")
	require.ErrorContains(t, err, "no topology")
	empty, err := ncclxml.ParseBytes([]byte(`<system version="1"><cpu numaid="0"/></system>`), "e.xml")
	require.NoError(t, err)
	_, _, err = Complete(empty, "h100")
	require.ErrorIs(t, err, ErrIncomplete)
	require.ErrorContains(t, err, "no GPU device")
	bad, err := ncclxml.ParseBytes([]byte(`<system version="1"><cpu numaid="0"><pci busid="zz" class="0x030200"/></cpu></system>`), "b.xml")
	require.NoError(t, err)
	_, _, err = Complete(bad, "h100")
	require.ErrorContains(t, err, `b.xml:1: <pci busid="zz">`)
	require.False(t, Inspect(nil).NeedsModel())
	require.True(t, bytes.Contains([]byte(Inspect(empty).Describe(empty)), []byte("nothing missing")))
	require.False(t, errors.Is(err, ErrUnknownModel))
}
