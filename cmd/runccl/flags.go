package main

// The command line. nccl-tests' flags (src/common.cu, its getopt_long table; NCCL_TESTS_VERSION
// 2.19.6 in reference/nccl-model.md §7) mean what they mean there, so that a command line copied
// from all_reduce_perf runs the same sweep; runccl's own flags are long options. Where the two
// disagreed before, nccl-tests wins:
//
//   - -c is nccl-tests' --check (the number of checked runs per size, 1 by default; 0 skips the
//     check). The collective is named by --collective, by a positional argument (runccl
//     all_gather_perf …, runccl all_gather …) or by the program's name (a link named
//     all_gather_perf). An argument of -c that is not a number is still taken as the collective,
//     with a note on stderr, until runccl 1.0.
//   - sizes step by -i bytes (1M) unless -f is above 1, as in nccl-tests (-f 1 by default).
//   - -T is nccl-tests' --timeout in seconds; --timeout also takes a Go duration (10s, 1m).
//
// Flags of nccl-tests that runccl cannot honour are usage errors naming what is not supported,
// never ignored: -t other than 1, and -y, -S, -J, -R, -x, -D, -V, -M other than their defaults.

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/comm/perf"
	"github.com/simccl/simccl/internal/cli"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/tuning"
)

// deprecatedUntil is the release after which -c NAME stops naming the collective.
const deprecatedUntil = "runccl 1.0"

type options struct {
	colls     []string // perf.Collectives entries, in order
	dtypes    []coll.DataType
	ops       []coll.RedOp
	root      int  // -r
	allRoots  bool // -r all
	perf      perf.Options
	flags     perf.Flags // the header's record of the parameters
	nranks    int
	nranksSet bool // -g was given
	procs     bool
	transport string
	settings  planner.Settings // NCCL's, from the environment and the flags
	timeout   time.Duration
	// timeoutSet: --timeout was given; it then bounds the bootstrap too (else the bootstrap has
	// its own default, realnet.DefaultBootstrapTimeout).
	timeoutSet bool
	maxMemory  int64 // bytes; 0 = the memory available
	json       bool
	preconn    bool
	verbose    bool
	backend    string
	shareGPUs  bool
	cpuprof    string
	// args is the command line as given (after the collective of the program's name, where
	// there is one): --procs passes it on to its children.
	args []string
}

// checkValue is -c/--check: a count of checked runs (nccl-tests), or, deprecated, a collective.
type checkValue struct {
	n     int
	colls string // set by a deprecated -c NAME
	set   bool
}

func (c *checkValue) String() string { return strconv.Itoa(c.n) }
func (c *checkValue) Type() string   { return "int" }
func (c *checkValue) Set(s string) error {
	c.set = true
	switch strings.ToLower(s) {
	case "true":
		c.n = 1
		return nil
	case "false":
		c.n = 0
		return nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return fmt.Errorf("%d: want a number of checked runs (0: no check)", n)
		}
		c.n = n
		return nil
	}
	if _, err := parseCollNames(s); err == nil {
		c.colls, c.n = s, 1
		return nil
	}
	return fmt.Errorf("%q: want a number of checked runs (nccl-tests' --check; 0: no check), or, deprecated, a collective", s)
}

// timeoutValue is -T/--timeout: nccl-tests' seconds (an integer), or a Go duration.
type timeoutValue struct{ d time.Duration }

func (t *timeoutValue) String() string { return t.d.String() }
func (t *timeoutValue) Type() string   { return "seconds|duration" }
func (t *timeoutValue) Set(s string) error {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || n > 1e6 {
			return fmt.Errorf("%d: want 0 .. 1000000 seconds", n)
		}
		t.d = time.Duration(n) * time.Second
		if n == 0 { // nccl-tests: no timeout; the engines always bound a call
			t.d = comm.DefaultTimeout
		}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("%q: want seconds (nccl-tests) or a positive duration (10s, 1m)", s)
	}
	t.d = d
	return nil
}

// unsupported are nccl-tests' flags that runccl accepts only at their default value.
var unsupported = []struct{ short, long, def, what string }{
	{"y", "stream_null", "0", "the CUDA NULL stream (the engines run every rank on a stream of its own)"},
	{"S", "report_timestamps", "0", "a timestamp per row"},
	{"J", "output_file", "", "an output file (--json writes JSON to stdout)"},
	{"R", "local_register", "0", "buffer registration (ncclCommRegister, ncclCommWindowRegister): the engines register nothing"},
	{"x", "cta_policy", "", "CTA policies (the engines have no CTAs)"},
	{"D", "device_implementation", "0", "device-API implementations"},
	{"V", "device_cta_count", "16", "device-API CTA counts"},
	{"M", "memory", "0", "the GPU memory report"},
}

