package partial

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/beevik/etree"

	"github.com/simccl/simccl/topo/ncclxml"
)

var (
	// ErrUnknownModel is wrapped by Lookup's and Complete's error for a model name it lacks.
	ErrUnknownModel = errors.New("partial: unknown GPU model")
	// ErrIncomplete is wrapped by Complete's error when the file lacks what a GPU model cannot
	// give: which PCI devices are GPUs, or the GPU-to-GPU NVLinks of a mesh.
	ErrIncomplete = errors.New("partial: topology still incomplete")
	// ErrMismatch is wrapped by Complete's error when the file contradicts the model (another sm).
	ErrMismatch = errors.New("partial: topology does not match the GPU model")
)

// Gaps is what a topology file leaves to NCCL's hardware detection. Elements are those of the
// document Inspect was given; Document.Line locates them.
type Gaps struct {
	// GPUStubs are <pci> devices of a display class (0x03…) with no <gpu> in them: NCCL adds
	// the <gpu> (dev, sm, rank, gdr, NVLinks) for the GPU its rank uses.
	GPUStubs []*etree.Element
	// GPUsWithoutSM are <gpu> elements without sm (NCCL reads it from NVML when absent).
	GPUsWithoutSM []*etree.Element
	// NICStubs are <pci> devices of a network class (0x02…) with no <nic> in them: NCCL adds
	// <nic><net …> from its network plugin (name, speed, port, GUID, GDR support).
	NICStubs []*etree.Element
	// Unclassified are <pci> leaves without a class: NCCL reads the class from sysfs, so
	// whether each is a GPU, a NIC or something else is not in the file.
	Unclassified []*etree.Element
	// UsableGPUs counts the <gpu> elements with a rank and an sm: GPUs simccl can simulate as
	// the file stands.
	UsableGPUs int
}

// Inspect lists what doc leaves to detection.
func Inspect(doc *ncclxml.Document) *Gaps {
	g := &Gaps{}
	if doc == nil || doc.Root() == nil {
		return g
	}
	for _, p := range doc.Root().FindElements("//pci") {
		gpu, nic := p.SelectElement("gpu"), p.SelectElement("nic")
		class, hasClass := ncclxml.Attr(p, "class")
		leaf := len(p.ChildElements()) == 0
		switch {
		case gpu != nil:
			_, hasSM := ncclxml.Attr(gpu, "sm")
			_, hasRank := ncclxml.Attr(gpu, "rank")
			if !hasSM {
				g.GPUsWithoutSM = append(g.GPUsWithoutSM, gpu)
			} else if hasRank {
				g.UsableGPUs++
			}
		case nic != nil:
		case !leaf:
		case !hasClass || strings.TrimSpace(class) == "":
			g.Unclassified = append(g.Unclassified, p)
		case strings.HasPrefix(class, "0x03"):
			g.GPUStubs = append(g.GPUStubs, p)
		case strings.HasPrefix(class, "0x02"):
			g.NICStubs = append(g.NICStubs, p)
		}
	}
	return g
}

// NeedsModel says the file cannot be simulated as it stands and a GPU model would be the way to
// complete it: no usable GPU, and GPU devices (or devices of unknown class) that detection would
// have filled.
func (g *Gaps) NeedsModel() bool {
	return g.UsableGPUs == 0 && len(g.GPUStubs)+len(g.GPUsWithoutSM)+len(g.Unclassified) > 0
}

// Describe says what is missing, each kind with a count and the first few bus ids and lines.
func (g *Gaps) Describe(doc *ncclxml.Document) string {
	var parts []string
	add := func(els []*etree.Element, one, many, rest string) {
		what := one
		if len(els) != 1 {
			what = many
		}
		if len(els) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s%s (%s)", len(els), what, rest, locate(doc, els)))
		}
	}
	add(g.GPUStubs, "GPU device", "GPU devices", " without <gpu>")
	add(g.GPUsWithoutSM, "<gpu> element", "<gpu> elements", " without sm")
	add(g.NICStubs, "NIC device", "NIC devices", " without <nic><net>")
	add(g.Unclassified, "PCI device", "PCI devices", " without a class")
	if len(parts) == 0 {
		return "nothing missing"
	}
	return strings.Join(parts, "; ")
}

