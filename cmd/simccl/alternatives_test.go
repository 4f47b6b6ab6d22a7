package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/simnet"
)

// runJSON runs simccl with args and decodes its JSON rows.
func runJSON(t *testing.T, env map[string]string, args ...string) []simnet.Row {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var out, errb bytes.Buffer
	rc := mainRun(append(args, "--json", "--progress", "off"), &out, &errb)
	require.Equal(t, 0, rc, errb.String())
	var doc struct{ Rows []simnet.Row }
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	return doc.Rows
}

// Every cell NCCL's tuner could pick is listed once, fastest on the GPUs first, NCCL's own pick
// marked and equal to the row; point-to-point calls have none.
func TestRunAlternatives(t *testing.T) {
	rows := runJSON(t, nil, "run", "-c", "allreduce,alltoall", "-b", "1M", "-e", "1M", "--alternatives")
	require.Len(t, rows, 2)
	ar, a2a := rows[0], rows[1]
	require.Equal(t, "all_reduce", ar.Coll)
	require.Empty(t, a2a.Alternatives, "all-to-all has no algorithm to choose")
	seen := map[string]bool{}
	picks := 0
	for i, a := range ar.Alternatives {
		cell := a.Algo + "/" + a.Proto
		require.False(t, seen[cell], "cell %s twice", cell)
		seen[cell] = true
		require.Empty(t, a.Error, cell)
		require.Positive(t, a.TimeUs, cell)
		require.Positive(t, a.NCCLModelUs, cell)
		if i > 0 {
			require.LessOrEqual(t, ar.Alternatives[i-1].GPUUs(), a.GPUUs(), "not sorted at %s", cell)
		}
		if a.Pick {
			picks++
			require.Equal(t, ar.Algo, a.Algo)
			require.Equal(t, ar.Proto, a.Proto)
			require.Equal(t, ar.NChannels, a.NChannels)
			require.Equal(t, ar.TimeUs, a.TimeUs)
		}
	}
	require.Equal(t, 1, picks)
	// A DGX H100 node: NVLS and the three protocols of Ring and Tree.
	for _, c := range []string{"NVLS/Simple", "Ring/LL", "Ring/LL128", "Ring/Simple", "Tree/LL", "Tree/LL128", "Tree/Simple"} {
		require.True(t, seen[c], "%s missing from %v", c, seen)
	}
	require.False(t, seen["NVLS/LL"], "NVLS runs Simple only")
}

// An alternative is the call NCCL_ALGO/NCCL_PROTO would force: the same channels and time as run
// with --algo and --proto.
func TestAlternativeIsForcedRun(t *testing.T) {
	rows := runJSON(t, nil, "run", "--nodes", "2", "-c", "allgather", "-b", "4M", "-e", "4M", "--alternatives")
	require.Len(t, rows, 1)
	checked := 0
	for _, a := range rows[0].Alternatives {
		if a.Pick {
			continue
		}
		forced := runJSON(t, nil, "run", "--nodes", "2", "-c", "allgather", "-b", "4M", "-e", "4M", "--algo", a.Algo, "--proto", a.Proto)
		require.Len(t, forced, 1)
		require.Equal(t, a.Algo, forced[0].Algo)
		require.Equal(t, a.Proto, forced[0].Proto)
		require.Equal(t, a.NChannels, forced[0].NChannels, "%s/%s", a.Algo, a.Proto)
		require.Equal(t, a.TimeUs, forced[0].TimeUs, "%s/%s", a.Algo, a.Proto)
		checked++
	}
	require.GreaterOrEqual(t, checked, 2)
}

// The text table lists the alternatives after nccl-tests' footer, as comment lines, with the note.
func TestRunAlternativesText(t *testing.T) {
	var out, errb bytes.Buffer
	rc := mainRun([]string{"run", "-b", "64K", "-e", "64K", "--alternatives", "--progress", "off"}, &out, &errb)
	require.Equal(t, 0, rc, errb.String())
	s := out.String()
	foot := strings.Index(s, "# Avg bus bandwidth")
	alts := strings.Index(s, "# alternatives:")
	require.Positive(t, foot)
	require.Greater(t, alts, foot, "the alternatives come after the footer")
	require.Contains(t, s, "# note: --alternatives: NCCL's pick was the fastest simulated on the GPUs at")
	lines := 0
	for _, l := range strings.Split(s[alts:], "\n") {
		if strings.HasPrefix(l, "#        65536  all_reduce") {
			lines++
			require.True(t, strings.HasPrefix(l, "#"), l)
		}
	}
	require.GreaterOrEqual(t, lines, 4)
	require.Contains(t, s[alts:], "pick")
}

