package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/internal/cli"
)

// Every simccl command that takes a shared flag (internal/cli.Shared: --collective, -b/-e/-f,
// -d, --op, --topo, --nodes, --fabric, --json, --progress, the NCCL flags) takes it with the
// shared shorthand and help: the same word means the same thing in every command (issue 17: the
// flags differed by command). --op has no shorthand in report, where -o is the output file.
func TestSharedFlags(t *testing.T) {
	root := newRoot()
	require.Empty(t, cli.SharedViolations(root, map[string]bool{"simccl report --op": true}))
	// Not vacuous: the sweeping commands have the sweep flags, the planning ones the machine's.
	for _, c := range []string{"run", "tune", "mem", "report", "plan"} {
		cmd, _, err := root.Find([]string{c})
		require.NoError(t, err)
		for _, f := range []string{"collective", "minbytes", "maxbytes", "stepfactor", "datatype", "topo", "nodes", "algo", "nccl-version"} {
			require.NotNil(t, cmd.Flags().Lookup(f), "simccl %s lacks --%s", c, f)
		}
		require.Equal(t, "c", cmd.Flags().Lookup("collective").Shorthand, c)
	}
	for _, c := range []string{"run", "report", "replay"} {
		cmd, _, _ := root.Find([]string{c})
		for _, f := range []string{"fabric", "fabric-set", "progress"} {
			require.NotNil(t, cmd.Flags().Lookup(f), "simccl %s lacks --%s", c, f)
		}
	}
}

// simccl completion bash|zsh|fish writes the shell's script; the completions know the commands,
// the flags and the values of the shared ones (embedded topologies, collectives, lists).
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__start_simccl", "zsh": "#compdef simccl", "fish": "complete -c simccl", "powershell": "Register-ArgumentCompleter"} {
		var out, errb bytes.Buffer
		require.Equal(t, 0, mainRun([]string{"completion", shell}, &out, &errb), errb.String())
		require.Contains(t, out.String(), want, shell)
	}
	complete := func(args ...string) []string {
		var out, errb bytes.Buffer
		require.Equal(t, 0, mainRun(append([]string{"__complete"}, args...), &out, &errb), errb.String())
		var got []string
		for _, l := range strings.Split(out.String(), "\n") {
			if l != "" && !strings.HasPrefix(l, ":") {
				got = append(got, strings.SplitN(l, "\t", 2)[0])
			}
		}
		return got
	}
	require.Subset(t, complete(""), []string{"run", "tune", "report", "topo", "replay", "completion", "help"})
	require.Subset(t, complete("run", "--to"), []string{"--topo"})
	require.Subset(t, complete("run", "--topo", ""), []string{"dgx-h100", "gb200-nvl72", "h200x2-nvlink"})
	require.Subset(t, complete("run", "-c", "allreduce,"), []string{"allreduce,allgather", "allreduce,sendrecv"})
	require.Subset(t, complete("tune", "-d", ""), []string{"float", "bfloat16"})
	require.Subset(t, complete("topo", ""), []string{"dump"})
	require.Subset(t, complete("help", ""), []string{"run", "topo"})
}

// Usage errors exit 2 and failures 1, in every command, with one line on stderr naming the
// command (issue 17: --nccl-version fell back with another exit status than other bad flags).
func TestExitStatuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"nosuch"}, 2, `simccl: usage: unknown command "nosuch"`},
		{[]string{"rnu"}, 2, "did you mean run?"},
		{[]string{"help", "nosuch"}, 2, "no such command"},
		{[]string{"run", "--nccl-version", "2.99"}, 2, "simccl run: usage: --nccl-version"},
		// The finding's own line: a release only search has is a usage error that says so, at once
		// (it printed a fallback line, then failed with exit 1).
		{[]string{"run", "--nccl-version", "2.18"}, 2, "simccl run: usage: --nccl-version 2.18: the tuning model has 2.26, 2.28, 2.29, 2.30 (simccl search also takes 2.18"},
		{[]string{"tune", "--nccl-version", "2.99"}, 2, "simccl tune: usage: --nccl-version"},
		{[]string{"plan", "--nccl-version", "2.99"}, 2, "simccl plan: usage: --nccl-version"},
		{[]string{"mem", "--nccl-version", "2.99"}, 2, "simccl mem: usage: --nccl-version"},
		{[]string{"topo", "--nccl-version", "2.99"}, 2, "simccl topo: usage: --nccl-version"},
		{[]string{"search", "--nccl-version", "2.99"}, 2, "simccl search: usage: --nccl-version"},
		{[]string{"run", "--topo", "dgx-h10"}, 1, "embedded: dgx-a100"},
		{[]string{"run", "-c", "allreduce,bogus"}, 2, `--collective: unknown collective "bogus"`},
		{[]string{"run", "-d", "all"}, 2, "-d all: this command takes one type"},
		{[]string{"run", "--bogus"}, 2, "simccl run: usage: unknown flag: --bogus"},
		{[]string{"run", "--progress", "sometimes"}, 2, "--progress"},
	} {
		var out, errb bytes.Buffer
		require.Equal(t, c.code, mainRun(c.args, &out, &errb), "%v: %s", c.args, errb.String())
		require.Contains(t, errb.String(), c.want, "%v", c.args)
		require.Equal(t, 1, strings.Count(errb.String(), "\n"), "%v: one line: %q", c.args, errb.String())
	}
}

