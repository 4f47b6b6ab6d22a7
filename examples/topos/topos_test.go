package topos

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/beevik/etree"

	"github.com/simccl/simccl/topo/ncclxml"
)

var update = flag.Bool("update", false, "rewrite the generated examples (gb200-nvl72.xml)")

func TestNames(t *testing.T) {
	want := []string{"dgx-a100", "dgx-b200", "dgx-h100", "dgx-h200", "dgx1-v100", "gb200-nvl4-tray", "gb200-nvl72",
		"gh200-c2c", "h200x2-nvlink", "hgx-h100-16nic", "pcie-8gpu-2socket"}
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
		"dgx-h200":          {8, 8, 2},
		"dgx-b200":          {8, 8, 2},
		"hgx-h100-16nic":    {8, 16, 2},
		"gb200-nvl72":       {72, 72, 36},
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
		// On each host, the GPUs' devs (NVML's index there) are 0..k-1 in rank order, so that
		// rank == dev on a single host; every GPU has a class 0x03 parent.
		nextDev := map[string]int{}
		for _, g := range root.FindElements("//gpu") {
			host := hostOf(g)
			if want := strconv.Itoa(nextDev[host]); g.SelectAttrValue("dev", "x") != want {
				t.Errorf("%s:%d: gpu dev %s, want %s (the host's GPUs in rank order)", name, doc.Line(g), g.SelectAttrValue("dev", ""), want)
			}
			nextDev[host]++
			if p := g.Parent(); p == nil || !strings.HasPrefix(p.SelectAttrValue("class", ""), "0x03") {
				t.Errorf("%s:%d: gpu not under a display-class pci", name, doc.Line(g))
			}
		}
		if len(nextDev) == 1 {
			for _, g := range root.FindElements("//gpu") {
				if g.SelectAttrValue("rank", "") != g.SelectAttrValue("dev", "x") {
					t.Errorf("%s:%d: gpu rank != dev on a single host", name, doc.Line(g))
				}
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
		type gpuKey struct {
			host  string
			busid int64
		}
		gpuAt := map[gpuKey]map[int64]int64{} // (host, busid) -> target busid -> count
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
			gpuAt[gpuKey{hostOf(g), busid}] = peers
		}
		for from, peers := range gpuAt {
			for to, count := range peers {
				back, ok := gpuAt[gpuKey{from.host, to}]
				if !ok {
					t.Errorf("%s: NVLink from %#x to %#x, which is not a GPU of its host", name, from.busid, to)
				} else if back[from.busid] != count {
					t.Errorf("%s: NVLink %#x->%#x count %d, back %d", name, from.busid, to, count, back[from.busid])
				}
			}
		}
		devs := map[string]bool{} // host + " " + dev: a net plugin numbers the devices of its host
		for _, n := range root.FindElements("//net") {
			dev, _ := ncclxml.Attr(n, "dev")
			key := hostOf(n) + " " + dev
			if devs[key] {
				t.Errorf("%s:%d: net dev %s twice on one host", name, doc.Line(n), dev)
			}
			devs[key] = true
		}
	}
}

// hostOf is the host_hash of the <cpu> that holds e.
func hostOf(e *etree.Element) string {
	for p := e.Parent(); p != nil; p = p.Parent() {
		if p.Tag == "cpu" {
			return p.SelectAttrValue("host_hash", "")
		}
	}
	return ""
}

// nvl72 builds gb200-nvl72.xml: its own header comment, then gb200-nvl4-tray.xml's <system>
// content once per tray, tray t with host_hash 0x97d0a4c3e15b2f86 ^ t<<8 and ranks 4t..4t+3.
func nvl72(t *testing.T, current []byte) []byte {
	t.Helper()
	const trays, gpusPerTray = 18, 4
	tray, err := Get("gb200-nvl4-tray")
	if err != nil {
		t.Fatal(err)
	}
	open := []byte("<system version=\"1\">\n")
	i, j := bytes.Index(tray, open), bytes.Index(tray, []byte("</system>"))
	k := bytes.Index(current, open)
	if i < 0 || j < i || k < 0 {
		t.Fatal("gb200-nvl4-tray.xml or gb200-nvl72.xml has no <system version=\"1\"> line")
	}
	body := string(tray[i+len(open) : j])
	const hash = 0x97d0a4c3e15b2f86
	if !strings.Contains(body, fmt.Sprintf("host_hash=\"%#x\"", uint64(hash))) {
		t.Fatalf("gb200-nvl4-tray.xml's host_hash is no longer %#x", uint64(hash))
	}
	rank := regexp.MustCompile(`rank="(\d+)"`)
	var b bytes.Buffer
	b.Write(current[:k+len(open)])
	for tr := 0; tr < trays; tr++ {
		fmt.Fprintf(&b, "  <!-- tray %d: ranks %d-%d -->\n", tr, gpusPerTray*tr, gpusPerTray*tr+gpusPerTray-1)
		s := strings.ReplaceAll(body, fmt.Sprintf("%#x", uint64(hash)), fmt.Sprintf("%#x", uint64(hash)^uint64(tr)<<8))
		s = rank.ReplaceAllStringFunc(s, func(m string) string {
			r, _ := strconv.Atoi(rank.FindStringSubmatch(m)[1])
			return fmt.Sprintf("rank=\"%d\"", gpusPerTray*tr+r)
		})
		b.WriteString(s)
	}
	b.WriteString("</system>\n")
	return b.Bytes()
}

// TestNVL72 checks gb200-nvl72.xml is 18 trays of gb200-nvl4-tray.xml (-update writes it).
func TestNVL72(t *testing.T) {
	current, err := Get("gb200-nvl72")
	if err != nil {
		t.Fatal(err)
	}
	want := nvl72(t, current)
	if *update {
		if err := os.WriteFile("gb200-nvl72.xml", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(current, want) {
		t.Fatal("gb200-nvl72.xml is not 18 trays of gb200-nvl4-tray.xml: run go test ./examples/topos -run TestNVL72 -update")
	}
}
