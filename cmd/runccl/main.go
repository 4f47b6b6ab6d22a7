// Command runccl runs collectives for real, nccl-tests style, on CPUs: goroutine ranks in one
// process (-g N), one process per rank on this host (--procs, shared memory), or one rank per
// process under a launcher (torchrun, mpirun, srun: detected from the environment); or on this
// machine's GPUs (--backend cuda). Its flags are nccl-tests' (flags.go), its output nccl-tests'
// table (comm/perf.TableWriter) or JSON.
//
//	runccl [all_reduce_perf|all_gather|…] -b 8 -e 128M -f 2 -g NRANKS [-c 1] [-d TYPE] [-o OP] [--json]
//	runccl replay TRACE…
//	runccl help [replay]
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

	"github.com/spf13/cobra"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/comm/perf"
	"github.com/simccl/simccl/internal/cli"
	"github.com/simccl/simccl/internal/sysmem"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/realnet"
)

// errUsage marks a usage error (exit 2): cli.ErrUsage, as simccl's.
var errUsage = cli.ErrUsage

func main() {
	args := os.Args[1:]
	if c := programColl(os.Args[0]); c != "" {
		args = append([]string{c}, args...) // a link named all_gather_perf runs all_gather
	}
	os.Exit(mainRun(args, os.Stdout, os.Stderr, os.Getenv))
}

// mainRun runs the command line args: exit 0, 1 on a failure or wrong elements, 2 on bad usage
// (cli.ExitCode, as simccl's).
func mainRun(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return cli.Execute(newRoot(bareCheck(args), stderr, getenv), bareCheck(args), stdout, stderr)
}

// newRoot builds runccl's command tree for the command line args: the root runs a sweep (its
// flags are nccl-tests' and runccl's, flags.go), replay runs a trace (replay.go).
func newRoot(args []string, stderr io.Writer, getenv func(string) string) *cobra.Command {
	s := newFlagSet()
	root := cli.NewRoot("runccl [COLLECTIVE]", "run NCCL's collectives for real, nccl-tests style", "")
	root.Flags().AddFlagSet(s.fs)
	root.Args = cobra.ArbitraryArgs // collectives, read by options
	root.RunE = func(cmd *cobra.Command, positional []string) error {
		opt, err := s.options(args, positional, stderr, getenv)
		switch {
		case errors.Is(err, errHelp):
			return cmd.Help()
		case errors.Is(err, errVersion):
			fmt.Fprintln(cmd.OutOrStdout(), "runccl", version())
			return nil
		case err != nil:
			return err
		}
		if opt.cpuprof != "" {
			f, err := os.Create(opt.cpuprof)
			if err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
				return err
			}
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
		return run(opt, cmd.OutOrStdout(), cmd.ErrOrStderr(), getenv)
	}
	replayArgs := args
	if len(args) > 0 && args[0] == "replay" {
		replayArgs = args[1:]
	}
	root.AddCommand(replayCommand(replayArgs, getenv))
	cli.RegisterCompletions(root)
	defaultHelp := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, a []string) {
		switch cmd.CommandPath() {
		case "runccl":
			writeHelp(cmd.OutOrStdout())
		case "runccl replay":
			writeReplayHelp(cmd.OutOrStdout())
		default:
			defaultHelp(cmd, a)
		}
	})
	return root
}

func (o *options) config(stderr io.Writer) *comm.Config {
	c := cpuConfig(o.settings)
	cfg := &c
	cfg.Transport, cfg.Timeout, cfg.ConnectAtInit = o.transport, o.timeout, o.preconn
	// An explicit --timeout bounds the bootstrap too; without one it has the bootstrap's own
	// default (realnet.DefaultBootstrapTimeout), not the per-call 10 s: 64 goroutine ranks on a
	// loaded 2-core machine can take longer than that to meet.
	if o.timeoutSet {
		cfg.BootstrapTimeout = o.timeout
	}
	if o.verbose {
		cfg.Logf = func(format string, args ...any) { fmt.Fprintf(stderr, "runccl INFO "+format+"\n", args...) }
	}
	return cfg
}

func run(opt *options, stdout, stderr io.Writer, getenv func(string) string) error {
	if opt.backend == "cuda" {
		return runCUDA(opt, stdout, stderr, getenv) // cuda.go
	}
	launch, launched, err := resolveRanks(opt, getenv, stderr)
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
		c, err := initLaunched(launch, opt.config(stderr))
		if err != nil {
			return err
		}
		cs = []*comm.Comm{c}
	case opt.procs:
		return spawn(opt, stdout, stderr)
	default:
		cs, err = comm.InitAll(opt.nranks, opt.config(stderr))
		if err != nil {
			return err
		}
	}
	defer func() {
		for _, c := range cs {
			c.Destroy()
		}
	}()
	opt.flags.NGpus = len(cs)
	watch := watchSignals(cs)
	err = sweepCPU(cs, opt, launched, stdout, watch.interrupted)
	if serr := watch.stop(); serr != nil {
		return serr
	}
	return err
}