// The aliases of the shared flags: --coll is --collective, --nnodes is --nodes; -c takes
// nccl-tests' binary names.
func TestFlagAliases(t *testing.T) {
	run := func(args ...string) string {
		var out, errb bytes.Buffer
		require.Equal(t, 0, mainRun(args, &out, &errb), "%v: %s", args, errb.String())
		return out.String()
	}
	want := run("tune", "-c", "allgather", "--nodes", "2", "-b", "1M", "-e", "1M", "--no-table")
	require.Contains(t, want, "AllGather: ")
	require.Equal(t, want, run("tune", "--coll", "all_gather_perf", "--nnodes", "2", "-b", "1M", "-e", "1M", "--no-table"))
}

// simccl --version and simccl version print "simccl VERSION" on stdout (issue 17: there was no
// --version); -ldflags -X main.versionString sets it.
func TestVersion(t *testing.T) {
	versionString = "v9.9.9"
	defer func() { versionString = "" }()
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var out, errb bytes.Buffer
		require.Equal(t, 0, mainRun(args, &out, &errb), errb.String())
		require.Equal(t, "simccl v9.9.9\n", out.String(), "%v", args)
	}
}

// Help is cobra's for every command: no pflag "Usage of simccl search:" line, the flags listed
// under "Flags:", and the command's own words above them.
func TestHelpLayout(t *testing.T) {
	for _, c := range []string{"search", "run", "tune", "plan", "mem", "report", "replay", "topo"} {
		var out, errb bytes.Buffer
		require.Equal(t, 0, mainRun([]string{c, "--help"}, &out, &errb))
		require.NotContains(t, out.String(), "Usage of", c)
		require.Contains(t, out.String(), "\nFlags:\n", c)
		require.Contains(t, out.String(), "--topo", c)
	}
}

// Point-to-point rows (sendrecv, alltoall) say P2P in run's algo column, not Ring (issue 17).
func TestRunP2PRows(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 0, mainRun([]string{"run", "-c", "sendrecv,alltoall,allreduce", "-b", "1M", "-e", "1M", "--json", "--progress", "off"}, &out, &errb), errb.String())
	var v struct {
		Rows []struct {
			Coll string `json:"coll"`
			Algo string `json:"algo"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &v))
	require.Len(t, v.Rows, 3)
	for _, r := range v.Rows {
		if r.Coll == "all_reduce" {
			require.NotEqual(t, "P2P", r.Algo)
		} else {
			require.Equal(t, "P2P", r.Algo, r.Coll)
		}
	}
}

// plan takes the call as every sweeping command does, -b (nccl-tests' size), or as NCCL's API,
// --count (issue 17: plan alone had --count): -b 4M of floats is --count 1M.
func TestPlanSizeOrCount(t *testing.T) {
	plan := func(args ...string) string {
		var out, errb bytes.Buffer
		require.Equal(t, 0, mainRun(append([]string{"plan", "-c", "allreduce", "--summary"}, args...), &out, &errb), errb.String())
		return out.String()
	}
	require.Equal(t, plan("--count", "1M"), plan("-b", "4M"))
	require.NotEqual(t, plan("--count", "1M"), plan("-b", "1M"))
}

// simccl report works at 512 nodes (issue 17: it failed from 256): the page is written, with the
// "where time goes" section one line saying why the schedule is not recorded.
func TestReportAt512Nodes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	page := filepath.Join(t.TempDir(), "r.html")
	var out, errb bytes.Buffer
	require.Equal(t, 0, mainRun([]string{"report", "--nodes", "512", "-b", "8", "-e", "8", "--progress", "off", "-o", page}, &out, &errb), errb.String())
	html, err := os.ReadFile(page)
	require.NoError(t, err)
	require.Contains(t, string(html), "The schedule of one all_reduce at 512 node(s) (4096 ranks) has about")
}

// Every JSON document simccl prints has one key style, snake_case (issue 17: ncclVersion, nNodes
// and maxBw beside nccl_version; search and topo kept NCCL's camelCase). Keys of maps that hold
// data (report's paths by GPU name, replay's scaled communicators) are names, not keys, and are
// left out.
func TestJSONKeysSnakeCase(t *testing.T) {
	trace := replayData + "trace/"
	page := filepath.Join(t.TempDir(), "r.html")
	dataKeyed := map[string]bool{"paths": true, "scaled": true}
	snake := regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*$`)
	for _, args := range [][]string{
		{"topo", "--json"},
		{"topo", "--json", "--nodes", "2"},
		{"search", "--json"},
		{"search", "--json", "--nodes", "2"},
		{"tune", "--json", "-c", "all", "-b", "1M", "-e", "1M"},
		{"plan", "--json", "-c", "allreduce,sendrecv", "-b", "1K"},
		{"mem", "--json", "-c", "all", "-b", "1M", "-e", "1M"},
		{"run", "--json", "-c", "all", "--nodes", "2", "-b", "1M", "-e", "1M"},
		{"replay", "--json", "--topo", "h200x2-nvlink", trace + "simccl-trace.rank0.jsonl", trace + "simccl-trace.rank1.jsonl"},
		{"report", "--json", "-o", page, "-b", "8", "-e", "1K", "--progress", "off"},
	} {
		var out, errb bytes.Buffer
		require.Equal(t, 0, mainRun(args, &out, &errb), "%v: %s", args, errb.String())
		var doc any
		require.NoError(t, json.Unmarshal(out.Bytes(), &doc), "%v", args)
		keys := 0
		var walk func(v any, path string)
		walk = func(v any, path string) {
			switch x := v.(type) {
			case map[string]any:
				for k, e := range x {
					keys++
					require.Regexp(t, snake, k, "simccl %s: key %s/%s", strings.Join(args, " "), path, k)
					if !dataKeyed[k] {
						walk(e, path+"/"+k)
					}
				}
			case []any:
				for _, e := range x {
					walk(e, path+"[]")
				}
			}
		}
		walk(doc, "")
		require.Greater(t, keys, 5, "%v", args)
	}
}
