package partial

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/beevik/etree"

	"github.com/simccl/simccl/topo/ncclxml"
)

// NIC is what NCCL's network plugin reports for a NIC port, and what CompleteNICs writes into the
// NIC devices a file lists without <nic><net>: the port speed and whether GPUDirect RDMA is there.
// Everything else the plugin reports (name, port, GUID, connections) does not change NCCL's
// topology beyond naming the port, and CompleteNICs writes what the IB plugin writes for one
// ConnectX port.
type NIC struct {
	// Speed is the port's speed in Mb/s, the unit of <net speed> (NCCL 2.28 ncclNetProperties_t
	// speed: the IB plugin's active speed × width, 400000 for an NDR port).
	Speed float64
	// GDR says GPUDirect RDMA works (the IB plugin's gdrSupport: nvidia-peermem or DMA-BUF),
	// <net gdr="1">; without it NCCL stages network data through host memory.
	GDR bool
}

// MaxNICSpeed bounds NIC.Speed (Mb/s): 800 Tb/s, simnet's bound on a link.
const MaxNICSpeed = 800e6

// NICResult says what CompleteNICs did.
type NICResult struct {
	// Added lists the completed devices in the order of their dev: bus id and the <net>'s name.
	Added []AddedNIC
}

// AddedNIC is one NIC device CompleteNICs gave a <net>.
type AddedNIC struct {
	BusID, Name string
	Dev, Line   int
}

// maxConnIB is the <net maxconn> CompleteNICs writes: what NCCL 2.28.9 wrote for the ConnectX-7
// ports of a DGX H100 (examples/topos/dgx-h100.xml; the IB plugin reports the device's max_qp).
const maxConnIB = 131072

// CompleteNICs returns a copy of doc with a <nic><net …/></nic> in every NIC device the file
// lists without one (a leaf <pci> of a network class, 0x02…), as NCCL's IB plugin would report
// one port per device (NCCL 2.28 ncclTopoFillNet, with xmlSetAttrIfUnset: nothing the file gives
// is changed): name mlx5_K and dev K — the plugin's index, after the devs the file's own nets
// use, the devices of a host in PCI bus-id order, as ibv_get_device_list lists mlx5 devices —,
// port 1, speed and gdr from nic, latency 0, a GUID of its own (from the bus id) and maxconn
// 131072. A file without such a device is an ErrIncomplete saying so: its NICs are its own.
func CompleteNICs(doc *ncclxml.Document, nic NIC) (*ncclxml.Document, *NICResult, error) {
	if !(nic.Speed > 0) || nic.Speed > MaxNICSpeed || math.IsInf(nic.Speed, 0) {
		return nil, nil, fmt.Errorf("partial: NIC speed %g Mb/s: want more than 0 and at most %g", nic.Speed, float64(MaxNICSpeed))
	}
	cp, err := systemCopy(doc)
	if err != nil {
		return nil, nil, err
	}
	stubs := Inspect(cp).NICStubs
	if len(stubs) == 0 {
		return nil, nil, fmt.Errorf("%w: %s: no NIC device without <nic><net> (a <pci> of class 0x02… with nothing in it) for a NIC speed to complete: the file's NICs are its own",
			ErrIncomplete, cp.Name)
	}
	// The devs the file's own nets take, per host: the plugin numbers the others after them.
	next := map[string]int64{}
	for _, n := range cp.Root().FindElements("//net") {
		d, ok, err := cp.AttrInt(n, "dev")
		if err != nil {
			return nil, nil, err
		}
		if h := hostOf(n); ok && d+1 > next[h] {
			next[h] = d + 1
		}
	}
	type stub struct {
		pci    *etree.Element
		host   string
		order  int // the host's first appearance
		bus    int64
		busStr string
	}
	hosts := map[string]int{}
	var list []stub
	for _, p := range stubs {
		busStr, bus, order, err := placeOf(cp, p, hosts)
		if err != nil {
			return nil, nil, err
		}
		list = append(list, stub{pci: p, host: hostOf(p), order: order, bus: bus, busStr: busStr})
	}
	sort.SliceStable(list, func(i, j int) bool {
		if list[i].order != list[j].order {
			return list[i].order < list[j].order
		}
		return list[i].bus < list[j].bus
	})
	res := &NICResult{}
	speed := strconv.FormatFloat(nic.Speed, 'f', -1, 64)
	for _, s := range list {
		dev := next[s.host]
		next[s.host]++
		name := fmt.Sprintf("mlx5_%d", dev)
		n := s.pci.CreateElement("nic").CreateElement("net")
		n.CreateAttr("name", name)
		n.CreateAttr("dev", strconv.FormatInt(dev, 10))
		n.CreateAttr("latency", "0")
		n.CreateAttr("speed", speed)
		n.CreateAttr("port", "1")
		// A GUID of its own: a ConnectX port's node GUID is unique; NCCL groups ports of one
		// device by it (dual-port NICs), and these are one port each.
		n.CreateAttr("guid", fmt.Sprintf("0x%x", uint64(0x5f1cc1)<<40|uint64(s.bus)&(1<<40-1)))
		n.CreateAttr("maxconn", strconv.Itoa(maxConnIB))
		n.CreateAttr("gdr", boolAttr(nic.GDR))
		res.Added = append(res.Added, AddedNIC{BusID: s.busStr, Name: name, Dev: int(dev), Line: cp.Line(s.pci)})
	}
	cp.Doc.Indent(2)
	return cp, res, nil
}

// DescribeNICs says in words what CompleteNICs added ("8 NICs at 400 Gb/s, GPUDirect RDMA").
func (r *NICResult) DescribeNICs(nic NIC) string {
	if r == nil || len(r.Added) == 0 {
		return "no NIC"
	}
	what := "NICs"
	if len(r.Added) == 1 {
		what = "NIC"
	}
	gdr := "GPUDirect RDMA"
	if !nic.GDR {
		gdr = "no GPUDirect RDMA"
	}
	return fmt.Sprintf("%d %s at %s Gb/s, %s", len(r.Added), what, strconv.FormatFloat(nic.Speed/1000, 'f', -1, 64), gdr)
}
