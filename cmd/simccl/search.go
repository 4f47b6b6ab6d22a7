package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/internal/cli"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/search"
)

func init() {
	register(&command{
		name:   "search",
		short:  "NCCL's channel search on a topology: ring, tree, CollNet, NVLS graphs (NCCL log lines, graph XML, JSON)",
		define: defineSearch,
	})
}

func defineSearch(fs *pflag.FlagSet) runFunc {
	mf := addMachineFlags(fs)
	mf.searchOnly = true
	cli.Explain(fs, "nccl-version", "search also takes "+strings.Join(planner.SearchReleases(), ", "))
	rank := fs.Int("rank", 0, "the rank whose view is searched (its P2P domain is kept; NCCL_TOPO_DUMP_FILE_RANK-style)")
	graphFile := fs.String("graph", "", "load graphs from this NCCL graph file instead of searching (default $NCCL_GRAPH_FILE)")
	dumpFile := fs.String("graph-dump", os.Getenv("NCCL_GRAPH_DUMP_FILE"), "write the graphs to this file in NCCL's format (default $NCCL_GRAPH_DUMP_FILE)")
	asJSON := cli.AddJSON(fs, "")
	crossNic := fs.Int("cross-nic", 2, "NCCL_CROSS_NIC (0, 1 or 2; default $NCCL_CROSS_NIC, else 2)")
	p2pDisable := fs.Bool("p2p-disable", false, "NCCL_P2P_DISABLE=1 (also what NVML reports for GeForce boards)")
	p2pLevel := fs.String("p2p-level", "", "NCCL_P2P_LEVEL (LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS)")
	rings := fs.Bool("rings", false, "also print the communicator's rings over all nodes, as NCCL's \"Channel NN/MM : …\" lines")
	trees := fs.Int("trees", -1, "also print this rank's tree neighbours on every channel, as NCCL's \"Trees [c] d0/d1/d2->rank->up\" line")
	return func(stdout, stderr io.Writer) error {
		if *crossNic < 0 || *crossNic > 2 {
			return fmt.Errorf("%w: --cross-nic %d (want 0, 1 or 2)", errUsage, *crossNic)
		}
		if *mf.nodes < 1 || *mf.nodes > planner.MaxNodes {
			return fmt.Errorf("%w: --nodes %d (want 1..%d)", errUsage, *mf.nodes, planner.MaxNodes)
		}
		s, err := mf.settings(fs)
		if err != nil {
			return err
		}
		s.Graph.LocalRank = *rank
		if fs.Changed("p2p-disable") {
			s.Graph.P2PDisable = *p2pDisable
		}
		if *p2pLevel != "" {
			if _, err := graph.ParsePathType(*p2pLevel); err != nil {
				return fmt.Errorf("%w: --p2p-level: %v", errUsage, err)
			}
			s.Graph.P2PLevel = *p2pLevel
		}
		if fs.Changed("cross-nic") {
			s.CrossNic = crossNic
		}
		if *graphFile != "" {
			s.GraphFile = *graphFile
		}
		name, doc, err := planner.LoadTopology(*mf.topo, s)
		if err != nil {
			return err
		}
		p, err := planner.New(planner.Machine{Name: name, Doc: doc, Nodes: *mf.nodes, Settings: s, SearchOnly: true})
		if err != nil {
			if errors.Is(err, planner.ErrTooManyRanks) {
				return nodesError(err)
			}
			return fmt.Errorf("%s: %w", name, err)
		}
		res := p.Search
		if *trees < -1 || (*trees >= 0 && *trees >= res.NNodes*res.NGPUs) {
			// Before any output: -1 (the default) prints no trees.
			return fmt.Errorf("%w: --trees %d: want a rank in 0..%d (-1: none)", errUsage, *trees, res.NNodes*res.NGPUs-1)
		}
		top := res.Topology()
		params, _ := search.ParamsFor(s.Release)
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
				Version  string `json:"nccl_version"`
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
