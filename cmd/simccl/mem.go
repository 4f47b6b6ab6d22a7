package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/simnet"
	"github.com/simccl/simccl/tuning"
)

func init() {
	register(&command{
		name:  "mem",
		short: "transport buffer memory per rank (lazy or eager connection), per algorithm, protocol and transport",
		run:   runMem,
	})
}

func runMem(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("mem", stderr)
	topoFile := fs.String("topo", "", "NCCL topology XML (default: the embedded "+topos.DefaultName+"); an embedded name also works")
	nodes := fs.Int("nodes", 1, "number of nodes (copies of the topology)")
	fabricFile := fs.String("fabric", "", "fabric description (key = value file, see docs/cluster.md)")
	collName := fs.StringP("collective", "c", "allreduce", "the workload: allreduce|allgather|reducescatter|broadcast|reduce|alltoall|sendrecv|all, or a comma-separated list")
	minB := fs.StringP("minbytes", "b", "8", "smallest size (nccl-tests size: the total buffer)")
	maxB := fs.StringP("maxbytes", "e", "1G", "largest size")
	factor := fs.Int64P("stepfactor", "f", 2, "size multiplication factor")
	dtName := fs.StringP("datatype", "d", "float", "data type")
	eager := fs.Bool("eager", false, "everything connected at init (NCCL_RUNTIME_CONNECT=0) instead of lazily for the workload")
	collNet := fs.Bool("collnet", false, "a CollNet (SHARP) plugin is present (NCCL_COLLNET_ENABLE=1; NICs need coll=\"1\")")
	perRank := fs.Bool("per-rank", false, "one line per rank besides the summary")
	version := fs.String("nccl-version", "", "NCCL release whose rules apply (2.28 default, 2.30)")
	asJSON := fs.Bool("json", false, "print {\"selected\", \"lazy\", \"eager\"} as JSON instead of the tables")
	fs.SetOutput(stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	var funcs []coll.Func
	for _, name := range strings.Split(*collName, ",") {
		name = strings.TrimSpace(name)
		if strings.EqualFold(name, "all") {
			funcs = append(funcs, allColls...)
			continue
		}
		f, err := coll.ParseFunc(name)
		if err != nil {
			return fmt.Errorf("%w: -c: %v", errUsage, err)
		}
		funcs = append(funcs, f)
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
	if *nodes < 1 {
		return fmt.Errorf("%w: --nodes %d (want >= 1)", errUsage, *nodes)
	}
	fab := simnet.DefaultFabric()
	if *fabricFile != "" {
		f, err := os.Open(*fabricFile)
		if err != nil {
			return err
		}
		fab, err = simnet.ParseFabric(f, *fabricFile)
		f.Close()
		if err != nil {
			return err
		}
	}
	// Buffer sizes and the other NCCL_* knobs come from the environment, as NCCL reads them.
	cfg, err := tuning.ConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	if *version != "" {
		cfg.Version = *version
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
	m, err := simnet.MachineFromXML(data, name, *nodes, fab, cfg)
	if err != nil {
		return err
	}
	setup, err := simnet.NewMemSetup(data, name, m, *collNet)
	if err != nil {
		return err
	}
	var calls []simnet.MemCall
	for _, f := range funcs {
		for _, s := range sizes {
			calls = append(calls, simnet.MemCall{Func: f, Bytes: s})
		}
	}
	lazy, err := m.Memory(setup, calls, dt, false)
	if err != nil {
		return err
	}
	eag, err := m.Memory(setup, calls, dt, true)
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
			Selected string               `json:"selected"`
			Topology string               `json:"topology"`
			Lazy     *simnet.MemoryReport `json:"lazy"`
			Eager    *simnet.MemoryReport `json:"eager"`
		}{sel.Mode, name, lazy, eag})
	}
	fmt.Fprintf(stdout, "# simccl mem: %s, %d node(s) x %d GPUs = %d ranks\n", name, m.Nodes, m.Node.NumGPUs, m.NRanks())
	return simnet.WriteMemoryText(stdout, sel, other, *perRank)
}
