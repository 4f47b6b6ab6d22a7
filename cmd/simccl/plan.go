package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/internal/cli"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/planner"
)

func init() {
	register(&command{
		name:  "plan",
		short: "NCCL's plan for calls on a topology, compiled into their schedules of point-to-point steps",
		long: `simccl plan [--topo FILE] [--nodes N] -c allreduce [-b SIZE [-e MAX -f F] | --count N] [--algo …] [--proto …] [--json]

Plans calls as NCCL would on the machine (the topology × --nodes, NCCL's settings from the
environment and the flags: --algo is NCCL_ALGO, --proto NCCL_PROTO, --max-nchannels
NCCL_MAX_NCHANNELS, …) and compiles each into the schedule that simccl run simulates and the real
engines execute: per rank and channel, NCCL's primitives (Send, RecvReduceSend, …) with peers,
connections, offsets, bytes and slots. -b gives the call as nccl-tests' size (the total buffer),
--count as NCCL's API takes it (1M elements without either).`,
		define: definePlan,
	})
}

// planOut is one planned call in plan's JSON.
type planOut struct {
	Coll     string         `json:"coll"`  // nccl-tests name
	Count    int64          `json:"count"` // elements, as NCCL's API takes them
	Note     string         `json:"note"`
	Schedule *coll.Schedule `json:"schedule,omitempty"` // not with --summary
	Summary  *coll.Summary  `json:"summary,omitempty"`
	Error    string         `json:"error,omitempty"` // a plan Compile refuses (a schedule too large)
}

func definePlan(fs *pflag.FlagSet) runFunc {
	mf := addMachineFlags(fs)
	collName := cli.AddCollective(fs, "c", "allreduce")
	sizes := cli.AddSizes(fs, "", "", 2) // the call's count follows from -b; no -e: -b alone
	minB, maxB := sizes.Min, sizes.Max
	countStr := fs.String("count", "", "element count as NCCL's API takes it instead of -b (AllGather: per-rank send count; ReduceScatter: per-rank receive count; K/M/G = 1024^k); default 1M")
	dtype := cli.AddDataType(fs, "float")
	redop := cli.AddOp(fs, "o")
	root := fs.IntP("root", "r", 0, "root rank (broadcast, reduce)")
	peer := fs.Int("peer", 1, "sendrecv: rank r sends to r+peer")
	summary := fs.Bool("summary", false, "print only the per-rank totals, not every step")
	ranks := fs.String("ranks", "", "comma-separated ranks whose steps to print (default all)")
	asJSON := cli.AddJSON(fs, `{"plans":[{"note","schedule","summary"}…]}`)
	return func(stdout, stderr io.Writer) error {
		funcs, err := cli.ParseColls(*collName, allColls)
		if err != nil {
			return err
		}
		dts, err := cli.ParseDataTypes(*dtype, false)
		if err != nil {
			return err
		}
		ops, err := cli.ParseOps(*redop, false)
		if err != nil {
			return err
		}
		dt, op := dts[0], ops[0]
		if *minB != "" && *countStr != "" {
			return fmt.Errorf("%w: -b and --count both given: one sets the other", errUsage)
		}
		if *maxB != "" && *minB == "" {
			return fmt.Errorf("%w: -e needs -b", errUsage)
		}
		var sweep []int64 // nccl-tests sizes; nil: one call of count elements
		count := int64(1 << 20)
		switch {
		case *minB != "":
			if sweep, err = sizes.Sweep(0); err != nil {
				return err
			}
		case *countStr != "":
			if count, err = units.ParseSize(*countStr); err != nil {
				return fmt.Errorf("%w: --count: %v", errUsage, err)
			}
			if count > units.MaxSize/int64(dt.Size()) {
				return fmt.Errorf("%w: --count %d of %d-byte %s: more than 1 TiB (the largest size simccl simulates)", errUsage, count, dt.Size(), dt)
			}
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
		p, err := mf.planner(fs)
		if err != nil {
			return err
		}
		n := p.NRanks()
		for _, r := range show {
			if r >= n {
				return fmt.Errorf("%w: --ranks: %d is not a rank of %s × %d node(s) (0..%d)", errUsage, r, p.Name, p.Nodes, n-1)
			}
		}
		var calls []coll.Call
		for _, f := range funcs {
			if sweep == nil {
				calls = append(calls, coll.Call{Func: f, Count: count, DataType: dt, Op: op, Root: *root, Peer: *peer})
				continue
			}
			for _, s := range sweep {
				c := coll.TestCall(f, s, dt, op, n)
				c.Root, c.Peer = *root, *peer
				if c.Count == 0 {
					if len(sweep) == 1 && len(funcs) == 1 {
						return fmt.Errorf("%w: -b %d: %v over %d ranks has no elements to move (nccl-tests rounds the per-rank count down to 16 bytes' worth): no call", errUsage, s, f, n)
					}
					continue // as tune and run: no call of no element
				}
				calls = append(calls, c)
			}
		}
		for _, c := range calls {
			if err := c.Check(n); err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
		}
		var outs []planOut
		failed := 0
		for i, c := range calls {
			o, s, err := planOne(p, c, !*summary || !*asJSON)
			if err != nil {
				return err
			}
			if o.Error != "" {
				failed++
				if len(calls) == 1 {
					return fmt.Errorf("%s: %s", o.Note, o.Error)
				}
			}
			if *asJSON {
				if !*summary {
					o.Schedule = s
				}
				outs = append(outs, o)
				continue
			}
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			fmt.Fprintf(stdout, "# %s\n", o.Note)
			if o.Error != "" {
				fmt.Fprintf(stdout, "# not compiled: %s\n", o.Error)
				continue
			}
			if err := coll.WriteText(stdout, s, coll.DumpOptions{Steps: !*summary, Ranks: show}); err != nil {
				return err
			}
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", " ")
			if err := enc.Encode(struct {
				Plans []planOut `json:"plans"`
			}{outs}); err != nil {
				return err
			}
		}
		if failed > 0 {
			return fmt.Errorf("%d of %d plans not compiled (schedules too large: simccl run simulates them compactly)", failed, len(calls))
		}
		return nil
	}
}

// planOne decides and compiles one call. A schedule Compile refuses is reported in the result's
// Error (the decision still stands); other errors are returned.
func planOne(p *planner.Planner, c coll.Call, keep bool) (planOut, *coll.Schedule, error) {
	d, err := p.Decide(c)
	if err != nil {
		return planOut{}, nil, err
	}
	algo, proto, nch := d.Plan.ShownNames()
	o := planOut{Coll: coll.TestName(c.Func), Count: c.Count, Note: fmt.Sprintf("%s × %d node(s), %d ranks: NCCL runs %s/%s on %d channel(s)", p.Name, p.Nodes, p.NRanks(), algo, proto, nch)}
	if d.Choice != nil {
		o.Note += " — " + d.Choice.Line()
	}
	s, err := coll.Compile(d.Plan)
	if err != nil {
		o.Error = err.Error()
		return o, nil, nil
	}
	sum := coll.Summarize(s)
	o.Summary = &sum
	if !keep {
		s = nil
	}
	return o, s, nil
}
