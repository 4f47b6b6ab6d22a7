package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/simccl/simccl/simnet"
)

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
		if p, ok := simnet.PickOf(r.Alternatives); ok {
			pick = p.GPUUs()
		}
		for _, a := range r.Alternatives {
			t, g, vs, mode := "-", "-", "", a.Mode
			if a.Error != "" {
				mode = a.Error
			} else if a.TimeUs > 0 {
				t, g = formatUs(a.TimeUs), formatUs(a.GPUUs())
				switch {
				case a.Pick:
					vs = "pick"
				case pick > 0:
					vs = fmt.Sprintf("%+.1f%%", 100*(a.GPUUs()/pick-1))
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
