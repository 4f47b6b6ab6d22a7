package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/simnet"
)

// alternatives times the call of f at size under every algorithm and protocol NCCL's tuner could
// give it: each cell forced as NCCL_ALGO=<algo> NCCL_PROTO=<proto> would force it (the tuner then
// picks its channels, as NCCL does), simulated as run simulates NCCL's own pick (opt), beside the
// cost model's time for it. pick is the row of NCCL's own decision, reused for its cell. Cells the
// tuning model leaves out (an algorithm the machine cannot run, a protocol disabled for it) are not
// listed; one the simulator has no schedule for is, with its reason and no time. Point-to-point
// calls and one-rank communicators have no choice to compare: nil. The result is sorted fastest
// first by the GPUs' time (gpuUs; ties, and cells without a time, in NCCL's algorithm and
// protocol order).
func alternatives(m *simnet.Machine, p *planner.Planner, f coll.Func, size int64, dt coll.DataType, op coll.RedOp, opt simnet.RunOptions, pick simnet.Row) []simnet.Alternative {
	n := m.NRanks()
	if f == coll.SendRecv || f == coll.AllToAll || n == 1 || pick.Count == 0 {
		return nil
	}
	type cell struct {
		alt   simnet.Alternative
		order int
	}
	var cells []cell
	for a := range coll.NumAlgos {
		for pr := range coll.NumProtos {
			var ex coll.Exclude
			for i := range ex.Algos {
				ex.Algos[i] = coll.Algo(i) != a
			}
			for i := range ex.Protos {
				ex.Protos[i] = coll.Proto(i) != pr
			}
			call := coll.TestCall(f, size, dt, op, n)
			call.Exclude = ex
			d, err := p.Decide(call)
			if err != nil || d.Choice == nil || d.Plan.Algo != a || d.Plan.Proto != pr {
				continue // not a cell NCCL's tuner could pick here
			}
			alt := simnet.Alternative{Algo: a.String(), Proto: pr.String(), NChannels: d.Plan.NChannels, NCCLModelUs: float64(d.Choice.TimeUs)}
			if pick.NCCL == "" && pick.Algo == alt.Algo && pick.Proto == alt.Proto {
				alt.Pick, alt.NChannels, alt.TimeUs, alt.DeviceUs, alt.Mode = true, pick.NChannels, pick.TimeUs, pick.DeviceUs, pick.Mode
			} else {
				o := opt
				o.Exclude, o.Record = ex, false
				row, _, err := m.Run(f, size, dt, op, o)
				switch {
				case err != nil:
					alt.Error = err.Error()
				case row.NCCL != "":
					alt.Error = "not simulated: the simulator ran " + row.Algo + "/" + row.Proto + " instead"
				default:
					alt.NChannels, alt.TimeUs, alt.DeviceUs, alt.Mode = row.NChannels, row.TimeUs, row.DeviceUs, row.Mode
				}
				if errors.Is(err, simnet.ErrNotCompiled) {
					alt.Error = fmt.Sprintf("not simulated: simccl has no schedule for %v", a)
				}
			}
			cells = append(cells, cell{alt, int(a)*int(coll.NumProtos) + int(pr)})
		}
	}
	slices.SortStableFunc(cells, func(x, y cell) int {
		xt, yt := x.alt.Error == "", y.alt.Error == ""
		if xt != yt {
			if xt {
				return -1
			}
			return 1
		}
		if xt {
			if c := cmp.Compare(gpuUs(x.alt), gpuUs(y.alt)); c != 0 {
				return c
			}
		}
		return cmp.Compare(x.order, y.order)
	})
	out := make([]simnet.Alternative, len(cells))
	for i, c := range cells {
		out[i] = c.alt
	}
	return out
}

// gpuUs is the GPUs' time of a, which ranks the cells: its device time where the host's floor
// set its time (every cell of such a call takes about the floor, which differs between them only
// by the host's cost of their channels), else its time.
func gpuUs(a simnet.Alternative) float64 {
	if a.DeviceUs > 0 {
		return a.DeviceUs
	}
	return a.TimeUs
}

// fastestOther is the fastest simulated alternative of r that is not NCCL's pick, and whether r's
// pick is among them with a time (false: nothing to compare).
func fastestOther(r simnet.Row) (best simnet.Alternative, pick float64, ok bool) {
	havePick := false
	for _, a := range r.Alternatives {
		switch {
		case a.Error != "" || a.TimeUs <= 0:
		case a.Pick:
			pick, havePick = gpuUs(a), true
		case !ok:
			best, ok = a, true
		}
	}
	return best, pick, ok && havePick
}

