package discover

import (
	"fmt"
	"math"
	"path"
	"runtime"
	"strconv"
	"strings"

	"github.com/beevik/etree"

	"github.com/simccl/simccl/topo/ncclxml"
)

// Options says where and how to look.
type Options struct {
	// Root is the directory below which /sys and /proc are read; "" means "/".
	Root string
	// NVML answers for the GPUs (required; see OpenNVML and FakeNVML).
	NVML NVML
	// GOARCH names the CPU architecture written in <cpu arch> ("amd64" → x86_64, "arm64" → arm64,
	// "ppc64"/"ppc64le" → ppc64, as NCCL's compile-time test); "" means runtime.GOARCH.
	GOARCH string
	// Getenv reads the NCCL variables discovery honours: NCCL_HOSTID, NCCL_IB_HCA,
	// NCCL_IB_DISABLE, NCCL_IB_MERGE_VFS, NCCL_NET, NCCL_SOCKET_IFNAME. nil reads none.
	Getenv func(string) string
	// HasAddress tells whether a network interface has an IP address (NCCL's socket transport
	// only uses those). nil: on the live root "/", ask the operating system; below another root,
	// take an interface whose operstate is "up" or "unknown" as addressed.
	HasAddress func(ifname string) bool
	// GPULinkFromNVML fills a GPU's link_speed/link_width from NVML's current PCIe generation and
	// width (fallback "16.0 GT/s", 16), as NCCL 2.30 does; false reads sysfs like any other PCI
	// device, as NCCL 2.28 does (ncclTopoGetXmlFromSys).
	GPULinkFromNVML bool
}

// Result is a discovered topology.
type Result struct {
	Doc *ncclxml.Document
	// Warnings lists what could not be read the way NCCL reads it and was left out or approximated.
	Warnings []string
}

// Discover builds the NCCL 2.28 topology XML of the machine below o.Root with every NVML GPU
// (rank = NVML index) and the NICs NCCL's first usable network would report:
//
//   - each GPU: <pci busid> from NVML's bus id, its attributes and parent chain from sysfs
//     (ncclTopoGetXmlFromSys: class, vendor, device, subsystem ids, link_speed = the lower of the
//     device's and its upstream port's max_link_speed, link_width = the smaller max_link_width,
//     the parent being the grandparent directory when both parent and grandparent are PCI
//     addresses, else a <cpu> for the device's numa_node); <gpu dev sm rank gdr>; one <nvlink
//     target count tclass> per remote bus id over the active P2P-capable links; <c2c bw count>.
//   - each <cpu>: host_hash (NCCL 2.28's hash of hostname+boot_id, or of NCCL_HOSTID),
//     numaid, affinity (/sys/devices/system/node/node<N>/cpumap), arch, and for x86_64 the CPUID
//     vendor, family (NCCL's family+extFamily<<4) and model, taken from /proc/cpuinfo.
//   - NICs: the active ports of /sys/class/infiniband (InfiniBand or RoCE) if any, else the
//     addressed interfaces of /sys/class/net NCCL's socket transport would pick.
func Discover(o Options) (*Result, error) {
	if o.NVML == nil {
		return nil, fmt.Errorf("%w: no NVML library given", ErrNoNVML)
	}
	b := newBuilder(o)
	n, err := o.NVML.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("discover: NVML device count: %v", err)
	}
	var gpus []gpuEntry
	for i := 0; i < n; i++ {
		g, err := o.NVML.Device(i)
		if err != nil {
			return nil, fmt.Errorf("discover: NVML device %d: %v", i, err)
		}
		e, err := b.addGPU(i, g)
		if err != nil {
			return nil, err
		}
		gpus = append(gpus, e)
	}
	b.addNets()
	// <gpu gdr>: NCCL 2.28 (init.cc ncclGpuGdrSupport, CUDA >= 11.3) writes the CUDA attribute
	// cudaDevAttrGPUDirectRDMASupported, whatever the network.
	for _, e := range gpus {
		ok, err := e.dev.GDRSupported()
		if err != nil {
			b.warnf("GPU %d: could not ask CUDA for GPUDirect RDMA support (%v): wrote gdr=\"0\"", e.index, err)
		}
		e.el.CreateAttr("gdr", boolStr(ok && err == nil))
	}
	b.doc.Indent(2)
	return &Result{Doc: &ncclxml.Document{Name: "discovered topology", Doc: b.doc}, Warnings: b.warnings}, nil
}

