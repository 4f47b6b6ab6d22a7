package topo

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"

	"github.com/beevik/etree"

	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/topo/ncclxml"
)

// topoError is what FromXML returns: it unwraps to graph.ErrTopology and to the error inside
// (an *ncclxml.Error, which wraps ncclxml.ErrSyntax, when the error is located).
type topoError struct{ err error }

func (e *topoError) Error() string   { return e.err.Error() }
func (e *topoError) Unwrap() []error { return []error{graph.ErrTopology, e.err} }

// Inter-socket bandwidths in GB/s (NCCL 2.28 ncclTopoGetInterCpuBw; topo.h P9_BW, ARM_BW, …).
const (
	p9Bw         = 32
	armBw        = 6
	erpQpiBw     = 40
	srpQpiBw     = 22
	sklQpiBw     = 10
	bdwQpiBw     = 6
	amdBw        = 16
	zpiBw        = 6
	yongfengZpBw = 9
)

// CPU model codes as NCCL prints them in "CPU/0-0 (arch/vendor/model)" (NCCL 2.28 topo.h
// NCCL_TOPO_CPU_MODEL_*; 0 = unknown). The arch and vendor codes are graph.CPUArch* and
// graph.CPUVendor*.
const (
	modelBDW      = 1
	modelSKL      = 2
	modelSRP      = 3
	modelERP      = 4
	modelYongfeng = 1
)

// f32 rounds to float32, as NCCL keeps bandwidths in floats (the same rounding as package
// graph's links).
func f32(x float64) float64 { return float64(float32(x)) }

// cpuCodes are the numeric arch/vendor/model NCCL derives from the XML attributes.
type cpuCodes struct{ arch, vendor, model int }

func codesOf(n *graph.Node) cpuCodes { return cpuCodes{n.CPU.ArchID, n.CPU.VendorID, n.CPU.ModelID} }

// builder holds the state of one FromXML call.
type builder struct {
	doc   *ncclxml.Document
	sys   *graph.System
	elem  map[*graph.Node]*etree.Element
	ranks map[int]*etree.Element

	warnedHash map[string]bool
}

// FromXML builds the system NCCL would build from a topology document (ncclTopoGetSystemFromXml,
// then ncclTopoComputePaths, the GPU trimming of ncclTopoTrimSystem, paths again, and the
// maxBw/totalBw of ncclTopoSearchInit).
func FromXML(doc *ncclxml.Document, opt graph.Options) (*graph.System, error) {
	if doc == nil || doc.Root() == nil {
		return nil, &topoError{fmt.Errorf("graph: no document")}
	}
	root := doc.Root()
	if root.Tag != "system" {
		return nil, &topoError{doc.Errorf(root, "<%s> is not a topology (want <system>)", root.Tag)}
	}
	b := &builder{
		doc:   doc,
		sys:   graph.NewSystem(doc.Name, opt),
		elem:  map[*graph.Node]*etree.Element{},
		ranks: map[int]*etree.Element{},
	}
	if err := b.build(root); err != nil {
		return nil, &topoError{err}
	}
	s := b.sys
	if len(s.Nodes[graph.GPU]) == 0 {
		return nil, &topoError{doc.Errorf(root, "no GPU with a rank in the topology (a <gpu> needs rank, dev and sm; partial files that rely on NCCL's hardware detection cannot be simulated)")}
	}
	if opt.Strict && len(s.Warnings) > 0 {
		return nil, &topoError{errors.New(s.Warnings[0])}
	}
	if err := s.Compute(); err != nil {
		// A problem with one node is located at the element the node came from.
		var ne *graph.NodeError
		if errors.As(err, &ne) {
			err = doc.Errorf(b.elem[ne.Node], "%s", ne.Msg)
		} else {
			err = fmt.Errorf("%s: %w", doc.Name, err)
		}
		return nil, &topoError{err}
	}
	return s, nil
}

// build converts the XML tree into nodes and links, in NCCL's order: CPUs (with their PCI trees,
// GPUs and NICs), NVLinks, C2C links, pcilinks, Broadcom switch flattening, CPU↔CPU links, and
// the final link sort (NCCL 2.28 ncclTopoGetSystemFromXml).
func (b *builder) build(root *etree.Element) error {
	for _, c := range root.ChildElements() {
		if c.Tag == "cpu" {
			if err := b.addCPU(c); err != nil {
				return err
			}
		}
	}
	if err := b.walkLinks(root); err != nil {
		return err
	}
	b.flattenBcmSwitches()
	b.connectCPUs()
	return b.sortSystem()
}

func (b *builder) warnf(e *etree.Element, format string, args ...any) {
	b.sys.Warnings = append(b.sys.Warnings, b.doc.Errorf(e, format, args...).Error())
}

