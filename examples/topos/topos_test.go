package topos

import (
	"bytes"
	"strings"
	"testing"

	"github.com/simccl/simccl/topo/ncclxml"
)

func TestNames(t *testing.T) {
	want := []string{"dgx-a100", "dgx-h100", "dgx1-v100", "gb200-nvl4-tray", "gh200-c2c", "h200x2-nvlink", "pcie-8gpu-2socket"}
	got := Names()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
}

func TestDefault(t *testing.T) {
	name, data := Default()
	if name != "dgx-h100" {
		t.Fatalf("Default name %q", name)
	}
	if !bytes.Contains(data, []byte(`<system version="1">`)) {
		t.Fatalf("default topology does not look like a system file")
	}
}

func TestGet(t *testing.T) {
	a, err := Get("gh200-c2c")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Get("gh200-c2c.xml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("Get with and without .xml differ")
	}
	a[0] = 'X' // caller's copy; must not change the embedded file
	if c, _ := Get("gh200-c2c"); c[0] == 'X' {
		t.Fatal("Get returned the embedded bytes, not a copy")
	}
	for _, bad := range []string{"", "nope", "../topos", "dgx-h100/x", ".xml"} {
		if _, err := Get(bad); err == nil || !strings.Contains(err.Error(), "dgx-h100") {
			t.Errorf("Get(%q) = %v, want an error listing the examples", bad, err)
		}
	}
}

// TestExamplesParse checks every example is a well-formed version-1 system file with the GPUs
// and NICs its comment promises.
func TestExamplesParse(t *testing.T) {
	want := map[string]struct{ gpus, nets, cpus int }{
		"dgx-h100":          {8, 8, 2},
		"dgx-a100":          {8, 8, 2},
		"h200x2-nvlink":     {2, 1, 1},
		"dgx1-v100":         {8, 4, 2},
		"pcie-8gpu-2socket": {8, 1, 2},
		"gh200-c2c":         {1, 1, 1},
		"gb200-nvl4-tray":   {4, 4, 2},
	}
	for _, name := range Names() {
		data, err := Get(name)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := ncclxml.ParseBytes(data, name+".xml")
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if doc.Kind() != ncclxml.KindSystem {
			t.Errorf("%s: kind %v", name, doc.Kind())
		}
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: no expectations in the test", name)
			continue
		}
		root := doc.Root()
		got := struct{ gpus, nets, cpus int }{
			len(root.FindElements("//gpu")), len(root.FindElements("//net")), len(root.FindElements("cpu")),
		}
		if got != w {
			t.Errorf("%s: gpus/nets/cpus = %v, want %v", name, got, w)
		}
		// Every GPU has rank == dev, and a class 0x03 parent.
		for _, g := range root.FindElements("//gpu") {
			if g.SelectAttrValue("rank", "") != g.SelectAttrValue("dev", "x") {
				t.Errorf("%s:%d: gpu rank != dev", name, doc.Line(g))
			}
			if p := g.Parent(); p == nil || !strings.HasPrefix(p.SelectAttrValue("class", ""), "0x03") {
				t.Errorf("%s:%d: gpu not under a display-class pci", name, doc.Line(g))
			}
		}
	}
}

// TestExamplesConsistent checks what NCCL would trip over in a hand-written file: GPU ranks are
// 0..n-1 once each, NET devs are unique, every GPU-to-GPU NVLink names a GPU of the file and is
// matched by a link back with the same count, and every GPU uses as many NVLinks as its
// generation has (NCCL 2.28 probes 6 links for sm7x, 12 for sm8x, 18 for sm90+: ncclTopoGetXmlFromGpu).
func TestExamplesConsistent(t *testing.T) {
	linksPerGPU := map[string]int{"70": 6, "80": 12, "90": 18, "100": 18}
	for _, name := range Names() {
		data, _ := Get(name)
		doc, err := ncclxml.ParseBytes(data, name+".xml")
		if err != nil {
			t.Fatal(err)
		}
		root := doc.Root()
		gpuAt := map[int64]map[int64]int64{} // busid -> target busid -> count
		ranks := map[int64]bool{}
		gpus := root.FindElements("//gpu")
		for _, g := range gpus {
			busid, err := doc.RequireBusID(g.Parent(), "busid")
			if err != nil {
				t.Fatal(err)
			}
			rank, err := doc.RequireInt(g, "rank")
			if err != nil || ranks[rank] || rank < 0 || rank >= int64(len(gpus)) {
				t.Errorf("%s:%d: bad or repeated rank %d (%v)", name, doc.Line(g), rank, err)
			}
			ranks[rank] = true
			peers := map[int64]int64{}
			total := int64(0)
			for _, l := range g.SelectElements("nvlink") {
				target, err := doc.RequireBusID(l, "target")
				if err != nil {
					t.Fatal(err)
				}
				count, err := doc.RequireInt(l, "count")
				if err != nil {
					t.Fatal(err)
				}
				total += count
				if tc, _ := ncclxml.Attr(l, "tclass"); strings.HasPrefix(tc, "0x03") {
					peers[target] = count
				}
			}
			sm, _ := ncclxml.Attr(g, "sm")
			if want, ok := linksPerGPU[sm]; ok && len(g.SelectElements("nvlink")) > 0 && total != int64(want) {
				t.Errorf("%s:%d: GPU with sm %s uses %d NVLinks, want %d", name, doc.Line(g), sm, total, want)
			}
			gpuAt[busid] = peers
		}
		for from, peers := range gpuAt {
			for to, count := range peers {
				back, ok := gpuAt[to]
				if !ok {
					t.Errorf("%s: NVLink from %#x to %#x, which is not a GPU of the file", name, from, to)
				} else if back[from] != count {
					t.Errorf("%s: NVLink %#x->%#x count %d, back %d", name, from, to, count, back[from])
				}
			}
		}
		devs := map[string]bool{}
		for _, n := range root.FindElements("//net") {
			dev, _ := ncclxml.Attr(n, "dev")
			if devs[dev] {
				t.Errorf("%s:%d: net dev %s twice", name, doc.Line(n), dev)
			}
			devs[dev] = true
		}
	}
}
