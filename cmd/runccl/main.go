// Command runccl runs collectives for real, nccl-tests style, on CPUs: goroutine ranks in one
// process (-g N), one process per rank on this host (--procs, shared memory), or one rank per
// process under a launcher (torchrun, mpirun, srun: detected from the environment).
//
//	runccl -c allreduce|allgather|reducescatter|broadcast|reduce|alltoall|sendrecv|all
//	       -b 8 -e 128M -f 2 -g NRANKS [--backend cpu] [-d TYPE] [-o OP] [--check] [--json]
package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/comm/perf"
	"github.com/simccl/simccl/internal/sysmem"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/realnet"
)

var errUsage = errors.New("usage")

func main() {
	os.Exit(mainRun(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

type options struct {
	perf      perf.Options
	nranks    int
	procs     bool
	transport string
	settings  planner.Settings // NCCL's, from the environment and the flags
	timeout   time.Duration
	// timeoutSet: --timeout was given; it then bounds the bootstrap under a launcher too (with
	// goroutine ranks and --procs it always does: this program starts every rank).
	timeoutSet bool
	maxMemory  int64 // bytes; 0 = the memory available
	json       bool
	preconn    bool
	verbose    bool
	backend    string
	shareGPUs  bool
	cpuprof    string
}

func parse(args []string, stderr io.Writer, getenv func(string) string) (*options, error) {
	fs := pflag.NewFlagSet("runccl", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	c := fs.StringP("coll", "c", "allreduce", "collective: "+fmt.Sprint(perf.Collectives)+" or all (comma-separated list allowed)")
	b := fs.StringP("minbytes", "b", "32M", "smallest total buffer size (8, 64K, 1M, …)")
	e := fs.StringP("maxbytes", "e", "32M", "largest total buffer size")
	f := fs.Int64P("stepfactor", "f", 2, "multiply the size by this factor between steps")
	g := fs.IntP("ngpus", "g", 1, "number of ranks (goroutines in this process, or processes with --procs)")
	d := fs.StringP("datatype", "d", "float", "data type: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2")
	o := fs.StringP("op", "o", "sum", "reduction: sum prod max min avg premulsum")
	r := fs.IntP("root", "r", 0, "root rank of broadcast and reduce")
	n := fs.IntP("iters", "n", 20, "timed iterations per size")
	w := fs.IntP("warmup_iters", "w", 1, "warm-up iterations per size")
	check := fs.Bool("check", false, "check every element of one extra run per size (the #wrong column)")
	backend := fs.String("backend", "cpu", "execution backend: cpu, or cuda (-g GPUs of this machine, cuda.go)")
	procs := fs.Bool("procs", false, "one process per rank on this host (shared memory) instead of goroutines")
	transport := fs.String("transport", "auto", "auto, inproc, shm or tcp")
	nf := addNCCLFlags(fs)
	timeout := fs.Duration("timeout", comm.DefaultTimeout, "fail a call that makes no progress for this long")
	js := fs.Bool("json", false, "write JSON instead of the table")
	preconn := fs.Bool("connect-at-init", false, "connect every ring/tree connection at init (NCCL_RUNTIME_CONNECT=0)")
	verbose := fs.BoolP("verbose", "v", false, "log connections and their memory to stderr")
	graph := fs.IntP("cudagraph", "G", 0, "cuda backend: capture the -n timed iterations as one CUDA graph and time this many replays of it (nccl-tests' -G)")
	cpuprof := fs.String("cpuprofile", "", "write a CPU profile of the run (Go's pprof format) to this file")
	maxMem := fs.String("max-memory", "auto", "refuse sizes whose buffers (every rank on this host) exceed this (auto: the memory available)")
	share := fs.Bool("share-gpus", false, "cuda backend: let -g exceed the GPU count, ranks sharing GPUs round robin (exercises the multi-rank paths; timings say nothing about NVLink)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *backend != "cpu" && *backend != "cuda" {
		return nil, fmt.Errorf("%w: --backend %q: want cpu or cuda", errUsage, *backend)
	}
	settings, err := nf.settings(fs, getenv)
	if err != nil {
		return nil, err
	}
	opt := &options{nranks: *g, procs: *procs, transport: *transport, settings: settings, timeout: *timeout, timeoutSet: fs.Changed("timeout"),
		json: *js, preconn: *preconn, verbose: *verbose, backend: *backend, shareGPUs: *share, cpuprof: *cpuprof}
	if *timeout <= 0 {
		return nil, fmt.Errorf("%w: --timeout %v: want a positive duration", errUsage, *timeout)
	}
	if *maxMem != "auto" {
		v, err := units.ParseSize(*maxMem)
		if err != nil || v == 0 {
			return nil, fmt.Errorf("%w: --max-memory %q: want a size (16G) or auto", errUsage, *maxMem)
		}
		opt.maxMemory = v
	}
	if *backend != "cuda" && (*graph != 0 || *share) {
		return nil, fmt.Errorf("%w: -G/--cudagraph and --share-gpus need --backend cuda", errUsage)
	}
	if *graph < 0 {
		return nil, fmt.Errorf("%w: -G %d: want a number of graph replays (0: no graph)", errUsage, *graph)
	}
	opt.perf.Graph = *graph
	if opt.perf.Colls, err = perf.ParseColls(*c); err != nil {
		return nil, fmt.Errorf("%w: -c: %v", errUsage, err)
	}
	lo, err := units.ParseSize(*b)
	if err != nil {
		return nil, fmt.Errorf("%w: -b: %v", errUsage, err)
	}
	hi, err := units.ParseSize(*e)
	if err != nil {
		return nil, fmt.Errorf("%w: -e: %v", errUsage, err)
	}
	if opt.perf.Sizes, err = units.Sweep(lo, hi, *f); err != nil {
		return nil, fmt.Errorf("%w: -b/-e/-f: %v", errUsage, err)
	}
	if opt.perf.DataType, err = coll.ParseDataType(*d); err != nil {
		return nil, fmt.Errorf("%w: -d: %v", errUsage, err)
	}
	if opt.perf.Op, err = coll.ParseRedOp(*o); err != nil {
		return nil, fmt.Errorf("%w: -o: %v", errUsage, err)
	}
	if *g < 1 || *g > 1024 {
		return nil, fmt.Errorf("%w: -g %d: want 1..1024 ranks", errUsage, *g)
	}
	if *n < 1 || *w < 0 {
		return nil, fmt.Errorf("%w: -n %d -w %d: want at least 1 timed iteration and no negative warm-up count", errUsage, *n, *w)
	}
	opt.perf.Root, opt.perf.Iters, opt.perf.Warmup, opt.perf.Check = *r, *n, *w, *check
	return opt, nil
}

func mainRun(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) > 0 && args[0] == "replay" {
		return runReplay(args[1:], stdout, stderr, getenv) // replay.go
	}
	opt, err := parse(args, stderr, getenv)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err == nil && opt.cpuprof != "" {
		var f *os.File
		if f, err = os.Create(opt.cpuprof); err == nil {
			if err = pprof.StartCPUProfile(f); err == nil {
				defer func() { pprof.StopCPUProfile(); f.Close() }()
			}
		}
	}
	if err == nil {
		err = run(opt, stdout, stderr, getenv)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "runccl:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "runccl:", err)
		return 1
	}
}

func (o *options) config(stderr io.Writer, launched bool) *comm.Config {
	c := cpuConfig(o.settings)
	cfg := &c
	cfg.Transport, cfg.Timeout, cfg.ConnectAtInit = o.transport, o.timeout, o.preconn
	if !launched || o.timeoutSet {
		cfg.BootstrapTimeout = o.timeout
	}
	if o.verbose {
		cfg.Logf = func(format string, args ...any) { fmt.Fprintf(stderr, "runccl INFO "+format+"\n", args...) }
	}
	return cfg
}

func run(opt *options, stdout, stderr io.Writer, getenv func(string) string) error {
	if opt.backend == "cuda" {
		return runCUDA(opt, stdout, getenv) // cuda.go
	}
	launch, launched, err := perf.DetectLaunch(getenv)
	if err != nil {
		return err
	}
	// The ranks' buffers on this host: every rank with goroutines or --procs, this one under a
	// launcher (which may start others here: the bound is per process).
	here := opt.nranks
	if launched {
		here = 1
	}
	if err := checkMemory(opt, here, launched && launch.Launcher == "runccl"); err != nil {
		return err
	}
	var cs []*comm.Comm
	switch {
	case launched:
		c, err := initLaunched(launch, opt.config(stderr, launch.Launcher != "runccl"))
		if err != nil {
			return err
		}
		cs = []*comm.Comm{c}
	case opt.procs:
		return spawn(opt, stdout, stderr)
	default:
		cs, err = comm.InitAll(opt.nranks, opt.config(stderr, false))
		if err != nil {
			return err
		}
	}
	defer func() {
		for _, c := range cs {
			c.Destroy()
		}
	}()
	stopWatch := abortOnSignal(cs)
	res, err := perf.Run(cs, opt.perf)
	if serr := stopWatch(); serr != nil {
		return serr
	}
	if err != nil {
		return err
	}
	if res == nil { // not rank 0
		return nil
	}
	if opt.json {
		if err := perf.WriteJSON(stdout, res); err != nil {
			return err
		}
	} else {
		perf.WriteTable(stdout, res)
	}
	if res.Wrong > 0 {
		return fmt.Errorf("%d wrong elements", res.Wrong)
	}
	return nil
}

// checkMemory refuses sizes whose buffers would not fit: ranks ranks' buffers for the largest size
// against --max-memory, or else the memory available (child: the parent has checked the host).
func checkMemory(opt *options, ranks int, child bool) error {
	per := perf.RankBufferBytes(opt.perf)
	need := per
	if per > 0 && int64(ranks) > (1<<62)/per {
		need = 1 << 62
	} else {
		need = per * int64(ranks)
	}
	bound, what := opt.maxMemory, "--max-memory"
	if bound == 0 {
		if child {
			return nil
		}
		var ok bool
		if bound, ok = sysmem.Available(); !ok {
			return nil
		}
		what = "the memory available"
	}
	if need > bound {
		return fmt.Errorf("%w: -e %s needs %s of buffers (%s for each of %d ranks in this process), more than %s (%s): use a smaller -e or fewer ranks",
			errUsage, units.FormatSize(maxSize(opt.perf.Sizes)), approxSize(need), approxSize(per), ranks, what, approxSize(bound))
	}
	return nil
}

func maxSize(sizes []int64) int64 {
	var m int64
	for _, s := range sizes {
		m = max(m, s)
	}
	return m
}

// approxSize prints bytes to three significant digits (1.5G, 640M).
func approxSize(b int64) string {
	f, unit := float64(b), ""
	for _, u := range []string{"K", "M", "G", "T", "P", "E"} {
		if f < 1024 {
			break
		}
		f, unit = f/1024, u
	}
	return fmt.Sprintf("%.3g%s", f, unit)
}

// initLaunched joins the job as one rank: runccl's own children are handed their id; under a
// launcher the id is the root's address and the job's secret (perf.Launch.UniqueID), and rank 0
// starts the root.
func initLaunched(l perf.Launch, cfg *comm.Config) (*comm.Comm, error) {
	var id comm.UniqueID
	if l.ID != "" {
		b, err := hex.DecodeString(l.ID)
		if err != nil || len(b) != len(id) {
			return nil, fmt.Errorf("RUNCCL_ID is not a %d-byte hex unique id", len(id))
		}
		copy(id[:], b)
	} else {
		var err error
		if id, err = l.UniqueID(); err != nil {
			return nil, err
		}
		if l.Rank == 0 {
			root, err := realnet.StartRoot(id, cfg.BootstrapTimeout)
			if err != nil {
				return nil, fmt.Errorf("%s rank 0: %w", l.Launcher, err)
			}
			defer root.Close()
		}
	}
	c, err := comm.InitRank(l.Size, id, l.Rank, cfg)
	if errors.Is(err, realnet.ErrAuth) {
		err = fmt.Errorf("%w (every rank needs the same secret: SIMCCL_COMM_ID=host:port#SECRET, or SIMCCL_SECRET_FILE on a file system all hosts share: docs/security.md)", err)
	}
	return c, err
}

// spawn starts one child process per rank (this program again, with RUNCCL_* variables; the unique
// id, secret included, travels in the environment, which only this user can read) and owns them
// (runOwned); rank 0's output is the run's output. The bootstrap root runs here, bounded by
// --timeout: if the ranks have not all registered by then, the children are stopped.
func spawn(opt *options, stdout, stderr io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	id, root, err := realnet.NewUniqueID("", opt.timeout)
	if err != nil {
		return err
	}
	defer root.Close()
	var args []string
	for i := 1; i < len(os.Args); i++ {
		if os.Args[i] != "--procs" && os.Args[i] != "--procs=true" {
			args = append(args, os.Args[i])
		}
	}
	cmds := make([]*exec.Cmd, opt.nranks)
	for r := range cmds {
		cmd := exec.Command(self, args...)
		cmd.Env = append(os.Environ(), "RUNCCL_RANK="+strconv.Itoa(r), "RUNCCL_NRANKS="+strconv.Itoa(opt.nranks), "RUNCCL_ID="+hex.EncodeToString(id[:]))
		if r == 0 {
			cmd.Stdout = stdout
		}
		cmd.Stderr = stderr
		cmds[r] = cmd
	}
	abort := make(chan error, 1)
	go func() {
		if err := root.Wait(); err != nil {
			abort <- err
		}
	}()
	return runOwned(cmds, func(r int) string { return fmt.Sprintf("rank %d", r) }, abort)
}
