package topo

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/internal/topogen"
	"github.com/simccl/simccl/topo/ncclxml"
)

const cpuOpen = topogen.CPUOpen

var gpuPCI = topogen.GPUPCI

func build(t *testing.T, text string, opt graph.Options) (*graph.System, error) {
	t.Helper()
	doc, err := ncclxml.ParseBytes([]byte(text), "t.xml")
	if err != nil {
		return nil, err
	}
	return FromXML(doc, opt)
}

// TestErrors: each bad input fails with one clear line that names the file and, where there
// is one, the line of the offending element. None panics or hangs.
func TestErrors(t *testing.T) {
	nvs := `<nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>`
	cases := []struct {
		name, xml string
		opt       graph.Options
		want      string // substring; "t.xml:N:" checks the line
	}{
		{"missing busid", cpuOpen + `<pci class="0x060400"/></cpu></system>`, graph.Options{}, "t.xml:3: <pci> without busid"},
		{"bad busid", cpuOpen + gpuPCI("0000:zz:00.0", 0, "") + `</cpu></system>`, graph.Options{}, `t.xml:3: <pci>: bad busid "0000:zz:00.0"`},
		{"negative nvlink count", cpuOpen + gpuPCI("0000:01:00.0", 0, `<nvlink target="fffffff:ff:ff.0" count="-2" tclass="0x068000"/>`) + `</cpu></system>`, graph.Options{}, "t.xml:4: <nvlink count=-2>: negative link count"},
		{"non-numeric nvlink count", cpuOpen + gpuPCI("0000:01:00.0", 0, `<nvlink target="fffffff:ff:ff.0" count="lots" tclass="0x068000"/>`) + `</cpu></system>`, graph.Options{}, `t.xml:4: <nvlink count="lots">: not an integer`},
		{"nvlink without count", cpuOpen + gpuPCI("0000:01:00.0", 0, `<nvlink target="fffffff:ff:ff.0" tclass="0x068000"/>`) + `</cpu></system>`, graph.Options{}, "t.xml:4: <nvlink> without count"},
		{"duplicate rank", cpuOpen + gpuPCI("0000:01:00.0", 0, nvs) + gpuPCI("0000:02:00.0", 0, nvs) + `</cpu></system>`, graph.Options{}, "t.xml:7: duplicate rank 0 (also on line 4)"},
		{"zero nvlink count (strict)", cpuOpen + gpuPCI("0000:01:00.0", 0, `<nvlink target="fffffff:ff:ff.0" count="0" tclass="0x068000"/>`) + gpuPCI("0000:02:00.0", 1, nvs) + `</cpu></system>`, graph.Options{Strict: true}, `t.xml:4: GPU rank 0: <nvlink target="fffffff:ff:ff.0" count="0">: a link of bandwidth 0`},
		{"negative link width", cpuOpen + `<pci busid="0000:01:00.0" class="0x030200" link_width="-4"><gpu dev="0" sm="90" rank="0"/></pci></cpu></system>`, graph.Options{}, "t.xml:3: <pci link_width=-4>: negative"},
		{"negative c2c bandwidth", cpuOpen + gpuPCI("0000:01:00.0", 0, `<c2c bw="-5" count="2"/>`) + `</cpu></system>`, graph.Options{}, "t.xml:4: <c2c bw=-5 count=2>: negative"},
		{"zero net speed (strict)", cpuOpen + gpuPCI("0000:01:00.0", 0, "") + `<nic><net name="x" dev="0" speed="0"/></nic></cpu></system>`, graph.Options{Strict: true}, `t.xml:6: <net speed=0>: not positive`},
		{"nvlink to nowhere (strict)", cpuOpen + gpuPCI("0000:01:00.0", 0, `<nvlink target="0000:99:00.0" count="4" tclass="0x030200"/>`) + `</cpu></system>`, graph.Options{Strict: true}, `t.xml:4: GPU rank 0: <nvlink target="0000:99:00.0"> names no GPU of the topology`},
		{"one-way GPU nvlink", cpuOpen + gpuPCI("0000:01:00.0", 0, `<nvlink target="0000:02:00.0" count="4" tclass="0x030200"/>`) + gpuPCI("0000:02:00.0", 1, "") + `</cpu></system>`, graph.Options{}, "t.xml:4: no NVL link from GPU/0-2000 back to GPU/0-1000"},
		{"no GPU", cpuOpen + `<pci busid="0000:01:00.0" class="0x060400"/></cpu></system>`, graph.Options{}, "t.xml:1: no GPU with a rank"},
		{"gpu without rank only", cpuOpen + `<pci busid="0000:01:00.0" class="0x030200"><gpu dev="0" sm="90"/></pci></cpu></system>`, graph.Options{}, "no GPU with a rank"},
		{"gpu without sm", cpuOpen + `<pci busid="0000:01:00.0" class="0x030200"><gpu dev="0" rank="0"/></pci></cpu></system>`, graph.Options{}, "t.xml:3: <gpu> without sm"},
		{"cpu without numaid", `<system version="1"><cpu arch="x86_64"/></system>`, graph.Options{}, "t.xml:1: <cpu> without numaid"},
		{"local rank absent", cpuOpen + gpuPCI("0000:01:00.0", 5, "") + `</cpu></system>`, graph.Options{LocalRank: 3}, "t.xml: local rank 3 is not in the topology (ranks [5])"},
		{"graph dump", `<graphs version="1"></graphs>`, graph.Options{}, "t.xml:1: <graphs> is not a topology"},
		// Finding 10 of the input-bounds issue: a repeated GPU bus id loaded silently as a second
		// GPU of the same id; more links than NCCL_TOPO_MAX_LINKS named no file or line.
		{"duplicate GPU bus id", cpuOpen + gpuPCI("0000:01:00.0", 0, nvs) + gpuPCI("0000:01:00.0", 1, nvs) + `</cpu></system>`, graph.Options{}, `t.xml:6: <pci busid="0000:01:00.0">: GPU bus id repeated (GPU rank 0 has it, line 4)`},
		{"net speed 1e308 Mb/s", cpuOpen + gpuPCI("0000:01:00.0", 0, "") + `<nic><net name="x" dev="0" speed="1e308"/></nic></cpu></system>`, graph.Options{}, "t.xml:6: <net speed=1e+308>: want at most 8e+08 Mb/s (800 Tb/s)"},
		{"net latency 1e13 µs", cpuOpen + gpuPCI("0000:01:00.0", 0, "") + `<nic><net name="x" dev="0" speed="400000" latency="1e13"/></nic></cpu></system>`, graph.Options{}, "t.xml:6: <net latency=1e+13>: want 0..1e+06 µs"},
		{"5,000 NICs", string(topogen.NICs(5000)), graph.Options{}, "t.xml:581: CPU/0-0 has more than 576 links (NCCL_TOPO_MAX_LINKS)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := build(t, c.xml, c.opt)
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %q, want one line containing %q", err, c.want)
			}
			if !errors.Is(err, graph.ErrTopology) {
				t.Errorf("error does not wrap ErrTopology: %v", err)
			}
		})
	}
}