type gpuEntry struct {
	index int
	dev   GPU
	el    *etree.Element
}

type builder struct {
	o        Options
	fs       sysfs
	doc      *etree.Document
	sys      *etree.Element
	pci      map[string]*etree.Element // every <pci> by busid, attached or not (NCCL's xmlFindTagKv)
	nets     map[string]*etree.Element // every <net> by name
	nvmlLink map[string][2]string      // busid → NVML link_speed, link_width (GPULinkFromNVML)
	arch     string
	cpu      cpuInfo
	hostHash uint64
	warnings []string
}

func newBuilder(o Options) *builder {
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	b := &builder{
		o:        o,
		fs:       newSysfs(o.Root),
		doc:      etree.NewDocument(),
		pci:      map[string]*etree.Element{},
		nets:     map[string]*etree.Element{},
		nvmlLink: map[string][2]string{},
	}
	b.sys = b.doc.CreateElement("system")
	b.sys.CreateAttr("version", "1")
	goarch := o.GOARCH
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	b.arch = ncclArch(goarch)
	b.cpu = readCPUInfo(b.fs)
	b.hostHash = hostHash(b.fs, o.Getenv("NCCL_HOSTID"))
	return b
}

func (b *builder) warnf(format string, args ...any) {
	b.warnings = append(b.warnings, fmt.Sprintf(format, args...))
}

