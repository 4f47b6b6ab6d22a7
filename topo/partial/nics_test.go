package partial

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/topo/ncclxml"
)

// CompleteNICs gives every NIC device without <nic><net> one port as NCCL's IB plugin reports it,
// numbered after the file's own nets in bus-id order, and the system NCCL builds from the result
// has a NET per device at the speed given, beside the GPU of its PCIe switch.
func TestCompleteNICs(t *testing.T) {
	cases := []struct {
		file, model string
		nic         NIC
		buses       []string // completed devices in dev order
		firstDev    int
		err         error
		errHas      string
	}{
		{file: "azure-ndv5-h100-partial", model: "h100", nic: NIC{Speed: 400000, GDR: true},
			buses: []string{"0101:00:00.0", "0102:00:00.0", "0103:00:00.0", "0104:00:00.0", "0105:00:00.0", "0106:00:00.0", "0107:00:00.0", "0108:00:00.0"}},
		{file: "azure-ndv4-a100-partial", model: "a100", nic: NIC{Speed: 200000, GDR: true},
			buses: []string{"0101:00:00.0", "0102:00:00.0", "0103:00:00.0", "0104:00:00.0", "0105:00:00.0", "0106:00:00.0", "0107:00:00.0", "0108:00:00.0"}},
		{file: "aws-p4d-24xl-a100-partial", model: "a100", nic: NIC{Speed: 100000},
			buses: []string{"0000:10:1b.0", "0000:20:1b.0", "0000:90:1b.0", "0000:a0:1b.0"}},
		// A file whose NICs are all there: nothing for a speed to complete.
		{file: "dgx-h100", nic: NIC{Speed: 400000}, err: ErrIncomplete, errHas: "dgx-h100.xml: no NIC device without <nic><net>"},
		{file: "azure-ndv5-h100-partial", nic: NIC{Speed: 0}, errHas: "want more than 0"},
		{file: "azure-ndv5-h100-partial", nic: NIC{Speed: 1e12}, errHas: "at most"},
	}
	for _, c := range cases {
		name := c.file
		doc := read(t, c.file)
		if c.model != "" {
			var err error
			doc, _, err = Complete(doc, c.model)
			require.NoError(t, err, name)
		}
		before, _ := doc.Bytes()
		done, res, err := CompleteNICs(doc, c.nic)
		after, _ := doc.Bytes()
		require.Equal(t, before, after, "%s: CompleteNICs changed its input", name)
		if c.errHas != "" {
			require.ErrorContains(t, err, c.errHas, name)
			if c.err != nil {
				require.ErrorIs(t, err, c.err, name)
			}
			continue
		}
		require.NoError(t, err, name)
		require.Len(t, res.Added, len(c.buses), name)
		for i, a := range res.Added {
			require.Equal(t, c.buses[i], a.BusID, "%s: dev %d", name, i)
			require.Equal(t, c.firstDev+i, a.Dev, name)
			require.Equal(t, "mlx5_"+itoa(a.Dev), a.Name, name)
			require.Positive(t, a.Line, name)
		}
		require.Empty(t, Inspect(done).NICStubs, "%s: NIC devices left without <net>", name)
		require.Contains(t, res.DescribeNICs(c.nic), itoa(len(c.buses))+" NIC", name)

		// NCCL's system of the result: one NET per device at the speed given, GDR as given,
		// distinct GUIDs, each NET reached from some GPU through PCIe only (its own switch).
		sys, err := topo.FromXML(done, graph.Options{})
		require.NoError(t, err, name)
		nets := sys.NETs()
		require.Len(t, nets, len(c.buses), name)
		guids := map[uint64]bool{}
		for _, n := range nets {
			require.InDelta(t, c.nic.Speed/8000, float64(n.NET.Speed), 1e-3, name)
			require.Equal(t, c.nic.GDR, n.NET.GDR, name)
			require.Equal(t, 1, n.NET.Port, name)
			require.False(t, guids[n.NET.GUID], "%s: GUID %x twice", name, n.NET.GUID)
			guids[n.NET.GUID] = true
			best := graph.PathSYS
			for _, g := range sys.GPUs() {
				if p := sys.Path(g, n); p != nil && p.Type < best {
					best = p.Type
				}
			}
			require.LessOrEqual(t, best, graph.PathPHB, "%s: NET %d reached from no GPU through PCIe", name, n.NET.Dev)
		}

		// Completed NICs are the file's own: doing it again is the error above.
		_, _, err = CompleteNICs(done, c.nic)
		require.ErrorIs(t, err, ErrIncomplete, name)
	}
}

// A file with some nets of its own keeps them: the plugin numbers the others after them, and no
// attribute the file gives changes.
func TestCompleteNICsAfterOwnNets(t *testing.T) {
	doc := read(t, "azure-ndv5-h100-partial")
	doc, _, err := Complete(doc, "h100")
	require.NoError(t, err)
	// Give the first NIC device a net of its own, dev 5, at 200 Gb/s.
	first := Inspect(doc).NICStubs[0]
	n := first.CreateElement("nic").CreateElement("net")
	n.CreateAttr("name", "ib7")
	n.CreateAttr("dev", "5")
	n.CreateAttr("speed", "200000")
	data, err := doc.Bytes()
	require.NoError(t, err)
	doc, err = ncclxml.ParseBytes(data, "own.xml")
	require.NoError(t, err)

	done, res, err := CompleteNICs(doc, NIC{Speed: 400000, GDR: true})
	require.NoError(t, err)
	require.Len(t, res.Added, 7)
	for i, a := range res.Added {
		require.Equal(t, 6+i, a.Dev)
	}
	found := false
	for _, e := range done.Root().FindElements("//net") {
		if e.SelectAttrValue("name", "") == "ib7" {
			found = true
			require.Equal(t, "5", e.SelectAttrValue("dev", ""))
			require.Equal(t, "200000", e.SelectAttrValue("speed", ""))
			require.Nil(t, e.SelectAttr("gdr"), "an attribute the file left out was added")
		}
	}
	require.True(t, found)
	b, _ := done.Bytes()
	require.Equal(t, 8, strings.Count(string(b), "<net "))
}

func itoa(i int) string { return strconv.Itoa(i) }

// Any document: CompleteNICs errs or leaves no NIC device bare, never changes its input, and what
// it returns reads back (the system may still refuse it, with an error).
func FuzzCompleteNICs(f *testing.F) {
	f.Add(`<system version="1"><cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143"><pci busid="0000:10:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16"/></cpu></system>`)
	f.Add(`<system version="1"><cpu numaid="0"><pci busid="0001:00:00.0" class="0x030200"/><pci busid="0101:00:00.0" class="0x020000"/><nic><net name="x" dev="3"/></nic></cpu></system>`)
	f.Fuzz(func(t *testing.T, text string) {
		doc, err := ncclxml.ParseBytes([]byte(text), "fuzz.xml")
		if err != nil {
			return
		}
		before, _ := doc.Bytes()
		done, res, err := CompleteNICs(doc, NIC{Speed: 400000, GDR: true})
		after, _ := doc.Bytes()
		if string(before) != string(after) {
			t.Fatal("CompleteNICs changed its input")
		}
		if err != nil {
			return
		}
		if len(Inspect(done).NICStubs) != 0 || len(res.Added) == 0 {
			t.Fatalf("%d NIC devices left bare, %d added", len(Inspect(done).NICStubs), len(res.Added))
		}
		data, err := done.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ncclxml.ParseBytes(data, "again.xml"); err != nil {
			t.Fatalf("the completed document does not read back: %v", err)
		}
		_, _ = topo.FromXML(done, graph.Options{})
	})
}