// newNode adds a node made from element e, which locates the errors found later about it.
func (b *builder) newNode(t graph.NodeType, id int64, e *etree.Element) (*graph.Node, error) {
	n, err := b.sys.AddNode(t, id)
	if err != nil {
		return nil, b.doc.Errorf(e, "%v", err)
	}
	b.elem[n] = e
	return n, nil
}

// maxNetLatencyUs bounds a <net latency> (µs): one second.
const maxNetLatencyUs = 1e6

// maxNetSpeedMbps bounds a <net speed> (Mb/s): 800 Tb/s, the simulator's bound on a link (simnet's
// MaxSpeedGBps, partial.MaxNICSpeed).
const maxNetSpeedMbps = 800e6

// connect adds a link as graph.Connect does; an error (a node over NCCL_TOPO_MAX_LINKS links) is
// located at e, the element that asked for the link.
func (b *builder) connect(e *etree.Element, node, remote *graph.Node, t graph.LinkType, bw float64) error {
	if err := graph.Connect(node, remote, t, bw); err != nil {
		return b.doc.Errorf(e, "%v", err)
	}
	return nil
}

func topoID(systemID int, local int64) int64 {
	return int64(uint64(systemID)<<56 | uint64(local)&(1<<56-1))
}

// node finds a node by its id, as ncclTopoGetNode does.
func (b *builder) node(t graph.NodeType, id int64) *graph.Node {
	for _, n := range b.sys.Nodes[t] {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// --- attributes -------------------------------------------------------------------------------

func attr(e *etree.Element, name string) (string, bool) {
	a := e.SelectAttr(name)
	if a == nil {
		return "", false
	}
	return a.Value, true
}

// attrInt reads an integer attribute the way NCCL's strtol(…, 0) does (decimal, 0x hex),
// returning def when absent; a value that is not a number is an error.
func (b *builder) attrInt(e *etree.Element, name string, def int64) (int64, error) {
	v, ok := attr(e, name)
	if !ok {
		return def, nil
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 0, 64)
	if err != nil {
		// NCCL accepts a leading number followed by junk; so do we only for decimals like "1.0".
		if f, ferr := strconv.ParseFloat(v, 64); ferr == nil && f == math.Trunc(f) && math.Abs(f) < 1<<62 {
			return int64(f), nil
		}
		return 0, b.doc.Errorf(e, "<%s %s=%s>: not an integer", e.Tag, name, ncclxml.Quote(v))
	}
	return n, nil
}

func (b *builder) attrFloat(e *etree.Element, name string, def float64) (float64, error) {
	v, ok := attr(e, name)
	if !ok || strings.TrimSpace(v) == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, b.doc.Errorf(e, "<%s %s=%s>: not a number", e.Tag, name, ncclxml.Quote(v))
	}
	return f, nil
}

func (b *builder) attrHex(e *etree.Element, name string, def uint64) (uint64, error) {
	v, ok := attr(e, name)
	if !ok || strings.TrimSpace(v) == "" {
		return def, nil
	}
	s := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(v), "0x"), "0X")
	n, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, b.doc.Errorf(e, "<%s %s=%s>: not a hexadecimal number", e.Tag, name, ncclxml.Quote(v))
	}
	return n, nil
}

// parseBusID converts "dddd:bb:dd.f" (spaces around it ignored) to NCCL's integer with
// ncclxml.ParseBusID (NCCL 2.28 busIdToInt64, which drops ':' and '.' and reads the rest as
// hex); anything else in the string, no digit at all, or more than 16 digits is an error, in the
// builder's words.
func parseBusID(s string) (int64, error) {
	s = strings.TrimSpace(s)
	v, err := ncclxml.ParseBusID(s)
	if err != nil {
		return 0, fmt.Errorf("bad busid %s (want dddd:bb:dd.f in hex)", ncclxml.Quote(s))
	}
	return v, nil
}

func (b *builder) busID(e *etree.Element) (int64, error) {
	v, ok := attr(e, "busid")
	if !ok {
		return 0, b.doc.Errorf(e, "<%s> without busid", e.Tag)
	}
	id, err := parseBusID(v)
	if err != nil {
		return 0, b.doc.Errorf(e, "<%s>: %v", e.Tag, err)
	}
	return id, nil
}

// --- CPUs ---------------------------------------------------------------------------------------

func (b *builder) systemID(e *etree.Element) (int, error) {
	h, err := b.attrHex(e, "host_hash", 0)
	if err != nil {
		// Anonymised dumps write placeholders such as "0xHOSTHASH_A". NCCL's strtoull would read
		// 0 for all of them and merge the hosts; we keep distinct strings distinct, since that
		// is what the file means, and say so.
		v, _ := attr(e, "host_hash")
		f := fnv.New64a()
		f.Write([]byte(v))
		h = f.Sum64()
		if !b.warnedHash[v] {
			if b.warnedHash == nil {
				b.warnedHash = map[string]bool{}
			}
			b.warnedHash[v] = true
			b.warnf(e, "<cpu host_hash=%s> is not hexadecimal; hosts are told apart by the string", ncclxml.Quote(v))
		}
	}
	for i, x := range b.sys.HostHashes {
		if x == h {
			return i, nil
		}
	}
	b.sys.HostHashes = append(b.sys.HostHashes, h)
	return len(b.sys.HostHashes) - 1, nil
}