// flagSet builds runccl's flags: nccl-tests' first, then runccl's own (help.go prints them in
// two groups).
type flagSet struct {
	fs, nt, own *pflag.FlagSet

	t, g, n, m, w, N, p, z, G, C, a *int
	i, o, d, r, coll                *string
	sizes                           *cli.Sizes
	check                           checkValue
	timeout                         timeoutValue
	unsup                           []*string

	backend, transport, cpuprof, maxMem *string
	procs, js, preconn, verbose, share  *bool
	version                             *bool
	nf                                  *ncclFlags
	positional                          []string // the arguments after the flags: collectives
}

func newFlagSet() *flagSet {
	s := &flagSet{fs: pflag.NewFlagSet("runccl", pflag.ContinueOnError)}
	nt := pflag.NewFlagSet("nccl-tests", pflag.ContinueOnError)
	nt.SortFlags = false // in the order of nccl-tests' own usage (src/common.cu)
	s.t = nt.IntP("nthreads", "t", 1, "threads per process: runccl drives each rank from a goroutine of its own, so only 1 (give the ranks with -g)")
	s.g = nt.IntP("ngpus", "g", 1, "ranks in this process (goroutines; processes with --procs; GPUs with --backend cuda)")
	s.sizes = cli.AddSizes(nt, "32M", "32M", 1) // all_reduce_perf's defaults
	cli.Explain(nt, "stepfactor", "nccl-tests: 1 steps by -i bytes")
	s.i = nt.StringP("stepbytes", "i", "1M", "add this many bytes between sizes (when -f is 1)")
	s.n = nt.IntP("iters", "n", 20, "timed iterations per size and placement")
	s.m = nt.IntP("agg_iters", "m", 1, "calls per timed iteration, issued in one group")
	s.w = nt.IntP("warmup_iters", "w", 1, "warm-up iterations at min, 2×min, … max before the sweep")
	s.N = nt.IntP("run_cycles", "N", 1, "run the sweep this many times (0: until interrupted)")
	s.p = nt.IntP("parallel_init", "p", 0, "0 or 1; with one thread (-t 1) both initialise the ranks alike")
	s.check.n = 1
	nt.VarP(&s.check, "check", "c", "checked runs per size and placement, counted in #wrong (0: no check, #wrong N/A)")
	s.o = cli.AddOp(nt, "o")
	cli.Explain(nt, "op", "or mulsum (PreMulSum), or all")
	s.d = cli.AddDataType(nt, "float")
	cli.Explain(nt, "datatype", "or all")
	s.r = nt.StringP("root", "r", "0", "root rank of broadcast and reduce, or all (every rank in turn)")
	s.z = nt.IntP("blocking", "z", 0, "1: wait for every call and then for every rank before the next")
	s.timeout.d = comm.DefaultTimeout
	nt.VarP(&s.timeout, "timeout", "T", "fail a call without progress for this long: seconds (0: the default), or a duration (10s)")
	s.G = nt.IntP("cudagraph", "G", 0, "cuda backend: capture the -n timed iterations as one CUDA graph and time this many replays")
	s.C = nt.IntP("report_cputime", "C", 0, "1: report the time to issue the calls (cputime) instead of the time to complete them")
	s.a = nt.IntP("average", "a", 1, "the ranks' times combined: 0 rank 0's, 1 the mean, 2 the min, 3 the max")
	for _, u := range unsupported {
		s.unsup = append(s.unsup, nt.StringP(u.long, u.short, u.def, "not supported: "+u.what))
		nt.Lookup(u.long).Hidden = true
	}

	own := pflag.NewFlagSet("runccl", pflag.ContinueOnError)
	s.coll = cli.AddCollective(own, "", "") // no -c: that is nccl-tests' --check
	cli.Explain(own, "collective", "default all_reduce, or the program's name (all_gather_perf)")
	s.backend = own.String("backend", "cpu", "execution backend: cpu (package comm), or cuda (-g GPUs of this machine)")
	s.procs = own.Bool("procs", false, "one process per rank on this host (shared memory) instead of goroutines")
	s.transport = own.String("transport", "auto", "auto, inproc, shm or tcp")
	s.nf = addNCCLFlags(own)
	s.js = cli.AddJSON(own, "a header, the rows, the sums")
	s.preconn = own.Bool("connect-at-init", false, "connect every ring/tree connection at init (NCCL_RUNTIME_CONNECT=0)")
	s.verbose = own.BoolP("verbose", "v", false, "log connections and their memory to stderr")
	s.cpuprof = own.String("cpuprofile", "", "write a CPU profile of the run (Go's pprof format) to this file")
	s.maxMem = own.String("max-memory", "auto", "refuse sizes whose buffers (every rank on this host) exceed this (auto: the memory available)")
	s.share = own.Bool("share-gpus", false, "cuda backend: let -g exceed the GPU count, ranks sharing GPUs round robin (timings then say nothing about NVLink)")
	s.version = own.Bool("version", false, "print runccl's version and exit")
	own.BoolP("help", "h", false, "print this help and exit")

	s.nt, s.own = nt, own
	s.fs.AddFlagSet(nt)
	s.fs.AddFlagSet(own)
	// --coll was the collective's long name before --collective (cli.Normalize; cobra applies
	// it to the root's flags).
	s.fs.SetNormalizeFunc(cli.Normalize)
	return s
}

