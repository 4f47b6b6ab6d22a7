package search

import "testing"

// builder makes small topologies by hand for tests that must not depend on package graph: links
// in both directions and paths from a BFS that follows NCCL 2.28's rule (paths.cc
// ncclTopoSetPaths, the ≤2.30.4 update rule; no P2P/PXN/GDR post-processing).
type builder struct {
	t *Topology
}

func newBuilder() *builder { return &builder{t: NewTopology()} }

func (b *builder) link(tb testing.TB, x, y Handle, typ int, bw float64) {
	tb.Helper()
	if err := b.t.Connect(x, y, typ, bw); err != nil {
		tb.Fatal(err)
	}
	if err := b.t.Connect(y, x, typ, bw); err != nil {
		tb.Fatal(err)
	}
}

// bfs fills every node's paths towards GPUs, NVSwitches, CPUs and NETs.
func (b *builder) bfs() *Topology {
	t := b.t
	for _, n := range t.all {
		for k := NodeKind(0); k < numKinds; k++ {
			n.paths[k] = make([]path, len(t.nodes[k]))
			for i := range n.paths[k] {
				n.paths[k][i] = path{typ: PathDIS}
			}
		}
	}
	for _, k := range []NodeKind{KindCPU, KindGPU, KindNET, KindNVS} {
		for _, base := range t.nodes[k] {
			base.paths[k][base.index] = path{typ: PathLOC, bw: locBw, set: true}
			frontier := []*node{base}
			for len(frontier) > 0 {
				var next []*node
				for _, n := range frontier {
					p := n.paths[k][base.index]
					for _, l := range n.links {
						rem := l.rem
						rp := &rem.paths[k][base.index]
						bw := min(p.bw, l.bw)
						if n != base && n.kind == KindGPU && (l.kind != linkNVL || rem.kind != KindGPU || p.count() > 1) {
							continue
						}
						if (rp.bw == 0 || rp.count() > p.count()) && rp.bw < bw {
							rev := findLink(rem, n, l.kind)
							list := append([]*link{rev}, p.list...)
							typ := PathType(l.kind)
							if l.kind == linkNET {
								typ = PathLOC
							}
							if n.kind == KindPCI && rem.kind == KindPCI {
								typ = PathPXB
							}
							if l.kind == linkPCI && (n.kind == KindCPU || rem.kind == KindCPU) {
								typ = PathPHB
							}
							if n.kind == KindGPU && p.typ == PathNVL && typ == PathNVL && len(list) > 1 {
								typ = PathNVB
							}
							*rp = path{list: list, bw: bw, typ: max(p.typ, typ), set: true}
							found := false
							for _, x := range next {
								if x == rem {
									found = true
								}
							}
							if !found {
								next = append(next, rem)
							}
						}
					}
				}
				frontier = next
			}
		}
	}
	return t
}

// h200x2 is the lent 2×H200 machine as NCCL 2.28.9 saw it (testdata/nccl/h200x2/real_topo.xml):
// one Emerald Rapids CPU, two H200 on PCIe Gen5 (width 0 read as 16: 48 GB/s), each with 18
// NVLinks to the (invisible) NVSwitch, and, for the fake-hosts run, the 10 Gb/s socket NIC.
// nvl is the number of direct GPU↔GPU NVLinks (the nvl4/nvl0 variants), nvs says the NVLinks
// go to an NVSwitch instead.
func h200x2(tb testing.TB, nvs bool, nvl int, net bool) *Topology {
	b := newBuilder()
	cpu := b.t.AddCPU(0, ArchX86, VendorIntel)
	g0 := b.t.AddGPU(0x60, 0, 0, 90)
	g1 := b.t.AddGPU(0x70, 1, 1, 90)
	b.link(tb, g0, cpu, linkPCI, 48)
	b.link(tb, g1, cpu, linkPCI, 48)
	if nvs {
		sw := b.t.AddNode(KindNVS, 0)
		b.link(tb, g0, sw, linkNVL, 18*20.6)
		b.link(tb, g1, sw, linkNVL, 18*20.6)
	} else if nvl > 0 {
		b.link(tb, g0, g1, linkNVL, float64(nvl)*20.6)
	}
	if net {
		nic := b.t.AddNode(KindNIC, 0)
		n := b.t.AddNET(0, NetInfo{Dev: 0, Bw: 10000.0 / 8000})
		b.link(tb, nic, cpu, linkPCI, locBw)
		b.link(tb, nic, n, linkNET, 10000.0/8000)
	}
	return b.bfs()
}

// oneGPU keeps only GPU rank r of a two-GPU topology (the fake-hosts run: each process is alone
// on its "host" with the NIC).
func oneGPU(tb testing.TB, r int) *Topology { return oneGPUNic(tb, r, 10000) }

// oneGPUNic is oneGPU with a NIC of the given speed (Mb/s).
func oneGPUNic(tb testing.TB, r int, speed float64) *Topology {
	b := newBuilder()
	cpu := b.t.AddCPU(0, ArchX86, VendorIntel)
	g := b.t.AddGPU(int64(0x60+0x10*r), 0, r, 90)
	b.link(tb, g, cpu, linkPCI, 48)
	sw := b.t.AddNode(KindNVS, 0)
	b.link(tb, g, sw, linkNVL, 18*20.6)
	nic := b.t.AddNode(KindNIC, 0)
	n := b.t.AddNET(0, NetInfo{Dev: 0, Bw: speed / 8000})
	b.link(tb, nic, cpu, linkPCI, locBw)
	b.link(tb, nic, n, linkNET, speed/8000)
	return b.bfs()
}