// locate names up to three elements by bus id (their own or their <pci>'s) and line.
func locate(doc *ncclxml.Document, els []*etree.Element) string {
	var s []string
	for i, e := range els {
		if i == 3 {
			s = append(s, "…")
			break
		}
		p := e
		if p.Tag != "pci" && p.Parent() != nil {
			p = p.Parent()
		}
		bus, _ := ncclxml.Attr(p, "busid")
		if line := doc.Line(e); line > 0 {
			s = append(s, fmt.Sprintf("%s line %d", bus, line))
		} else {
			s = append(s, bus)
		}
	}
	return strings.Join(s, ", ")
}

// Result says what Complete filled and what it left.
type Result struct {
	Model Model
	// GPUs are the completed GPUs in rank order.
	GPUs []GPU
	// Left lists what the file still lacks after completion (NIC devices without <net>, devices
	// without a class), in words; empty when nothing is left.
	Left []string
}

// GPU is one GPU after completion.
type GPU struct {
	BusID     string
	Rank, Dev int
	Line      int  // of its <pci> in the file (0 when unknown)
	Added     bool // a <gpu> element was created for it
	NVLinks   int  // NVLinks added (0: none added; the file's own are kept)
}

// Complete returns a copy of doc with what NCCL's detection (NCCL 2.28 xml.cc
// ncclTopoGetXmlFromGpu, ncclTopoFillGpu) would have filled on GPUs of the named model:
//
//   - a <gpu> in every GPU device (a <pci> of class 0x03… without one), and on every <gpu>
//     the attributes it lacks, as NCCL only fills missing ones: dev (NVML's index: GPUs of a
//     host in PCI bus-id order, the order NVML and CUDA_DEVICE_ORDER=PCI_BUS_ID give identical
//     GPUs), sm (the model's compute capability), rank (when no GPU of the file has one: the
//     same order, one rank per GPU, a communicator over every GPU as CUDA_VISIBLE_DEVICES would
//     give it) and gdr (CUDA's GPUDirect RDMA attribute);
//   - NVLinks, on a <gpu> that has none (NCCL probes NVML only then): for an NVSwitch board,
//     one <nvlink target="fffffff:ff:ff.0" count=N tclass="0x068000"/>, what NCCL 2.28.9 writes
//     in a VM where the switches are not visible. On bare metal NCCL names each switch; it
//     merges every link to an NVSwitch into one NVS node either way, so the system is the same
//     (but for float rounding: NCCL sums the links of several switches in float).
//
// A file that says another sm than the model's is an ErrMismatch. What the model cannot give is
// an ErrIncomplete naming it: which PCI devices are GPUs when none has a display class, and the
// GPU-to-GPU links of a mesh (V100). NIC devices without <net> are left as they are (the network
// plugin fills them, not the GPU) and listed in Result.Left.
func Complete(doc *ncclxml.Document, model string) (*ncclxml.Document, *Result, error) {
	m, err := Lookup(model)
	if err != nil {
		return nil, nil, err
	}
	cp, err := systemCopy(doc)
	if err != nil {
		return nil, nil, err
	}
	gaps := Inspect(cp)

	type cand struct {
		pci, gpu *etree.Element
		host     int
		bus      int64
		busStr   string
	}
	hosts := map[string]int{} // host_hash → order of first appearance
	var cands []*cand
	anyRank := false
	for _, p := range cp.Root().FindElements("//pci") {
		gpu := p.SelectElement("gpu")
		stub := gpu == nil && len(p.ChildElements()) == 0 && strings.HasPrefix(p.SelectAttrValue("class", ""), "0x03")
		if gpu == nil && !stub {
			continue
		}
		busStr, bus, host, err := placeOf(cp, p, hosts)
		if err != nil {
			return nil, nil, err
		}
		if gpu != nil && gpu.SelectAttr("rank") != nil {
			anyRank = true
		}
		cands = append(cands, &cand{pci: p, gpu: gpu, host: host, bus: bus, busStr: busStr})
	}
	if len(cands) == 0 {
		if len(gaps.Unclassified) > 0 {
			return nil, nil, fmt.Errorf("%w: %s: no PCI device of the file is a GPU: %d PCI devices have no class (%s), and NCCL tells GPUs from NICs by the class it reads from the live machine; give the GPUs class=\"0x030200\" and the NICs class=\"0x020000\" (Ethernet) or \"0x020700\" (InfiniBand)",
				ErrIncomplete, cp.Name, len(gaps.Unclassified), locate(cp, gaps.Unclassified))
		}
		return nil, nil, fmt.Errorf("%w: %s: no GPU device (a <pci> of class 0x03…) for the GPU model to complete", ErrIncomplete, cp.Name)
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].host != cands[j].host {
			return cands[i].host < cands[j].host
		}
		return cands[i].bus < cands[j].bus
	})

	res := &Result{Model: m}
	devIndex := map[int]int{}           // host → next NVML index
	devs := map[[2]int]*etree.Element{} // (host, dev) → <gpu>
	ranks := map[int]*etree.Element{}
	nextRank := 0
	if anyRank {
		for _, c := range cands {
			if c.gpu != nil {
				if r, ok, _ := cp.AttrInt(c.gpu, "rank"); ok && int(r) >= nextRank {
					nextRank = int(r) + 1
				}
			}
		}
	}
	for _, c := range cands {
		index := devIndex[c.host]
		devIndex[c.host]++
		out := GPU{BusID: c.busStr, Line: cp.Line(c.pci)}
		if c.gpu == nil {
			c.gpu = c.pci.CreateElement("gpu")
			out.Added = true
		}
		g := c.gpu
		if v, ok := ncclxml.Attr(g, "sm"); ok {
			sm, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || sm != m.SM {
				return nil, nil, fmt.Errorf("%w: %v", ErrMismatch, cp.Errorf(g, "<gpu sm=%s>, but GPU model %s (%s) has sm %d", ncclxml.Quote(v), m.Name, m.Part, m.SM))
			}
		}
		setIfUnset(g, "dev", strconv.Itoa(index))
		setIfUnset(g, "sm", strconv.Itoa(m.SM))
		// A file whose GPUs carry ranks keeps them; a rank-less <gpu> there is a GPU outside the
		// communicator and stays so. GPUs added to such a file take the next ranks.
		if !anyRank || out.Added {
			setIfUnset(g, "rank", strconv.Itoa(nextRank))
			nextRank++
		}
		setIfUnset(g, "gdr", boolAttr(m.GDR))
		dev, _, err := cp.AttrInt(g, "dev")
		if err != nil {
			return nil, nil, err
		}
		out.Dev = int(dev)
		if prev, dup := devs[[2]int{c.host, int(dev)}]; dup {
			return nil, nil, fmt.Errorf("%w: %v", ErrMismatch, cp.Errorf(c.pci, "GPU %s would have dev %d, which the GPU at line %d has: number the GPUs' dev attributes 0..n-1", c.busStr, dev, cp.Line(prev)))
		}
		devs[[2]int{c.host, int(dev)}] = g
		if r, ok, err := cp.AttrInt(g, "rank"); err != nil {
			return nil, nil, err
		} else if ok {
			if prev, dup := ranks[int(r)]; dup {
				return nil, nil, fmt.Errorf("%w: %v", ErrMismatch, cp.Errorf(c.pci, "GPU %s would have rank %d, which the GPU at line %d has", c.busStr, r, cp.Line(prev)))
			}
			ranks[int(r)] = g
			out.Rank = int(r)
		} else {
			out.Rank = -1
		}
		if len(g.SelectElements("nvlink")) == 0 && m.NVLinks > 0 {
			switch m.Fabric {
			case NVSwitch:
				l := g.CreateElement("nvlink")
				l.CreateAttr("target", ncclxml.SentinelBusID)
				l.CreateAttr("count", strconv.Itoa(m.NVLinks))
				l.CreateAttr("tclass", nvswitchClass)
				out.NVLinks = m.NVLinks
			case GPUMesh:
				return nil, nil, fmt.Errorf("%w: %v", ErrIncomplete, cp.Errorf(c.pci,
					"GPU %s: %s GPUs are joined GPU to GPU (%d NVLinks each, a hybrid cube mesh on 8-GPU boards); NCCL learns from NVML which GPU each link reaches, and the file does not say: write them in each <gpu> as <nvlink target=\"PEER_BUSID\" count=\"N\" tclass=\"0x030200\"/> (as testdata/topos/dgx1-v100-8gpu-hybrid-cube-mesh.xml has them)",
					c.busStr, m.Part, m.NVLinks))
			}
		}
		res.GPUs = append(res.GPUs, out)
	}
	sort.SliceStable(res.GPUs, func(i, j int) bool { return res.GPUs[i].Rank < res.GPUs[j].Rank })
	if len(gaps.NICStubs) > 0 {
		res.Left = append(res.Left, (&Gaps{NICStubs: gaps.NICStubs}).Describe(cp)+
			": NCCL takes NICs from its network plugin (name, speed, port, GUID, GDR), which a GPU model does not give; without them the topology has no NET and simulates one node")
	}
	if len(gaps.Unclassified) > 0 {
		res.Left = append(res.Left, (&Gaps{Unclassified: gaps.Unclassified}).Describe(cp)+", left as they are")
	}
	cp.Doc.Indent(2)
	return cp, res, nil
}

