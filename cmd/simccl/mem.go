package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/simccl/simccl/internal/cli"
	"github.com/simccl/simccl/planner"
)

func init() {
	register(&command{
		name:   "mem",
		short:  "transport buffer memory per rank (lazy or eager connection), per algorithm, protocol and transport",
		define: defineMem,
	})
}

func defineMem(fs *pflag.FlagSet) runFunc {
	mf := addMachineFlags(fs)
	sweep := addSweepFlags(fs, "allreduce") // the workload
	eager := fs.Bool("eager", false, "everything connected at init (NCCL_RUNTIME_CONNECT=0) instead of lazily for the workload")
	perRank := fs.Bool("per-rank", false, "one line per rank besides the summary")
	asJSON := cli.AddJSON(fs, `{"selected", "lazy", "eager"}`)
	return func(stdout, stderr io.Writer) error {
		funcs, sizes, dt, _, err := sweep.parse(allColls)
		if err != nil {
			return err
		}
		// Buffer sizes and the other NCCL_* knobs come from the environment, as NCCL reads them.
		p, err := mf.planner(fs)
		if err != nil {
			return err
		}
		var calls []planner.MemCall
		for _, f := range funcs {
			for _, s := range sizes {
				calls = append(calls, planner.MemCall{Func: f, Bytes: s})
			}
		}
		lazy, err := p.Memory(calls, dt, false)
		if err != nil {
			return err
		}
		eag, err := p.Memory(calls, dt, true)
		if err != nil {
			return err
		}
		sel, other := lazy, eag
		if *eager {
			sel, other = eag, lazy
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(struct {
				Selected string                `json:"selected"`
				Topology string                `json:"topology"`
				Lazy     *planner.MemoryReport `json:"lazy"`
				Eager    *planner.MemoryReport `json:"eager"`
			}{sel.Mode, p.Name, lazy, eag})
		}
		fmt.Fprintf(stdout, "# simccl mem: %s, %d node(s) x %d GPUs = %d ranks\n", p.Name, p.Nodes, p.PPN, p.NRanks())
		return planner.WriteMemoryText(stdout, sel, other, *perRank)
	}
}
