package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simccl/simccl/comm/perf"
	"github.com/simccl/simccl/internal/cli"
)

var update = flag.Bool("update", false, "rewrite the expected results of data-driven tests (testdata/*.txt, *.golden) with what the code gives")

// describe parses a command line and says what runccl would run, or the usage error (exit 2) and
// the notes it writes.
func describe(args []string) string {
	var errb bytes.Buffer
	opt, err := parse(args, &errb, noenv)
	var b strings.Builder
	switch {
	case errors.Is(err, errHelp):
		b.WriteString("help\n")
	case errors.Is(err, errVersion):
		b.WriteString("version\n")
	case err != nil:
		fmt.Fprintln(&errb, "runccl:", err)
		fmt.Fprintf(&b, "exit %d\n", cli.ExitCode(err))
	default:
		p := opt.perf
		sizes := fmt.Sprint(p.Sizes)
		if len(p.Sizes) > 6 {
			sizes = fmt.Sprintf("%v … %d", p.Sizes[:3], p.Sizes[len(p.Sizes)-1])
		}
		var types, ops []string
		for _, d := range opt.dtypes {
			types = append(types, d.String())
		}
		for _, o := range opt.ops {
			ops = append(ops, perf.OpName(o))
		}
		root := fmt.Sprint(opt.root)
		if opt.allRoots {
			root = "all"
		}
		fmt.Fprintf(&b, "collectives %s; sizes %s (%d); types %s; ops %s; root %s\n", strings.Join(perf.NamesOf(opt.colls), ","), sizes, len(p.Sizes),
			strings.Join(types, ","), strings.Join(ops, ","), root)
		fmt.Fprintf(&b, "iters %d warmup %d agg %d check %v×%d cycles %d blocking %v cputime %v average %d graph %d\n", p.Iters, p.Warmup, p.AggIters,
			p.Check, p.CheckIters, p.Cycles, p.Blocking, p.CPUTime, p.Average.Flag(), p.Graph)
		fmt.Fprintf(&b, "ranks %d (-g given: %v); timeout %v; backend %s; json %v\n", opt.nranks, opt.nranksSet, opt.timeout, opt.backend, opt.json)
	}
	for _, l := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		if l != "" {
			fmt.Fprintf(&b, "stderr: %s\n", l)
		}
	}
	return b.String()
}

// TestFlags runs the command lines of testdata/flags.txt: blocks of comment lines, "runccl ARGS…",
// "----" and what describe says; -update writes what the code says.
func TestFlags(t *testing.T) {
	path := filepath.Join("testdata", "flags.txt")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for i, block := range strings.Split(strings.TrimSpace(string(data)), "\n\n") {
		lines := strings.Split(block, "\n")
		var cmd string
		var want []string
		sep := -1
		for j, l := range lines {
			switch {
			case sep < 0 && l == "----":
				sep = j
			case sep < 0 && strings.HasPrefix(l, "runccl"):
				cmd = l
			case sep >= 0:
				want = append(want, l)
			}
			if sep < 0 || j == sep {
				out.WriteString(l + "\n")
			}
		}
		if cmd == "" || sep < 0 {
			t.Fatalf("block %d: no command or no ----:\n%s", i, block)
		}
		got := describe(strings.Fields(cmd)[1:])
		out.WriteString(got + "\n")
		if w := strings.Join(want, "\n") + "\n"; got != w && !*update {
			t.Errorf("%s\n--- want\n%s--- got\n%s", cmd, w, got)
		}
	}
	if *update {
		if err := os.WriteFile(path, []byte(strings.TrimSuffix(out.String(), "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