// The tuner file --write-tuner writes, read back with --tuner-file, makes every call run its
// fastest alternative: the same cell, channels and time.
func TestWriteTunerReadsBack(t *testing.T) {
	f := filepath.Join(t.TempDir(), "tuner.csv")
	args := []string{"run", "--topo", "h200x2-nvlink", "-c", "allreduce,allgather", "-b", "1K", "-e", "1G", "-f", "32"}
	first := runJSON(t, nil, append(args, "--write-tuner", f)...)
	data, err := os.ReadFile(f)
	require.NoError(t, err)
	require.Contains(t, string(data), "# collective,minBytes,maxBytes,algorithm,protocol,channels\n")
	again := runJSON(t, nil, append(args, "--tuner-file", f)...)
	require.Len(t, again, len(first))
	for i, r := range first {
		best := r.Alternatives[0]
		require.Equal(t, best.Algo+"/"+best.Proto, again[i].Algo+"/"+again[i].Proto, "%s %d", r.Coll, r.Bytes)
		require.Equal(t, best.NChannels, again[i].NChannels, "%s %d", r.Coll, r.Bytes)
		require.Equal(t, best.TimeUs, again[i].TimeUs, "%s %d", r.Coll, r.Bytes)
	}
}

func TestWriteTunerRules(t *testing.T) {
	row := func(c string, b int64, algo, proto string) simnet.Row {
		return simnet.Row{Coll: c, Bytes: b, Alternatives: []simnet.Alternative{{Algo: algo, Proto: proto, TimeUs: 1}}}
	}
	rows := []simnet.Row{
		row("all_reduce", 1024, "Ring", "LL"), row("all_reduce", 4096, "Ring", "LL"),
		row("all_reduce", 16384, "Tree", "LL128"), row("all_reduce", 65536, "Ring", "LL"),
		row("all_gather", 1024, "Ring", "Simple"),
		{Coll: "alltoall", Bytes: 1024}, // no alternatives: no rule
	}
	var b bytes.Buffer
	require.NoError(t, writeTuner(&b, rows, "simccl run x"))
	var rules []string
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if !strings.HasPrefix(l, "#") {
			rules = append(rules, l)
		}
	}
	require.Equal(t, []string{
		"allreduce,0,16383,Ring,LL,*",
		"allreduce,16384,65535,Tree,LL128,*",
		"allreduce,65536,*,Ring,LL,*",
		"allgather,0,*,Ring,Simple,*",
	}, rules)
}

// replay --alternatives lists each distinct collective call with what the trace would save with
// its fastest cell: the calls times the pick's GPU time less the fastest's, the largest first.
func TestReplayAlternatives(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"replay", "--topo", "dgx-h100", "--nodes", "2", "--scale-ranks", "16", "--alternatives", "--json", "--progress", "off",
		"../../testdata/intercept/h200x2/trace/simccl-trace.rank0.jsonl", "../../testdata/intercept/h200x2/trace/simccl-trace.rank1.jsonl"}
	require.Equal(t, 0, mainRun(args, &out, &errb), errb.String())
	var rep struct {
		Notes        []string
		Alternatives []struct {
			Op           string
			Calls        int
			Alternatives []simnet.Alternative
			SavedUs      float64 `json:"saved_us"`
		}
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.NotEmpty(t, rep.Alternatives)
	saving := 0
	for i, c := range rep.Alternatives {
		require.Positive(t, c.Calls)
		require.NotEqual(t, "sendrecv", c.Op)
		if i > 0 {
			require.GreaterOrEqual(t, rep.Alternatives[i-1].SavedUs, c.SavedUs)
		}
		pick := 0.0
		for _, a := range c.Alternatives {
			if a.Pick {
				pick = a.GPUUs()
			}
		}
		want := 0.0
		if best := c.Alternatives[0].GPUUs(); best < pick {
			want = float64(c.Calls) * (pick - best)
			saving++
		}
		require.InDelta(t, want, c.SavedUs, 1e-9)
	}
	require.Positive(t, saving, "some call has a faster cell on 2 DGX H100 nodes")
	found := false
	for _, n := range rep.Notes {
		found = found || strings.Contains(n, "less on the GPUs")
	}
	require.True(t, found, "%q", rep.Notes)
}
