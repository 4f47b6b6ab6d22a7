package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/intercept"
	"github.com/simccl/simccl/internal/cli"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/simnet"
	"github.com/simccl/simccl/tuning"
)

func init() {
	register(&command{
		name:   "replay",
		short:  "simulate the NCCL calls of a recorded workload trace (or NCCL COLL logs) on any topology, optionally scaled",
		args:   cobra.ArbitraryArgs, // the trace files
		define: defineReplay,
	})
}

func defineReplay(fs *pflag.FlagSet) runFunc {
	mf := addMachineFlags(fs)
	cli.Explain(fs, "topo", "replay: default the trace's virtual topology, else $NCCL_TOPO_FILE, else "+topos.DefaultName)
	cli.Explain(fs, "nodes", "replay: default --scale-ranks / GPUs per node, else the trace's ranks / GPUs per node (a trace that does not fill whole nodes needs --nodes or --scale-ranks)")
	fabric := cli.AddFabric(fs)
	scaleRanks := fs.Int("scale-ranks", 0, "simulate data-parallel communicators (the trace's largest) at this many ranks (default: the machine's)")
	asJSON := cli.AddJSON(fs, "")
	top := fs.Int("top", 10, "list this many slowest calls")
	allCalls := fs.Bool("calls", false, "list every launch (call or group) with its simulated time")
	nLinks := fs.Int("links", 10, "list this many most utilised links (0: no per-link accounting)")
	measured := fs.StringArray("measured", nil, "per-rank timing file of the traced run (bench/intercept/torch_mixed.py output; repeatable): compare")
	progress := cli.AddProgress(fs)
	alts := fs.Bool("alternatives", false, "also simulate each distinct collective call under every algorithm and protocol NCCL's tuner could pick (as simccl run --alternatives) and list the calls by what the trace would save on the GPUs with the fastest cell (JSON: alternatives); costs a simulation per cell of each distinct call")
	return func(stdout, stderr io.Writer) error {
		if fs.NArg() == 0 {
			return fmt.Errorf("%w: want one or more trace files (JSON lines from the shim, or NCCL INFO logs with COLL lines)", errUsage)
		}
		if *scaleRanks < 0 || *mf.nodes < 1 || *top < 0 || *nLinks < 0 {
			return fmt.Errorf("%w: --scale-ranks, --nodes, --top and --links must not be negative", errUsage)
		}
		if *scaleRanks > planner.MaxRanks || *mf.nodes > planner.MaxNodes {
			return fmt.Errorf("%w: --scale-ranks %d, --nodes %d: at most %d ranks (planner.MaxRanks)", errUsage, *scaleRanks, *mf.nodes, planner.MaxRanks)
		}

		// The files are read with simccl's bounds on every input and checked as runccl replay checks
		// them (intercept.CheckTraces): every rank present, ranks agreeing, every Send received.
		var files []intercept.TraceFile
		var recs []intercept.Record
		virtualTopo := ""
		for _, path := range fs.Args() {
			f, err := intercept.ReadTraceOrLog(path)
			if err != nil {
				return err
			}
			if len(recs)+len(f.Records) > intercept.MaxRecords {
				return fmt.Errorf("%w: %s: more than %d records in the trace's files", intercept.ErrTrace, path, intercept.MaxRecords)
			}
			for _, x := range f.Records {
				if x.Topo != "" && virtualTopo == "" {
					virtualTopo = x.Topo
				}
			}
			files = append(files, f)
			recs = append(recs, f.Records...)
		}
		if err := intercept.CheckTraces(files, intercept.CheckOptions{Virtual: true}); err != nil {
			return err
		}
		launches, err := intercept.Launches(recs)
		if err != nil {
			return err
		}
		if len(launches) == 0 {
			return fmt.Errorf("%s: no collective or point-to-point call in the trace", strings.Join(fs.Args(), ", "))
		}

		fab, err := fabric.Read()
		if err != nil {
			return err
		}
		if *mf.topo == "" {
			*mf.topo = virtualTopo
		}
		releaseNote, err := releaseFromLogs(fs, files)
		if err != nil {
			return err
		}
		newPlanner, err := mf.builder(fs)
		if err != nil {
			return err
		}
		newPlanner = cachedPlanners(newPlanner)
		plannerAt := plannersAt(newPlanner)
		build := func(nodes int) (*simnet.Machine, error) {
			p, err := newPlanner(nodes)
			if err != nil {
				return nil, err
			}
			m, err := simMachine(p, fab)
			if err != nil {
				return nil, err
			}
			// A traced application's calls are timed one at a time: not nccl-tests' loop, which
			// run times a broadcast or reduce by (simnet.NCCLTestsLoop).
			m.BackToBack = 1
			// Calls past coll's limit are timed from other node counts, as simccl run times them
			// (a 32 MiB broadcast on 300 DGX H100 nodes, NVLSTree on 1,400).
			m.PlannerAt = plannerAt
			return m, nil
		}
		m, err := build(1)
		if err != nil {
			return err
		}
		name := m.Node.Name
		g := m.Node.NumGPUs
		n := *mf.nodes
		if !fs.Changed("nodes") {
			n = 1
			// Without --nodes or --scale-ranks a trace replays at its own scale, which must be a
			// whole number of nodes of this topology: anything else is scaled only when asked for.
			if world := intercept.World(launches); *scaleRanks == 0 {
				if world%g != 0 {
					return fmt.Errorf("%w: the trace's largest communicators have %d ranks, not a whole number of %s nodes of %d GPUs: pass --scale-ranks N (a multiple of %d, such as %d) to simulate them at N ranks, or --nodes N to replay on N nodes", errUsage, world, name, g, g, (world+g-1)/g*g)
				}
				n = world / g
			}
			if *scaleRanks > 0 {
				if *scaleRanks%g != 0 {
					return fmt.Errorf("%w: --scale-ranks %d is not a multiple of the %d GPUs of a %s node", errUsage, *scaleRanks, g, name)
				}
				n = *scaleRanks / g
			}
		}
		if n > 1 {
			if m, err = build(n); err != nil {
				return err
			}
		}
		if *scaleRanks > 0 && *scaleRanks != m.NRanks() {
			if fs.Changed("nodes") {
				// The scaled communicators would run on more (or fewer) ranks than the machine the
				// header and the JSON name.
				return fmt.Errorf("%w: --scale-ranks %d and --nodes %d disagree: %d %s nodes of %d GPUs are %d ranks (give one of them, or both alike)", errUsage, *scaleRanks, n, n, name, g, m.NRanks())
			}
			if *scaleRanks%g != 0 {
				return fmt.Errorf("%w: --scale-ranks %d is not a multiple of the %d GPUs of a %s node", errUsage, *scaleRanks, g, name)
			}
		}

		opt := intercept.ReplayOptions{ScaleRanks: *scaleRanks, Links: *nLinks > 0, Build: build, Alternatives: *alts}
		if show, err := showProgress(*progress, stderr); err != nil {
			return err
		} else if show {
			start := time.Now()
			opt.Progress = func(done, total int, what string) { drawBar(stderr, done, total, what, time.Since(start)) }
			defer fmt.Fprintln(stderr)
		}
		rep, err := intercept.Replay(launches, m, opt)
		if err != nil {
			return err
		}
		rep.Release = m.Release
		if rep.Release == "" {
			rep.Release = tuning.DefaultRelease
		}
		if releaseNote != "" {
			rep.Notes = append(rep.Notes, releaseNote)
		}
		var cmp *intercept.Comparison
		if len(*measured) > 0 {
			meas, err := intercept.ReadMeasured(*measured)
			if err != nil {
				return err
			}
			if cmp, err = intercept.Compare(rep, meas); err != nil {
				return err
			}
		}
		if *asJSON {
			out := struct {
				*intercept.Report
				Slowest    []intercept.LaunchResult `json:"slowest"`
				Comparison *intercept.Comparison    `json:"comparison,omitempty"`
			}{rep, rep.Slowest(*top), cmp}
			if len(out.Links) > *nLinks {
				out.Links = out.Links[:*nLinks]
			}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", " ")
			return enc.Encode(out)
		}
		if *allCalls {
			title, index := "every launch, in trace order", "launch"
			if !rep.LaunchesKnown {
				title, index = "every call, in log order (launches not known)", "call"
			}
			if err := writeLaunches(stdout, title, index, rep.Launches); err != nil {
				return err
			}
			fmt.Fprintln(stdout)
		}
		return writeReplayText(stdout, rep, cmp, *top, *nLinks)
	}
}