// usagef is a usage error (exit 2).
func usagef(format string, a ...any) error { return cli.Usagef(format, a...) }

// errHelp and errVersion ask mainRun to print the help or the version.
var (
	errHelp    = errors.New("help requested")
	errVersion = errors.New("version requested")
)

// bareCheck turns a bare --check (runccl's earlier boolean flag: at the end, or before another
// flag) into --check=1.
func bareCheck(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if a == "--check" && (i+1 == len(out) || (strings.HasPrefix(out[i+1], "-") && !isNumber(out[i+1]))) {
			out[i] = "--check=1"
		}
	}
	return out
}

func isNumber(s string) bool { _, err := strconv.Atoi(s); return err == nil }

// parse reads the command line; notes go to stderr (a deprecated -c NAME, a launcher's variables
// left unused are reported by run).
func parse(args []string, stderr io.Writer, getenv func(string) string) (*options, error) {
	s := newFlagSet()
	if err := s.fs.Parse(bareCheck(args)); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, errHelp
		}
		return nil, usagef("%v", err)
	}
	return s.options(args, s.fs.Args(), stderr, getenv)
}

// options reads the parsed flags and the positional arguments: args is the command line as given
// (passed on to --procs children).
func (s *flagSet) options(args, positional []string, stderr io.Writer, getenv func(string) string) (*options, error) {
	s.positional = positional
	if h, _ := s.fs.GetBool("help"); h {
		return nil, errHelp
	}
	if *s.version {
		return nil, errVersion
	}
	fs := s.fs
	for i, u := range unsupported {
		if v := *s.unsup[i]; fs.Changed(u.long) && v != u.def {
			accept := "only -" + u.short + " " + u.def
			if u.def == "" {
				accept = "it only unset"
			}
			return nil, usagef("-%s %s (--%s): not supported: %s; runccl accepts %s", u.short, v, u.long, u.what, accept)
		}
	}
	opt := &options{args: args, nranks: *s.g, nranksSet: fs.Changed("ngpus"), procs: *s.procs, transport: *s.transport,
		timeout: s.timeout.d, timeoutSet: fs.Changed("timeout"), json: *s.js, preconn: *s.preconn, verbose: *s.verbose,
		backend: *s.backend, shareGPUs: *s.share, cpuprof: *s.cpuprof}
	if *s.backend != "cpu" && *s.backend != "cuda" {
		return nil, usagef("--backend %q: want cpu or cuda", *s.backend)
	}
	var err error
	if opt.settings, err = s.nf.settings(fs, getenv); err != nil {
		return nil, err
	}
	if getenv("RUNCCL_RANK") != "" {
		stderr = io.Discard // --procs children: the parent has said it
	}
	if err := opt.readColls(s, stderr); err != nil {
		return nil, err
	}
	if err := opt.readSizes(s); err != nil {
		return nil, err
	}
	if err := opt.readTypes(s); err != nil {
		return nil, err
	}
	if err := opt.readCounts(s); err != nil {
		return nil, err
	}
	if *s.maxMem != "auto" {
		v, err := units.ParseSize(*s.maxMem)
		if err != nil || v == 0 {
			return nil, usagef("--max-memory %q: want a size (16G) or auto", *s.maxMem)
		}
		opt.maxMemory = v
	}
	if err := opt.checkBackend(); err != nil {
		return nil, err
	}
	opt.flags.Timeout = opt.timeout.Seconds()
	opt.flags.Algo, opt.flags.Proto = opt.settings.Tuning.Algo, opt.settings.Tuning.Proto
	opt.flags.MinNChannels, opt.flags.MaxNChannels = opt.settings.Tuning.MinNChannels, opt.settings.Tuning.MaxNChannels
	opt.flags.ConnectAtInit, opt.flags.Procs, opt.flags.ShareGPUs = opt.preconn, opt.procs, opt.shareGPUs
	return opt, nil
}

