package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/simnet"
	"github.com/simccl/simccl/tuning"
)

func init() {
	register(&command{
		name:  "plan",
		short: "compile one collective into its schedule of point-to-point steps and print it",
		run:   runPlan,
	})
}

func runPlan(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("plan", stderr)
	collName := fs.StringP("coll", "c", "allreduce", "collective: allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv")
	nRanks := fs.IntP("nranks", "n", 8, "number of ranks")
	nNodes := fs.Int("nnodes", 1, "number of nodes (ranks are split evenly; rings and trees are built across nodes as NCCL does)")
	countStr := fs.String("count", "1M", "element count as NCCL's API takes it (AllGather: per-rank send count; ReduceScatter: per-rank receive count; K/M/G = 1024^k)")
	dtype := fs.StringP("datatype", "d", "float", "data type (int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2)")
	redop := fs.StringP("op", "o", "sum", "reduction: sum, prod, max, min, avg")
	root := fs.IntP("root", "r", 0, "root rank (broadcast, reduce)")
	peer := fs.Int("peer", 1, "sendrecv: rank r sends to r+peer")
	topoFile := fs.String("topo", "", "NCCL topology XML or embedded name: take algorithm, protocol, channels, chunk size, rings and trees from the tuning model and channel search of that machine (× --nnodes), as 'simccl run' does; without it they come from the flags below")
	algo := fs.String("algo", "Ring", "algorithm: Ring; Tree, NVLSTree, CollNetChain (AllReduce); NVLS (one node: AllReduce, AllGather, ReduceScatter); PAT (AllGather, ReduceScatter); NVLS/CollNet go through switch endpoints; ignored for sendrecv/alltoall (with --topo: overrides tuning's choice)")
	proto := fs.String("proto", "Simple", "protocol: LL, LL128, Simple (with --topo: overrides tuning's choice)")
	nch := fs.Int("nchannels", 1, "channels the call is spread over (with --topo: overrides tuning's choice)")
	chunkStr := fs.String("chunk", "0", "payload bytes per chunk (0 = NCCL's default for the protocol, fact sheet §5.7; with --topo: tuning's)")
	crossNic := fs.Bool("crossnic", false, "rings alternate channel pairs on odd nodes (NCCL crossNic=2)")
	pattern := fs.String("pattern", "balanced", "tree pattern inside a node: balanced, split, tree")
	summary := fs.Bool("summary", false, "print only the per-rank totals, not every step")
	ranks := fs.String("ranks", "", "comma-separated ranks whose steps to print (default all)")
	asJSON := fs.Bool("json", false, "print the schedule and its summary as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: simccl plan -c allreduce -n 8 --count 1M [-d float] [--algo Ring --proto Simple --nchannels 2] [--json]")
		fmt.Fprintln(stderr, "\nCompiles one collective into the schedule both simnet and the real engine execute: per rank and")
		fmt.Fprintln(stderr, "channel, NCCL's primitives (Send, RecvReduceSend, …) with peers, connections, offsets, bytes and slots.")
		fmt.Fprintln(stderr, "Algorithm, protocol and channel count are flags (defaults Ring/Simple/1), or, with --topo, the tuning")
		fmt.Fprintln(stderr, "model's choice for that machine (flags given explicitly still override it).")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	f, err := coll.ParseFunc(*collName)
	if err != nil {
		return fmt.Errorf("%w: -c: %v", errUsage, err)
	}
	count, err := units.ParseSize(*countStr)
	if err != nil {
		return fmt.Errorf("%w: --count: %v", errUsage, err)
	}
	dt, err := coll.ParseDataType(*dtype)
	if err != nil {
		return fmt.Errorf("%w: -d: %v", errUsage, err)
	}
	op, err := coll.ParseRedOp(*redop)
	if err != nil {
		return fmt.Errorf("%w: -o: %v", errUsage, err)
	}
	a, err := coll.ParseAlgo(*algo)
	if err != nil {
		return fmt.Errorf("%w: --algo: %v", errUsage, err)
	}
	pr, err := coll.ParseProto(*proto)
	if err != nil {
		return fmt.Errorf("%w: --proto: %v", errUsage, err)
	}
	chunk, err := units.ParseSize(*chunkStr)
	if err != nil {
		return fmt.Errorf("%w: --chunk: %v", errUsage, err)
	}
	var pat coll.TreePattern
	switch strings.ToLower(*pattern) {
	case "balanced":
		pat = coll.PatternBalancedTree
	case "split":
		pat = coll.PatternSplitTree
	case "tree":
		pat = coll.PatternTree
	default:
		return fmt.Errorf("%w: --pattern %q: want balanced, split or tree", errUsage, *pattern)
	}
	if *nRanks < 1 || *nNodes < 1 || *nRanks%*nNodes != 0 {
		return fmt.Errorf("%w: -n %d over --nnodes %d: want a positive rank count divisible by the node count", errUsage, *nRanks, *nNodes)
	}
	if *nch < 1 || *nch > coll.MaxChannels {
		return fmt.Errorf("%w: --nchannels %d: want 1..%d", errUsage, *nch, coll.MaxChannels)
	}
	var show []int
	if *ranks != "" {
		for _, s := range strings.Split(*ranks, ",") {
			r, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || r < 0 {
				return fmt.Errorf("%w: --ranks: %q is not a rank number", errUsage, s)
			}
			show = append(show, r)
		}
	}
	p := coll.Plan{Func: f, Count: count, DataType: dt, Op: op, Root: *root, Peer: *peer, NRanks: *nRanks,
		NNodes: *nNodes, Algo: a, Proto: pr, NChannels: *nch, ChunkSize: chunk}
	if f == coll.SendRecv || f == coll.AllToAll {
		p.Algo = coll.Ring // no collective algorithm; keeps the plan's name readable
	}
	note := "algorithm, protocol and channels from flags"
	if *topoFile != "" {
		tp, tnote, err := tunedPlan(*topoFile, *nNodes, f, count, dt, op)
		if err != nil {
			return err
		}
		if fs.Changed("nranks") && *nRanks != tp.NRanks {
			return fmt.Errorf("%w: -n %d but %s × %d node(s) has %d ranks", errUsage, *nRanks, *topoFile, *nNodes, tp.NRanks)
		}
		tp.Root, tp.Peer = *root, *peer
		if fs.Changed("algo") {
			tp.Algo = a
		}
		if fs.Changed("proto") {
			tp.Proto = pr
		}
		if fs.Changed("nchannels") {
			tp.NChannels = *nch
		}
		if fs.Changed("chunk") {
			tp.ChunkSize = chunk
		}
		p = tp
		note = "tuned for " + *topoFile
		if tnote != "" {
			note += ": " + tnote
		}
	} else {
		ppn := *nRanks / *nNodes
		ident := func(k int) [][]int {
			chains := make([][]int, k)
			for c := range chains {
				chains[c] = make([]int, ppn)
				for i := range chains[c] {
					chains[c][i] = i
				}
			}
			return chains
		}
		if p.Rings, err = coll.BuildRings(ident(*nch), *nNodes, ppn, *crossNic); err != nil {
			return err
		}
		if a == coll.Tree {
			// Channels 0..k−1 use tree 0 of the double binary tree and their twins k..2k−1 tree 1.
			trees, err := coll.BuildTrees(ident((*nch+1)/2), *nNodes, ppn, pat)
			if err != nil {
				return err
			}
			p.Trees = trees[:*nch]
		}
	}
	s, err := coll.Compile(p)
	if err != nil {
		return err
	}
	for _, r := range show {
		if r >= s.Endpoints() {
			return fmt.Errorf("%w: --ranks: %d is not a rank (or switch endpoint) in 0..%d", errUsage, r, s.Endpoints()-1)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", " ")
		return enc.Encode(struct {
			Note     string         `json:"note"`
			Schedule *coll.Schedule `json:"schedule"`
			Summary  coll.Summary   `json:"summary"`
		}{note, s, coll.Summarize(s)})
	}
	fmt.Fprintf(stdout, "# %s\n", note)
	return coll.WriteText(stdout, s, coll.DumpOptions{Steps: !*summary, Ranks: show})
}

// tunedPlan builds the machine of a topology (simnet's pipeline: graph, search, tuning) and returns
// the plan NCCL would run for the call: tuning's algorithm, protocol, channels and chunk size, and
// the searched rings and trees.
func tunedPlan(topoFile string, nodes int, f coll.Func, count int64, dt coll.DataType, op coll.RedOp) (coll.Plan, string, error) {
	var data []byte
	if d, err := os.ReadFile(topoFile); err == nil {
		data = d
	} else if d, err2 := topos.Get(topoFile); err2 == nil {
		data = d
	} else {
		return coll.Plan{}, "", fmt.Errorf("--topo: %w", err)
	}
	fab := simnet.DefaultFabric()
	m, err := simnet.MachineFromXML(data, topoFile, nodes, fab, &tuning.Config{})
	if err != nil {
		return coll.Plan{}, "", err
	}
	// simnet's Plan takes nccl-tests' total size in bytes.
	size := count * int64(dt.Size())
	if f == coll.AllGather || f == coll.ReduceScatter || f == coll.AllToAll {
		size *= int64(m.NRanks())
	}
	return m.Plan(f, size, dt, op)
}
