package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/internal/units"
)

func init() {
	register(&command{
		name:  "plan",
		short: "NCCL's plan for one call on a topology, compiled into its schedule of point-to-point steps",
		run:   runPlan,
	})
}

func runPlan(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("plan", stderr)
	mf := addMachineFlags(fs)
	collName := fs.StringP("collective", "c", "allreduce", "collective: allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv")
	size := fs.StringP("bytes", "b", "", "nccl-tests size (the total buffer, as -b/-e of run); the call's count follows from it")
	countStr := fs.String("count", "", "element count as NCCL's API takes it instead of -b (AllGather: per-rank send count; ReduceScatter: per-rank receive count; K/M/G = 1024^k); default 1M")
	dtype := fs.StringP("datatype", "d", "float", "data type (int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2)")
	redop := fs.StringP("op", "o", "sum", "reduction: sum, prod, max, min, avg")
	root := fs.IntP("root", "r", 0, "root rank (broadcast, reduce)")
	peer := fs.Int("peer", 1, "sendrecv: rank r sends to r+peer")
	summary := fs.Bool("summary", false, "print only the per-rank totals, not every step")
	ranks := fs.String("ranks", "", "comma-separated ranks whose steps to print (default all)")
	asJSON := fs.Bool("json", false, "print the decision, the schedule and its summary as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: simccl plan [--topo FILE] [--nodes N] -c allreduce [-b SIZE | --count N] [--algo …] [--proto …] [--json]")
		fmt.Fprintln(stderr, "\nPlans one call as NCCL would on the machine (the topology × --nodes, NCCL's settings from the")
		fmt.Fprintln(stderr, "environment and the flags: --algo is NCCL_ALGO, --proto NCCL_PROTO, --max-nchannels NCCL_MAX_NCHANNELS,")
		fmt.Fprintln(stderr, "…) and compiles it into the schedule that simccl run simulates and the real engines execute: per rank")
		fmt.Fprintln(stderr, "and channel, NCCL's primitives (Send, RecvReduceSend, …) with peers, connections, offsets, bytes and slots.")
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
	dt, err := coll.ParseDataType(*dtype)
	if err != nil {
		return fmt.Errorf("%w: -d: %v", errUsage, err)
	}
	op, err := coll.ParseRedOp(*redop)
	if err != nil {
		return fmt.Errorf("%w: -o: %v", errUsage, err)
	}
	if *size != "" && *countStr != "" {
		return fmt.Errorf("%w: -b and --count both given: one sets the other", errUsage)
	}
	var bytes, count int64 = -1, 1 << 20
	if *size != "" {
		if bytes, err = units.ParseSize(*size); err != nil {
			return fmt.Errorf("%w: -b: %v", errUsage, err)
		}
	} else if *countStr != "" {
		if count, err = units.ParseSize(*countStr); err != nil {
			return fmt.Errorf("%w: --count: %v", errUsage, err)
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
	call := coll.Call{Func: f, Count: count, DataType: dt, Op: op, Root: *root, Peer: *peer}
	if bytes >= 0 {
		call = coll.TestCall(f, bytes, dt, op, n)
		call.Root, call.Peer = *root, *peer
	}
	if err := call.Check(n); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	for _, r := range show {
		if r >= n {
			return fmt.Errorf("%w: --ranks: %d is not a rank of %s × %d node(s) (0..%d)", errUsage, r, p.Name, p.Nodes, n-1)
		}
	}
	d, err := p.Decide(call)
	if err != nil {
		return err
	}
	note := fmt.Sprintf("%s × %d node(s), %d ranks: NCCL runs %v/%v on %d channel(s)", p.Name, p.Nodes, n, d.Plan.Algo, d.Plan.Proto, d.Plan.NChannels)
	if d.Choice != nil {
		note += " — " + d.Choice.Line()
	}
	s, err := coll.Compile(d.Plan)
	if err != nil {
		return fmt.Errorf("%s: %w", note, err)
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