// addCPU follows ncclTopoAddCpu: a CPU node per <cpu>, its arch/vendor/model codes, then its
// <pci> children and the CPU-attached NICs.
func (b *builder) addCPU(e *etree.Element) error {
	sid, err := b.systemID(e)
	if err != nil {
		return err
	}
	if _, ok := attr(e, "numaid"); !ok {
		return b.doc.Errorf(e, "<cpu> without numaid")
	}
	numa, err := b.attrInt(e, "numaid", -1)
	if err != nil {
		return err
	}
	cpu, err := b.newNode(graph.CPU, topoID(sid, numa), e)
	if err != nil {
		return err
	}
	cpu.CPU.NumaID = int(numa)
	cpu.CPU.Affinity, _ = attr(e, "affinity")
	cpu.CPU.Arch, _ = attr(e, "arch")
	cpu.CPU.Vendor, _ = attr(e, "vendor")
	fam, err := b.attrInt(e, "familyid", 0)
	if err != nil {
		return err
	}
	model, err := b.attrInt(e, "modelid", 0)
	if err != nil {
		return err
	}
	cpu.CPU.Family, cpu.CPU.Model = int(fam), int(model)

	c := classifyCPU(cpu.CPU.Arch, cpu.CPU.Vendor, fam, model)
	cpu.CPU.ArchID, cpu.CPU.VendorID, cpu.CPU.ModelID = c.arch, c.vendor, c.model

	for _, ch := range e.ChildElements() {
		switch ch.Tag {
		case "pci":
			if err := b.addPCI(ch, cpu, sid); err != nil {
				return err
			}
		case "nic":
			// A <nic> directly under <cpu>: all such NICs share one NIC node of local id 0,
			// connected to the first CPU that holds one with LOC_BW PCI links (ncclTopoAddCpu).
			nic := b.node(graph.NIC, 0)
			if nic == nil {
				if nic, err = b.newNode(graph.NIC, topoID(sid, 0), ch); err != nil {
					return err
				}
				if err := b.connect(ch, cpu, nic, graph.LinkPCI, graph.LocBw); err != nil {
					return err
				}
				if err := b.connect(ch, nic, cpu, graph.LinkPCI, graph.LocBw); err != nil {
					return err
				}
			}
			if err := b.addNIC(ch, nic, sid); err != nil {
				return err
			}
		}
	}
	return nil
}

// classifyCPU returns the codes NCCL derives from a <cpu>'s arch, vendor, familyid and modelid
// (NCCL 2.28 ncclTopoAddCpu): the arch and vendor strings are matched by prefix against
// kvDictCpuArch (x86_64, arm64, ppc64) and kvDictCpuVendor (GenuineIntel → Intel, AuthenticAMD →
// AMD, CentaurHauls and "  Shanghai  " → Zhaoxin), anything else being 0 (unknown, HygonGenuine
// included); the vendor is read on x86 only, and the model for Intel and Zhaoxin only.
func classifyCPU(arch, vendor string, fam, model int64) cpuCodes {
	var c cpuCodes
	switch {
	case strings.HasPrefix(arch, "x86_64"):
		c.arch = graph.CPUArchX86
	case strings.HasPrefix(arch, "arm64"):
		c.arch = graph.CPUArchARM
	case strings.HasPrefix(arch, "ppc64"):
		c.arch = graph.CPUArchPower
	}
	if c.arch == graph.CPUArchX86 {
		switch {
		case strings.HasPrefix(vendor, "GenuineIntel"):
			c.vendor = graph.CPUVendorIntel
		case strings.HasPrefix(vendor, "AuthenticAMD"):
			c.vendor = graph.CPUVendorAMD
		case strings.HasPrefix(vendor, "CentaurHauls"), strings.HasPrefix(vendor, "  Shanghai  "):
			c.vendor = graph.CPUVendorZhaoxin
		}
		switch c.vendor {
		case graph.CPUVendorIntel:
			// Intel model by family 6 and model id: ≥0xCF ERP, ≥0x8F SRP, ≥0x55 SKL, else BDW.
			switch {
			case fam == 6 && model >= 0xCF:
				c.model = modelERP
			case fam == 6 && model >= 0x8F:
				c.model = modelSRP
			case fam == 6 && model >= 0x55:
				c.model = modelSKL
			default:
				c.model = modelBDW
			}
		case graph.CPUVendorZhaoxin:
			if fam == 7 && model == 0x5B {
				c.model = modelYongfeng
			}
		}
	}
	return c
}

