package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/internal/cli"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/report"
	"github.com/simccl/simccl/simnet"
)

func init() {
	register(&command{
		name:   "run",
		short:  "simulate collectives on a topology (and a cluster of it): nccl-tests style table, traces, plots",
		define: defineRun,
	})
}

var allColls = []coll.Func{coll.AllReduce, coll.AllGather, coll.ReduceScatter, coll.Broadcast, coll.Reduce, coll.AllToAll, coll.SendRecv}

func defineRun(fs *pflag.FlagSet) runFunc {
	mf := addMachineFlags(fs)
	fabric := cli.AddFabric(fs)
	sweep := addSweepFlags(fs, "allreduce")
	sweep.addOp(fs, "o")
	tracePath := fs.String("trace", "", "write a Chrome trace-event JSON (Perfetto) of every simulated op: a process per rank, a thread per channel and peer (calls the compact executor replays record none)")
	opsPath := fs.String("ops", "", "write the op log (CSV, one line per message, with its route)")
	plotPath := fs.String("plot", "", "plot busbw against size (.png or .svg)")
	asJSON := cli.AddJSON(fs, `{"header":{…},"rows":[…],"notes":[…]}`)
	progress := cli.AddProgress(fs)
	maxOps := fs.Int("trace-max-ops", 2_000_000, "stop recording ops for --trace/--ops after this many (memory bound)")
	dryRun := fs.Bool("dry-run", false, "print what would be simulated for each size (NCCL's decision, the plan simulated, the mode) without simulating")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the command to this file (go tool pprof), also when it is interrupted (Ctrl-C, SIGTERM: the profile so far, exit status 130 or 143)")
	memProfile := fs.String("memprofile", "", "write the command's allocations (pprof's allocs profile, sampled) to this file at its end (go tool pprof)")
	jobs := fs.IntP("jobs", "j", 0, "calls simulated at once (0: one per core, GOMAXPROCS); --trace/--ops run one at a time. The calls share one heap, which simccl holds near 3 GiB (a soft limit; GOMEMLIMIT or GOGC in the environment replace it)")
	ecmpMean := fs.Bool("ecmp-mean", false, "let the ECMP mean model stand even on an oversubscribed fabric (fast, but it ignores hash collisions on links that bind: tens of percent off, see docs/cluster.md)")
	launch := fs.String("launch", "per-gpu", "how the host launches each call: per-gpu (one process or thread per GPU, as torchrun and mpirun … -g 1), per-node (one thread drives every GPU of its node, as nccl-tests -g 8: a call costs at least NCCL's host enqueue on every GPU, 10.12 µs for the first and 7.93 µs for each other, 65.6 µs for 8 GPUs, and 0.064 µs for each further channel of the call on each GPU; per-gpu: at least one enqueue, 10.12 µs on one channel, 11.59 µs on 24), graph (CUDA graph replays, a process per GPU, nccl-tests -G: no host floor, and a kernel starts 0.6 µs sooner than from a stream), graph-per-node (one process replays the graphs of every GPU of its node, nccl-tests -g 8 -G: as graph, and each call 2.80 µs more on the GPU); measured with NCCL 2.28 on H200 and H100 (docs/cluster.md)")
	hostEnq := addHostEnqueue(fs)
	loop := fs.Int("back-to-back", 0, "time each call as the steady call of a loop of this many back-to-back launches, as nccl-tests reports it (1: one call alone); 0: nccl-tests' loop (3 calls) for broadcast and reduce, whose chain the loop overlaps, one call for the others, which the loop changes by under 0.3% (docs/cluster.md); schedule replays only, the mode says \"back-to-back\"; the loop replays N copies of the call's schedule, within coll's limit of 5,000,000 steps")
	alts := fs.Bool("alternatives", false, "also simulate every algorithm and protocol NCCL's tuner could pick for each collective call, forced as NCCL_ALGO/NCCL_PROTO would force it (NCCL then picks the channels), and list them after the table with NCCL's own estimate of each (JSON: each row's \"alternatives\", fastest first, NCCL's marked \"pick\"): where the pick is not the fastest simulated, a note says by how much. Costs a simulation per cell (up to 3 protocols of each algorithm); send/recv and all-to-all have no choice to compare")
	tunerOut := fs.String("write-tuner", "", "with --alternatives (which it implies): write a tuner file (--tuner-file's CSV) giving each collective, from each simulated size up to the next, the fastest alternative simulated there (its algorithm and protocol; NCCL's channels for them); simccl run --tuner-file reads it back, and NCCL's example tuner plugin reads the same format")
	exact := fs.Bool("exact", false, "replay exactly: no approximation (ecmp-mean, rail-owed, rail-over, unchecked, rate-interval-N, latency-mean, ring-coarse-K, tree-steady-C, schedule-steady, nvls-symmetric-steady, nvlstree-fold, switch-bound, nodes-steady, sizes-steady modes; see docs/cluster.md), whatever it costs; an NVLS or NVLSTree call that only an approximation can time runs NCCL's choice among Ring and Tree instead, and its row and a note say so")
	return func(stdout, stderr io.Writer) error {
		if *cpuProfile != "" {
			f, err := os.Create(*cpuProfile)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
			defer profileOnInterrupt(stderr, *cpuProfile)()
		}
		if *memProfile != "" {
			f, err := os.Create(*memProfile)
			if err != nil {
				return err
			}
			defer f.Close()
			defer pprof.Lookup("allocs").WriteTo(f, 0)
		}
		funcs, sizes, dt, op, err := sweep.parse(allColls)
		if err != nil {
			return err
		}
		// Output paths are checked before anything is simulated.
		if *tunerOut != "" {
			*alts = true
		}
		for _, o := range []struct{ flag, path string }{{"--trace", *tracePath}, {"--ops", *opsPath}, {"--plot", *plotPath}, {"--write-tuner", *tunerOut}} {
			if o.path != "" {
				if err := checkWritable(o.flag, o.path); err != nil {
					return err
				}
			}
		}
		var plotFormat string
		if *plotPath != "" {
			plotFormat = strings.TrimPrefix(strings.ToLower(filepath.Ext(*plotPath)), ".")
			if plotFormat != "png" && plotFormat != "svg" {
				return fmt.Errorf("%w: --plot %q: want a .png or .svg file", errUsage, *plotPath)
			}
		}
		if *maxOps < 0 {
			return fmt.Errorf("%w: --trace-max-ops %d: want a number of ops (0: none recorded)", errUsage, *maxOps)
		}
		if *exact && *ecmpMean {
			// --exact turns every approximation off, ECMP's mean model included.
			return fmt.Errorf("%w: --exact and --ecmp-mean: one replays exactly, the other lets the ECMP mean model stand; give one", errUsage)
		}
		fab, err := fabric.Read()
		if err != nil {
			return err
		}
		p, err := mf.planner(fs)
		if err != nil {
			return err
		}
		m, err := simMachine(p, fab)
		if err != nil {
			return err
		}
		build, err := mf.builder(fs)
		if err != nil {
			return err
		}
		m.PlannerAt = plannersAt(build)
		if m.Launch, err = simnet.ParseLaunchMode(*launch); err != nil {
			return fmt.Errorf("%w: --launch: %v", errUsage, err)
		}
		if m.HostEnqueue, err = hostEnq(); err != nil {
			return err
		}
		if m.HostEnqueue > 0 && m.Launch.Graph() {
			m.Notes = append(m.Notes, fmt.Sprintf("--host-enqueue changes nothing under --launch %s: CUDA graph replays have no host floor", m.Launch))
		}
		if *loop < 0 {
			return fmt.Errorf("%w: --back-to-back %d: want 0 (nccl-tests' default) or a number of calls", errUsage, *loop)
		}
		m.BackToBack = *loop
		if un := planner.UnreadEnv(os.Environ()); len(un) > 0 {
			// NCCL settings the plans and the replay run without: say so rather than leave a row
			// to look like NCCL's behaviour under them.
			m.Notes = append(m.Notes, fmt.Sprintf("not modelled, set in the environment: %s (the rows are NCCL's behaviour without them)", strings.Join(un, " ")))
		}
		if n := qpsNote(m.Fabric, m.Nodes); n != "" {
			m.Notes = append(m.Notes, n)
		}

		showBar, err := showProgress(*progress, stderr)
		if err != nil {
			return err
		}
		total := len(funcs) * len(sizes)
		record := *tracePath != "" || *opsPath != ""
		wantOps := record
		var rows []simnet.Row
		var traced []simnet.Traced
		var offset simnet.Time
		var notes []string
		noteSeen := map[string]bool{}
		for _, n := range m.Notes {
			noteSeen[n] = true
			notes = append(notes, n)
		}
		// The calls, and what planning says before anything is simulated: NCCL's decision where the
		// simulator runs another (the table's "nccl runs" column) and the plan's notes.
		calls := make([]runCall, 0, total)
		subst := false
		for _, f := range funcs {
			for _, size := range sizes {
				c := runCall{f: f, size: size}
				if pl, note, err := m.Plan(f, size, dt, op); err == nil {
					c.planNote = note
					// With --exact an NVLS or NVLSTree call past its replays runs Ring or Tree
					// instead (substNote): the column may be needed, which only simulating tells.
					subst = subst || note != "" || (*exact && (pl.Algo == coll.NVLS || pl.Algo == coll.NVLSTree))
				}
				calls = append(calls, c)
			}
		}
		h := simnet.RunHeader{Program: "simccl", Version: version(), Topology: p.Name, Nodes: m.Nodes, GPUsPerNode: m.Node.NumGPUs, NRanks: m.NRanks(),
			NChannels: p.Table.NChannels, NCCLRelease: p.Table.K.Release, DataType: dt.String(), Op: op.String(), Launch: m.Launch.String(), HostEnqueueUs: cmp.Or(m.HostEnqueue, simnet.HostEnqueue).Micros(), BackToBack: m.BackToBack}
		if m.Nodes > 1 {
			h.Fabric = m.Fabric.Header() // the machine's: NCCL_IB_QPS_PER_CONNECTION joins it there
		}
		for _, f := range funcs {
			h.Collectives = append(h.Collectives, coll.TestName(f))
		}
		// The text table is streamed as nccl-tests streams its own: each row once its call and
		// those before it are simulated, so a stopped run keeps what it finished. The JSON is one
		// document, written at the end.
		var table *tableStream
		var bar *liveBar
		if showBar {
			bar = startBar(stderr, total)
		}
		// emitted: the calls whose rows are written; emit writes those that are ready.
		emitted := 0
		var emitErr error
		emit := func(ready func(i int) bool) {
			if table == nil || emitErr != nil {
				return
			}
			for emitted < len(calls) && ready(emitted) {
				if c := &calls[emitted]; c.err == nil {
					write := func() { emitErr = table.row(c.row) }
					if bar != nil {
						bar.above(write)
					} else {
						write()
					}
				}
				emitted++
			}
		}
		if !*asJSON {
			table = &tableStream{w: stdout, h: h}
			var headNotes []string
			seen := map[string]bool{}
			for _, n := range m.Notes {
				if !seen[n] {
					seen[n] = true
					headNotes = append(headNotes, n)
				}
			}
			for _, c := range calls {
				if c.planNote != "" && !seen[c.planNote] {
					seen[c.planNote] = true
					headNotes = append(headNotes, fmt.Sprintf("%s from %d bytes: %s", coll.TestName(c.f), c.size, c.planNote))
				}
			}
			if err := table.begin(headNotes, subst); err != nil {
				return err
			}
		}
		var failed []string
		// The (collective, size) calls are independent: run them on the cores (--jobs), each on its
		// own engine, and assemble the rows, notes and failures in their order afterwards, so the
		// output is the same whatever the number of workers. Traces are recorded in order, on one
		// worker, because --trace-max-ops stops recording after the calls before.
		workers := *jobs
		if workers <= 0 {
			workers = runtime.GOMAXPROCS(0)
		}
		if record {
			workers = 1
		}
		// simulate times call c (recording its ops if record) and, with --alternatives, its
		// alternatives, which record nothing.
		simulate := func(c *runCall, record bool) {
			opt := simnet.RunOptions{DryRun: *dryRun, Exact: *exact, MeanOversubscribed: *ecmpMean}
			rec := opt
			rec.Record = record
			c.row, c.res, c.err = m.Run(c.f, c.size, dt, op, rec)
			if *alts && c.err == nil {
				c.row.Alternatives = m.Alternatives(c.f, c.size, dt, op, opt, c.row)
			}
		}
		done := 0
		recorded := 0
		if workers <= 1 {
			for i := range calls {
				c := &calls[i]
				if bar != nil {
					bar.set(done, fmt.Sprintf("%s %s", coll.TestName(c.f), units.FormatSize(c.size)))
				}
				if record && recorded >= *maxOps {
					record = false
				}
				c.over = wantOps && !record
				simulate(c, record)
				if c.err == nil && record {
					recorded += len(c.res.Ops)
				}
				done++
				emit(func(j int) bool { return j < done })
			}
		} else {
			// For the JSON, largest sizes first: they take longest, so the workers end together.
			// For the streamed table, the largest call of each worker but one first, then the
			// others in order, so that rows come out as they are simulated and the longest calls
			// do not start last.
			order := make(chan int, len(calls))
			for _, i := range callOrder(calls, workers, table == nil) {
				order <- i
			}
			close(order)
			finished := make([]bool, len(calls))
			finishedCh := make(chan int)
			for range min(workers, len(calls)) {
				go func() {
					for i := range order {
						simulate(&calls[i], false)
						finishedCh <- i
					}
				}()
			}
			for range calls {
				i := <-finishedCh
				done++
				finished[i] = true
				if bar != nil {
					bar.set(done, fmt.Sprintf("%s %s", coll.TestName(calls[i].f), units.FormatSize(calls[i].size)))
				}
				emit(func(j int) bool { return finished[j] })
			}
		}
		if emitErr != nil {
			return emitErr
		}
		var lateNotes []string // the notes a simulation tells: after the streamed rows
		for i := range calls {
			c := &calls[i]
			if note := c.planNote; note != "" && !noteSeen[note] {
				noteSeen[note] = true
				notes = append(notes, fmt.Sprintf("%s from %d bytes: %s", coll.TestName(c.f), c.size, note))
			}
			if c.err != nil {
				// The other sizes and collectives went on; the command fails at the end.
				failed = append(failed, fmt.Sprintf("%s %d bytes: %v", coll.TestName(c.f), c.size, c.err))
				continue
			}
			row := c.row
			rows = append(rows, row)
			if row.Mode != "" && !noteSeen[row.Coll+" "+row.Mode] {
				noteSeen[row.Coll+" "+row.Mode] = true
				var n string
				switch {
				case strings.HasPrefix(row.Mode, "schedule back-to-back"):
					n = fmt.Sprintf("%s from %d bytes: the schedule replayed as a loop of back-to-back calls, one call's time in it as nccl-tests reports (%s; --trace and --ops record one call; --back-to-back 1: one call alone)", row.Coll, row.Bytes, row.Mode)
				case row.Mode != "schedule":
					n = fmt.Sprintf("%s from %d bytes: simulated by the compact executor, mode %s (see docs/cluster.md; --json gives the mode per row)", row.Coll, row.Bytes, row.Mode)
					if patMeanRS(row) {
						n += "; a PAT reduce-scatter folded with its members' mean latency (no rotation of the nodes keeps their latencies, as with a part-full last leaf, or that fold would be too long) stands where the call is latency-bound (its bandwidth part within 10% of its time: −0.44…0% against the whole schedule) or its schedule is past what coll compiles, where at large calls it can be far fast (1,000 nodes at 1 GiB: 23%); --exact replays the schedule"
					}
				}
				if n != "" {
					notes = append(notes, n)
					lateNotes = append(lateNotes, n)
				}
			}
			if patLongRS(row) && !noteSeen["pat long rs"] {
				noteSeen["pat long rs"] = true
				n := fmt.Sprintf("%s from %d bytes: a PAT reduce-scatter this long (%.0f µs) is not robust in the replay of its whole schedule: perturbing every link's latency by up to 1 ns moves that replay by +0.35…+2.9%%, by up to 100 ns +1…+10%% (64–256 one-GPU DGX H100 nodes, 512 MiB–1 GiB, rail routing; an all-gather moves by under 0.01%% and 0.4%%), and under ECMP's collisions summing the same rates in another order moved it by +0.5%% and −3.2%% (512 and 1,000 one-GPU GH200 nodes, 256 MiB), so its time is one of a family, parted ranks slower; a fold's row (pat-fold) is the unperturbed call, its ranks in step, the fastest of them (docs/cluster.md, PAT)", row.Coll, row.Bytes, row.TimeUs)
				notes = append(notes, n)
				lateNotes = append(lateNotes, n)
			}
			if n := substNote(row, c.planNote, *exact); n != "" && !noteSeen[n] {
				noteSeen[n] = true
				notes = append(notes, n)
				lateNotes = append(lateNotes, n)
			}
			if len(c.res.Ops) > 0 {
				traced = append(traced, simnet.Traced{Label: fmt.Sprintf("%s %d", row.Coll, c.size), Ops: c.res.Ops, Offset: offset, Names: c.res.LinkName})
				offset += c.res.Time + simnet.Microsecond
			}
		}
		if n := hostBoundNote(rows, m.Launch, p.NRanks(), m.HostScale()); n != "" {
			notes = append(notes, n)
			lateNotes = append(lateNotes, n)
		}
		if n := meanBacklogNote(rows); n != "" {
			notes = append(notes, n)
			lateNotes = append(lateNotes, n)
		}
		if n := readModeNote(rows, p); n != "" {
			notes = append(notes, n)
			lateNotes = append(lateNotes, n)
		}
		if n := p2pChannelNote(rows, p); n != "" {
			notes = append(notes, n)
			lateNotes = append(lateNotes, n)
		}
		if n := simnet.AlternativesNote(rows, m.Nodes); n != "" {
			notes = append(notes, n)
			lateNotes = append(lateNotes, n)
		}
		if bar != nil {
			bar.finish()
		}
		// A trace or op log without ops is an error, not an empty file; the table still comes out.
		var unrecorded string
		var noOps error
		if wantOps {
			unrecorded, noOps = unrecordedCalls(calls, len(traced), *maxOps, *dryRun)
		}
		if *asJSON {
			if err := simnet.WriteJSON(stdout, h, rows, notes); err != nil {
				return err
			}
		} else if err := table.end(lateNotes); err != nil {
			return err
		} else if err := writeAlternatives(stdout, rows); err != nil {
			return err
		}
		if *tracePath != "" && noOps == nil {
			if err := writeFile(*tracePath, func(w io.Writer) error { return simnet.WriteTrace(w, traced) }); err != nil {
				return err
			}
		}
		if *opsPath != "" && noOps == nil {
			if err := writeFile(*opsPath, func(w io.Writer) error { return simnet.WriteOpsCSV(w, traced) }); err != nil {
				return err
			}
		}
		if *plotPath != "" {
			title := fmt.Sprintf("simulated busbw, %s, %d ranks", m.Node.Name, m.NRanks())
			if err := writeFile(*plotPath, func(w io.Writer) error {
				return report.WriteBusbwPlot(w, title, report.SeriesOfRows(rows), plotFormat)
			}); err != nil {
				return err
			}
		}
		if *tunerOut != "" {
			line := "simccl run " + strings.Join(os.Args[min(2, len(os.Args)):], " ")
			if err := writeFile(*tunerOut, func(w io.Writer) error { return writeTuner(w, rows, line) }); err != nil {
				return err
			}
		}
		if unrecorded != "" {
			fmt.Fprintf(stderr, "simccl run: %s\n", unrecorded)
		}
		if len(failed) > 0 {
			for _, f := range failed {
				fmt.Fprintf(stderr, "simccl run: %s\n", f)
			}
			return fmt.Errorf("%d of %d simulations failed", len(failed), total)
		}
		return noOps
	}
}

