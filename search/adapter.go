package search

import "github.com/simccl/simccl/graph"

// FromSystem copies what the search needs out of a graph.System: nodes, links (with bandwidths
// the search may consume on its own copy), the paths graph computed, NET properties and the
// number of hosts. keepNets says whether the NETs take part: when all the communicator's ranks
// are in this system NCCL searches without them (2.28's search.cc tests the NET count, and
// ncclTopoTrimSystem removes the NETs of a single-node system (paths.cc); later releases
// keep them but test system->inter instead, to the same effect), so a single-node search passes
// false and a multi-node one true.
func FromSystem(sys *graph.System, keepNets bool) (*Topology, error) {
	if sys == nil {
		return nil, errorf("no system")
	}
	t := NewTopology()
	t.SetHosts(len(sys.HostHashes))
	handles := map[*graph.Node]Handle{}
	for ty := 0; ty < graph.NumNodeTypes; ty++ {
		kind := NodeKind(ty)
		if kind == KindNET && !keepNets {
			continue
		}
		for _, n := range sys.Nodes[ty] {
			var h Handle
			switch kind {
			case KindGPU:
				h = t.AddGPU(n.ID, n.GPU.Rank, n.GPU.Dev, n.GPU.SM)
			case KindCPU:
				// graph keeps NCCL's arch and vendor codes, which are search's (topo.h).
				h = t.AddCPU(n.ID, n.CPU.ArchID, n.CPU.VendorID)
			case KindNET:
				h = t.AddNET(n.ID, NetInfo{Dev: n.NET.Dev, Bw: n.NET.Speed, Latency: n.NET.Latency,
					GUID: n.NET.GUID, Port: n.NET.Port, Coll: n.NET.Coll, GDR: n.NET.GDR, Rail: n.NET.Rail, Plane: n.NET.Plane})
			default:
				h = t.AddNode(kind, n.ID)
			}
			handles[n] = h
		}
	}
	links := map[*graph.Link]*link{}
	for n, h := range handles {
		src := t.nodes[h.Kind][h.Index]
		for _, l := range n.Links {
			rh, ok := handles[l.Remote]
			if !ok {
				continue // a link to a NET that was trimmed
			}
			nl := &link{kind: int(l.Type), rem: t.nodes[rh.Kind][rh.Index], bw: float32(l.BW)}
			src.links = append(src.links, nl)
			links[l] = nl
		}
	}
	for n, h := range handles {
		src := t.nodes[h.Kind][h.Index]
		for ty := 0; ty < graph.NumNodeTypes; ty++ {
			kind := NodeKind(ty)
			dsts := t.nodes[kind]
			src.paths[kind] = make([]path, len(dsts))
			for i := range dsts {
				src.paths[kind][i] = path{typ: PathDIS}
			}
			for _, m := range sys.Nodes[ty] {
				mh, ok := handles[m]
				if !ok {
					continue
				}
				p := sys.Path(n, m)
				if p == nil {
					continue
				}
				np := path{typ: PathType(p.Type), bw: float32(p.BW), set: true}
				for _, l := range p.Links {
					ml, ok := links[l]
					if !ok {
						np = path{typ: PathDIS}
						break
					}
					np.list = append(np.list, ml)
				}
				src.paths[kind][mh.Index] = np
			}
		}
	}
	if err := t.finish(); err != nil {
		return nil, err
	}
	return t, nil
}
