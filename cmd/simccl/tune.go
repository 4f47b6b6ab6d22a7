package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/search"
	"github.com/simccl/simccl/topo/ncclxml"
	"github.com/simccl/simccl/tuning"
	"github.com/simccl/simccl/tuning/fromsearch"
)

func init() {
	register(&command{
		name:  "tune",
		short: "NCCL's cost model on a topology: the TUNING table and the per-size algorithm/protocol/channel choices",
		run:   runTune,
	})
}

var tunedColls = []coll.Func{coll.AllReduce, coll.AllGather, coll.ReduceScatter, coll.Broadcast, coll.Reduce}

func runTune(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tune", stderr)
	topoFile := fs.String("topo", "", "NCCL topology XML (default: the embedded "+topos.DefaultName+"); an embedded name also works")
	nodes := fs.Int("nodes", 1, "number of nodes (copies of the topology)")
	collName := fs.StringP("collective", "c", "all", "allreduce|allgather|reducescatter|broadcast|reduce|all")
	minB := fs.StringP("minbytes", "b", "8", "smallest size (nccl-tests size: the total buffer)")
	maxB := fs.StringP("maxbytes", "e", "1G", "largest size")
	factor := fs.Int64P("stepfactor", "f", 2, "size multiplication factor")
	dtName := fs.StringP("datatype", "d", "float", "data type (float, half, bfloat16, double, int8, …)")
	version := fs.String("nccl-version", "", "NCCL release whose rules apply (2.28 default, 2.30)")
	algo := fs.String("algo", "", "NCCL_ALGO (e.g. ring,tree or allreduce:tree;allgather:^pat); default: $NCCL_ALGO")
	proto := fs.String("proto", "", "NCCL_PROTO (e.g. ^LL128); default: $NCCL_PROTO")
	tunerFile := fs.String("tuner-file", "", "tuner rules (CSV: collective,minBytes,maxBytes,algorithm,protocol,channels; see below)")
	noTable := fs.Bool("no-table", false, "print only the per-size choices")
	asJSON := fs.Bool("json", false, `print {"table":[…],"choices":[…]} instead of text`)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: simccl tune [--topo FILE] [--nodes N] [-b MIN -e MAX -f FACTOR] [--nccl-version V] [--algo …] [--proto …] [--tuner-file CSV] [--json]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Runs NCCL's topology search and cost model and prints what NCCL_DEBUG_SUBSYS=TUNING prints on rank 0:")
		fmt.Fprintln(stderr, "the latency/bandwidth table and one line per collective and size. NCCL_* tuning variables")
		fmt.Fprintln(stderr, "(NCCL_ALGO, NCCL_PROTO, NCCL_MIN/MAX_NCHANNELS, NCCL_NTHREADS, NCCL_BUFFSIZE, …) are read from the")
		fmt.Fprintln(stderr, "environment; --algo/--proto override them. Sizes follow nccl-tests (the total buffer); the")
		fmt.Fprintln(stderr, "choice line prints NCCL's Bytes (count × element size, the per-rank count for AllGather/ReduceScatter).")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, tuning.OverrideHelp)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	funcs := tunedColls
	if !strings.EqualFold(*collName, "all") {
		f, err := coll.ParseFunc(*collName)
		if err != nil || f >= coll.NumTunedFuncs {
			return fmt.Errorf("%w: -c %q: want allreduce, allgather, reducescatter, broadcast, reduce or all", errUsage, *collName)
		}
		funcs = []coll.Func{f}
	}
	lo, err := units.ParseSize(*minB)
	if err != nil {
		return fmt.Errorf("%w: -b: %v", errUsage, err)
	}
	hi, err := units.ParseSize(*maxB)
	if err != nil {
		return fmt.Errorf("%w: -e: %v", errUsage, err)
	}
	sizes, err := units.Sweep(lo, hi, *factor)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	dt, err := coll.ParseDataType(*dtName)
	if err != nil {
		return fmt.Errorf("%w: -d: %v", errUsage, err)
	}
	if *nodes < 1 || *nodes > 1<<20 {
		return fmt.Errorf("%w: --nodes %d (want 1..%d)", errUsage, *nodes, 1<<20)
	}
	cfg, err := tuning.ConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	if *version != "" {
		cfg.Version = *version
	}
	if *algo != "" {
		cfg.Algo = *algo
	}
	if *proto != "" {
		cfg.Proto = *proto
	}
	if *tunerFile != "" {
		f, err := os.Open(*tunerFile)
		if err != nil {
			return err
		}
		cfg.Overrides, err = tuning.ParseOverrides(*tunerFile, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	if _, err := tuning.ConstantsFor(cfg.Version); err != nil {
		return fmt.Errorf("%w: --nccl-version: %v", errUsage, err)
	}
	gopt := graph.Options{}
	if cfg.Version != "" {
		if gopt.Version, err = graph.ParseVersion(cfg.Version); err != nil {
			return fmt.Errorf("%w: --nccl-version: %v", errUsage, err)
		}
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
	sopt := search.AllOptions{MinChannels: cfg.MinNChannels, MaxChannels: cfg.MaxNChannels}
	if v := strings.TrimSpace(os.Getenv("NCCL_NVLS_ENABLE")); v != "" && v != "2" {
		on := v != "0"
		sopt.NVLS = &on
	}
	comm, _, _, err := fromsearch.Pipeline(doc, *nodes, gopt, sopt, fromsearch.Options{})
	if err != nil {
		return err
	}
	table, err := tuning.Model(comm, cfg)
	if err != nil {
		return err
	}
	var choices []tuning.Choice
	elt := int64(dt.Size())
	for _, f := range funcs {
		for _, s := range sizes {
			count := s / elt
			if f == coll.AllGather || f == coll.ReduceScatter {
				count /= int64(comm.NRanks) // nccl-tests: per-rank count of the total buffer
			}
			ch, err := table.Select(tuning.Call{Func: f, Count: count, ElemSize: int(elt), DataType: int(dt)})
			if err != nil {
				return fmt.Errorf("%s %d bytes: %w", f, s, err)
			}
			choices = append(choices, ch)
		}
	}
	if *asJSON {
		return table.NewReport(choices).WriteJSON(stdout)
	}
	fmt.Fprintf(stdout, "# simccl tune: %s, %d ranks on %d node(s), %d channels, NCCL %s rules\n", name, comm.NRanks, comm.NNodes, table.NChannels, table.K.Release)
	if !*noTable {
		if err := table.WriteText(stdout, ""); err != nil {
			return err
		}
	}
	for _, ch := range choices {
		if _, err := fmt.Fprintln(stdout, ch.Line()); err != nil {
			return err
		}
	}
	return nil
}
