package discover

import (
	"fmt"
	"math/bits"
	"net"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/beevik/etree"
)

// netDev is one device as NCCL's network plugin reports it (ncclNetProperties_t).
type netDev struct {
	name    string
	pciPath string // root-relative sysfs path, "" when none
	speed   int    // Mb/s
	port    int
	guid    uint64
	maxconn int // 0 = unknown: not written
	gdr     bool
}

// addNets imports the NICs the way ncclTopoProcessNet does for the first network that NCCL 2.28
// initialises: the IB verbs transport when it finds an active port, else sockets.
func (b *builder) addNets() {
	var devs []netDev
	ib := b.o.Getenv("NCCL_IB_DISABLE") != "1" && !strings.EqualFold(b.o.Getenv("NCCL_NET"), "Socket")
	if ib {
		devs = b.ibDevices()
	}
	if len(devs) == 0 {
		devs = b.socketDevices()
	}
	for i, d := range devs {
		b.fillNet(i, d)
	}
}

// fillNet is ncclTopoFillNet plus the attributes ncclTopoPopulateNics sets (NCCL 2.28
// topo.cc): a <net> is found by name or created in the <nic> of its PCI device (whose chain is
// filled from sysfs) or, for a device that is not on PCI, of the first <cpu>.
func (b *builder) fillNet(dev int, d netDev) {
	n := b.nets[d.name]
	if n == nil {
		var parent *etree.Element
		p := d.pciPath
		if p != "" {
			// ncclTopoGetSubsystem: a device whose subsystem is not "pci" (virtio, usb…) hangs
			// off the first CPU.
			if sub, ok := b.fs.realpath(p + "/subsystem"); !ok || path.Base(sub) != "pci" {
				p = ""
			}
		}
		if p != "" {
			parent = b.pciNode(path.Base(p))
			setIfUnset(parent, "class", "0x02")
			b.fillFromSys(parent)
		} else {
			parent = b.sys.SelectElement("cpu")
			if parent == nil {
				parent = b.cpuNode("-1")
			}
		}
		nic := parent.SelectElement("nic")
		if nic == nil {
			nic = parent.CreateElement("nic")
		}
		n = nic.CreateElement("net")
		n.CreateAttr("name", d.name)
		b.nets[d.name] = n
	}
	n.CreateAttr("dev", strconv.Itoa(dev))
	setIfUnset(n, "latency", "0")
	setIfUnset(n, "speed", strconv.Itoa(d.speed))
	setIfUnset(n, "port", strconv.Itoa(d.port))
	setIfUnset(n, "guid", fmt.Sprintf("0x%x", d.guid))
	if d.maxconn > 0 {
		setIfUnset(n, "maxconn", strconv.Itoa(d.maxconn))
	}
	setIfUnset(n, "gdr", boolStr(d.gdr))
}

// ibDevices lists the active ports of /sys/class/infiniband as NCCL 2.28's IB transport
// (net_ib.cc ncclIbInit / ncclIbGetProperties) reports them.
func (b *builder) ibDevices() []netDev {
	names := b.fs.readDir("/sys/class/infiniband")
	sort.Slice(names, func(i, j int) bool { return naturalLess(names[i], names[j]) })
	filter := parseIfFilter(b.o.Getenv("NCCL_IB_HCA"))
	mergeVFs := b.o.Getenv("NCCL_IB_MERGE_VFS") != "0"
	gdr := b.peerMem()
	var devs []netDev
	warned := false
	for _, name := range names {
		dir := "/sys/class/infiniband/" + name
		ports := b.fs.readDir(dir + "/ports")
		sort.Slice(ports, func(i, j int) bool { return strtol(ports[i]) < strtol(ports[j]) })
		for _, ps := range ports {
			port := int(strtol(ps))
			pdir := dir + "/ports/" + ps
			if !strings.Contains(b.fs.str(pdir, "state"), "ACTIVE") {
				continue
			}
			ll := b.fs.str(pdir, "link_layer")
			if ll != "InfiniBand" && ll != "Ethernet" {
				continue
			}
			if !filter.match(name, port) {
				continue
			}
			d := netDev{name: name, port: port, gdr: gdr}
			// ncclIbGetPciPath: the device's path with the function digit set to 0 (ports of one
			// NIC merged) and, with NCCL_IB_MERGE_VFS (default 1), the device digits too; the
			// port number NCCL reports adds the devices already seen on that path.
			if p, ok := b.fs.realpath(dir + "/device"); ok && len(p) >= 4 {
				q := []byte(p)
				q[len(q)-1] = '0'
				if mergeVFs {
					q[len(q)-3], q[len(q)-4] = '0', '0'
				}
				d.pciPath = string(q)
				for _, e := range devs {
					if e.pciPath == d.pciPath && e.name != name {
						d.port++
					}
				}
			}
			d.speed = rateMbps(b.fs.str(pdir, "rate"))
			d.guid = ibGUID(b.fs.str(dir, "sys_image_guid"))
			if !warned {
				b.warnf("InfiniBand: maxconn (the verbs device's max_qp) is not in sysfs: left out; gdr=%q from nvidia-peermem alone (DMA-BUF support is not probed)", boolStr(gdr))
				warned = true
			}
			devs = append(devs, d)
		}
	}
	return devs
}

