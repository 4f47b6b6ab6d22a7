package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/simnet"
)

// An NCCL setting the simulation does not model, set in the environment, is named in run's notes
// (table and JSON); one it reads (NCCL_ALGO) or one NCCL only prints by (NCCL_DEBUG) is not.
func TestRunNotesUnreadEnv(t *testing.T) {
	notes := func() []string {
		var out, errb bytes.Buffer
		rc := mainRun([]string{"run", "-b", "1M", "-e", "1M", "--json", "--progress", "off"}, &out, &errb)
		require.Equal(t, 0, rc, errb.String())
		var doc struct {
			Notes []string `json:"notes"`
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
		return doc.Notes
	}
	t.Setenv("NCCL_ALGO", "Ring")
	t.Setenv("NCCL_DEBUG", "INFO")
	t.Setenv("NCCL_IB_QPS_PER_CONNECTION", "4") // read since stop 50 (simnet.Fabric.QPs)
	for _, n := range notes() {
		require.NotContains(t, n, "not modelled, set in the environment", n)
	}
	t.Setenv("NCCL_IB_TIMEOUT", "22")
	found := false
	for _, n := range notes() {
		if strings.Contains(n, "not modelled, set in the environment: NCCL_IB_TIMEOUT=22 ") {
			found = true
		}
	}
	require.True(t, found, "no note names NCCL_IB_TIMEOUT")
}

// NCCL_IB_QPS_PER_CONNECTION under rail routing changes nothing, and a note says so; under ECMP,
// or on one node, no note.
func TestQPsNote(t *testing.T) {
	f := simnet.DefaultFabric()
	f.QPs = 4
	require.Empty(t, qpsNote(f, 8), "ECMP: the queue pairs are simulated")
	f.Routing = "rail"
	require.Contains(t, qpsNote(f, 8), "NCCL_IB_QPS_PER_CONNECTION=4 changes nothing here: routing rail")
	require.Empty(t, qpsNote(f, 1), "one node: no network")
	f.QPs = 1
	require.Empty(t, qpsNote(f, 8))

	t.Setenv("NCCL_IB_QPS_PER_CONNECTION", "4")
	var out, errb bytes.Buffer
	require.Equal(t, 0, mainRun([]string{"run", "--nodes", "2", "--fabric-set", "routing=rail", "-b", "1M", "-e", "1M", "--progress", "off"}, &out, &errb), errb.String())
	require.Contains(t, out.String(), "# note: NCCL_IB_QPS_PER_CONNECTION=4 changes nothing here")
}

// meanBacklogNote names, per collective, the rows the ECMP mean model timed beyond its backlog
// bar, with their sizes and measures, and nothing where there are none.
func TestMeanBacklogNote(t *testing.T) {
	require.Empty(t, meanBacklogNote([]simnet.Row{{Coll: "alltoall", Bytes: 1 << 20}}))
	n := meanBacklogNote([]simnet.Row{
		{Coll: "alltoall", Bytes: 256 << 20, MeanBacklog: 0.169},
		{Coll: "alltoall", Bytes: 1 << 30, MeanBacklog: 0.181},
		{Coll: "alltoall", Bytes: 1 << 20},
	})
	require.Contains(t, n, "alltoall 268435456–1073741824 bytes (twice the largest backlog 16.9–18.1% of the time)")
	require.Contains(t, n, "the ECMP mean model stands past the replay budgets")
	require.Contains(t, n, "point-to-point rows were 1–14% fast")
	require.NotContains(t, n, "tree all-reduce", "no tree row: no tree figure")
	// A tree all-reduce whose replay of every rank was past its budgets: its own figures.
	n = meanBacklogNote([]simnet.Row{{Coll: "all_reduce", Bytes: 1 << 30, MeanBacklog: 0.159}})
	require.Contains(t, n, "all_reduce 1073741824 bytes (twice the largest backlog 15.9% of the time)")
	require.Contains(t, n, "tree all-reduce rows 0.14–0.90% fast")
	require.NotContains(t, n, "point-to-point")
}

// TestP2PChannelNote: where NCCL 2.28's rule for network peers leaves every peer one p2p channel
// (16 DGX H100 nodes: 2 × 128 ranks > 4 × 16 p2p channels), simccl run says so and names
// NCCL_NCHANNELS_PER_NET_PEER; not on 2 nodes (2 a peer), not for a collective, not with the
// variable set (which also brings the send/recv's second channel back).
func TestP2PChannelNote(t *testing.T) {
	const want = "NCCL 2.28 gives every peer 1 p2p channel on 128 ranks"
	run := func(args ...string) string {
		var out, errb bytes.Buffer
		if rc := mainRun(append([]string{"run", "-b", "1G", "-e", "1G", "--progress", "off"}, args...), &out, &errb); rc != 0 {
			t.Fatalf("%v: rc %d: %s", args, rc, errb.String())
		}
		return out.String()
	}
	if out := run("--nodes", "16", "-c", "sendrecv"); !strings.Contains(out, want) || !strings.Contains(out, "NCCL_NCHANNELS_PER_NET_PEER sets the count") {
		t.Errorf("16 nodes send/recv: no note:\n%s", out)
	}
	for _, args := range [][]string{{"--nodes", "2", "-c", "sendrecv"}, {"--nodes", "16", "-c", "allreduce"}} {
		if out := run(args...); strings.Contains(out, "p2p channel on") {
			t.Errorf("%v: note where it does not apply:\n%s", args, out)
		}
	}
	t.Setenv("NCCL_NCHANNELS_PER_NET_PEER", "2")
	if out := run("--nodes", "16", "-c", "sendrecv"); strings.Contains(out, "p2p channel on") || strings.Contains(out, "not modelled") {
		t.Errorf("with NCCL_NCHANNELS_PER_NET_PEER=2: \n%s", out)
	}
}