// TestLongAttribute: a 100 kB attribute value gives a short one-line error or warning (the value
// cut by ncclxml.Quote), not a 100 kB message.
func TestLongAttribute(t *testing.T) {
	long := strings.Repeat("f", 100<<10)
	_, err := build(t, cpuOpen+gpuPCI("0000:01:00.0"+long, 0, "")+`</cpu></system>`, graph.Options{})
	if err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), "t.xml:3: <pci>: bad busid") {
		t.Errorf("100 kB busid: %.300q (%d bytes)", err, len(fmt.Sprint(err)))
	}
	_, err = build(t, cpuOpen+gpuPCI("0000:01:00.0", 0, `<nvlink target="fffffff:ff:ff.0" count="`+long+`" tclass="0x068000"/>`)+`</cpu></system>`, graph.Options{})
	if err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), "t.xml:4: <nvlink count=") {
		t.Errorf("100 kB count: %.300q (%d bytes)", err, len(fmt.Sprint(err)))
	}
	s, err := build(t, strings.Replace(cpuOpen, `host_hash="0x1"`, `host_hash="z`+long+`"`, 1)+gpuPCI("0000:01:00.0", 0, "")+`</cpu></system>`, graph.Options{})
	if err != nil {
		t.Fatalf("100 kB host_hash: %.300v", err)
	}
	if len(s.Warnings) != 1 || len(s.Warnings[0]) > 200 {
		t.Errorf("100 kB host_hash: warnings %.300q", s.Warnings)
	}
}

// TestRankZeroDefault: a node file whose ranks start at 8 loads with the zero Options.
func TestRankZeroDefault(t *testing.T) {
	s, err := build(t, cpuOpen+gpuPCI("0000:01:00.0", 8, "")+gpuPCI("0000:02:00.0", 9, "")+`</cpu></system>`, graph.Options{NRanks: 16})
	if err != nil || len(s.GPUs()) != 2 || !s.Inter {
		t.Fatalf("%v", err)
	}
}

