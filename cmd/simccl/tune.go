package main

import (
	"fmt"
	"io"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/tuning"
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
	mf := addMachineFlags(fs)
	sweep := addSweepFlags(fs, "all", "allreduce|allgather|reducescatter|broadcast|reduce|all, or a comma-separated list")
	noTable := fs.Bool("no-table", false, "print only the per-size choices")
	asJSON := fs.Bool("json", false, `print {"table":[…],"choices":[…]} instead of text`)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: simccl tune [--topo FILE] [--nodes N] [-b MIN -e MAX -f FACTOR] [--nccl-version V] [--algo …] [--proto …] [--tuner-file CSV] [--json]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Runs NCCL's topology search and cost model and prints what NCCL_DEBUG_SUBSYS=TUNING prints on rank 0:")
		fmt.Fprintln(stderr, "the latency/bandwidth table and one line per collective and size. NCCL_* tuning variables")
		fmt.Fprintln(stderr, "(NCCL_ALGO, NCCL_PROTO, NCCL_MIN/MAX_NCHANNELS, NCCL_NTHREADS, NCCL_BUFFSIZE, NCCL_TOPO_FILE, …) are read")
		fmt.Fprintln(stderr, "from the environment; flags override them. Sizes follow nccl-tests (the total buffer); the")
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
	funcs, sizes, dt, _, err := sweep.parse(tunedColls)
	if err != nil {
		return err
	}
	for _, f := range funcs {
		if f >= coll.NumTunedFuncs {
			return fmt.Errorf("%w: -c %q: want allreduce, allgather, reducescatter, broadcast, reduce or all", errUsage, *sweep.coll)
		}
	}
	p, err := mf.planner(fs)
	if err != nil {
		return err
	}
	var choices []tuning.Choice
	var skipped []string
	for _, f := range funcs {
		for _, s := range sizes {
			call := coll.TestCall(f, s, dt, coll.Sum, p.NRanks())
			if call.Count == 0 {
				// nccl-tests rounds the per-rank count down to 16 bytes' worth of elements; a call
				// of no element is not made (and NCCL would not tune it).
				skipped = append(skipped, fmt.Sprintf("%v %d B: no element per rank, no call", f, s))
				continue
			}
			d, err := p.Decide(call)
			if err != nil {
				return fmt.Errorf("%s %d bytes: %w", f, s, err)
			}
			choices = append(choices, *d.Choice)
		}
	}
	table := p.Table
	if *asJSON {
		return table.NewReport(choices).WriteJSON(stdout)
	}
	fmt.Fprintf(stdout, "# simccl tune: %s, %d ranks on %d node(s), %d channels, NCCL %s rules\n", p.Name, p.NRanks(), p.Nodes, table.NChannels, table.K.Release)
	if !*noTable {
		if err := table.WriteText(stdout, ""); err != nil {
			return err
		}
	}
	for _, sk := range skipped {
		fmt.Fprintf(stdout, "# %s\n", sk)
	}
	for _, ch := range choices {
		if _, err := fmt.Fprintln(stdout, ch.Line()); err != nil {
			return err
		}
	}
	return nil
}