// releaseFromLogs sets --nccl-version, where the command line leaves it, to the release that the
// NCCL logs among files name (their "NCCL version" line), when simccl's tuning model has it: a
// replay of a real run's logs plans its calls under that run's rules. It returns the note that says
// which release planned the calls and why ("" when no file names a release).
func releaseFromLogs(fs *pflag.FlagSet, files []intercept.TraceFile) (string, error) {
	var named []string
	for _, f := range files {
		if f.NCCLVersion != "" && !slices.Contains(named, f.NCCLVersion) {
			named = append(named, f.NCCLVersion)
		}
	}
	if len(named) == 0 {
		return "", nil
	}
	sort.Strings(named)
	logs := strings.Join(named, ", ")
	if fs.Changed("nccl-version") {
		v := fs.Lookup("nccl-version").Value.String()
		if len(named) == 1 && planner.MajorMinor(named[0]) == planner.MajorMinor(v) {
			return "", nil
		}
		return fmt.Sprintf("the logs name NCCL %s; the calls are planned under %s's rules, as --nccl-version asks", logs, v), nil
	}
	if len(named) > 1 {
		return fmt.Sprintf("the logs name NCCL %s: the calls are planned under the default, %s's rules (--nccl-version picks another)", logs, tuning.DefaultRelease), nil
	}
	k, err := tuning.ConstantsFor(named[0])
	if err != nil {
		return fmt.Sprintf("the logs name NCCL %s, a release simccl's tuning model does not have (it has %s): the calls are planned under %s's rules", logs, strings.Join(tuning.Releases(), ", "), tuning.DefaultRelease), nil
	}
	if err := fs.Set("nccl-version", k.Release); err != nil {
		return "", err
	}
	return fmt.Sprintf("the calls are planned under NCCL %s's rules, the release the logs name (%s); --nccl-version picks another", k.Release, logs), nil
}