// --- PCI ----------------------------------------------------------------------------------------

// pciClassType maps a PCI class by prefix (NCCL 2.28 kvDictPciClass): 0x060400 bridge → PCI,
// 0x080100 → PCI, 0x068000 → NVS, 0x068001 → CPU, 0x03… → GPU, 0x02… → NIC, other → PCI.
func pciClassType(class string) graph.NodeType {
	switch {
	case strings.HasPrefix(class, "0x060400"), strings.HasPrefix(class, "0x080100"):
		return graph.PCI
	case strings.HasPrefix(class, "0x068000"):
		return graph.NVS
	case strings.HasPrefix(class, "0x068001"):
		return graph.CPU
	case strings.HasPrefix(class, "0x03"):
		return graph.GPU
	case strings.HasPrefix(class, "0x02"):
		return graph.NIC
	}
	return graph.PCI
}

// pciGenCode is the per-lane speed code (units of 100 Mb/s) of a link_speed string, matched by
// prefix in NCCL's order, first match wins; unknown or empty → 60 (NCCL 2.28 kvDictPciGen).
func pciGenCode(speed string) int {
	table := []struct {
		key  string
		code int
	}{
		{"2.5 GT/s", 15}, {"5 GT/s", 30}, {"8 GT/s", 60}, {"16 GT/s", 120}, {"32 GT/s", 240},
		{"2.5 GT/s PCIe", 15}, {"5.0 GT/s PCIe", 30}, {"8.0 GT/s PCIe", 60}, {"16.0 GT/s PCIe", 120},
		{"32.0 GT/s PCIe", 240}, {"64.0 GT/s PCIe", 480},
	}
	for _, t := range table {
		if strings.HasPrefix(speed, t.key) {
			return t.code
		}
	}
	return 60
}

func child(e *etree.Element, tag string) *etree.Element {
	for _, c := range e.ChildElements() {
		if c.Tag == tag {
			return c
		}
	}
	return nil
}

// addPCI follows ncclTopoAddPci: a <pci> holding a <gpu> with a rank is a GPU node; one holding
// a <nic> with a <net> is a NIC node (functions of one device merged); one whose class maps to
// PCI is a switch whose children are added recursively; anything else is ignored. The device is
// linked to its parent both ways with its own link bandwidth.
func (b *builder) addPCI(e *etree.Element, parent *graph.Node, sid int) error {
	busid, err := b.busID(e)
	if err != nil {
		return err
	}
	class, hasClass := attr(e, "class")
	t := pciClassType(class)
	var node *graph.Node
	if g := child(e, "gpu"); g != nil {
		t = graph.GPU
		if _, ok := attr(g, "rank"); !ok {
			return nil // a <gpu> without rank is not one of the communicator's GPUs
		}
		if prev := b.node(graph.GPU, topoID(sid, busid)); prev != nil {
			// NCCL 2.28's ncclTopoAddPci would create a second GPU node of the same id, which
			// NVLinks and paths to that bus id cannot tell from the first: a wrong topology.
			bus, _ := attr(e, "busid")
			return b.doc.Errorf(e, "<pci busid=%s>: GPU bus id repeated (GPU rank %d has it, line %d)",
				ncclxml.Quote(bus), prev.GPU.Rank, b.doc.Line(b.elem[prev]))
		}
		if node, err = b.newNode(graph.GPU, topoID(sid, busid), g); err != nil {
			return err
		}
		if err := b.addGPU(g, node); err != nil {
			return err
		}
		// NCCL reads no id of a GPU's <pci>: one it cannot parse leaves the GPU unnamed here too.
		if dev, err := b.attrHex(e, "device", 0); err == nil && dev <= 0xffff {
			node.GPU.PCIDevice = uint16(dev)
		}
	}
	if n := child(e, "nic"); n != nil {
		t = graph.NIC
		if child(n, "net") == nil {
			return nil
		}
		// Ignore the function number: ports of one NIC are one PCI device.
		// Only a newly created NIC is linked to the parent: a second function of the same
		// device adds its nets but no second PCI link (ncclTopoAddPci).
		id := topoID(sid, busid&^0xf)
		nic := b.node(graph.NIC, id)
		if nic == nil {
			if nic, err = b.newNode(graph.NIC, id, e); err != nil {
				return err
			}
			node = nic
		}
		if err := b.addNIC(n, nic, sid); err != nil {
			return err
		}
	} else if t == graph.PCI || (!hasClass && node == nil) {
		if node, err = b.newNode(graph.PCI, topoID(sid, busid), e); err != nil {
			return err
		}
		var dev uint64
		for i, name := range []string{"vendor", "device", "subsystem_vendor", "subsystem_device"} {
			v, err := b.attrHex(e, name, 0)
			if err != nil {
				return err
			}
			dev |= (v & 0xffff) << (48 - 16*i)
		}
		node.PCI.Device = dev
		for _, c := range e.ChildElements() {
			if c.Tag == "pci" {
				if err := b.addPCI(c, node, sid); err != nil {
					return err
				}
			}
		}
	}
	if node == nil {
		return nil
	}
	width, err := b.attrInt(e, "link_width", 0)
	if err != nil {
		return err
	}
	if width < 0 {
		return b.doc.Errorf(e, "<pci link_width=%d>: negative", width)
	}
	if width == 0 {
		width = 16 // 0 or empty → x16 (NCCL 2.28 ncclTopoAddPci)
	}
	speed, _ := attr(e, "link_speed")
	bw := f32(float64(width) * float64(pciGenCode(speed)) / 80)
	if err := b.connect(e, node, parent, graph.LinkPCI, bw); err != nil {
		return err
	}
	return b.connect(e, parent, node, graph.LinkPCI, bw)
}