// readColls resolves the collectives from --collective, the positional arguments (the program's
// name among them) and a deprecated -c NAME; where several are given they must agree.
func (o *options) readColls(s *flagSet, stderr io.Writer) error {
	type source struct{ what, val string }
	var srcs []source
	if s.fs.Changed("collective") {
		srcs = append(srcs, source{"--collective", *s.coll})
	}
	for _, a := range s.positional {
		if _, err := parseCollNames(a); err != nil {
			return usagef("unexpected argument %q (a collective: %s; or a subcommand first: help, replay)", a, strings.Join(perf.NamesOf(perf.Collectives), ", "))
		}
		srcs = append(srcs, source{"argument", a})
	}
	if s.check.colls != "" {
		fmt.Fprintf(stderr, "runccl: note: -c %s names the collective as runccl did before; -c is now nccl-tests' --check (checked runs, 1 by default): use --collective %s or `runccl %s_perf …` (-c NAME is accepted until %s)\n",
			s.check.colls, s.check.colls, perf.NameOf(strings.Split(s.check.colls, ",")[0]), deprecatedUntil)
		srcs = append(srcs, source{"-c", s.check.colls})
	}
	o.colls = []string{"allreduce"}
	for i, src := range srcs {
		cs, err := parseCollNames(src.val)
		if err != nil {
			return usagef("%s: %v", src.what, errors.Unwrap(err))
		}
		if i > 0 && strings.Join(cs, ",") != strings.Join(o.colls, ",") {
			return usagef("%s %s and %s %s name different collectives: give one", srcs[0].what, srcs[0].val, src.what, src.val)
		}
		o.colls = cs
	}
	return nil
}

// collOrder is perf.Collectives' order (-c all), as coll.Funcs.
var collOrder = []coll.Func{coll.AllReduce, coll.AllGather, coll.ReduceScatter, coll.Broadcast, coll.Reduce, coll.AllToAll, coll.SendRecv}

// parseCollNames reads collectives as every command does (cli.ParseColls: allreduce, all_reduce,
// all_reduce_perf, a list, all) and names them as package perf does (allreduce).
func parseCollNames(s string) ([]string, error) {
	fs, err := cli.ParseColls(s, collOrder)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = strings.ToLower(f.String())
	}
	return out, nil
}

func (o *options) readSizes(s *flagSet) error {
	lo, hi, err := s.sizes.Bounds()
	if err != nil {
		return err
	}
	step, err := cli.ParseSize("-i", *s.i)
	if err != nil {
		return err
	}
	f := *s.sizes.Factor
	switch {
	case f < 1:
		return usagef("-f %d: want a factor of 1 (step by -i bytes) or more", f)
	case f > 1 && s.fs.Changed("stepbytes"):
		return usagef("-i %s and -f %d: nccl-tests steps by -f when it is above 1 and leaves -i unused; give one of them", *s.i, f)
	case f == 1 && step == 0 && lo < hi:
		return usagef("-i %s: want a positive step (or -f 2 and more)", *s.i)
	}
	if o.perf.Sizes, err = cli.Sweep(lo, hi, f, step); err != nil {
		return err
	}
	o.flags.MinBytes, o.flags.MaxBytes, o.flags.StepBytes, o.flags.StepFactor = lo, hi, step, f
	return nil
}