func boolStr(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

// setIfUnset is NCCL's xmlSetAttrIfUnset / xmlInitAttr*: attributes already there are kept.
func setIfUnset(e *etree.Element, key, val string) {
	if e.SelectAttr(key) == nil {
		e.CreateAttr(key, val)
	}
}

// setNonEmpty is ncclTopoSetAttrFromSys: set (or overwrite) only when the file gave something.
func setNonEmpty(e *etree.Element, key, val string) {
	if val != "" {
		e.CreateAttr(key, val)
	}
}

// pciNode is ncclTopoGetPciNode: the <pci> with this busid, or a new detached one.
func (b *builder) pciNode(busID string) *etree.Element {
	if e, ok := b.pci[busID]; ok {
		return e
	}
	e := etree.NewElement("pci")
	e.CreateAttr("busid", busID)
	b.pci[busID] = e
	return e
}

// fillFromSys is ncclTopoGetXmlFromSys (NCCL 2.28 topo.cc): fill a <pci> from
// sysfs, attach it under its parent (kept in busid order, NCCL issue #820) and go on upwards.
func (b *builder) fillFromSys(node *etree.Element) {
	busID := node.SelectAttrValue("busid", "")
	p, ok := b.fs.pciPath(busID)
	if ok {
		setNonEmpty(node, "class", b.fs.str(p, "class"))
	}
	for _, k := range []string{"vendor", "device", "subsystem_vendor", "subsystem_device"} {
		if node.SelectAttr(k) == nil && ok {
			setNonEmpty(node, k, b.fs.str(p, k))
		}
	}
	nv, fromNVML := b.nvmlLink[busID]
	if node.SelectAttr("link_speed") == nil {
		switch {
		case fromNVML:
			node.CreateAttr("link_speed", nv[0])
		case ok:
			dev := b.fs.str(p, "max_link_speed")
			port := b.fs.str(p, "../max_link_speed")
			if gts(port) < gts(dev) {
				node.CreateAttr("link_speed", port)
			} else {
				node.CreateAttr("link_speed", dev)
			}
		default:
			node.CreateAttr("link_speed", "")
		}
	}
	if node.SelectAttr("link_width") == nil {
		switch {
		case fromNVML:
			node.CreateAttr("link_width", nv[1])
		case ok:
			// A missing file reads as 0, so a device on a root bus (no upstream port) gets 0,
			// as NCCL writes it.
			dev := strtol(b.fs.str(p, "max_link_width"))
			port := strtol(b.fs.str(p, "../max_link_width"))
			node.CreateAttr("link_width", strconv.FormatInt(min(dev, port), 10))
		default:
			node.CreateAttr("link_width", "")
		}
	}
	if node.SelectAttrValue("vendor", "") == "0x1000" {
		b.addBcmLinks(node, busID)
	}
	parent := node.Parent()
	if parent == nil {
		if ok {
			parent = b.sysParent(p)
		} else {
			parent = b.cpuNode("-1")
		}
		insertByBusID(parent, node)
	}
	switch parent.Tag {
	case "pci":
		b.fillFromSys(parent)
	case "cpu":
		b.fillCPU(parent)
	}
}

// sysParent walks one PCI level up from a resolved device path (NCCL 2.28): the parent is the
// grandparent directory when both the parent and the grandparent are PCI addresses (the parent
// being the switch's downstream port, which NCCL skips), otherwise the <cpu> of the device's
// numa_node (the root complex).
func (b *builder) sysParent(p string) *etree.Element {
	numa := b.fs.str(p, "numa_node")
	up := path.Dir(p)
	if isBDF(path.Base(up)) {
		up2 := path.Dir(up)
		if isBDF(path.Base(up2)) {
			return b.pciNode(path.Base(up2))
		}
	}
	return b.cpuNode(numa)
}

// insertByBusID adds child under parent before the first sibling whose busid sorts after it.
func insertByBusID(parent, child *etree.Element) {
	id := child.SelectAttrValue("busid", "")
	for i, t := range parent.Child {
		s, ok := t.(*etree.Element)
		if !ok {
			continue
		}
		if other := s.SelectAttr("busid"); other != nil && id < other.Value {
			parent.InsertChildAt(i, child)
			return
		}
	}
	parent.AddChild(child)
}

// addBcmLinks adds <pcilink target> for each peer switch that a Broadcom PEX switch lists under
// /sys/kernel/pci_switch_link/virtual_switch_links/<busid> (NCCL 2.28 getBcmLinks).
func (b *builder) addBcmLinks(node *etree.Element, busID string) {
	dir := "/sys/kernel/pci_switch_link/virtual_switch_links/" + strings.ToLower(busID)
	for _, name := range b.fs.readDir(dir) {
		if len(name) != 12 {
			continue
		}
		if _, ok := b.fs.pciPath(name); !ok {
			continue
		}
		found := false
		for _, l := range node.SelectElements("pcilink") {
			if l.SelectAttrValue("target", "") == name {
				found = true
			}
		}
		if !found {
			node.CreateElement("pcilink").CreateAttr("target", name)
		}
	}
}

// cpuNode finds or creates the <cpu numaid> under <system>; a new one gets host_hash and numaid.
func (b *builder) cpuNode(numa string) *etree.Element {
	for _, c := range b.sys.SelectElements("cpu") {
		if c.SelectAttrValue("numaid", "") == numa {
			return c
		}
	}
	c := b.sys.CreateElement("cpu")
	c.CreateAttr("host_hash", fmt.Sprintf("0x%x", b.hostHash))
	c.CreateAttr("numaid", numa)
	if numa == "-1" {
		b.fillCPU(c)
	}
	return c
}

// gts is sscanf("%f GT/s"): the leading number of a link speed, +Inf when there is none.
func gts(s string) float64 {
	f := strings.Fields(s)
	if len(f) == 0 {
		return math.Inf(1)
	}
	v, err := strconv.ParseFloat(f[0], 32)
	if err != nil {
		return math.Inf(1)
	}
	return v
}

// strtol is C's strtol(s, NULL, 0): the leading integer (decimal, 0x hex or 0 octal), 0 if none.
func strtol(s string) int64 {
	s = strings.TrimLeft(s, " \t\n")
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	base := 10
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && isHex(s[2]):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base = 8
	}
	var v int64
	for _, c := range []byte(s) {
		var d int64
		switch {
		case c >= '0' && c <= '9':
			d = int64(c - '0')
		case c >= 'a' && c <= 'f':
			d = int64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = int64(c-'A') + 10
		default:
			d = 99
		}
		if d >= int64(base) {
			break
		}
		if v > (math.MaxInt64-d)/int64(base) {
			v = math.MaxInt64
			break
		}
		v = v*int64(base) + d
	}
	if neg {
		return -v
	}
	return v
}