// addGPU reads <gpu dev sm rank gdr> (ncclTopoAddGpu).
func (b *builder) addGPU(e *etree.Element, n *graph.Node) error {
	for _, a := range []string{"dev", "sm"} {
		if _, ok := attr(e, a); !ok {
			return b.doc.Errorf(e, "<gpu> without %s", a)
		}
	}
	dev, err := b.attrInt(e, "dev", 0)
	if err != nil {
		return err
	}
	sm, err := b.attrInt(e, "sm", 0)
	if err != nil {
		return err
	}
	rank, err := b.attrInt(e, "rank", 0)
	if err != nil {
		return err
	}
	gdr, err := b.attrInt(e, "gdr", 0)
	if err != nil {
		return err
	}
	if rank < 0 || rank > math.MaxInt32 {
		return b.doc.Errorf(e, "<gpu rank=%d>: rank out of range", rank)
	}
	if sm <= 0 {
		return b.doc.Errorf(e, "<gpu sm=%d>: compute capability must be positive", sm)
	}
	if prev, dup := b.ranks[int(rank)]; dup {
		return b.doc.Errorf(e, "duplicate rank %d (also on line %d)", rank, b.doc.Line(prev))
	}
	b.ranks[int(rank)] = e
	n.GPU = graph.GPUInfo{Dev: int(dev), Rank: int(rank), SM: int(sm), GDR: gdr != 0}
	return nil
}

// addNIC adds the <net> children of a <nic> (ncclTopoAddNic/ncclTopoAddNet): a NET node per net
// with a dev, linked both ways to the NIC with LINK_NET of speed/8000 GB/s.
func (b *builder) addNIC(e *etree.Element, nic *graph.Node, sid int) error {
	for _, ne := range e.ChildElements() {
		if ne.Tag != "net" {
			continue
		}
		if _, ok := attr(ne, "dev"); !ok {
			b.warnf(ne, "<net> without dev is ignored (NCCL adds only nets with a plugin index)")
			continue
		}
		dev, err := b.attrInt(ne, "dev", 0)
		if err != nil {
			return err
		}
		if dev < 0 {
			return b.doc.Errorf(ne, "<net dev=%d>: negative", dev)
		}
		if prev := b.node(graph.NET, topoID(sid, dev)); prev != nil {
			// NCCL keys nets by name when merging a file with detection, so a file can list the
			// same dev twice; both become NET nodes with one id, which no rank can tell apart.
			b.warnf(ne, "<net dev=%d> repeats the dev of line %d; both are kept, with the same id", dev, b.doc.Line(b.elem[prev]))
		}
		net, err := b.newNode(graph.NET, topoID(sid, dev), ne)
		if err != nil {
			return err
		}
		info := graph.NetInfo{Dev: int(dev), Rail: -1, Plane: -1}
		info.Name, _ = attr(ne, "name")
		if info.GUID, err = b.attrHex(ne, "guid", uint64(dev)); err != nil {
			// A redacted guid ("0xREDACTED"): NCCL's strtoull reads 0.
			b.sys.Warnings = append(b.sys.Warnings, err.Error()+"; read as 0 as NCCL does")
			info.GUID = 0
		}
		mbps, err := b.attrFloat(ne, "speed", 0)
		if err != nil {
			return err
		}
		if mbps > maxNetSpeedMbps {
			// Not an NCCL rule (NCCL takes the plugin's speed as it is): past this the simulator's
			// links cannot carry it, and a speed past float32's range reads as infinite.
			return b.doc.Errorf(ne, "<net speed=%g>: want at most %g Mb/s (800 Tb/s)", mbps, float64(maxNetSpeedMbps))
		}
		if mbps <= 0 {
			if _, given := attr(ne, "speed"); given {
				b.warnf(ne, "<net speed=%g>: not positive; NCCL uses 10000 Mb/s", mbps)
			}
			mbps = 10000 // speed ≤ 0 → 10 Gb/s (NCCL 2.28 ncclTopoAddNet)
		}
		info.Speed = f32(mbps / 8000)
		if info.Latency, err = b.attrFloat(ne, "latency", 0); err != nil {
			return err
		}
		if info.Latency < 0 || info.Latency > maxNetLatencyUs {
			// Not an NCCL rule (NCCL takes the plugin's float as it is): the simulator adds it to
			// every message in integer picoseconds, which a latency of 10^13 µs overflows.
			return b.doc.Errorf(ne, "<net latency=%g>: want 0..%g µs", info.Latency, float64(maxNetLatencyUs))
		}
		ints := []struct {
			name string
			def  int64
			dst  *int
		}{{"port", 0, &info.Port}, {"maxconn", 64, &info.MaxConn}, {"rail", -1, &info.Rail}, {"plane", -1, &info.Plane}}
		for _, x := range ints {
			v, err := b.attrInt(ne, x.name, x.def)
			if err != nil {
				return err
			}
			*x.dst = int(v)
		}
		gdr, err := b.attrInt(ne, "gdr", 0)
		if err != nil {
			return err
		}
		coll, err := b.attrInt(ne, "coll", 0)
		if err != nil {
			return err
		}
		info.GDR, info.Coll = gdr != 0, coll != 0
		net.NET = info
		if err := b.connect(ne, nic, net, graph.LinkNET, info.Speed); err != nil {
			return err
		}
		if err := b.connect(ne, net, nic, graph.LinkNET, info.Speed); err != nil {
			return err
		}
	}
	return nil
}