// resolveRanks decides how this process runs its ranks. With no launcher variables, as -g
// goroutines (or --procs processes). Under a launcher (torchrun, mpirun, srun), as one rank of the
// launcher's job, as nccl-tests runs -g 1 under mpirun. An explicit -g N above 1 wins over a
// launcher's variables left in the environment of rank 0 (a Slurm batch script or allocation has
// SLURM_PROCID=0 and SLURM_NTASKS): the N ranks run in this process and a note on stderr names the
// variables left unused. On a rank other than 0 it is an error: that process was started by a
// launcher, which runs one rank per process.
func resolveRanks(opt *options, getenv func(string) string, stderr io.Writer) (perf.Launch, bool, error) {
	l, ok, err := perf.LauncherRank(getenv)
	if !ok {
		return l, false, nil
	}
	if l.Launcher != "runccl" && opt.nranksSet && opt.nranks > 1 {
		if err == nil && l.Rank != 0 {
			return l, false, usagef("-g %d: this process is rank %d of %d started by %s (%s, %s): under a launcher runccl runs one rank per process; drop -g or give -g 1",
				opt.nranks, l.Rank, l.Size, l.Launcher, l.RankVar, l.SizeVar)
		}
		fmt.Fprintf(stderr, "runccl: note: -g %d runs %d ranks in this process; %s's %s=%s and %s=%s are left unused (a launcher's processes run one rank each: -g 1)\n",
			opt.nranks, opt.nranks, l.Launcher, l.RankVar, getenv(l.RankVar), l.SizeVar, getenv(l.SizeVar))
		return perf.Launch{}, false, nil
	}
	l, _, err = perf.DetectLaunch(getenv)
	return l, true, err
}

// sweepCPU runs the command line's tests on the CPU engine's communicators of this process; rank
// 0's process prints.
func sweepCPU(cs []*comm.Comm, opt *options, launched bool, stdout io.Writer, interrupted func() error) error {
	n := cs[0].Count()
	if err := opt.checkRoot(n); err != nil {
		return err
	}
	what := "CPU (goroutine rank)"
	if launched {
		what = "CPU (process rank)"
	}
	devs, err := perf.Devices(cs, what)
	if err != nil {
		return err
	}
	var w perf.Writer
	for _, c := range cs {
		if c.Rank() == 0 {
			h := opt.header("cpu", c.TransportOf(1%n), cpuMachine, n, devs)
			if w, err = opt.writer(stdout, h); err != nil {
				return err
			}
		}
	}
	return runTests(opt, n, w, func(p perf.Options) (*perf.Result, error) { return perf.Run(cs, p) }, interrupted)
}

// cpuMachine says what the CPU engine plans for (planner.CPUMachine).
const cpuMachine = "planner.CPUMachine: each host's ranks as GPUs under one CPU socket without NVLink, hosts joined by one NIC"

// header describes the run for the writers.
func (o *options) header(backend, transport, machine string, n int, devs []perf.Device) perf.Header {
	return perf.Header{Program: "runccl", Version: version(), Backend: backend, NRanks: n, Transport: transport,
		NCCLRelease: releaseOf(o.settings), Machine: machine, Collectives: perf.NamesOf(o.colls), Flags: o.flags,
		Devices: devs, Args: o.args}
}

// writer returns the table or JSON writer of the run, its header written.
func (o *options) writer(stdout io.Writer, h perf.Header) (perf.Writer, error) {
	var w perf.Writer = perf.NewTableWriter(stdout, h)
	if o.json {
		w = perf.NewJSONWriter(stdout, h)
	}
	return w, w.Begin()
}

// checkRoot refuses a root that is not a rank of n, for the collectives that have one.
func (o *options) checkRoot(n int) error {
	for _, c := range o.colls {
		if (c == "broadcast" || c == "reduce") && !o.allRoots && o.root >= n {
			return usagef("-r %d: want a rank of the %d (0..%d) or all", o.root, n, n-1)
		}
	}
	return nil
}

// runTests runs the tests of the command line in nccl-tests' order (collective, then data type,
// reduction and root; each test a warm-up and the -N sweeps), each through sweep, with its lines
// going to w (nil on processes without rank 0), and closes w. It fails on the first error (the
// signal interrupted names, when one aborted the run), and with the number of wrong elements
// when some were.
func runTests(opt *options, n int, w perf.Writer, sweep func(perf.Options) (*perf.Result, error), interrupted func() error) error {
	var wrong int64
	err := func() error {
		for _, c := range opt.colls {
			f, err := coll.ParseFunc(c)
			if err != nil {
				return err
			}
			ops, roots := opt.ops, []int{opt.root}
			if !f.Reduces() {
				ops = ops[:1] // nccl-tests runs the others once, redop "none"
			}
			switch {
			case c != "broadcast" && c != "reduce":
				roots = []int{0} // no root: printed -1
			case opt.allRoots:
				roots = nil
				for r := 0; r < n; r++ {
					roots = append(roots, r)
				}
			}
			for _, dt := range opt.dtypes {
				for _, op := range ops {
					for _, root := range roots {
						p := opt.perf
						p.Colls, p.DataType, p.Op, p.Root = []string{c}, dt, op, root
						if w != nil {
							p.Sink = w
						}
						res, err := sweep(p)
						if err != nil {
							return err
						}
						if res != nil {
							wrong += res.Wrong
						}
					}
				}
			}
		}
		return nil
	}()
	if err != nil && interrupted != nil {
		if ie := interrupted(); ie != nil {
			err = ie
		}
	}
	if w != nil {
		if e := w.End(err); err == nil {
			err = e
		}
	}
	if err == nil && wrong > 0 {
		err = fmt.Errorf("%d wrong elements", wrong)
	}
	return err
}

// checkMemory refuses sizes whose buffers would not fit: ranks ranks' buffers for the largest size
// against --max-memory, or else the memory available (child: the parent has checked the host).
func checkMemory(opt *options, ranks int, child bool) error {
	p := opt.perf
	for _, op := range opt.ops {
		if op == coll.Avg || op == coll.PreMulSum {
			p.Op = op // these take a scaled copy of the input too
		}
	}
	per := perf.RankBufferBytes(p)
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
	for _, a := range opt.args {
		if a != "--procs" && a != "--procs=true" {
			args = append(args, a)
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
