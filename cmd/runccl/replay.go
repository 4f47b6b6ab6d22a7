package main

// runccl replay: a workload trace (intercept's JSON lines, one file per rank, or NCCL COLL logs)
// executed for real by the comm engine. The logic is in package intercept (PlanReal, RunActor,
// RunRealInProcess, MergeReal); this file wires flags, processes and output.

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/intercept/realreplay"
	"github.com/simccl/simccl/internal/cli"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/planner"
)

// Environment of a --procs child: which rank trace it runs, the communicators' unique ids (a JSON
// file: comm id → hex id), where it writes its result.
const (
	envReplayActor = "RUNCCL_REPLAY_ACTOR"
	envReplayIDs   = "RUNCCL_REPLAY_IDS"
	envReplayOut   = "RUNCCL_REPLAY_OUT"
)

type replayOptions struct {
	files     []string
	transport string
	procs     bool
	check     bool
	json      bool
	top       int
	calls     bool
	timeout   time.Duration
	settings  planner.Settings
	verbose   bool
	scale     int
	maxMemory int64
	args      []string // as given, for the children

	timeoutFlag timeoutValue // --timeout as runccl's -T reads it
}

// replayFlags defines replay's flags on a new flag set, filling o; it returns the flags parse
// reads after.
func replayFlags(o *replayOptions) (fs *pflag.FlagSet, nf *ncclFlags, mem *string) {
	fs = pflag.NewFlagSet("runccl replay", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetNormalizeFunc(cli.Normalize)
	fs.StringVar(&o.transport, "transport", "auto", "auto, inproc, shm or tcp")
	fs.BoolVar(&o.procs, "procs", false, "one process per rank trace on this host (shared memory) instead of goroutines")
	fs.BoolVar(&o.check, "check", false, "check every element every call wrote against its definition")
	cli.AddJSONVar(fs, &o.json, "")
	fs.IntVar(&o.top, "top", 10, "slowest launches to list")
	fs.BoolVar(&o.calls, "calls", false, "list every launch")
	o.timeoutFlag.d = comm.DefaultTimeout
	fs.Var(&o.timeoutFlag, "timeout", "fail a call that makes no progress for this long: seconds (0: the default), or a duration (10s), as runccl's -T")
	nf = addNCCLFlags(fs)
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "log connections and their memory to stderr")
	mem = fs.String("max-memory", "16G", "refuse a replay whose buffers (the largest launch of every rank this process runs) exceed this")
	fs.IntVar(&o.scale, "scale-ranks", 0, "run as N ranks: the largest communicators grow to N ranks with the same per-rank counts, the others are copied (N a multiple of their size), as simccl replay --scale-ranks (--scale is the same flag)")
	fs.BoolP("help", "h", false, "print this help and exit")
	return fs, nf, mem
}

// writeReplayHelp prints replay's help.
func writeReplayHelp(w io.Writer) {
	fs, _, _ := replayFlags(&replayOptions{})
	fmt.Fprint(w, `runccl replay runs a workload trace for real: one trace file per rank (intercept's
simccl-trace.rank<R>.jsonl) or one NCCL COLL log per process. Every recorded communicator is
rebuilt and each rank runs its calls in recorded order with their groups; goroutine ranks by
default, --procs for one process per rank. See intercept/README.md.

Usage:
  runccl replay [flags] TRACE…

Flags:
`)
	fmt.Fprint(w, fs.FlagUsagesWrapped(100))
	fmt.Fprint(w, "\nExit status: 0, 1 on a failure or wrong elements, 2 on bad usage.\n")
}

