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
		for k := range tc.env {
			os.Unsetenv(k)
		}
	}
}