// TestWarningsWithoutStrict: the inputs NCCL accepts silently load, with a located warning.
func TestWarningsWithoutStrict(t *testing.T) {
	nvs := `<nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>`
	s, err := build(t, cpuOpen+gpuPCI("0000:01:00.0", 0, `<nvlink target="fffffff:ff:ff.0" count="0" tclass="0x068000"/>`)+gpuPCI("0000:02:00.0", 1, nvs)+`</cpu></system>`, graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Warnings) != 1 || !strings.HasPrefix(s.Warnings[0], "t.xml:4:") {
		t.Fatalf("warnings %q", s.Warnings)
	}
	// As NCCL 2.28.9 does (its nvl0 log): a 0 GB/s NVLink, GPUs reach each other through the CPU.
	g0, g1 := s.Nodes[graph.GPU][0], s.Nodes[graph.GPU][1]
	if p := s.Path(g0, g1); p.Type != graph.PathPHB || p.BW != 48 {
		t.Errorf("GPU0→GPU1 %s %.1f, want PHB 48", p.Type, p.BW)
	}
	s, err = build(t, cpuOpen+gpuPCI("0000:01:00.0", 0, `<nvlink target="0000:99:00.0" count="4" tclass="0x030200"/>`)+`</cpu></system>`, graph.Options{})
	if err != nil || len(s.Warnings) != 1 {
		t.Fatalf("err %v warnings %q", err, s.Warnings)
	}
}

// TestTooManyNodes: more GPUs than NCCL_TOPO_MAX_NODES (576 in 2.28, 640 in 2.30) fail at the
// first one over, naming the limit; 100,000 GPUs fail as fast (200,000 are more elements than
// topo/ncclxml reads).
func TestTooManyNodes(t *testing.T) {
	gen := func(n int) string { return string(topogen.GPUsBySwitch(n)) }
	if _, err := build(t, gen(576), graph.Options{}); err != nil {
		t.Fatalf("576 GPUs: %v", err)
	}
	// GPU #577 sits on line 2 header lines + 9 switches × (1+64+1) lines + its switch's line + 1.
	_, err := build(t, gen(577), graph.Options{})
	if err == nil || !strings.Contains(err.Error(), "t.xml:598: more than 576 GPU nodes (NCCL_TOPO_MAX_NODES of NCCL 2.28)") {
		t.Fatalf("577 GPUs: %v", err)
	}
	if _, err := build(t, gen(640), graph.Options{Version: graph.V2_30}); err != nil {
		t.Fatalf("640 GPUs on 2.30: %v", err)
	}
	if testing.Short() {
		t.Skip("100,000 GPUs skipped in -short")
	}
	// Parsing 100,000 GPUs is topo/ncclxml's time; FromXML itself must stop at the 577th.
	doc, err := ncclxml.ParseBytes([]byte(gen(100000)), "t.xml")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = FromXML(doc, graph.Options{})
	if err == nil || !strings.Contains(err.Error(), "more than 576 GPU nodes") {
		t.Fatalf("100000 GPUs: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("FromXML took %v to reject 100000 GPUs", d)
	}
	t.Logf("FromXML rejected 100000 GPUs in %v", time.Since(start))
}

// TestUnreachableGPUs: two hosts in one file with nothing between them: the groups of GPUs that
// cannot reach each other are reported (one line per pair of groups), and each rank keeps only
// its own host's GPUs (NCCL's trimming), quickly.
func TestUnreachableGPUs(t *testing.T) {
	text := `<system version="1">
<cpu host_hash="0x1" numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
` + gpuPCI("0000:01:00.0", 0, "") + `</cpu>
<cpu host_hash="0x2" numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
` + gpuPCI("0000:01:00.0", 1, "") + `</cpu></system>`
	s, err := build(t, text, graph.Options{LocalRank: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Unreachable) != 1 || !strings.Contains(s.Unreachable[0], "GPU rank 0 (GPU/0-1000) has no path to GPU rank 1 (GPU/1-1000)") {
		t.Errorf("unreachable %q", s.Unreachable)
	}
	if len(s.Nodes[graph.GPU]) != 1 || s.Nodes[graph.GPU][0].GPU.Rank != 1 || !s.Inter {
		t.Errorf("kept %d GPUs (rank %d), inter %v; want rank 1 alone, inter", len(s.Nodes[graph.GPU]), s.Nodes[graph.GPU][0].GPU.Rank, s.Inter)
	}
}

// FuzzFromXML: no input makes FromXML panic or hang.
func FuzzFromXML(f *testing.F) {
	f.Add(cpuOpen + gpuPCI("0000:01:00.0", 0, `<nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>`) + `<nic><net name="a" dev="0" speed="400000" gdr="1"/></nic></cpu></system>`)
	f.Add(cpuOpen + `<pci busid="0000:10:00.0" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000" subsystem_device="0x0100"><pcilink target="0000:20:00.0"/><pci busid="0000:11:00.0" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000" subsystem_device="0x1100">` + gpuPCI("0000:12:00.0", 0, `<c2c bw="40000" count="2"/>`) + `</pci></pci></cpu></system>`)
	f.Fuzz(func(t *testing.T, text string) {
		doc, err := ncclxml.ParseBytes([]byte(text), "fuzz.xml")
		if err != nil {
			return
		}
		s, err := FromXML(doc, graph.Options{})
		if err == nil {
			s.Lines()
			if _, err := s.MarshalJSON(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