func (o *options) readTypes(s *flagSet) error {
	var err error
	if o.dtypes, err = cli.ParseDataTypes(*s.d, true); err != nil {
		return err
	}
	if o.ops, err = cli.ParseOps(*s.o, true); err != nil {
		return err
	}
	if r := strings.ToLower(strings.TrimSpace(*s.r)); r == "all" {
		o.allRoots = true
	} else {
		n, err := strconv.Atoi(r)
		if err != nil || n < 0 {
			return usagef("-r %q: want a rank (0, 1, …) or all", *s.r)
		}
		o.root = n
	}
	o.flags.Op, o.flags.DataType, o.flags.Root = *s.o, *s.d, *s.r
	return nil
}

func (o *options) readCounts(s *flagSet) error {
	bin := func(flag string, v int) error {
		if v != 0 && v != 1 {
			return usagef("-%s %d: want 0 or 1", flag, v)
		}
		return nil
	}
	switch {
	case *s.t != 1:
		return usagef("-t %d: runccl drives each rank of a process from a goroutine of its own, with no thread count: give the ranks with -g (nccl-tests runs -t × -g ranks per process: -g %d here)", *s.t, max(*s.t, 1)**s.g)
	case *s.g < 1 || *s.g > 1024:
		return usagef("-g %d: want 1..1024 ranks", *s.g)
	case *s.n < 1:
		return usagef("-n %d: want at least 1 timed iteration", *s.n)
	case *s.w < 0:
		return usagef("-w %d: want 0 or more warm-up iterations", *s.w)
	case *s.m < 1:
		return usagef("-m %d: want at least 1 call per iteration", *s.m)
	case *s.N < 0:
		return usagef("-N %d: want a number of cycles (0: until interrupted)", *s.N)
	case *s.G < 0:
		return usagef("-G %d: want a number of graph replays (0: no graph)", *s.G)
	}
	for _, b := range []struct {
		flag string
		v    int
	}{{"p", *s.p}, {"z", *s.z}, {"C", *s.C}} {
		if err := bin(b.flag, b.v); err != nil {
			return err
		}
	}
	avg, err := perf.AverageOf(*s.a)
	if err != nil {
		return usagef("-a %v", err)
	}
	p := &o.perf
	p.Iters, p.Warmup, p.AggIters, p.Graph = *s.n, *s.w, *s.m, *s.G
	p.Check, p.CheckIters = s.check.n > 0, s.check.n
	p.Blocking, p.CPUTime, p.Average = *s.z == 1, *s.C == 1, avg
	p.Cycles = *s.N
	if *s.N == 0 {
		p.Cycles = perf.Forever
	}
	f := &o.flags
	f.NThreads, f.NGpus, f.Iters, f.AggIters, f.WarmupIters, f.RunCycles = 1, *s.g, *s.n, *s.m, *s.w, *s.N
	f.ParallelInit, f.Check, f.Blocking, f.CudaGraph, f.ReportCputime, f.Average = *s.p, s.check.n, *s.z, *s.G, *s.C, *s.a
	return nil
}

// checkBackend refuses what the chosen backend cannot do.
func (o *options) checkBackend() error {
	if o.backend != "cuda" {
		if o.perf.Graph != 0 || o.shareGPUs {
			return usagef("-G/--cudagraph and --share-gpus need --backend cuda")
		}
		return nil
	}
	p := o.perf
	for _, c := range []struct {
		bad  bool
		what string
	}{
		{p.AggIters > 1, fmt.Sprintf("-m %d", p.AggIters)},
		{p.Blocking, "-z 1"},
		{p.CPUTime, "-C 1"},
		{p.CheckIters > 1, fmt.Sprintf("-c %d", p.CheckIters)},
	} {
		if c.bad {
			return usagef("%s: not supported with --backend cuda yet (the cpu backend runs it)", c.what)
		}
	}
	return nil
}

// programColl maps the program's name to a collective: a link named all_gather_perf (or
// all_gather) runs all_gather, as nccl-tests' binaries do. "" for runccl itself.
func programColl(argv0 string) string {
	name := filepath.Base(argv0)
	if name == "runccl" || name == "." || name == "" {
		return ""
	}
	if cs, err := parseCollNames(name); err == nil && len(cs) == 1 && name != "all" {
		return name
	}
	return ""
}

// releaseOf is the NCCL release whose rules plan the calls.
func releaseOf(s planner.Settings) string {
	if s.Release != "" {
		return s.Release
	}
	return tuning.DefaultRelease
}