// systemCopy is a copy of the topology document doc to complete (parsed again from its bytes, so
// that line numbers in errors stay the file's), or an error where doc is no topology.
func systemCopy(doc *ncclxml.Document) (*ncclxml.Document, error) {
	if doc == nil || doc.Root() == nil || doc.Kind() != ncclxml.KindSystem {
		return nil, fmt.Errorf("partial: no topology (<system>) to complete")
	}
	data, err := doc.Bytes()
	if err != nil {
		return nil, err
	}
	return ncclxml.ParseBytes(data, doc.Name)
}

// placeOf is where PCI device p sits for the order NCCL's detection numbers devices in: its bus
// id (as written and as a number) and its host, numbered in hosts by first appearance (the
// host_hash of its <cpu>; one host where none says).
func placeOf(cp *ncclxml.Document, p *etree.Element, hosts map[string]int) (string, int64, int, error) {
	busStr, err := cp.RequireAttr(p, "busid")
	if err != nil {
		return "", 0, 0, err
	}
	bus, err := ncclxml.ParseBusID(busStr)
	if err != nil {
		return "", 0, 0, cp.Errorf(p, "<pci busid=%s>: %v", ncclxml.Quote(busStr), err)
	}
	h := hostOf(p)
	if _, ok := hosts[h]; !ok {
		hosts[h] = len(hosts)
	}
	return busStr, bus, hosts[h], nil
}

// hostOf is the host_hash of the <cpu> holding e ("" when none says).
func hostOf(e *etree.Element) string {
	for p := e.Parent(); p != nil; p = p.Parent() {
		if p.Tag == "cpu" {
			return p.SelectAttrValue("host_hash", "")
		}
	}
	return ""
}

// setIfUnset is NCCL's xmlSetAttrIfUnset: attributes the file gives are kept.
func setIfUnset(e *etree.Element, key, val string) {
	if e.SelectAttr(key) == nil {
		e.CreateAttr(key, val)
	}
}

func boolAttr(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