// peerMem is NCCL's ncclIbGdrSupport (2.28): the nvidia-peermem (or nv_peer_mem) module is loaded.
func (b *builder) peerMem() bool {
	for _, p := range []string{
		"/sys/kernel/mm/memory_peers/nv_mem/version",
		"/sys/kernel/mm/memory_peers/nv_mem_nc/version",
		"/sys/module/nvidia_peermem/version",
	} {
		if b.fs.exists(p) {
			return true
		}
	}
	return false
}

// rateMbps reads an IB port's rate ("400 Gb/sec (4X NDR)") in Mb/s, the unit of NCCL's speed
// (ncclIbSpeed(active_speed) × ncclIbWidth(active_width), which the kernel's rate string shows).
func rateMbps(s string) int {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || v < 0 || v > 1e7 {
		return 0
	}
	return int(v*1000 + 0.5)
}

// ibGUID turns sysfs's "946d:ae03:00d6:c9c8" into what NCCL prints: the verbs GUID is big-endian
// (__be64) and NCCL prints it as a host (little-endian) integer, so the bytes come out reversed.
func ibGUID(s string) uint64 {
	h := strings.ReplaceAll(s, ":", "")
	v, err := strconv.ParseUint(h, 16, 64)
	if err != nil {
		return 0
	}
	return bits.ReverseBytes64(v)
}

// socketDevices lists the interfaces NCCL 2.28's socket transport picks (socket.cc
// ncclFindInterfaces): NCCL_SOCKET_IFNAME if set, else the first non-empty of: names starting
// with "ib"; anything but docker*, lo*, virbr*; docker*; lo*. Only interfaces with an address
// count; at most 16 (MAX_IFS).
func (b *builder) socketDevices() []netDev {
	type iface struct {
		name  string
		index int64
	}
	var all []iface
	for _, name := range b.fs.readDir("/sys/class/net") {
		if !b.hasAddress(name) {
			continue
		}
		all = append(all, iface{name, strtol(b.fs.str("/sys/class/net/"+name, "ifindex"))})
	}
	// getifaddrs lists interfaces by index.
	sort.Slice(all, func(i, j int) bool {
		if all[i].index != all[j].index {
			return all[i].index < all[j].index
		}
		return all[i].name < all[j].name
	})
	pick := func(f ifFilter) []string {
		var out []string
		for _, i := range all {
			if f.match(i.name, -1) && len(out) < 16 {
				out = append(out, i.name)
			}
		}
		return out
	}
	var names []string
	if env := b.o.Getenv("NCCL_SOCKET_IFNAME"); env != "" {
		names = pick(parseIfFilter(env))
	} else {
		for _, spec := range []string{"ib", "^docker,lo,virbr", "docker", "lo"} {
			if names = pick(parseIfFilter(spec)); len(names) > 0 {
				break
			}
		}
	}
	var devs []netDev
	for i, name := range names {
		dir := "/sys/class/net/" + name
		d := netDev{name: name, guid: uint64(i), maxconn: 65536}
		if p, ok := b.fs.realpath(dir + "/device"); ok {
			d.pciPath = p
		}
		// ncclNetSocketGetSpeed: sysfs speed, 10000 when unreadable or not positive.
		d.speed = int(strtol(b.fs.str(dir, "speed")))
		if d.speed <= 0 {
			d.speed = 10000
		}
		devs = append(devs, d)
	}
	return devs
}

func (b *builder) hasAddress(name string) bool {
	if b.o.HasAddress != nil {
		return b.o.HasAddress(name)
	}
	if b.fs.root == "/" {
		i, err := net.InterfaceByName(name)
		if err != nil {
			return false
		}
		addrs, err := i.Addrs()
		return err == nil && len(addrs) > 0
	}
	st := b.fs.str("/sys/class/net/"+name, "operstate")
	return st == "up" || st == "unknown"
}

// ifFilter is NCCL's interface/HCA list syntax (NCCL_IB_HCA, NCCL_SOCKET_IFNAME): comma
// separated names, matched as prefixes, or exactly with a leading "="; a leading "^" inverts the
// list; "name:port" restricts to one port.
type ifFilter struct {
	not, exact bool
	items      []ifItem
}

type ifItem struct {
	name string
	port int // -1 = any
}

func parseIfFilter(s string) ifFilter {
	var f ifFilter
	if strings.HasPrefix(s, "^") {
		f.not, s = true, s[1:]
	}
	if strings.HasPrefix(s, "=") {
		f.exact, s = true, s[1:]
	}
	for _, it := range strings.Split(s, ",") {
		if it == "" {
			continue
		}
		item := ifItem{name: it, port: -1}
		if n, p, ok := strings.Cut(it, ":"); ok {
			if v, err := strconv.Atoi(p); err == nil {
				item = ifItem{name: n, port: v}
			}
		}
		f.items = append(f.items, item)
	}
	return f
}

func (f ifFilter) match(name string, port int) bool {
	if len(f.items) == 0 {
		return true
	}
	m := false
	for _, it := range f.items {
		ok := name == it.name
		if !f.exact {
			ok = strings.HasPrefix(name, it.name)
		}
		if ok && (it.port == -1 || port == -1 || it.port == port) {
			m = true
			break
		}
	}
	return m != f.not
}

// naturalLess orders names with embedded numbers numerically (mlx5_2 before mlx5_10).
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitsPrefix(a), digitsPrefix(b)
		if da != "" && db != "" {
			na, _ := strconv.ParseUint(da, 10, 64)
			nb, _ := strconv.ParseUint(db, 10, 64)
			if na != nb {
				return na < nb
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitsPrefix(s string) string {
	i := 0
	for i < len(s) && i < 18 && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}
