package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/search"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/topo/ncclxml"
)

func init() {
	register(&command{
		name:  "search",
		short: "NCCL's channel search on a topology: ring, tree, CollNet, NVLS graphs (NCCL log lines, graph XML, JSON)",
		run:   runSearch,
	})
}

func runSearch(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("search", stderr)
	topoFile := fs.String("topo", "", "NCCL topology XML (default: the embedded "+topos.DefaultName+"); an embedded name also works")
	nodes := fs.Int("nodes", 1, "number of nodes of the communicator, each with this topology (NETs take part when > 1)")
	rank := fs.Int("rank", 0, "the rank whose view is searched (its P2P domain is kept; NCCL_TOPO_DUMP_FILE_RANK-style)")
	graphFile := fs.String("graph", os.Getenv("NCCL_GRAPH_FILE"), "load graphs from this NCCL graph file instead of searching (default $NCCL_GRAPH_FILE)")
	dumpFile := fs.String("graph-dump", os.Getenv("NCCL_GRAPH_DUMP_FILE"), "write the graphs to this file in NCCL's format (default $NCCL_GRAPH_DUMP_FILE)")
	asJSON := fs.Bool("json", false, "print the result as JSON instead of NCCL's log lines")
	version := fs.String("nccl-version", "2.28", "NCCL release whose search constants apply (2.18, 2.28, 2.29, 2.30)")
	crossNic := fs.Int("cross-nic", 2, "NCCL_CROSS_NIC (0, 1 or 2)")
	nvls := fs.String("nvls", "auto", "search the NVLS graph: auto/on (NCCL's rule: NVSwitch, sm >= 90, more than 2 GPUs), off (NCCL_NVLS_ENABLE=0)")
	collnet := fs.Bool("collnet", false, "a CollNet (SHARP) plugin is present: search the CollNet chain and direct graphs")
	p2pDisable := fs.Bool("p2p-disable", false, "NCCL_P2P_DISABLE=1 (also what NVML reports for GeForce boards)")
	p2pLevel := fs.String("p2p-level", "", "NCCL_P2P_LEVEL (LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS)")
	minCh := fs.Int("min-nchannels", 0, "NCCL_MIN_NCHANNELS (0 = unset)")
	maxCh := fs.Int("max-nchannels", 0, "NCCL_MAX_NCHANNELS (0 = unset)")
	rings := fs.Bool("rings", false, "also print the communicator's rings over all nodes, as NCCL's \"Channel NN/MM : …\" lines")
	trees := fs.Int("trees", -1, "also print this rank's tree neighbours on every channel, as NCCL's \"Trees [c] d0/d1/d2->rank->up\" line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *nodes < 1 || *nodes > 1<<20 {
		return fmt.Errorf("%w: --nodes %d (want 1..%d)", errUsage, *nodes, 1<<20)
	}
	if *crossNic < 0 || *crossNic > 2 {
		return fmt.Errorf("%w: --cross-nic %d (want 0, 1 or 2)", errUsage, *crossNic)
	}
	if *minCh < 0 || *maxCh < 0 {
		return fmt.Errorf("%w: --min-nchannels/--max-nchannels must be >= 0", errUsage)
	}
	params, err := search.ParamsFor(*version)
	if err != nil {
		return fmt.Errorf("%w: --nccl-version: %v", errUsage, err)
	}
	var nvlsOpt *bool
	switch strings.ToLower(*nvls) {
	case "auto":
	case "on", "1", "true":
		t := true
		nvlsOpt = &t
	case "off", "0", "false":
		f := false
		nvlsOpt = &f
	default:
		return fmt.Errorf("%w: --nvls %q (want auto, on or off)", errUsage, *nvls)
	}

	name, data := topos.Default()
	if *topoFile != "" {
		if d, err := os.ReadFile(*topoFile); err == nil {
			name, data = *topoFile, d
		} else if d, err2 := topos.Get(*topoFile); err2 == nil {
			name, data = *topoFile, d
		} else {
			return err
		}
	}
	doc, err := ncclxml.ParseBytes(data, name)
	if err != nil {
		return err
	}
	gopt := graph.Options{LocalRank: *rank, P2PDisable: *p2pDisable, P2PLevel: *p2pLevel}
	if strings.HasPrefix(*version, "2.30") {
		gopt.Version = graph.V2_30
	}
	sys, err := topo.FromXML(doc, gopt)
	if err != nil {
		return err
	}
	if *nodes > 1 {
		// Build again knowing the communicator spans several nodes, so that the NETs stay.
		gopt.NRanks = len(sys.GPUs()) * *nodes
		if sys, err = topo.FromXML(doc, gopt); err != nil {
			return err
		}
	}
	top, err := search.FromSystem(sys, *nodes > 1)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	opts := search.AllOptions{
		Options: search.Options{CrossNic: crossNic, Params: params},
		Nodes:   *nodes, CollNet: *collnet, NVLS: nvlsOpt, MinChannels: *minCh, MaxChannels: *maxCh,
	}
	if *graphFile != "" {
		gdoc, err := ncclxml.ReadFile(*graphFile)
		if err != nil {
			return err
		}
		gs, err := ncclxml.ReadGraphs(gdoc)
		if err != nil {
			return err
		}
		if opts.Loaded, err = search.Load(top, gs, *graphFile); err != nil {
			return err
		}
	}
	res, err := search.ComputeAll(top, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if *dumpFile != "" {
		f, err := os.Create(*dumpFile)
		if err != nil {
			return err
		}
		werr := search.WriteDump(f, top, res.Graphs())
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("--graph-dump %s: %w", *dumpFile, werr)
		}
	}
	if *asJSON {
		out := struct {
			Topology string `json:"topology"`
			Version  string `json:"ncclVersion"`
			*search.Result
		}{name, params.Version, res}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if err := search.WriteReport(stdout, res); err != nil {
		return err
	}
	if *rings {
		if err := writeRings(stdout, res); err != nil {
			return err
		}
	}
	if *trees >= 0 {
		return writeTrees(stdout, res, *trees)
	}
	return nil
}

// writeTrees prints one rank's tree neighbours on every channel as NCCL's init does
// ("Trees [0] 1/-1/-1->0->-1 [1] …"): channel c uses the tree graph's channel c with tree 0 of the
// double binary tree over nodes, its twin c+n tree 1 (coll.BuildTrees).
func writeTrees(w io.Writer, res *search.Result, rank int) error {
	ppn := res.NGPUs
	if rank >= res.NNodes*ppn {
		return fmt.Errorf("%w: --trees %d: the communicator has %d ranks", errUsage, rank, res.NNodes*ppn)
	}
	n := res.SearchChannels
	chains := make([][]int, n)
	for c := range chains {
		chains[c] = res.Tree.Intra[c%len(res.Tree.Intra)]
	}
	built, err := coll.BuildTrees(chains, res.NNodes, ppn, coll.TreePattern(res.Tree.Pattern))
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("Trees")
	for c := 0; c < res.NChannels && c < len(built); c++ {
		tr := built[c]
		d := [3]int{-1, -1, -1}
		for i, x := range tr.Down[rank] {
			if i < 3 {
				d[i] = x
			}
		}
		fmt.Fprintf(&b, " [%d] %d/%d/%d->%d->%d", c, d[0], d[1], d[2], rank, tr.Up[rank])
	}
	_, err = fmt.Fprintln(w, b.String())
	return err
}

// writeRings prints the communicator's rings as NCCL's init does ("Channel 00/24 : 0 1 …"): each
// comm channel's ring over all nodes (coll.BuildRings, rank = node × GPUs per node + local
// index), starting at rank 0.
func writeRings(w io.Writer, res *search.Result) error {
	ppn := res.NGPUs
	src := res.ChannelSource()
	chains := make([][]int, len(src))
	for c, s := range src {
		chains[c] = res.Ring.Intra[s]
	}
	built, err := coll.BuildRings(chains, res.NNodes, ppn, res.Ring.CrossNic != 0)
	if err != nil {
		return err
	}
	for c, ring := range built {
		start := 0
		for i, r := range ring {
			if r == 0 {
				start = i
			}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "Channel %02d/%02d :", c, len(built))
		for i := range ring {
			fmt.Fprintf(&b, " %d", ring[(start+i)%len(ring)])
		}
		if _, err := fmt.Fprintln(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}
