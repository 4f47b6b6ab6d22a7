package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Bad input found by a sweep of the commands (stop 47): each is refused up front with a usage
// error (exit 2) naming what is wrong, before any output, where it was ignored, accepted with a
// contradiction, or refused only after work.
func TestBadInputRefusedUpFront(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "m.csv")
	require.NoError(t, os.WriteFile(m, []byte("tag,coll,world,bytes,us,algbw,busbw\ndefault,frob,8,1024,20,0.05,0.09\n"), 0o644))
	trace := filepath.Join("..", "..", "testdata", "intercept", "h200x2", "trace")
	for _, tc := range []struct {
		args []string
		env  map[string]string
		rc   int
		want string
	}{
		{args: []string{"search", "--p2p-level", "FOO"}, rc: 2, want: `--p2p-level: graph: unknown path level "FOO"`},
		{args: []string{"search", "--trees", "100"}, rc: 2, want: "--trees 100: want a rank in 0..7"},
		{args: []string{"search", "--trees", "-5"}, rc: 2, want: "--trees -5: want a rank in 0..7"},
		{args: []string{"run", "--exact", "--ecmp-mean"}, rc: 2, want: "--exact and --ecmp-mean"},
		{args: []string{"run", "--gpus", "100"}, rc: 2, want: "--gpus 100: dgx-h100 has only 8 GPU(s) with a rank below 100"},
		{args: []string{"run", "--trace-max-ops", "-1", "--trace", filepath.Join(dir, "t.json")}, rc: 2, want: "--trace-max-ops -1"},
		{args: []string{"replay", "--progress", "off", filepath.Join(trace, "simccl-trace.rank0.jsonl"), filepath.Join(trace, "simccl-trace.rank1.jsonl"),
			"--topo", "h200x2-nvlink", "--scale-ranks", "8", "--nodes", "2"}, rc: 2, want: "--scale-ranks 8 and --nodes 2 disagree"},
		{args: []string{"run", "-b", "1M", "-e", "1M"}, env: map[string]string{"NCCL_BUFFSIZE": "1"}, rc: 2, want: "NCCL_BUFFSIZE=\"1\": want at least 4096 bytes"},
		// The step estimate sees the transfers' own chunk: 1-byte chunks of 64 MiB are refused
		// at once (they took 10 GB and more than a minute).
		{args: []string{"plan", "-b", "64M", "-c", "sendrecv", "--summary"}, env: map[string]string{"NCCL_P2P_NVL_CHUNKSIZE": "1"}, rc: 1, want: "schedule would have about"},
		{args: []string{"report", "-b", "1K", "-e", "4K", "-o", filepath.Join(dir, "r.html"), "--measured", m}, rc: 1, want: `unknown collective "frob"`},
	} {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		var out, errb bytes.Buffer
		rc := mainRun(tc.args, &out, &errb)
		require.Equal(t, tc.rc, rc, "%v: stderr %s", tc.args, errb.String())
		require.Contains(t, errb.String(), tc.want, "%v", tc.args)
		if tc.rc == 2 {
			require.Empty(t, strings.TrimSpace(out.String()), "%v: nothing printed before the error", tc.args)
		}
		for k := range tc.env {
			os.Unsetenv(k)
		}
	}
}
