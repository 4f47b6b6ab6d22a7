package perf

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// TableWriter prints a run as nccl-tests prints it, one line as each size finishes. The layout is
// that of nccl-tests 2.13–2.16 src/common.cu (public outputs of real clusters, comm/perf/testdata/nccl-tests,
// and the one report.ReadMeasured and compare.py-style parsers read): the "# nThread" line, the
// devices, the three header lines, rows "%12li  %12li  %8s  %6s  %6i" then, per placement,
// "  %7s  %6.2f  %6.2f  %5g" (time, algbw, busbw, #wrong; "N/A" when not checked), and the
// footer. runccl adds, after nccl-tests' columns, the plan the engine ran (algo, proto, nch), one
// "# runccl" line before "# nThread", and, when several collectives run, nccl-tests 2.19's
// "# Collective test starting/concluded: NAME_perf" lines around each one's table and footer.
//
// Every line is one Write; a writer with a Flush method (bufio.Writer) is flushed after each, so
// that a run killed half way leaves its finished lines.
type TableWriter struct {
	w    io.Writer
	h    Header
	cur  string // the collective whose table is open
	test Result // the open table's sums
	err  error
}

// NewTableWriter returns a writer of h's run to w.
func NewTableWriter(w io.Writer, h Header) *TableWriter { return &TableWriter{w: w, h: h} }

func (t *TableWriter) write(s string) error {
	if t.err != nil {
		return t.err
	}
	if _, t.err = io.WriteString(t.w, s); t.err == nil {
		if f, ok := t.w.(interface{ Flush() error }); ok {
			t.err = f.Flush()
		}
	}
	return t.err
}

// Begin prints the run's header: the runccl line, nccl-tests' parameter line and the devices.
func (t *TableWriter) Begin() error {
	var b strings.Builder
	h, f := t.h, t.h.Flags
	fmt.Fprintf(&b, "# %s %s: %s on the %s engine, transport %s; plans for NCCL %s (%s)\n",
		h.Program, h.Version, strings.Join(h.Collectives, ", "), h.Backend, h.Transport, h.NCCLRelease, h.Machine)
	step, kind := f.StepBytes, "bytes"
	if f.StepFactor > 1 {
		step, kind = f.StepFactor, "factor"
	}
	// src/common.cu (run): PRINT("# nThread %d nGpus %d minBytes %ld maxBytes %ld step: %ld(%s)
	// warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d\n", …)
	fmt.Fprintf(&b, "# nThread %d nGpus %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d\n",
		f.NThreads, f.NGpus, f.MinBytes, f.MaxBytes, step, kind, f.WarmupIters, f.Iters, f.AggIters, f.Check, f.CudaGraph)
	if f.Blocking != 0 {
		b.WriteString("# Blocking Enabled: wait for completion and barrier after each collective \n")
	}
	if f.ParallelInit != 0 {
		b.WriteString("# Parallel Init Enabled: threads call into NcclInitRank concurrently \n")
	}
	b.WriteString("#\n# Using devices\n")
	for _, d := range h.Devices {
		b.WriteString(DeviceLine(d))
	}
	return t.write(b.String())
}

// DeviceLine is a rank's line as nccl-tests prints it: "#  Rank %2d Group %2d Pid %6d on %10s
// device %2d [%s] %s\n".
func DeviceLine(d Device) string {
	return fmt.Sprintf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n", d.Rank, d.Group, d.Pid, d.Host, d.Device, d.Bus, d.Name)
}

// Line prints one size, after the header of its collective's table when it opens one.
func (t *TableWriter) Line(l Line) error {
	if c := l.OutOfPlace.Coll; c != t.cur {
		if t.cur != "" {
			if err := t.footer(); err != nil {
				return err
			}
		}
		t.cur, t.test = c, Result{}
		if err := t.write(t.tableHeader(c)); err != nil {
			return err
		}
	}
	t.test.Add(l, false)
	return t.write(FormatLine(l))
}

// End closes the last table with its footer; after a failed run (runErr not nil) it prints
// nothing more: the finished lines stand, without a footer that would sum up a partial table.
func (t *TableWriter) End(runErr error) error {
	if t.cur == "" || runErr != nil {
		return t.err
	}
	return t.footer()
}

// Writer is what TableWriter and JSONWriter have in common: Begin, then Line for each size as it
// finishes (a Sink), then End.
type Writer interface {
	Begin() error
	Sink
	End(runErr error) error
}

