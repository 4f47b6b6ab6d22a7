package report

import (
	"testing"

	"github.com/simccl/simccl/simnet"
	"github.com/stretchr/testify/require"
)

// The report's Perfetto export lays ops on simnet.WriteTrace's threads: a connection's overlapping
// messages on lanes of their own, threads numbered per rank in (channel, peer, lane) order, and
// no two slices of a thread overlap.
func TestPerfettoOpsThreads(t *testing.T) {
	us := simnet.Microsecond
	ops := []simnet.OpRecord{
		{Rank: 0, Peer: 1, Channel: 0, Start: 0, End: 2 * us},
		{Rank: 0, Peer: 1, Channel: 0, Start: 1 * us, End: 3 * us}, // overlaps the first: lane 2
		{Rank: 0, Peer: 1, Channel: 0, Start: 2 * us, End: 4 * us}, // starts as the first ends: lane 1
		{Rank: 0, Peer: 2, Channel: 0, Start: 1 * us, End: 2 * us},
		{Rank: 1, Peer: 0, Channel: 1, Start: 0, End: us},
	}
	got := perfettoOps(ops)
	tids := make([][2]int64, len(got))
	for i, o := range got {
		tids[i] = [2]int64{o[6], o[7]}
	}
	require.Equal(t, [][2]int64{{1, 0}, {2, 1}, {1, 0}, {3, 0}, {1, 0}}, tids)
	require.Equal(t, [8]int64{0, 0, 1, 1000, 2000, 0, 2, 1}, got[1])
	require.Nil(t, perfettoOps(nil))
}
