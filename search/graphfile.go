package search

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/simccl/simccl/topo/ncclxml"
)

// gpuFileID is the id a GPU gets in a graph file: NCCL_TOPO_ID(systemId, NVML dev).
func gpuFileID(n *node) int64 {
	sys := int64(uint64(n.id) >> 56)
	return sys<<56 | int64(n.dev)
}

// Dump converts graphs to NCCL's <graphs> layout (ncclTopoGetXmlFromGraphs, 2.28): GPUs by
// NCCL_TOPO_ID(systemId, dev), NETs by id, only the first GPU of NVLS channels, NETs only when the
// topology has NETs; ids in hex as 2.28 writes them.
func Dump(top *Topology, graphs []*Graph) (*ncclxml.Graphs, error) {
	out := &ncclxml.Graphs{HexIDs: true}
	hasNet := top.NumNETs() > 0
	for _, g := range graphs {
		if g == nil {
			continue
		}
		d := ncclxml.GraphDump{ID: g.ID, Pattern: int(g.Pattern), CrossNic: g.CrossNic, NChannels: g.NChannels,
			SpeedIntra: g.BwIntra, SpeedInter: g.BwInter, LatencyInter: g.LatencyInter,
			TypeIntra: g.TypeIntra.String(), TypeInter: g.TypeInter.String(), SameChannels: g.SameChannels}
		for c := 0; c < g.NChannels && c < len(g.Intra); c++ {
			var ch ncclxml.Channel
			if hasNet && c < len(g.Inter) {
				ch.Nets = []int64{g.Inter[c][0], g.Inter[c][1]}
			}
			for _, r := range g.Intra[c] {
				gi := top.gpuIndexOfRank(r)
				if gi < 0 {
					return nil, errorf("graph %d channel %d: rank %d is not in the topology", g.ID, c, r)
				}
				ch.GPUs = append(ch.GPUs, gpuFileID(top.nodes[KindGPU][gi]))
				if g.ID == IDNVLS {
					break // NVLS graphs only use the first GPU
				}
			}
			d.Channels = append(d.Channels, ch)
		}
		out.Graphs = append(out.Graphs, d)
	}
	return out, nil
}

// WriteDump writes graphs as NCCL_GRAPH_DUMP_FILE does.
func WriteDump(w io.Writer, top *Topology, graphs []*Graph) error {
	d, err := Dump(top, graphs)
	if err != nil {
		return err
	}
	_, err = d.WriteTo(w)
	return err
}

// Load reads the graphs of a graph file (NCCL_GRAPH_FILE) against a topology: GPU dev ids are
// matched by NCCL_TOPO_ID(systemId, dev) to ranks (ncclTopoGetGraphFromXml). name is used in
// errors.
func Load(top *Topology, gs *ncclxml.Graphs, name string) ([]*Graph, error) {
	if !top.finished {
		if err := top.finish(); err != nil {
			return nil, err
		}
	}
	ngpus := top.NumGPUs()
	var out []*Graph
	seen := map[int]int{} // graph id → line
	for _, d := range gs.Graphs {
		where := fmt.Sprintf("%s:%d: <graph id=%d>", name, d.Line, d.ID)
		// NCCL 2.28 ncclTopoGetGraphFromXml takes any values; these would make a plan no
		// NCCL search produces (and a pattern the search code does not know).
		if d.ID < IDRing || d.ID > IDCollNetDirect {
			return nil, errorf("%s: graph id %d (want %d..%d)", where, d.ID, IDRing, IDCollNetDirect)
		}
		if l, dup := seen[d.ID]; dup {
			return nil, errorf("%s: graph id %d repeated (also on line %d)", where, d.ID, l)
		}
		seen[d.ID] = d.Line
		if p := Pattern(d.Pattern); p < PatternBalancedTree || p > PatternCollNetDirect {
			return nil, errorf("%s: pattern %d (want %d..%d, NCCL_TOPO_PATTERN_*)", where, d.Pattern, PatternBalancedTree, PatternCollNetDirect)
		}
		if d.SpeedIntra < 0 || d.SpeedInter < 0 || d.LatencyInter < 0 {
			return nil, errorf("%s: negative speedintra %g, speedinter %g or latencyinter %g", where, d.SpeedIntra, d.SpeedInter, d.LatencyInter)
		}
		ti, err := ParsePathType(d.TypeIntra)
		if err != nil {
			return nil, fmt.Errorf("%s typeintra: %w", where, err)
		}
		te, err := ParsePathType(d.TypeInter)
		if err != nil {
			return nil, fmt.Errorf("%s typeinter: %w", where, err)
		}
		if d.NChannels < 0 || d.NChannels > MaxChannels {
			return nil, errorf("%s: nchannels %d out of 0..%d", where, d.NChannels, MaxChannels)
		}
		if len(d.Channels) > MaxChannels {
			return nil, errorf("%s: %d channels, more than %d", where, len(d.Channels), MaxChannels)
		}
		g := &Graph{ID: d.ID, Pattern: Pattern(d.Pattern), CrossNic: d.CrossNic, NChannels: d.NChannels,
			BwIntra: d.SpeedIntra, BwInter: d.SpeedInter, LatencyInter: d.LatencyInter,
			TypeIntra: ti, TypeInter: te, SameChannels: d.SameChannels, FromFile: true}
		for c, ch := range d.Channels {
			ranks := make([]int, 0, ngpus)
			for i, dev := range ch.GPUs {
				r := -1
				for _, n := range top.nodes[KindGPU] {
					if gpuFileID(n) == dev {
						r = n.rank
					}
				}
				if r < 0 {
					return nil, errorf("%s channel %d: GPU dev %#x is not in the topology", where, c, dev)
				}
				if slices.Contains(ranks, r) {
					return nil, errorf("%s channel %d: GPU dev %#x appears twice (positions %d and %d)", where, c, dev, slices.Index(ranks, r), i)
				}
				ranks = append(ranks, r)
			}
			// NETs are checked when the topology has them: a single-node system has none (NCCL
			// trims them, ncclTopoTrimSystem), and NCCL ignores the file's then.
			if top.NumNETs() > 0 {
				for _, n := range ch.Nets {
					if top.netIndexOfID(n) < 0 {
						return nil, errorf("%s channel %d: NET dev %#x is not in the topology", where, c, n)
					}
				}
			}
			if g.ID != IDNVLS && len(ranks) != ngpus {
				return nil, errorf("%s channel %d: %d GPUs, the topology has %d", where, c, len(ranks), ngpus)
			}
			g.Intra = append(g.Intra, ranks)
			var inter [2]int64
			for i, n := range ch.Nets {
				if i < 2 {
					inter[i] = n
				}
			}
			if len(ch.Nets) > 0 {
				g.Inter = append(g.Inter, inter)
			}
		}
		if g.NChannels > len(g.Intra) {
			return nil, errorf("%s: nchannels %d but only %d <channel> elements", where, g.NChannels, len(g.Intra))
		}
		g.Intra = g.Intra[:g.NChannels]
		if len(g.Inter) > g.NChannels {
			g.Inter = g.Inter[:g.NChannels]
		}
		out = append(out, g)
	}
	return out, nil
}