// --- NVLink, C2C, pcilink ---------------------------------------------------------------------

// walkLinks runs NCCL's three passes over the tree in its order: all NVLinks
// (ncclTopoAddNvLinks), then C2C links (ncclTopoAddC2c), then pcilinks (ncclTopoAddPciLinks).
// The order matters: links of equal bandwidth keep their insertion order.
func (b *builder) walkLinks(root *etree.Element) error {
	for _, pass := range []string{"nvlink", "c2c", "pcilink"} {
		if err := b.linkPass(root, pass, "", 0); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) linkPass(e *etree.Element, pass, parentBus string, sid int) error {
	if e.Tag == pass {
		switch pass {
		case "nvlink":
			return b.addNVLink(e, parentBus, sid)
		case "c2c":
			return b.addC2C(e, parentBus, sid)
		case "pcilink":
			return b.addPCILink(e, parentBus, sid)
		}
	}
	if e.Tag == "cpu" {
		var err error
		if sid, err = b.systemID(e); err != nil {
			return err
		}
	}
	if v, ok := attr(e, "busid"); ok {
		parentBus = v
	}
	for _, c := range e.ChildElements() {
		if err := b.linkPass(c, pass, parentBus, sid); err != nil {
			return err
		}
	}
	return nil
}

// parentGPU finds the GPU node of the <gpu> holding e, or nil for an unranked GPU.
func (b *builder) parentGPU(e *etree.Element, parentBus string, sid int) (*graph.Node, error) {
	g := e.Parent()
	if g == nil || g.Tag != "gpu" {
		return nil, b.doc.Errorf(e, "<%s> outside a <gpu>", e.Tag)
	}
	if _, ok := attr(g, "rank"); !ok {
		return nil, nil
	}
	id, err := parseBusID(parentBus)
	if err != nil {
		return nil, b.doc.Errorf(e, "<%s>: parent %v", e.Tag, err)
	}
	gpu := b.node(graph.GPU, topoID(sid, id))
	if gpu == nil {
		return nil, b.doc.Errorf(e, "<%s>: no GPU at busid %s", e.Tag, parentBus)
	}
	return gpu, nil
}

// addNVLink follows NCCL 2.28 ncclTopoAddNvLinks: bw = count × per-link bw of the GPU's sm. A GPU
// target adds GPU→GPU only (each GPU's XML adds its own direction); a CPU target (POWER) links
// to the GPU's local CPU; anything else is the NVSwitch, all merged into one NVS node (id 0).
func (b *builder) addNVLink(e *etree.Element, parentBus string, sid int) error {
	gpu, err := b.parentGPU(e, parentBus, sid)
	if err != nil || gpu == nil {
		return err
	}
	if _, ok := attr(e, "count"); !ok {
		return b.doc.Errorf(e, "<nvlink> without count")
	}
	count, err := b.attrInt(e, "count", 0)
	if err != nil {
		return err
	}
	if count < 0 {
		return b.doc.Errorf(e, "<nvlink count=%d>: negative link count", count)
	}
	if count > 1024 {
		return b.doc.Errorf(e, "<nvlink count=%d>: implausible link count", count)
	}
	tclass, ok := attr(e, "tclass")
	if !ok {
		return b.doc.Errorf(e, "<nvlink> without tclass")
	}
	target, _ := attr(e, "target")
	if count == 0 {
		// NCCL 2.28.9 adds the link with bandwidth 0 (its log prints "NVL[0.0]"); no path can use
		// it (paths to the NVS stay DIS), so GPUs fall back to PCI. Keep it, and say so.
		b.warnf(e, "GPU rank %d: <nvlink target=%s count=\"0\">: a link of bandwidth 0 that no path can use", gpu.GPU.Rank, ncclxml.Quote(target))
	}
	var remote *graph.Node
	switch pciClassType(tclass) {
	case graph.GPU:
		id, err := parseBusID(target)
		if err != nil {
			return b.doc.Errorf(e, "<nvlink>: target %v", err)
		}
		remote = b.node(graph.GPU, topoID(sid, id))
		if remote == nil {
			// NCCL ignores an NVLink to a GPU it does not know (ncclTopoAddNvLinks).
			b.warnf(e, "GPU rank %d: <nvlink target=%s> names no GPU of the topology; ignored", gpu.GPU.Rank, ncclxml.Quote(target))
			return nil
		}
		if remote == gpu {
			b.warnf(e, "GPU rank %d: <nvlink> targets its own busid %s; ignored", gpu.GPU.Rank, ncclxml.Quote(target))
			return nil
		}
	case graph.CPU:
		remote = findLocalCPU(gpu)
		if remote == nil {
			b.warnf(e, "GPU rank %d: <nvlink> to a CPU but no CPU above the GPU; ignored", gpu.GPU.Rank)
			return nil
		}
	default:
		if len(b.sys.Nodes[graph.NVS]) == 0 {
			if remote, err = b.newNode(graph.NVS, 0, e); err != nil {
				return err
			}
		} else {
			remote = b.sys.Nodes[graph.NVS][0]
		}
	}
	bw := f32(float64(count) * b.sys.Version.NVLinkBw(gpu.GPU.SM))
	if err := b.connect(e, gpu, remote, graph.LinkNVL, bw); err != nil {
		return err
	}
	if remote.Type != graph.GPU {
		return b.connect(e, remote, gpu, graph.LinkNVL, bw)
	}
	return nil
}

// addC2C: bw = bw_attr × count / 1000 GB/s, both ways between the GPU and its local CPU
// (NCCL 2.28 ncclTopoAddC2c).
func (b *builder) addC2C(e *etree.Element, parentBus string, sid int) error {
	gpu, err := b.parentGPU(e, parentBus, sid)
	if err != nil || gpu == nil {
		return err
	}
	count, err := b.attrInt(e, "count", 0)
	if err != nil {
		return err
	}
	mbps, err := b.attrInt(e, "bw", 0)
	if err != nil {
		return err
	}
	if count < 0 || mbps < 0 {
		return b.doc.Errorf(e, "<c2c bw=%d count=%d>: negative", mbps, count)
	}
	if count == 0 || mbps == 0 {
		b.warnf(e, "GPU rank %d: <c2c> with zero bandwidth; no link added", gpu.GPU.Rank)
		return nil
	}
	cpu := findLocalCPU(gpu)
	if cpu == nil {
		b.warnf(e, "GPU rank %d: <c2c> but no CPU above the GPU; ignored", gpu.GPU.Rank)
		return nil
	}
	bw := f32(float64(mbps) * float64(count) / 1000)
	if err := b.connect(e, gpu, cpu, graph.LinkC2C, bw); err != nil {
		return err
	}
	return b.connect(e, cpu, gpu, graph.LinkC2C, bw)
}

// addPCILink: a LOC link of LOC_BW from the switch holding <pcilink> to its target switch, one
// direction per element (NCCL 2.28 ncclTopoAddPciLinks).
func (b *builder) addPCILink(e *etree.Element, parentBus string, sid int) error {
	id, err := parseBusID(parentBus)
	if err != nil {
		return b.doc.Errorf(e, "<pcilink>: parent %v", err)
	}
	sw := b.node(graph.PCI, topoID(sid, id))
	if sw == nil {
		return b.doc.Errorf(e, "<pcilink>: no PCI switch at busid %s", parentBus)
	}
	target, _ := attr(e, "target")
	tid, err := parseBusID(target)
	if err != nil {
		return b.doc.Errorf(e, "<pcilink>: target %v", err)
	}
	remote := b.node(graph.PCI, topoID(sid, tid))
	if remote == nil {
		b.warnf(e, "<pcilink target=%s> names no PCI switch; ignored", ncclxml.Quote(target))
		return nil
	}
	return b.connect(e, sw, remote, graph.LinkLOC, graph.LocBw)
}

// findLocalCPU walks up PCI links through PCI switches to the CPU (findLocalCpu).
func findLocalCPU(n *graph.Node) *graph.Node {
	seen := map[*graph.Node]bool{}
	var rec func(n, from *graph.Node) *graph.Node
	rec = func(n, from *graph.Node) *graph.Node {
		if n.Type == graph.CPU {
			return n
		}
		if seen[n] {
			return nil
		}
		seen[n] = true
		for _, l := range n.Links {
			if l.Type == graph.LinkPCI && l.Remote != from && (l.Remote.Type == graph.PCI || l.Remote.Type == graph.CPU) {
				if c := rec(l.Remote, n); c != nil {
					return c
				}
			}
		}
		return nil
	}
	return rec(n, nil)
}

// --- flattening, CPU links, sorting -------------------------------------------------------------

// bcmGen recognises Broadcom PEX switches that show up as two levels (NCCL 2.28
// ncclTopoFlattenBcmSwitches): Gen4 when pci.device masked is 0x1000c0101000a000, Gen5 when it
// is 0x1000c03010000000 | level<<12.
func bcmGen(dev uint64, level int) int {
	m := dev & 0xfffffffffffff000
	if m == 0x1000c0101000a000 {
		return 4
	}
	if m == 0x1000c03010000000|uint64(level)<<12 {
		return 5
	}
	return 0
}

// flattenBcmSwitches merges the sub-switches of a two-level Broadcom switch into the parent
// (ncclTopoFlattenBcmSwitches): the parent loses its links to them, takes over their links,
// their devices point back at the parent, and the parent's subsystem id gets 0xffff so it is
// not merged again.
func (b *builder) flattenBcmSwitches() {
	for s := 0; s < len(b.sys.Nodes[graph.PCI]); s++ {
		sw := b.sys.Nodes[graph.PCI][s]
		gen := bcmGen(sw.PCI.Device, 0)
		if gen == 0 {
			continue
		}
		var subs []*graph.Node
		kept := sw.Links[:0:0]
		for _, l := range sw.Links {
			if l.Remote.Type == graph.PCI && bcmGen(l.Remote.PCI.Device, 1) == gen {
				subs = append(subs, l.Remote)
				continue
			}
			kept = append(kept, l)
		}
		sw.Links = kept
		for _, sub := range subs {
			for _, l := range sub.Links {
				rem := l.Remote
				if rem == sw {
					continue
				}
				sw.Links = append(sw.Links, l)
				for _, rl := range rem.Links {
					if rl.Remote == sub {
						rl.Remote = sw
						break
					}
				}
			}
			b.sys.RemoveNode(sub)
		}
		sw.PCI.Device |= 0xffff
		// NCCL restarts its scan at index 0 after a merge (the node list changed).
		s = 0
	}
}

// connectCPUs links every pair of CPUs of one host with a SYS link whose bandwidth depends on
// the first CPU's arch/vendor/model (NCCL 2.28 ncclTopoConnectCpus, ncclTopoGetInterCpuBw).
func (b *builder) connectCPUs() {
	cpus := b.sys.Nodes[graph.CPU]
	for _, c1 := range cpus {
		for _, c2 := range cpus {
			if c1 == c2 || c1.SystemID() != c2.SystemID() {
				continue
			}
			_ = graph.Connect(c1, c2, graph.LinkSYS, interCPUBw(codesOf(c1)))
		}
	}
}

func interCPUBw(c cpuCodes) float64 {
	bw := graph.LocBw // unrecognised arch or x86 vendor: LOC_BW (an NCCL 2.28 quirk)
	switch c.arch {
	case graph.CPUArchPower:
		return p9Bw
	case graph.CPUArchARM:
		return armBw
	case graph.CPUArchX86:
		switch c.vendor {
		case graph.CPUVendorIntel:
			switch c.model {
			case modelERP:
				bw = erpQpiBw
			case modelSRP:
				bw = srpQpiBw
			case modelSKL:
				bw = sklQpiBw
			default:
				bw = bdwQpiBw
			}
		case graph.CPUVendorAMD:
			bw = amdBw
		case graph.CPUVendorZhaoxin:
			if c.model == modelYongfeng {
				bw = yongfengZpBw
			} else {
				bw = zpiBw
			}
		}
	}
	return bw
}

// sortSystem moves, for every node reached down the PCI tree from each CPU, the link to its
// parent to the end of its links (NCCL 2.28 ncclTopoSortSystem).
func (b *builder) sortSystem() error {
	seen := map[*graph.Node]bool{}
	var rec func(n, up *graph.Node) error
	rec = func(n, up *graph.Node) error {
		if seen[n] {
			return fmt.Errorf("%s: PCI tree has a cycle at %s", b.doc.Name, n.Label())
		}
		seen[n] = true
		if up != nil {
			for i, l := range n.Links {
				if l.Remote == up {
					copy(n.Links[i:], n.Links[i+1:])
					n.Links[len(n.Links)-1] = l
					break
				}
			}
		}
		for _, l := range n.Links {
			if l.Type == graph.LinkPCI && l.Remote != up {
				if err := rec(l.Remote, n); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, c := range b.sys.Nodes[graph.CPU] {
		if err := rec(c, nil); err != nil {
			return err
		}
	}
	return nil
}