func (t *TableWriter) multi() bool { return len(t.h.Collectives) > 1 }

func (t *TableWriter) tableHeader(c string) string {
	var b strings.Builder
	if t.multi() {
		fmt.Fprintf(&b, "# Collective test starting: %s_perf\n", NameOf(c))
	}
	b.WriteString("#\n")
	b.WriteString(ColumnHeader(t.h.Flags.ReportCputime != 0))
	return b.String()
}

// ColumnHeader is nccl-tests' three header lines (src/common.cu, run), with runccl's plan
// columns after nccl-tests' on the second; cputime names the time column "cputime" (-C 1).
func ColumnHeader(cputime bool) string {
	timeStr := "time"
	if cputime {
		timeStr = "cputime"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "")
	fmt.Fprintf(&b, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s  %6s  %6s  %3s\n", "size", "count", "type", "redop", "root",
		timeStr, "algbw", "busbw", "#wrong", timeStr, "algbw", "busbw", "#wrong", "algo", "proto", "nch")
	fmt.Fprintf(&b, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)", "", "", "",
		"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")
	return b.String()
}

func (t *TableWriter) footer() error {
	var b strings.Builder
	b.WriteString(Footer(t.test.Failed, t.test.AvgBusBW))
	if t.multi() {
		fmt.Fprintf(&b, "# Collective test concluded: %s_perf\n", NameOf(t.cur))
	}
	return t.write(b.String())
}

// Footer is nccl-tests' footer: PRINT("# Out of bounds values : %d %s\n", errors, errors ?
// "FAILED" : "OK"); PRINT("# Avg bus bandwidth    : %g %s\n", bw, "") (the empty %s leaves a
// trailing space); PRINT("#\n").
func Footer(failed int, avgBusBW float64) string {
	ok := "OK"
	if failed > 0 {
		ok = "FAILED"
	}
	return fmt.Sprintf("# Out of bounds values : %d %s\n# Avg bus bandwidth    : %s \n#\n", failed, ok, cfmt(avgBusBW, 'g', 6))
}

// FormatLine is one size's line: nccl-tests' columns, then the plan columns of the out-of-place
// row ("  %6s  %6s  %3d", and "  nccl:ALGO/PROTO/NCH" when NCCL would have chosen another plan).
func FormatLine(l Line) string {
	r := l.OutOfPlace
	var b strings.Builder
	fmt.Fprintf(&b, "%12d  %12d  %8s  %6s  %6d", r.Bytes, r.Count, r.Type, r.RedOp, r.Root)
	b.WriteString(placement(r))
	if l.InPlace != nil {
		b.WriteString(placement(*l.InPlace))
	} else {
		fmt.Fprintf(&b, "  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A")
	}
	if r.Algo != "" {
		fmt.Fprintf(&b, "  %6s  %6s  %3d", r.Algo, r.Proto, r.NChannels)
		if r.NCCL != "" {
			fmt.Fprintf(&b, "  nccl:%s", r.NCCL)
		}
	}
	b.WriteByte('\n')
	return b.String()
}

// placement is nccl-tests' "  %7s  %6.2f  %6.2f  %5g" (#wrong a double) or "  %5s" of "N/A".
func placement(r Row) string {
	wrong := "N/A"
	if r.Wrong >= 0 {
		wrong = cfmt(float64(r.Wrong), 'g', 6)
	}
	return fmt.Sprintf("  %7s  %6s  %6s  %5s", FormatTime(r.TimeUs), cfmt(r.AlgBW, 'f', 2), cfmt(r.BusBW, 'f', 2), wrong)
}

// FormatTime is nccl-tests' time column (src/common.cu, BenchTime): "%7.0f" from 10000 µs,
// "%7.1f" from 100 µs, "%7.2f" below.
func FormatTime(us float64) string {
	switch {
	case us >= 10000:
		return fmt.Sprintf("%7s", cfmt(us, 'f', 0))
	case us >= 100:
		return fmt.Sprintf("%7s", cfmt(us, 'f', 1))
	}
	return fmt.Sprintf("%7s", cfmt(us, 'f', 2))
}

// cfmt formats v as C's printf does with %.<prec>f or %.<prec>g: the same digits as strconv,
// and "inf", "-inf" and "nan" for the values Go spells +Inf and NaN.
func cfmt(v float64, verb byte, prec int) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return strconv.FormatFloat(v, verb, prec, 64)
}