// writeLaunches lists launches; index names their index column ("launch", or "call" where the
// input does not say how calls were grouped).
func writeLaunches(w io.Writer, title, index string, ls []intercept.LaunchResult) error {
	fmt.Fprintf(w, "# %s\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "comm\t%s\tops\tcalls\tranks\tbytes\talgo\tproto\ttime(us)\t\n", index)
	for _, l := range ls {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%.1f\t\n", l.Comm, l.Index, l.Ops, l.Calls, l.NRanks, l.Bytes, l.Algo, l.Proto, l.TimeUs)
	}
	return tw.Flush()
}

func writeReplayText(w io.Writer, rep *intercept.Report, cmp *intercept.Comparison, top, nLinks int) error {
	// launches prints a launch count, or "-" where the input does not say how calls were grouped.
	launches := func(n int) string {
		if !rep.LaunchesKnown {
			return "-"
		}
		return fmt.Sprint(n)
	}
	grouping := fmt.Sprintf("in %d launches", len(rep.Launches))
	if !rep.LaunchesKnown {
		grouping = "(launches not known: see the note)"
	}
	fmt.Fprintf(w, "# simccl replay: %s, %d node(s), %d ranks, %d calls %s\n", rep.Machine, rep.Nodes, rep.Ranks, rep.Calls, grouping)
	comms := make([]string, 0, len(rep.Scaled))
	for c := range rep.Scaled {
		comms = append(comms, c)
	}
	sort.Strings(comms)
	for _, c := range comms {
		fmt.Fprintf(w, "# scaled: communicator %s, %d ranks in the trace -> %d ranks\n", c, rep.TraceRanks, rep.Scaled[c])
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "# note: %s\n", n)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ops\tlaunches\tcalls\tbytes\ttime(us)\tshare\t")
	for _, t := range rep.ByOp {
		share := 0.0
		if rep.TotalUs > 0 {
			share = 100 * t.TimeUs / rep.TotalUs
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%.1f%%\t\n", t.Ops, launches(t.Launches), t.Calls, t.Bytes, t.TimeUs, share)
	}
	fmt.Fprintf(tw, "total\t%s\t%d\t\t%.1f\t\t\n", launches(len(rep.Launches)), rep.Calls, rep.TotalUs)
	if err := tw.Flush(); err != nil {
		return err
	}
	if top > 0 {
		fmt.Fprintln(w)
		unit, index := "launches", "launch"
		if !rep.LaunchesKnown {
			unit, index = "calls", "call"
		}
		if err := writeLaunches(w, fmt.Sprintf("slowest %d %s", min(top, len(rep.Launches)), unit), index, rep.Slowest(top)); err != nil {
			return err
		}
	}
	if nLinks > 0 && len(rep.Links) > 0 {
		fmt.Fprintf(w, "\n# most utilised links (bytes / (capacity x total time)), %d of %d\n", min(nLinks, len(rep.Links)), len(rep.Links))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "link\tGB/s\tbytes\tutil\t")
		for i, l := range rep.Links {
			if i == nLinks {
				break
			}
			fmt.Fprintf(tw, "%s\t%.1f\t%.0f\t%.1f%%\t\n", l.Link, l.GBps, l.Bytes, 100*l.Utilisation)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(rep.Alternatives) > 0 {
		fmt.Fprintf(w, "\n# alternatives: each distinct collective call, its fastest simulated cell (GPU time) against NCCL's pick, the largest saving first\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "op\ttype\tbytes\tranks\tcalls\tpick\tpick(us)\tfastest\tfastest(us)\tsaved(us)\t")
		for _, c := range rep.Alternatives {
			pick, _ := simnet.PickOf(c.Alternatives)
			best := c.Alternatives[0]
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s/%s\t%.2f\t%s/%s\t%.2f\t%.1f\t\n", c.Op, c.DataType, c.Bytes, c.NRanks, c.Calls, pick.Algo, pick.Proto, pick.GPUUs(), best.Algo, best.Proto, best.GPUUs(), c.SavedUs)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if cmp != nil {
		fmt.Fprintf(w, "\n# simulated against measured (NCCL kernel time, last rank in to last rank out), %d calls\n", len(cmp.Calls))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "op\tcalls\tsim(us)\tmeasured(us)\terror\t")
		for _, p := range cmp.PerOp {
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%+.1f%%\t\n", p.Op, p.Calls, p.SimUs, p.MeasUs, 100*p.RelErr)
		}
		fmt.Fprintf(tw, "total\t%d\t%.1f\t%.1f\t%+.1f%%\t\n", len(cmp.Calls), cmp.SimUs, cmp.MeasUs, 100*cmp.RelErr)
		return tw.Flush()
	}
	return nil
}