// unrecordedCalls says which calls of a run asked for --trace/--ops left no op records, and why:
// the compact executors (large sizes, many ranks) keep no per-message records, and calls after
// --trace-max-ops ops are not recorded. It returns "" when every call was recorded, a one-line
// warning when some were, and an error when none were, since a trace without events is of no use.
func unrecordedCalls(calls []runCall, traced, maxOps int, dryRun bool) (string, error) {
	const (
		hintCompact = "trace smaller sizes (-e) or fewer --nodes: those run on the schedule executor, which records every message"
		hintOver    = "raise --trace-max-ops"
	)
	// Calls grouped by reason, then by collective, in the order of the run.
	type group struct {
		reason string
		hint   string
		colls  []string
		sizes  map[string][]int64
	}
	var groups []*group
	byReason := map[string]*group{}
	n := 0
	for _, c := range calls {
		if c.err != nil || c.res == nil || len(c.res.Ops) > 0 {
			continue
		}
		var reason, hint string
		switch {
		case c.over:
			reason, hint = fmt.Sprintf("past --trace-max-ops %d", maxOps), hintOver
		case dryRun:
			reason = "--dry-run simulates nothing"
		case c.row.Count == 0:
			reason = "no data at this size"
		case c.row.Mode != "" && !strings.HasPrefix(c.row.Mode, "schedule"):
			reason, hint = fmt.Sprintf("compact executor, mode %s, which records no ops", c.row.Mode), hintCompact
		default:
			reason = "no messages"
		}
		g := byReason[reason]
		if g == nil {
			g = &group{reason: reason, hint: hint, sizes: map[string][]int64{}}
			byReason[reason] = g
			groups = append(groups, g)
		}
		name := coll.TestName(c.f)
		if g.sizes[name] == nil {
			g.colls = append(g.colls, name)
		}
		g.sizes[name] = append(g.sizes[name], c.size)
		n++
	}
	if n == 0 {
		return "", nil
	}
	var parts []string
	hints := map[string]bool{}
	for _, g := range groups {
		var cs []string
		for _, name := range g.colls {
			sz := g.sizes[name]
			if len(sz) > 3 {
				cs = append(cs, fmt.Sprintf("%s %d sizes from %d to %d bytes", name, len(sz), sz[0], sz[len(sz)-1]))
				continue
			}
			ss := make([]string, len(sz))
			for i, b := range sz {
				ss[i] = fmt.Sprint(b)
			}
			cs = append(cs, fmt.Sprintf("%s %s bytes", name, strings.Join(ss, ", ")))
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", strings.Join(cs, ", "), g.reason))
		if g.hint != "" {
			hints[g.hint] = true
		}
	}
	hint := ""
	for _, h := range []string{hintCompact, hintOver} {
		if hints[h] {
			hint += "; " + h
		}
	}
	if traced == 0 {
		return "", fmt.Errorf("--trace/--ops: no op recorded, nothing written: %s%s", strings.Join(parts, "; "), hint)
	}
	return fmt.Sprintf("--trace/--ops: %d of %d calls not recorded: %s%s", n, len(calls), strings.Join(parts, "; "), hint), nil
}

// runCall is one (collective, size) call of simccl run and its outcome.
// callOrder is the order in which workers take calls: the largest sizes first (all, or the
// workers−1 largest and then the others in order).
func callOrder(calls []runCall, workers int, all bool) []int {
	bySize := make([]int, len(calls))
	for i := range bySize {
		bySize[i] = len(calls) - 1 - i // among equal sizes, the later call first
	}
	slices.SortStableFunc(bySize, func(a, b int) int { return cmp.Compare(calls[b].size, calls[a].size) })
	if all {
		return bySize
	}
	head := bySize[:min(max(workers-1, 0), len(bySize))]
	order := slices.Clone(head)
	for i := range calls {
		if !slices.Contains(head, i) {
			order = append(order, i)
		}
	}
	return order
}

type runCall struct {
	f    coll.Func
	size int64
	row  simnet.Row
	res  *simnet.Result
	err  error
	// over: not recorded because --trace-max-ops ops were recorded before it.
	over bool
	// planNote: what simnet.Machine.Plan says of the call before it is simulated (a substitution).
	planNote string
}

func writeFile(path string, fill func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// plannersAt returns build's planners as the simulator's (Machine.PlannerAt), each node count's
// built once (cachedPlanners).
func plannersAt(build func(nodes int) (*planner.Planner, error)) func(nodes int) (coll.Planner, error) {
	cached := cachedPlanners(build)
	return func(nodes int) (coll.Planner, error) {
		p, err := cached(nodes)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

// cachedPlanners returns build with each node count's planner built once (the simulator asks for
// the same smaller communicators at every size of a sweep, concurrently).
func cachedPlanners(build func(nodes int) (*planner.Planner, error)) func(nodes int) (*planner.Planner, error) {
	var mu sync.Mutex
	built := map[int]*planner.Planner{}
	return func(nodes int) (*planner.Planner, error) {
		mu.Lock()
		defer mu.Unlock()
		if p, ok := built[nodes]; ok {
			return p, nil
		}
		p, err := build(nodes)
		if err != nil {
			return nil, err
		}
		built[nodes] = p
		return p, nil
	}
}

// readModeNote says where NCCL moves the Simple rows' data between GPUs of a node by reads (P2P
// read mode: NCCL 2.28 p2pUseRead, sm80 GPUs joined by NVLink, where the receiver loads the
// sender's buffer), which the simulator does not model: its traffic rates and links are write
// mode's. Empty where no row is Simple or no GPU pair of p's nodes reads.
// substNote explains a row that simulates another algorithm than NCCL's where planning did not
// foresee it (planNote empty): the call has no replay at its size, and with --exact none of the
// approximate modes that would time NCCL's algorithm may stand, so the row runs NCCL's choice among
// the algorithms the compact executors replay (Ring, Tree). The table's header gets its "nccl
// runs" column only where planning foresees a substitution, so the note also names that column.
func substNote(row simnet.Row, planNote string, exact bool) string {
	if row.NCCL == "" || planNote != "" {
		return ""
	}
	why := "no replay of it fits this call"
	if exact {
		why = "--exact cannot replay it at this size (only the approximate modes time it: run without --exact)"
	}
	return fmt.Sprintf("%s from %d bytes: NCCL runs %s, but %s; the row simulates %s/%s/%d instead and its last column (nccl runs) says what NCCL runs",
		row.Coll, row.Bytes, row.NCCL, why, row.Algo, row.Proto, row.NChannels)
}

func readModeNote(rows []simnet.Row, p *planner.Planner) string {
	reads := false
	for _, rs := range p.Transports.Read {
		for _, r := range rs {
			reads = reads || r
		}
	}
	if !reads {
		return ""
	}
	var colls []string
	seen := map[string]bool{}
	for _, r := range rows {
		if r.Proto == coll.Simple.String() && !seen[r.Coll] {
			seen[r.Coll] = true
			colls = append(colls, r.Coll)
		}
	}
	if len(colls) == 0 {
		return ""
	}
	return fmt.Sprintf("Simple rows (%s): NCCL moves their data between these GPUs by reads over NVLink (P2P read mode, its choice on sm80), "+
		"which the simulation does not model: it times write mode, whose costs it was measured on (forced into read mode, NCCL's rings on 2 H200 took 13–28%% more per byte; testdata/nccl/h200x2/readscan-2026-11-30.csv)",
		strings.Join(colls, ", "))
}

// rowSpan is the rows of one collective a note names: their smallest and largest size, and the
// range of a value of theirs.
type rowSpan struct {
	coll       string
	lo, hi     int64
	vmin, vmax float64
}

// sizes is "N bytes" or "LO–HI bytes".
func (s *rowSpan) sizes() string {
	if s.lo == s.hi {
		return fmt.Sprintf("%d bytes", s.lo)
	}
	return fmt.Sprintf("%d–%d bytes", s.lo, s.hi)
}

// spansOf groups the rows keep picks by collective, in the rows' order, with their sizes and the
// range of value over them.
func spansOf(rows []simnet.Row, keep func(simnet.Row) bool, value func(simnet.Row) float64) []*rowSpan {
	var out []*rowSpan
	by := map[string]*rowSpan{}
	for _, r := range rows {
		if !keep(r) {
			continue
		}
		v := value(r)
		sp := by[r.Coll]
		if sp == nil {
			sp = &rowSpan{coll: r.Coll, lo: r.Bytes, hi: r.Bytes, vmin: v, vmax: v}
			by[r.Coll] = sp
			out = append(out, sp)
		}
		sp.lo, sp.hi = min(sp.lo, r.Bytes), max(sp.hi, r.Bytes)
		sp.vmin, sp.vmax = min(sp.vmin, v), max(sp.vmax, v)
	}
	return out
}

// meanBacklogNote names the rows the ECMP mean model times past the replay budgets though its
// backlog is over the 1% bar (Row.MeanBacklog), per collective with their sizes and measures: such
// rows may be some percent fast ("" where there are none).
func meanBacklogNote(rows []simnet.Row) string {
	spans := spansOf(rows, func(r simnet.Row) bool { return r.MeanBacklog > 0 }, func(r simnet.Row) float64 { return r.MeanBacklog })
	if len(spans) == 0 {
		return ""
	}
	parts := make([]string, len(spans))
	p2p, tree := false, false
	for i, sp := range spans {
		measure := fmt.Sprintf("%.1f%%", 100*sp.vmin)
		if sp.vmax > sp.vmin {
			measure = fmt.Sprintf("%.1f–%.1f%%", 100*sp.vmin, 100*sp.vmax)
		}
		parts[i] = fmt.Sprintf("%s %s (twice the largest backlog %s of the time)", sp.coll, sp.sizes(), measure)
		isP2P := sp.coll == "alltoall" || sp.coll == "sendrecv"
		p2p, tree = p2p || isP2P, tree || !isP2P
	}
	var measured []string
	if p2p {
		measured = append(measured, "point-to-point rows were 1–14% fast, and −0.8…+12.7% where the replay of every rank was past its budgets (the model with the work its links owe)")
	}
	if tree {
		// simnet's farMessages and farWork: the tree all-reduce's replay of every rank past them.
		measured = append(measured, "tree all-reduce rows 0.14–0.90% fast on the default fabric, 1.4–2.4% with 8 hosts a leaf and up to 19% with 2, where the replay of every rank, here past its budgets, was run")
	}
	return fmt.Sprintf("%s: the ECMP mean model stands past the replay budgets with its links backlogged beyond the 1%% bar; where measured, %s (ecmp_mean_backlog in the JSON; docs/cluster.md \"ECMP: the mean model\"; --exact replays every rank; on an InfiniBand fabric with adaptive routing, --fabric-set routing=adaptive times the call exactly, without hash collisions)", strings.Join(parts, "; "), strings.Join(measured, ", "))
}

// p2pChannelNote says where NCCL's rule for network peers leaves every peer of a point-to-point
// call one channel (tuning.Table.P2PChannels: up to 2.28, 2 halved while 2 × ranks passes 4 ×
// p2pnChannels; from 2.29, one per 14 GB/s of the NICs, a 100 Gb/s NIC one; 2.30, halved with
// maxP2pPeers), which halves a send/recv's bandwidth against two channels, and names the variable
// that sets it. Nothing where NCCL_NCHANNELS_PER_NET_PEER
// is set, on one node, or without a point-to-point row.
func p2pChannelNote(rows []simnet.Row, p *planner.Planner) string {
	if p.Nodes < 2 || p.Table.Config.NChannelsPerNetPeer > 0 {
		return ""
	}
	total, perPeer := p.Table.P2PChannels()
	if perPeer > 1 {
		return ""
	}
	var colls []string
	seen := map[string]bool{}
	for _, r := range rows {
		if r.Algo == "P2P" && !seen[r.Coll] {
			seen[r.Coll] = true
			colls = append(colls, r.Coll)
		}
	}
	if len(colls) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: NCCL %s gives every peer %d p2p channel on %d ranks (%d p2p channels; the count for a peer on another node falls with the ranks up to 2.28 and in 2.30, and follows the NIC's bandwidth from 2.29), so each transfer moves on one channel: NCCL_NCHANNELS_PER_NET_PEER sets the count (docs/cluster.md, point-to-point)",
		strings.Join(colls, ", "), p.Table.K.Release, perPeer, p.NRanks(), total)
}

// qpsNote says where NCCL_IB_QPS_PER_CONNECTION, set, changes nothing in the simulation: the
// fabric's rail routing picks every queue pair's uplink by destination, its adaptive routing
// spreads every flow already (docs/cluster.md "Queue pairs per connection"). Nothing to say on one
// node (no network) or under ECMP routing.
func qpsNote(f *simnet.Fabric, nodes int) string {
	if f == nil || nodes < 2 || f.QPs < 2 || f.Routing == "ecmp" {
		return ""
	}
	how := "picks every queue pair's uplinks by destination"
	if f.Routing == "adaptive" {
		how = "spreads every flow over all of its equal-cost links already"
	}
	return fmt.Sprintf("NCCL_IB_QPS_PER_CONNECTION=%d changes nothing here: routing %s %s (queue pairs spread over ECMP hashes only; docs/cluster.md)", f.QPs, f.Routing, how)
}

// hostBoundNote names the rows whose time is the host's floor for the launch mode (Row.HostBound),
// per collective the sizes from the smallest to the largest of them, and what that floor is on a
// communicator of ranks ranks whose host costs are scale times the measured ones
// (Machine.HostScale: --host-enqueue).
func hostBoundNote(rows []simnet.Row, launch simnet.LaunchMode, ranks int, scale float64) string {
	spans := spansOf(rows, func(r simnet.Row) bool { return r.HostBound }, func(simnet.Row) float64 { return 0 })
	if len(spans) == 0 {
		return ""
	}
	parts := make([]string, len(spans))
	p2p := false
	for i, sp := range spans {
		parts[i] = sp.coll + " " + sp.sizes()
		p2p = p2p || sp.coll == "alltoall" || sp.coll == "sendrecv"
	}
	us := func(t simnet.Time) float64 { return t.Micros() * scale }
	enq := fmt.Sprintf("%.2f µs on one channel and %.3f µs for each further channel of the call", us(simnet.HostEnqueue), us(simnet.HostPerChannel))
	if p2p {
		enq += fmt.Sprintf(", or, per send and receive of a rank, %.2f + %.3f µs a send/recv group and %.2f + %.3f µs an all-to-all (to every rank), and %.3f µs for each further channel of a send or receive to another rank",
			simnet.HostSendRecv.Base.Micros(), simnet.HostSendRecv.PerOp.Micros(), simnet.HostAllToAll.Base.Micros(), simnet.HostAllToAll.PerOp.Micros(), simnet.HostP2PPerChannel.Micros())
	}
	why := fmt.Sprintf("NCCL's enqueue of a call with a process per GPU, %s; the leases of 2 H200 that measured it took %.1f–%.1f µs, the host's fast and slow modes", enq, simnet.HostEnqueueSpan[0].Micros(), simnet.HostEnqueueSpan[1].Micros())
	if scale != 1 {
		why = "NCCL's enqueue of a call with a process per GPU on this host (--host-enqueue), " + enq
	}
	switch {
	case ranks == 1:
		// Run's floor for a one-rank communicator, whatever the launch mode but graphs.
		why = fmt.Sprintf("NCCL's enqueue of a one-rank call, a device copy: %.2f µs, %.2f µs for send/recv and all-to-all (measured apart)",
			us(simnet.OneRankHost), simnet.OneRankP2PHost.Micros())
	case launch == simnet.LaunchPerNode:
		why = fmt.Sprintf("one thread enqueues the call on every GPU of the node: at least NCCL's enqueue, %s, %.2f µs more for each GPU past the first, and each GPU's sends and receives beyond that", enq, us(simnet.HostPerRank))
	}
	return fmt.Sprintf("host-bound (%s): the GPUs' own time is shorter, so each call takes the host's (%s; --launch graph lifts it, --host-enqueue sets the host's speed; JSON: host_bound, device_us)", strings.Join(parts, ", "), why)
}

// addHostEnqueue defines --host-enqueue and returns its parser: the host's enqueue of a
// one-channel collective call (simnet.Machine.HostEnqueue; 0 where the flag is not given).
func addHostEnqueue(fs *pflag.FlagSet) func() (simnet.Time, error) {
	s := fs.String("host-enqueue", "", fmt.Sprintf("your host's time T for NCCL's enqueue of a small collective call on one GPU (a duration: 6.2us, 6200ns; a bare number is µs), which sets the host floor of every --launch mode but the graph ones: a collective's enqueue, its further channels and one thread's further GPUs scale with it, the point-to-point lines stay as measured (they did not follow a faster host). Where it shows: one thread driving a node's G GPUs (nccl-tests -g G) at 8 B takes about T × (1 + %.2f (G − 1)) a call; with a process per GPU an 8 B call is often the GPU's, not the host's (default %.2f µs, measured with NCCL 2.28 on 2 H200; those leases took %.2f–%.2f µs, the host's fast and slow modes; docs/cluster.md)", float64(simnet.HostPerRank)/float64(simnet.HostEnqueue), simnet.HostEnqueue.Micros(), simnet.HostEnqueueSpan[0].Micros(), simnet.HostEnqueueSpan[1].Micros()))
	return func() (simnet.Time, error) {
		if *s == "" {
			return 0, nil
		}
		t, err := parseHostEnqueue(*s)
		if err != nil {
			return 0, fmt.Errorf("%w: --host-enqueue %q: %v", errUsage, *s, err)
		}
		return t, nil
	}
}

// parseHostEnqueue reads a duration (Go's syntax: 6.2us, 6.2µs, 6200ns, 0.0062ms) or a bare number
// of microseconds, within (0, simnet.MaxHostEnqueue].
func parseHostEnqueue(s string) (simnet.Time, error) {
	var us float64
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		us = v
	} else if d, err := time.ParseDuration(s); err == nil {
		us = float64(d) / float64(time.Microsecond)
	} else {
		return 0, errors.New("want a duration such as 6.2us or a number of microseconds")
	}
	if math.IsNaN(us) || us <= 0 || us > simnet.MaxHostEnqueue.Micros() {
		return 0, fmt.Errorf("want a time above 0 and at most %g µs", simnet.MaxHostEnqueue.Micros())
	}
	t := simnet.FromMicros(us)
	if t <= 0 {
		return 0, fmt.Errorf("%g µs rounds to nothing (the simulator counts picoseconds)", us)
	}
	return t, nil
}

// patLongRS reports whether row is a PAT reduce-scatter, replayed whole (schedule) or folded
// (pat-fold), that lasts patRobustUs or more, where the replay of its whole schedule is not
// robust to perturbations (simnet's TestPATReduceScatterScheduleNotRobust).
func patLongRS(row simnet.Row) bool {
	return row.Coll == "reduce_scatter" && row.Algo == "PAT" && (row.Mode == "schedule" || strings.HasPrefix(row.Mode, "pat-fold")) && row.TimeUs >= patRobustUs
}

// patRobustUs is the length of a PAT reduce-scatter from which its schedule's replay is measured
// to move by about 1% or more when nothing physical changes. Under a 1 ns perturbation of the
// links' latencies (rail routing) 256 MiB on 128 one-GPU nodes (5.8 ms) moved by
// +0.003…+0.013%, 512 MiB (12.1 ms) by +0.35…+1.56% (docs/cluster.md, PAT: "A schedule that is
// not robust"). Under ECMP, where collisions join the flows, the same rates summed in another
// order (the rate computations leaving out the links another implies, stop 71) moved one-GPU
// GH200 nodes by −0.00002% (512 nodes, 64 MiB, 2.5 ms), −0.02% (1,000 nodes, 64 MiB, 4.1 ms),
// +0.52% (512 nodes, 256 MiB, 8.0 ms), −3.2% (1,000 nodes, 256 MiB, 8.2 ms) and +0.33% (1,000
// nodes, 1 GiB, 31 ms): from 6 ms, between the longest row that stayed put (5.8 ms) and the
// shortest that moved (8.0 ms).
const patRobustUs = 6_000

// patMeanRS reports whether row is a PAT reduce-scatter timed by the fold with its members' mean
// latency (simnet's pat-fold, latency-mean), which parts from the whole schedule at large calls.
func patMeanRS(row simnet.Row) bool {
	return row.Coll == "reduce_scatter" && row.Algo == "PAT" && strings.HasPrefix(row.Mode, "pat-fold") && strings.Contains(row.Mode, "latency-mean")
}
