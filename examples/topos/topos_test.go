package topos

import (
	"bytes"
	"strings"
	"testing"

	"github.com/simccl/simccl/topo/xml"
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
		doc, err := xml.ParseBytes(data, name+".xml")
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if doc.Kind() != xml.KindSystem {
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
