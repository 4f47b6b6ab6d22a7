package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/internal/input"
)

// sparse writes a file of n zero bytes without writing them (its size is all that is read).
func sparse(t *testing.T, name string, n int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	f, err := os.Create(p)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(n))
	require.NoError(t, f.Close())
	return p
}

// TestInputBounds: findings 6 and 8 of the input-bounds issue. Every file a command reads is
// bounded (a file of 64 MiB and one byte stands for /dev/zero, which took 9 to 18 GB), and
// --nodes, --scale-ranks, -b/-e and --count near their limits fail at once, on one line naming
// the file or the flag. How fast and in how much memory is bench/badinput's to measure.
func TestInputBounds(t *testing.T) {
	big := sparse(t, "big.bin", input.MaxBytes+1)
	trace := replayData + "trace/simccl-trace.rank0.jsonl"
	frob := filepath.Join(t.TempDir(), "m.csv") // a measured row of an unknown collective
	require.NoError(t, os.WriteFile(frob, []byte("tag,coll,world,bytes,us,algbw,busbw\ndefault,frob,8,1024,20,0.05,0.09\n"), 0o644))
	for _, tc := range []struct {
		args []string
		env  map[string]string
		rc   int
		want string
	}{
		// Finding 6: files over the bound, through every command that reads one.
		{args: []string{"run", "--topo", big}, rc: 1, want: big + ": input too large (more than 16 MiB)"},
		{args: []string{"tune", "--topo", big}, rc: 1, want: big + ": input too large"},
		{args: []string{"plan", "-b", "1M"}, env: map[string]string{"NCCL_TOPO_FILE": big}, rc: 1, want: "NCCL_TOPO_FILE: " + big + ": input too large"},
		{args: []string{"run", "--nodes", "2", "--fabric", big}, rc: 1, want: big + ":1: input too large (a line longer than 1 MiB)"},
		{args: []string{"replay", big}, rc: 1, want: big + ": input too large (more than 64 MiB)"},
		{args: []string{"replay", trace, big}, rc: 1, want: big + ": input too large"},
		{args: []string{"replay", "--topo", "h200x2-nvlink", trace, replayData + "trace/simccl-trace.rank1.jsonl", "--measured", big}, rc: 1, want: big + ": input too large"},
		{args: []string{"report", "-o", os.DevNull, "--measured", big}, rc: 1, want: big + ": input too large"},
		{args: []string{"mem", "--tuner-file", big}, rc: 1, want: big + ":1: input too large (a line longer than 1 MiB)"},
		{args: []string{"search", "--graph", big}, rc: 1, want: big + ": input too large"},
		{args: []string{"search"}, env: map[string]string{"NCCL_GRAPH_FILE": big}, rc: 1, want: "NCCL_GRAPH_FILE: " + big + ": input too large"},
		// Finding 8: --nodes on every command, over MaxNodes and over MaxRanks ranks.
		{args: []string{"plan", "-b", "1M", "--nodes", "1000000000"}, rc: 2, want: "--nodes 1000000000 (want 1..131072)"},
		{args: []string{"plan", "-b", "1M", "--nodes", "131072"}, rc: 2, want: "--nodes: planner: 131072 nodes × 8 GPUs = 1048576 ranks, more ranks than simccl simulates (131072)"},
		{args: []string{"run", "--nodes", "131072"}, rc: 2, want: "1048576 ranks, more ranks than simccl simulates"},
		{args: []string{"tune", "--nodes", "131072"}, rc: 2, want: "1048576 ranks, more ranks than simccl simulates"},
		{args: []string{"mem", "--nodes", "131072"}, rc: 2, want: "1048576 ranks, more ranks than simccl simulates"},
		{args: []string{"search", "--nodes", "131072"}, rc: 2, want: "1048576 ranks, more ranks than simccl simulates"},
		{args: []string{"report", "-o", os.DevNull, "--nodes", "131072"}, rc: 2, want: "1048576 ranks, more ranks than simccl simulates"},
		{args: []string{"replay", "--nodes", "131072", trace, replayData + "trace/simccl-trace.rank1.jsonl"}, rc: 2, want: "1048576 ranks, more ranks than simccl simulates"},
		{args: []string{"replay", "--scale-ranks", "1000000000", trace}, rc: 2, want: "--scale-ranks 1000000000, --nodes 1: at most 131072 ranks"},
		// Sizes beyond units.MaxSize (their bytes overflowed int64 on the way).
		{args: []string{"run", "-b", "8", "-e", "2T"}, rc: 2, want: "-e: 2199023255552 bytes, more than 1 TiB"},
		{args: []string{"tune", "-b", "4T", "-e", "4T"}, rc: 2, want: "-b: 4398046511104 bytes, more than 1 TiB"},
		{args: []string{"plan", "--count", "4611686018427387904"}, rc: 2, want: "--count 4611686018427387904 of 4-byte float: more than 1 TiB"},
		// Finding 5 through the command line.
		{args: []string{"run", "--nodes", "2", "--fabric-set", "hosts_per_leaf=1000000000000000000"}, rc: 2, want: "--fabric-set: fabric: hosts_per_leaf 1000000000000000000 (want 1..4096)"},
		{args: []string{"run", "--nodes", "2", "--fabric-set", "switch_latency_us=1e13"}, rc: 2, want: "switch_latency_us 1e+13"},
		// Values each in range that multiply into 160,000 uplinks a leaf: one error before any size.
		{args: []string{"run", "--nodes", "64", "--fabric-set", "uplink_speed=0.08Gbps"}, rc: 1, want: "fabric: a leaf would need 1.6e+05 uplinks of 0.01 GB/s"},
		// A sweep of the commands (stop 47): each was ignored, accepted with a contradiction, or
		// refused only after work. Usage errors come before any output.
		{args: []string{"search", "--p2p-level", "FOO"}, rc: 2, want: `--p2p-level: graph: unknown path level "FOO"`},
		{args: []string{"search", "--trees", "100"}, rc: 2, want: "--trees 100: want a rank in 0..7"},
		{args: []string{"search", "--trees", "-5"}, rc: 2, want: "--trees -5: want a rank in 0..7"},
		{args: []string{"run", "--trace-max-ops", "-1", "--trace", filepath.Join(t.TempDir(), "t.json")}, rc: 2, want: "--trace-max-ops -1"},
		{args: []string{"run", "--exact", "--ecmp-mean"}, rc: 2, want: "--exact and --ecmp-mean"},
		{args: []string{"run", "--gpus", "100"}, rc: 2, want: "--gpus 100: dgx-h100 has only 8 GPU(s) with a rank below 100"},
		{args: []string{"replay", "--progress", "off", trace, replayData + "trace/simccl-trace.rank1.jsonl",
			"--topo", "h200x2-nvlink", "--scale-ranks", "8", "--nodes", "2"}, rc: 2, want: "--scale-ranks 8 and --nodes 2 disagree"},
		{args: []string{"run", "-b", "1M", "-e", "1M"}, env: map[string]string{"NCCL_BUFFSIZE": "1"}, rc: 2, want: "NCCL_BUFFSIZE=\"1\": want at least 4096 bytes"},
		// The step estimate sees the transfers' own chunk: 1-byte chunks of 64 MiB are refused
		// at once (they took 10 GB and more than a minute).
		{args: []string{"plan", "-b", "64M", "-c", "sendrecv", "--summary"}, env: map[string]string{"NCCL_P2P_NVL_CHUNKSIZE": "1"}, rc: 1, want: "schedule would have about"},
		{args: []string{"report", "-b", "1K", "-e", "4K", "-o", filepath.Join(t.TempDir(), "r.html"), "--measured", frob}, rc: 1, want: `unknown collective "frob"`},
	} {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		var out, errb bytes.Buffer
		rc := mainRun(tc.args, &out, &errb)
		msg := strings.TrimSpace(errb.String())
		require.Equal(t, tc.rc, rc, "%v: %s", tc.args, msg)
		require.Contains(t, msg, tc.want, tc.args)
		require.NotContains(t, msg, "\n", tc.args)
		if tc.rc == 2 {
			require.Empty(t, strings.TrimSpace(out.String()), "%v: nothing printed before a usage error", tc.args)
		}
		for k := range tc.env {
			os.Unsetenv(k)
		}
	}
}
