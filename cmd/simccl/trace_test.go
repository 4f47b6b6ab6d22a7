package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A run whose calls all go to the compact executor records nothing: --trace fails with one line
// that says why and what to do, and writes no file; the table still comes out.
func TestRunTraceNothingRecorded(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "t.json")
	var out, errb bytes.Buffer
	rc := mainRun([]string{"run", "--nodes", "64", "--fabric", "../../examples/fabrics/rail-2tier.fabric", "-b", "1M", "-e", "4M", "-f", "4", "--trace", trace}, &out, &errb)
	require.Equal(t, 1, rc, "stderr: %s", errb.String())
	msg := strings.TrimSpace(errb.String())
	require.NotContains(t, msg, "\n", "one line")
	for _, want := range []string{"no op recorded", "all_reduce 1048576, 4194304 bytes", "compact executor", "records no ops", "smaller sizes", "--nodes"} {
		require.Contains(t, msg, want)
	}
	require.Contains(t, out.String(), "tree-compact", "the table is printed")
	_, err := os.Stat(trace)
	require.True(t, os.IsNotExist(err), "no trace written")
}

// Where some calls are recorded and others not, the trace has the recorded ones and stderr says
// which calls are missing and why: the compact executor, or --trace-max-ops.
func TestRunTracePartlyRecorded(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--nodes", "64", "--fabric", "../../examples/fabrics/rail-2tier.fabric", "-b", "8K", "-e", "128K", "-f", "16"},
			[]string{"1 of 2 calls not recorded: all_reduce 131072 bytes (compact executor, mode tree-compact, which records no ops)", "smaller sizes"}},
		{[]string{"-b", "8K", "-e", "1M", "-f", "4", "--trace-max-ops", "100"},
			[]string{"3 of 4 calls not recorded: all_reduce 32768, 131072, 524288 bytes (past --trace-max-ops 100); raise --trace-max-ops"}},
	} {
		trace := filepath.Join(dir, "t.json")
		var out, errb bytes.Buffer
		rc := mainRun(append([]string{"run", "--trace", trace}, tc.args...), &out, &errb)
		require.Equal(t, 0, rc, "%v: stderr %s", tc.args, errb.String())
		msg := strings.TrimSpace(errb.String())
		require.NotContains(t, msg, "\n", "one line")
		for _, w := range tc.want {
			require.Contains(t, msg, w, "%v", tc.args)
		}
		data, err := os.ReadFile(trace)
		require.NoError(t, err)
		var doc struct {
			TraceEvents []struct {
				Ph  string `json:"ph"`
				Cat string `json:"cat"`
			} `json:"traceEvents"`
		}
		require.NoError(t, json.Unmarshal(data, &doc))
		slices := 0
		for _, ev := range doc.TraceEvents {
			if ev.Ph == "X" {
				slices++
				require.Equal(t, "all_reduce 8192", ev.Cat, "only the first call is recorded")
			}
		}
		require.NotZero(t, slices, "%v", tc.args)
	}
}