// Format writes a graph as NCCL's ncclTopoPrintGraph does (2.28):
//
//	Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1
//	 0 : NET/0-0 GPU/0-60 GPU/0-70 NET/0-0
//
// GPUs and NETs are written as systemId-localId in hex (the busid for a GPU, the plugin dev for
// a NET).
func Format(w io.Writer, top *Topology, g *Graph) {
	fmt.Fprintf(w, "Pattern %d, crossNic %d, nChannels %d, bw %f/%f, type %s/%s, sameChannels %d\n",
		int(g.Pattern), g.CrossNic, g.NChannels, float64(float32(g.BwIntra)), float64(float32(g.BwInter)),
		g.TypeIntra, g.TypeInter, g.SameChannels)
	hasNet := top.NumNETs() > 0
	id := func(kind string, v int64) string {
		return kind + "/" + strconv.FormatInt(int64(uint64(v)>>56), 16) + "-" + strconv.FormatInt(v&(1<<56-1), 16)
	}
	for c := 0; c < g.NChannels && c < len(g.Intra); c++ {
		var b strings.Builder
		fmt.Fprintf(&b, "%2d :", c)
		if hasNet && c < len(g.Inter) {
			b.WriteString(" " + id("NET", g.Inter[c][0]))
		}
		for _, r := range g.Intra[c] {
			gi := top.gpuIndexOfRank(r)
			if gi < 0 {
				fmt.Fprintf(&b, " rank/%d", r)
			} else {
				b.WriteString(" " + id("GPU", top.nodes[KindGPU][gi].id))
			}
			if g.ID == IDNVLS {
				break
			}
		}
		if hasNet && c < len(g.Inter) {
			b.WriteString(" " + id("NET", g.Inter[c][1]))
		}
		fmt.Fprintln(w, b.String())
	}
}

// WriteReport writes a result as NCCL's INFO log shows it: the "=== System" bounds line, then
// each graph that has channels (ring and tree always) in ncclTopoPrintGraph's format, then the
// communicator's channel count.
func WriteReport(w io.Writer, res *Result) error {
	top := res.Topology()
	fmt.Fprintf(w, "=== System : maxBw %.1f totalBw %.1f ===\n", res.MaxBw, res.TotalBw)
	for _, g := range []*Graph{res.Ring, res.Tree, res.CollNetChain, res.CollNetDirect, res.NVLS} {
		if g == nil || (g.NChannels == 0 && g.ID != IDRing && g.ID != IDTree) {
			continue
		}
		Format(w, top, g)
	}
	_, err := fmt.Fprintf(w, "%d coll channels (%d search channels), %d nodes x %d GPUs\n",
		res.NChannels, res.SearchChannels, res.NNodes, res.NGPUs)
	return err
}
