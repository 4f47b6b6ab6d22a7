package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/simccl/simccl/internal/cli"
)

// runccl's flags that share a name with simccl's (internal/cli.Shared) have its help and
// shorthand, save --collective: -c is nccl-tests' --check here, so --collective has no shorthand.
func TestSharedFlags(t *testing.T) {
	root := newRoot(nil, &bytes.Buffer{}, noenv)
	if v := cli.SharedViolations(root, map[string]bool{"runccl --collective": true}); len(v) > 0 {
		t.Fatalf("%q", v)
	}
	for _, f := range []string{"collective", "minbytes", "maxbytes", "stepfactor", "datatype", "op", "json", "algo", "proto", "nccl-version", "min-nchannels", "max-nchannels"} {
		if root.Flags().Lookup(f) == nil {
			t.Errorf("runccl lacks --%s", f)
		}
	}
	if c := root.Flags().ShorthandLookup("c"); c == nil || c.Name != "check" {
		t.Errorf("-c is %v, want nccl-tests' --check", c)
	}
}

// runccl completion bash|zsh|fish; completions of the collective argument's flag and of -d.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__start_runccl", "zsh": "#compdef runccl", "fish": "complete -c runccl"} {
		var out, errb bytes.Buffer
		if code := mainRun([]string{"completion", shell}, &out, &errb, noenv); code != 0 || !strings.Contains(out.String(), want) {
			t.Errorf("completion %s: exit %d, %q lacks %q", shell, code, errb.String(), want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--coll", ""}, "alltoall"},
		{[]string{"-d", ""}, "bfloat16"},
		{[]string{"-o", ""}, "mulsum"},
		{[]string{"replay", "--sc"}, "--scale-ranks"},
		{[]string{""}, "replay"},
	} {
		var out, errb bytes.Buffer
		if code := mainRun(append([]string{"__complete"}, c.args...), &out, &errb, noenv); code != 0 || !strings.Contains(out.String(), c.want+"\n") && !strings.Contains(out.String(), c.want+"\t") {
			t.Errorf("__complete %q: exit %d, %q lacks %q", c.args, code, out.String(), c.want)
		}
	}
}

// replay's --scale-ranks is simccl replay's name (--scale, its name before, is the same flag);
// its --timeout reads seconds as -T does.
func TestReplayFlagNames(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--scale-ranks", "-2", "x"}, "--scale-ranks -2"},
		{[]string{"replay", "--scale", "-2", "x"}, "--scale-ranks -2"},
		{[]string{"replay", "--timeout", "0s", "x"}, "--timeout"},
		{[]string{"replay", "--timeout", "soon", "x"}, "--timeout"},
	} {
		var out, errb bytes.Buffer
		if code := mainRun(c.args, &out, &errb, noenv); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, %q lacks %q", c.args, code, errb.String(), c.want)
		}
	}
	o := &replayOptions{}
	fs, _, _ := replayFlags(o)
	if err := fs.Parse([]string{"--timeout", "30"}); err != nil || o.timeoutFlag.d.Seconds() != 30 {
		t.Errorf("--timeout 30: %v, %v", err, o.timeoutFlag.d)
	}
}

// Through the whole command line (cobra): bad usage exits 2 with one line; --coll and a bare
// --check (runccl's earlier spellings) still run.
func TestCommandLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "runccl: usage: unknown flag: --bogus"},
		{[]string{"-t", "2"}, "runccl: usage: -t 2"},
		{[]string{"nosuch_perf"}, `runccl: usage: unexpected argument "nosuch_perf"`},
		{[]string{"all_gather_perf", "--collective", "allreduce"}, "name different collectives"},
		{[]string{"-b", "lots"}, `runccl: usage: -b "lots"`},
		{[]string{"replay", "--bogus", "x"}, "runccl replay: usage: unknown flag: --bogus"},
		{[]string{"help", "tune"}, "runccl help: usage: help tune: no such command"},
	} {
		var out, errb bytes.Buffer
		if code := mainRun(c.args, &out, &errb, noenv); code != 2 || !strings.Contains(errb.String(), c.want) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q, want 2 and one line with %q", c.args, code, errb.String(), c.want)
		}
	}
	for _, args := range [][]string{
		{"--coll", "all_gather", "-b", "1K", "-e", "1K", "-g", "2", "-n", "1", "-w", "0", "--check"},
		{"all_gather_perf", "-b", "1K", "-e", "1K", "-g", "2", "-n", "1", "-w", "0", "-c", "1"},
	} {
		var out, errb bytes.Buffer
		if code := mainRun(args, &out, &errb, noenv); code != 0 || !strings.Contains(out.String(), "all_gather") || !strings.Contains(out.String(), "Out of bounds values : 0 OK") {
			t.Errorf("%v: exit %d, %s\n%s", args, code, errb.String(), out.String())
		}
	}
}