// replayCommand is `runccl replay`; args is the command line after "replay", for the children.
func replayCommand(args []string, getenv func(string) string) *cobra.Command {
	o := &replayOptions{args: args}
	fs, nf, mem := replayFlags(o)
	cmd := cli.Command("replay [flags] TRACE…", "run a captured workload trace for real", "", cobra.ArbitraryArgs,
		func(cmd *cobra.Command, files []string) error {
			if err := o.finish(fs, nf, *mem, files, getenv); err != nil {
				return err
			}
			if a := getenv(envReplayActor); a != "" {
				return replayChild(o, a, getenv, cmd.ErrOrStderr())
			}
			return replay(o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	cmd.Flags().AddFlagSet(fs)
	return cmd
}

// finish reads the parsed flags and the trace files.
func (o *replayOptions) finish(fs *pflag.FlagSet, nf *ncclFlags, mem string, files []string, getenv func(string) string) error {
	o.files = files
	o.timeout = o.timeoutFlag.d
	var err error
	if o.maxMemory, err = units.ParseSize(mem); err != nil {
		return fmt.Errorf("%w: --max-memory: %v", errUsage, err)
	}
	switch {
	case len(o.files) == 0:
		return fmt.Errorf("%w: no trace file (one per rank)", errUsage)
	case o.top < 0:
		return fmt.Errorf("%w: --top %d", errUsage, o.top)
	case o.scale < 0:
		return fmt.Errorf("%w: --scale-ranks %d", errUsage, o.scale)
	case o.timeout <= 0:
		return fmt.Errorf("%w: --timeout %v", errUsage, o.timeout)
	}
	switch o.transport {
	case "auto", "inproc", "shm", "tcp":
	default:
		return fmt.Errorf("%w: --transport %q: want auto, inproc, shm or tcp", errUsage, o.transport)
	}
	if o.settings, err = nf.settings(fs, getenv); err != nil {
		return err
	}
	if o.procs && o.transport == "inproc" {
		return fmt.Errorf("%w: --procs cannot use the in-process transport", errUsage)
	}
	return nil
}

// runReplay is `runccl replay`: exit 0, 1 on a failure or wrong elements, 2 on bad usage.
func (o *replayOptions) config(stderr io.Writer) *comm.Config {
	c := cpuConfig(o.settings)
	cfg := &c
	cfg.Transport, cfg.Timeout = o.transport, o.timeout
	if o.verbose {
		cfg.Logf = func(format string, args ...any) { fmt.Fprintf(stderr, "runccl INFO "+format+"\n", args...) }
	}
	return cfg
}

// plan reads the rank traces and checks them.
func (o *replayOptions) plan() (*realreplay.Program, error) {
	var ts []realreplay.RankTrace
	for _, f := range o.files {
		t, err := realreplay.ReadRankTrace(f)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	if o.scale > 0 {
		var err error
		if ts, err = realreplay.ScaleRankTraces(ts, o.scale); err != nil {
			return nil, err
		}
	}
	prog, err := realreplay.NewProgram(ts)
	if err != nil {
		return nil, err
	}
	// Goroutine ranks share this process's memory; with --procs each process holds one rank.
	var total int64
	for a := range prog.Actors {
		b, what := prog.Footprint(a)
		if o.procs {
			total = 0
		}
		if total += b; total > o.maxMemory {
			return nil, fmt.Errorf("the replay needs %s of buffers in one process, over --max-memory %s (the largest launch of the last rank counted needs %s: %s)",
				units.FormatSize(total), units.FormatSize(o.maxMemory), units.FormatSize(b), what)
		}
	}
	return prog, nil
}

func replay(o *replayOptions, stdout, stderr io.Writer) error {
	prog, err := o.plan()
	if err != nil {
		return err
	}
	var rep *realreplay.Report
	if o.procs {
		rep, err = replayProcs(o, prog, stderr)
	} else {
		rep, err = realreplay.RunInProcess(prog, o.config(stderr), o.check)
	}
	if err != nil {
		return err
	}
	rep.Transport, rep.Procs, rep.Check = o.transport, o.procs, o.check
	if o.transport == "auto" {
		rep.Transport = "auto (in-process)"
		if o.procs {
			rep.Transport = "auto (shared memory)"
		}
	}
	if o.json {
		out := struct {
			*realreplay.Report
			Slowest []realreplay.LaunchResult `json:"slowest"`
		}{rep, rep.Slowest(o.top)}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		writeReplay(stdout, rep, o)
	}
	if rep.Wrong > 0 {
		return fmt.Errorf("%d wrong elements (first in %s)", rep.Wrong, rep.FirstBad)
	}
	return nil
}

func writeReplay(w io.Writer, rep *realreplay.Report, o *replayOptions) {
	mode := "goroutine ranks"
	if rep.Procs {
		mode = "one process per rank"
	}
	fmt.Fprintf(w, "# runccl replay: %d rank traces, %s, transport %s, %d communicators, %d launches\n", rep.Ranks, mode, rep.Transport, len(rep.Comms), len(rep.Launches))
	for _, c := range rep.Comms {
		fmt.Fprintf(w, "#   communicator %s: %d ranks, %d calls\n", c.ID, c.Size, c.Calls)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "# note: %s\n", n)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ops\tlaunches\tbytes\ttime (us)\tshare\t")
	for _, t := range rep.ByOp {
		share := 0.0
		if rep.TotalUs > 0 {
			share = 100 * t.TimeUs / rep.TotalUs
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f%%\t\n", t.Ops, t.Launches, t.Bytes, t.TimeUs, share)
	}
	tw.Flush()
	fmt.Fprintf(w, "# total communication time: %.1f us over %d launches (wall %.1f ms, buffers and checks included)\n", rep.TotalUs, len(rep.Launches), rep.WallUs/1e3)
	list := func(title string, ls []realreplay.LaunchResult) {
		fmt.Fprintf(w, "# %s\n", title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "launch\tops\tcalls\tbytes\ttime (us)\t")
		for _, l := range ls {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t\n", l.Key, l.Ops, l.Calls, l.Bytes, l.TimeUs)
		}
		tw.Flush()
	}
	if o.top > 0 {
		list(fmt.Sprintf("slowest %d launches", min(o.top, len(rep.Launches))), rep.Slowest(o.top))
	}
	if o.calls {
		list("every launch, in order", rep.Launches)
	}
	if o.check {
		fmt.Fprintf(w, "# check: %d elements compared, %d wrong\n", rep.Checked, rep.Wrong)
	} else {
		fmt.Fprintln(w, "# check: off (--check compares every element)")
	}
}

// replayProcs runs one child process (this program again) per rank trace. The parent makes one
// unique id (and bootstrap root) per communicator and hands them over in a file; each child joins
// its communicators in id order (the same order on every child, so no two wait on each other),
// replays its trace and writes its timings; the parent merges them. The parent owns the children
// (runOwned): a failing child's error is on stderr and the others are stopped.
func replayProcs(o *replayOptions, prog *realreplay.Program, stderr io.Writer) (*realreplay.Report, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "runccl-replay-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ids := map[string]string{}
	for _, c := range prog.Comms {
		id, err := comm.GetUniqueID("")
		if err != nil {
			return nil, err
		}
		ids[c.ID] = hex.EncodeToString(id[:])
	}
	idFile := filepath.Join(dir, "ids.json")
	b, _ := json.Marshal(ids)
	if err := os.WriteFile(idFile, b, 0o600); err != nil {
		return nil, err
	}
	var args []string
	for _, a := range o.args {
		if a != "--procs" && a != "--procs=true" {
			args = append(args, a)
		}
	}
	cmds := make([]*exec.Cmd, len(prog.Actors))
	for a := range cmds {
		cmd := exec.Command(self, append([]string{"replay"}, args...)...)
		cmd.Env = append(os.Environ(), envReplayActor+"="+strconv.Itoa(a), envReplayIDs+"="+idFile,
			envReplayOut+"="+filepath.Join(dir, fmt.Sprintf("rank%d.json", a)))
		cmd.Stderr = stderr
		cmds[a] = cmd
	}
	if err := runOwned(cmds, func(a int) string { return "rank trace " + prog.Actors[a].Name }, nil); err != nil {
		return nil, err
	}
	results := make([]*realreplay.ActorResult, len(cmds))
	for a := range cmds {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank%d.json", a)))
		if err != nil {
			return nil, fmt.Errorf("rank trace %s: no result: %v", prog.Actors[a].Name, err)
		}
		var r realreplay.ActorResult
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("rank trace %s: result: %v", prog.Actors[a].Name, err)
		}
		results[a] = &r
	}
	return prog.Merge(results), nil
}

// replayChild is one --procs child: it joins its communicators, replays its rank trace and writes
// its result where the parent said.
func replayChild(o *replayOptions, actor string, getenv func(string) string, stderr io.Writer) error {
	o.procs = true // one rank in this process (for --max-memory)
	prog, err := o.plan()
	if err != nil {
		return err
	}
	a, err := strconv.Atoi(actor)
	if err != nil || a < 0 || a >= len(prog.Actors) {
		return fmt.Errorf("%s=%q: not a rank trace index (0..%d)", envReplayActor, actor, len(prog.Actors)-1)
	}
	b, err := os.ReadFile(getenv(envReplayIDs))
	if err != nil {
		return err
	}
	var ids map[string]string
	if err := json.Unmarshal(b, &ids); err != nil {
		return fmt.Errorf("%s: %v", getenv(envReplayIDs), err)
	}
	cfg := o.config(stderr)
	comms := map[string]*comm.Comm{}
	defer func() {
		for _, c := range comms {
			c.Destroy()
		}
	}()
	for _, c := range prog.Comms { // id order on every child
		for r, m := range c.Members {
			if m != a {
				continue
			}
			raw, err := hex.DecodeString(ids[c.ID])
			var id comm.UniqueID
			if err != nil || len(raw) != len(id) {
				return fmt.Errorf("communicator %s: no unique id from the parent", c.ID)
			}
			copy(id[:], raw)
			cm, err := comm.InitRank(c.Size, id, r, cfg)
			if err != nil {
				return fmt.Errorf("%s: communicator %s rank %d: %v", prog.Actors[a].Name, c.ID, r, err)
			}
			comms[c.ID] = cm
		}
	}
	var cs []*comm.Comm
	for _, c := range comms {
		cs = append(cs, c)
	}
	stopWatch := abortOnSignal(cs)
	res, err := prog.RunActor(a, comms, o.check)
	if serr := stopWatch(); serr != nil {
		return serr
	}
	if err != nil {
		for _, c := range comms {
			c.Abort() // the peers see the connections go and fail at once
		}
		return err
	}
	out, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(getenv(envReplayOut), out, 0o600)
}
