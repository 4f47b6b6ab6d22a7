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