// addGPU is ncclTopoFillGpu + ncclTopoGetXmlFromGpu (NCCL 2.28) for NVML device i, plus the
// rank NCCL's ncclTopoGetSystem adds (rank = i for a dump of the whole machine).
func (b *builder) addGPU(i int, g GPU) (gpuEntry, error) {
	raw, err := g.BusID()
	if err != nil {
		return gpuEntry{}, fmt.Errorf("discover: NVML device %d: PCI info: %v", i, err)
	}
	addr, err := parseBusID(raw)
	if err != nil {
		return gpuEntry{}, fmt.Errorf("discover: NVML device %d: %v", i, err)
	}
	busID := addr.String()
	major, minor, err := g.ComputeCapability()
	if err != nil {
		return gpuEntry{}, fmt.Errorf("discover: NVML device %d (%s): compute capability: %v", i, busID, err)
	}
	sm := major*10 + minor
	node := b.pciNode(busID)
	setIfUnset(node, "class", "0x03")
	if b.o.GPULinkFromNVML {
		// NCCL 2.30: current generation → "<gen speed> PCIe"; on failure "16.0 GT/s" (which
		// matches no speed prefix of ncclTopoAddPci) and width 16.
		speeds := []string{"", "2.5 GT/s PCIe", "5.0 GT/s PCIe", "8.0 GT/s PCIe", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "64.0 GT/s PCIe"}
		gen, width, err := g.PCIeLink()
		speed, w := "16.0 GT/s", "16"
		if err == nil && gen > 0 && gen < len(speeds) {
			speed = speeds[gen]
		}
		if err == nil && width > 0 {
			w = strconv.Itoa(width)
		}
		b.nvmlLink[busID] = [2]string{speed, w}
	}
	b.fillFromSys(node)

	gpu := node.SelectElement("gpu")
	if gpu == nil {
		gpu = node.CreateElement("gpu")
	}
	setIfUnset(gpu, "dev", strconv.Itoa(i))
	setIfUnset(gpu, "sm", strconv.Itoa(sm))
	if gpu.SelectElement("nvlink") == nil {
		for l := 0; l < maxNvLinks(sm); l++ {
			if p2p, err := g.NvLinkP2P(l); err != nil || !p2p {
				continue
			}
			// NCCL asks the NVML field NVML_FI_DEV_NVLINK_GET_STATE from sm90 on (CUDA >= 11.8),
			// nvmlDeviceGetNvLinkState before.
			if up, err := g.NvLinkActive(l, sm >= 90); err != nil || !up {
				continue
			}
			remote, err := g.NvLinkRemoteBusID(l)
			if err != nil {
				continue
			}
			target := nvlinkTarget(remote)
			var nvl *etree.Element
			for _, e := range gpu.SelectElements("nvlink") {
				if e.SelectAttrValue("target", "") == target {
					nvl = e
				}
			}
			if nvl == nil {
				nvl = gpu.CreateElement("nvlink")
				nvl.CreateAttr("target", target)
				nvl.CreateAttr("count", "1")
			} else {
				c, _ := strconv.Atoi(nvl.SelectAttrValue("count", "0"))
				nvl.CreateAttr("count", strconv.Itoa(c+1))
			}
		}
	}
	if gpu.SelectElement("c2c") == nil && sm >= 90 {
		if nlinks, err := g.C2CLinkCount(); err == nil {
			bw, count := 0, 0
			for l := 0; l < nlinks; l++ {
				if up, mbw, err := g.C2CLink(l); err == nil && up {
					bw = mbw // NCCL keeps the last active link's bandwidth
					count++
				}
			}
			if count > 0 {
				c := gpu.CreateElement("c2c")
				c.CreateAttr("bw", strconv.Itoa(bw))
				c.CreateAttr("count", strconv.Itoa(count))
			}
		}
	}
	for _, nvl := range gpu.SelectElements("nvlink") {
		if nvl.SelectAttr("tclass") != nil {
			continue
		}
		target := nvl.SelectAttrValue("target", "")
		p, ok := b.fs.pciPath(target)
		if !ok || target == nvlinkSentinel {
			// The remote end is not visible here (a VM): NCCL assumes an NVSwitch.
			nvl.CreateAttr("tclass", "0x068000")
		} else {
			setNonEmpty(nvl, "tclass", b.fs.str(p, "class"))
		}
	}
	gpu.CreateAttr("rank", strconv.Itoa(i))
	return gpuEntry{index: i, dev: g, el: gpu}, nil
}