// alternativesNote sums up the rows' alternatives: at how many calls NCCL's pick was the fastest
// simulated, and the largest gaps where it was not ("" when no row has two timed alternatives).
func alternativesNote(rows []simnet.Row) string {
	type gap struct {
		r    simnet.Row
		best simnet.Alternative
		by   float64
	}
	var gaps []gap
	calls := 0
	for _, r := range rows {
		best, pick, ok := fastestOther(r)
		if !ok {
			continue
		}
		calls++
		if gpuUs(best) < pick {
			gaps = append(gaps, gap{r, best, pick/gpuUs(best) - 1})
		}
	}
	if calls == 0 {
		return ""
	}
	s := fmt.Sprintf("--alternatives: NCCL's pick was the fastest simulated on the GPUs at %d of %d calls", calls-len(gaps), calls)
	if len(gaps) == 0 {
		return s
	}
	slices.SortStableFunc(gaps, func(x, y gap) int { return cmp.Compare(y.by, x.by) })
	var worst []string
	for _, g := range gaps[:min(3, len(gaps))] {
		worst = append(worst, fmt.Sprintf("%s %d bytes, %s/%s (the pick, %s/%s, %.1f%% slower)",
			g.r.Coll, g.r.Bytes, g.best.Algo, g.best.Proto, g.r.Algo, g.r.Proto, 100*g.by))
	}
	return s + "; the largest gaps: " + strings.Join(worst, "; ") + " (simulated GPU time, a host-bound call's device_us; NCCL's cost model's time for each cell is in the alternatives below, nccl_model_us in the JSON)"
}

// writeAlternatives writes the rows' alternatives after the table, as comment lines (tools that
// read nccl-tests' output skip them): one line per call and cell, fastest first.
func writeAlternatives(w io.Writer, rows []simnet.Row) error {
	var b strings.Builder
	started := false
	for _, r := range rows {
		if len(r.Alternatives) == 0 {
			continue
		}
		if !started {
			started = true
			b.WriteString("#\n# alternatives: each algorithm and protocol NCCL's tuner could pick, forced as NCCL_ALGO/NCCL_PROTO would force it, simulated, fastest on the GPUs first (gpu: the GPUs' own time, below the host's floor where that sets the call's); beside it NCCL's own estimate\n")
			fmt.Fprintf(&b, "# %12s  %-15s %-13s %-7s %4s %10s %10s %9s %15s  %s\n", "size (B)", "coll", "algo", "proto", "nch", "time (us)", "gpu (us)", "vs pick", "nccl model (us)", "mode")
		}
		pick := 0.0
		for _, a := range r.Alternatives {
			if a.Pick && a.Error == "" {
				pick = gpuUs(a)
			}
		}
		for _, a := range r.Alternatives {
			t, g, vs, mode := "-", "-", "", a.Mode
			if a.Error != "" {
				mode = a.Error
			} else if a.TimeUs > 0 {
				t, g = formatUs(a.TimeUs), formatUs(gpuUs(a))
				switch {
				case a.Pick:
					vs = "pick"
				case pick > 0:
					vs = fmt.Sprintf("%+.1f%%", 100*(gpuUs(a)/pick-1))
				}
			}
			fmt.Fprintf(&b, "# %12d  %-15s %-13s %-7s %4d %10s %10s %9s %15s  %s\n", r.Bytes, r.Coll, a.Algo, a.Proto, a.NChannels, t, g, vs, formatUs(a.NCCLModelUs), mode)
		}
	}
	if !started {
		return nil
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// formatUs prints a time in µs as the table does (two decimals below 1 ms).
func formatUs(us float64) string {
	if us >= 1000 {
		return fmt.Sprintf("%.0f", us)
	}
	return fmt.Sprintf("%.2f", us)
}

// writeTuner writes a tuner file (--tuner-file's CSV, tuning.OverrideHelp) that gives each
// collective, from each simulated size up to the next, the fastest alternative of the rows
// (--write-tuner): the algorithm and protocol, with the channels left to the model (NCCL's count
// for that cell, the one each alternative was simulated with). Consecutive sizes with the same
// cell share a rule; the first size's rule starts at 0 and the last's has no upper bound. Rows
// with no timed alternative (point-to-point calls, a dry run) give none.
func writeTuner(w io.Writer, rows []simnet.Row, cmdline string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# tuner rules from the fastest simulated alternative of each size (simccl run --write-tuner)\n# %s\n# collective,minBytes,maxBytes,algorithm,protocol,channels\n", cmdline)
	type rule struct {
		coll, cell string
		lo         int64
	}
	byColl := map[string][]simnet.Row{}
	var colls []string
	for _, r := range rows {
		if len(r.Alternatives) == 0 || r.Alternatives[0].Error != "" || r.Alternatives[0].TimeUs <= 0 {
			continue
		}
		if byColl[r.Coll] == nil {
			colls = append(colls, r.Coll)
		}
		byColl[r.Coll] = append(byColl[r.Coll], r)
	}
	for _, c := range colls {
		rs := byColl[c]
		slices.SortStableFunc(rs, func(x, y simnet.Row) int { return cmp.Compare(x.Bytes, y.Bytes) })
		name := strings.ReplaceAll(c, "_", "")
		var cur *rule
		flush := func(hi string) {
			if cur != nil {
				algo, proto, _ := strings.Cut(cur.cell, "/")
				fmt.Fprintf(&b, "%s,%d,%s,%s,%s,*\n", name, cur.lo, hi, algo, proto)
			}
		}
		for i, r := range rs {
			a := r.Alternatives[0]
			cell := a.Algo + "/" + a.Proto
			if cur != nil && cur.cell == cell {
				continue
			}
			flush(strconv.FormatInt(r.Bytes-1, 10))
			lo := r.Bytes
			if i == 0 {
				lo = 0
			}
			cur = &rule{coll: c, cell: cell, lo: lo}
		}
		flush("*")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
