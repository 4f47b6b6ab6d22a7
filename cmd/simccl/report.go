package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/internal/cli"
	"github.com/simccl/simccl/internal/input"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/report"
	"github.com/simccl/simccl/simnet"
)

func init() {
	register(&command{
		name:   "report",
		short:  "write one self-contained HTML page: topology, tuner map, busbw, where time goes, memory",
		define: defineReport,
	})
}

func defineReport(fs *pflag.FlagSet) runFunc {
	mf := addMachineFlags(fs)
	fabric := cli.AddFabric(fs)
	sweep := addSweepFlags(fs, "allreduce")
	sweep.addOp(fs, "") // -o is the output file here
	measured := fs.String("measured", "", "measured timings: CSV (tag,coll,world,bytes,us,algbw,busbw), nccl-tests text output, or runccl --json")
	measTag := fs.String("measured-tag", "default", "CSV rows of this tag (\"*\": every tag, one series each)")
	measColl := fs.String("measured-coll", "", "collective of an nccl-tests text output (default: the one its *_perf command line names; refused when it names none)")
	launch := fs.String("launch", "auto", "how the host launched each call, which the simulation models: per-gpu, per-node, graph or graph-per-node (as simccl run's --launch); auto: as the measured nccl-tests output's header says (\"nThread T nGpus G … graph: K\": graph where K ≥ 1, graph-per-node where also G > 1, per-node where G is the node's GPUs, per-gpu where G is 1), else per-gpu")
	hostEnq := addHostEnqueue(fs)
	focusColl := fs.String("focus", "", "collective of the \"where time goes\" section (default: the first of -c; none: no such section)")
	focusSize := fs.String("focus-size", "", "size of the \"where time goes\" section (default: the swept size nearest 1M)")
	sections := fs.String("sections", "all", "sections to build, comma-separated, of "+strings.Join(report.SectionNames, ",")+" (or all); the others are one line saying so")
	alts := fs.Bool("alternatives", false, "also simulate every algorithm and protocol NCCL's tuner could pick at each size (as simccl run --alternatives): the tuner map's tips list them beside NCCL's estimates, and a note says how often NCCL's pick was the fastest simulated; each size then costs a simulation per cell (--size-budget counts them)")
	sizeBudget := fs.Duration("size-budget", 10*time.Second, "longest simulation of one swept size: the larger sizes of a collective whose time, extrapolated from the last two, passes it are not simulated, and the page says so (0: no bound)")
	out := fs.StringP("output", "o", "", "HTML file to write (required; - for stdout)")
	asJSON := cli.AddJSON(fs, "the report's data, on stdout as well as the page")
	progress := cli.AddProgress(fs)
	return func(stdout, stderr io.Writer) error {
		if *out == "" {
			return fmt.Errorf("%w: -o report.html (or --output FILE) is required", errUsage)
		}
		if *out == "-" && *asJSON {
			return fmt.Errorf("%w: -o - and --json would both write to stdout: write the page to a file", errUsage)
		}
		if *out != "-" {
			if err := checkWritable("-o", *out); err != nil {
				return err
			}
		}
		if *sizeBudget < 0 {
			return fmt.Errorf("%w: --size-budget %v (want ≥ 0)", errUsage, *sizeBudget)
		}
		var secs []string
		if *sections != "all" {
			for _, s := range strings.Split(*sections, ",") {
				secs = append(secs, strings.TrimSpace(s))
			}
			if err := report.CheckSections(secs); err != nil {
				return fmt.Errorf("%w: --sections: %v", errUsage, err)
			}
		}
		if *focusColl != "" && *focusColl != "none" {
			if _, err := coll.ParseFunc(*focusColl); err != nil {
				return fmt.Errorf("%w: --focus: %v", errUsage, err)
			}
		}
		funcs, sizes, dt, op, err := sweep.parse(allColls)
		if err != nil {
			return err
		}
		fab, err := fabric.Read()
		if err != nil {
			return err
		}
		// Every option and input is checked before the communicator is built (seconds at 2,048
		// nodes) and the simulation.
		var opt report.Options
		if *focusSize != "" {
			if opt.FocusSize, err = units.ParseSize(*focusSize); err != nil {
				return fmt.Errorf("%w: --focus-size: %v", errUsage, err)
			}
			if err := units.CheckSize("--focus-size", opt.FocusSize); err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
		}
		auto := *launch == "auto"
		if !auto {
			if opt.Launch, err = simnet.ParseLaunchMode(*launch); err != nil {
				return fmt.Errorf("%w: --launch: %v (or auto)", errUsage, err)
			}
		}
		if opt.HostEnqueue, err = hostEnq(); err != nil {
			return err
		}
		hostScale := (&simnet.Machine{HostEnqueue: opt.HostEnqueue}).HostScale()
		var measuredGPUs int // GPUs per thread of the measured run (nccl-tests' -g); 0: not said
		if *measured != "" {
			data, err := input.ReadFile(*measured)
			if err != nil {
				return err
			}
			if opt.Measured, err = report.ReadMeasured(data, *measured, *measColl); err != nil {
				return err
			}
			opt.MeasuredName = *measured
			if g, graph, ok := report.MeasuredLaunch(data); ok && auto {
				measuredGPUs = g
				if graph {
					opt.Launch = simnet.LaunchGraph
					opt.LaunchNote = fmt.Sprintf("launch: CUDA graphs, as %s's header says (graph ≥ 1): no host floor per call", *measured)
					if g > 1 {
						opt.Launch = simnet.LaunchGraphPerNode
						opt.LaunchNote = fmt.Sprintf("launch: one process replays CUDA graphs on %d GPUs, as %s's header says (nGpus %d, graph ≥ 1): no host floor per call, and %.2f µs more a call on each GPU (simnet.GraphPerNodeCall, measured on 2 H200)", g, *measured, g, simnet.GraphPerNodeCall.Micros())
					}
					measuredGPUs = 0
				}
			}
		}
		if _, err := showProgress(*progress, stderr); err != nil {
			return err
		}
		p, err := mf.planner(fs)
		if err != nil {
			return err
		}
		build, err := mf.builder(fs) // the focus section's "done up to N nodes"
		if err != nil {
			return err
		}
		if perNode := p.PPN; measuredGPUs > 1 {
			if measuredGPUs == perNode {
				opt.Launch = simnet.LaunchPerNode
				opt.LaunchNote = fmt.Sprintf("launch: one thread drives the %d GPUs of a node, as %s's header says (nGpus %d): a call costs at least NCCL's host enqueue on each of them (%.2f µs for the first, %.2f µs for each other, and %.3f µs for each further channel of the call on each)", perNode, *measured, measuredGPUs, hostScale*simnet.HostEnqueue.Micros(), hostScale*simnet.HostPerRank.Micros(), hostScale*simnet.HostPerChannel.Micros())
			} else {
				opt.LaunchNote = fmt.Sprintf("launch: %s drove %d GPUs per thread (nGpus), the node has %d: simulated with a process per GPU, whose host floor is lower (--launch per-node takes one thread per node)", *measured, measuredGPUs, perNode)
			}
		}
		opt.Planner, opt.Fabric, opt.Funcs, opt.Sizes, opt.DataType, opt.Op = p, fab, funcs, sizes, dt, op
		opt.MeasuredTag, opt.FocusColl, opt.Sections, opt.PlannerAt, opt.SizeBudget = *measTag, *focusColl, secs, cachedPlanners(build), *sizeBudget
		opt.Alternatives = *alts
		if *sizeBudget == 0 {
			opt.SizeBudget = -1
		}
		if show, err := showProgress(*progress, stderr); err != nil {
			return err
		} else if show {
			start := time.Now()
			opt.Progress = func(done, total int, what string) {
				drawBar(stderr, done, total, what, time.Since(start))
				if done == total {
					fmt.Fprintln(stderr)
				}
			}
		}
		r, err := report.Build(opt)
		if err != nil {
			return err
		}
		if *out == "-" {
			if err := r.WriteHTML(stdout); err != nil {
				return err
			}
		} else if err := writeFile(*out, r.WriteHTML); err != nil {
			return err
		}
		if *asJSON {
			return r.WriteJSON(stdout)
		}
		if *out != "-" {
			fmt.Fprintf(stdout, "simccl report: wrote %s (%s)\n", *out, r.Title)
		}
		return nil
	}
}
