package simnet

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAlternativesNote(t *testing.T) {
	fast := Row{Coll: "all_reduce", Bytes: 1024, Algo: "Ring", Proto: "LL", Alternatives: []Alternative{
		{Algo: "Ring", Proto: "LL", TimeUs: 10, Pick: true},
		{Algo: "Tree", Proto: "LL", TimeUs: 12},
	}}
	slow := Row{Coll: "all_reduce", Bytes: 1 << 20, Algo: "Ring", Proto: "Simple", Alternatives: []Alternative{
		{Algo: "NVLS", Proto: "Simple", TimeUs: 20},
		{Algo: "Ring", Proto: "Simple", TimeUs: 25, Pick: true},
	}}
	// Host-bound: the same time at the floor, the GPUs' time tells them apart.
	floor := Row{Coll: "all_gather", Bytes: 8, Algo: "Ring", Proto: "Simple", Alternatives: []Alternative{
		{Algo: "Ring", Proto: "LL", TimeUs: 18.2, DeviceUs: 8},
		{Algo: "Ring", Proto: "Simple", TimeUs: 18.05, DeviceUs: 12, Pick: true},
	}}
	none := Row{Coll: "alltoall", Bytes: 8}
	n := AlternativesNote([]Row{fast, slow, floor, none}, 1)
	require.Contains(t, n, "at 1 of 3 calls")
	require.Contains(t, n, "all_gather 8 bytes, Ring/LL (the pick, Ring/Simple, 50.0% slower)")
	require.Contains(t, n, "all_reduce 1048576 bytes, NVLS/Simple (the pick, Ring/Simple, 25.0% slower)")
	require.Less(t, strings.Index(n, "all_gather 8"), strings.Index(n, "all_reduce 1048576"), "largest gap first")
	require.Equal(t, "", AlternativesNote([]Row{none}, 1))
	require.Equal(t, "--alternatives: NCCL's pick was the fastest simulated on the GPUs at 1 of 1 calls", AlternativesNote([]Row{fast}, 1))
}

// An LL cell past 1 MiB among the gaps carries its caveat; the same call twice is named once.
func TestAlternativesNoteLLCaveat(t *testing.T) {
	row := func(b int64) Row {
		return Row{Coll: "broadcast", Bytes: b, Algo: "Ring", Proto: "LL128", Alternatives: []Alternative{
			{Algo: "Ring", Proto: "LL", TimeUs: 100},
			{Algo: "Ring", Proto: "LL128", TimeUs: 200, Pick: true},
		}}
	}
	n := AlternativesNote([]Row{row(8 << 20), row(8 << 20)}, 1)
	require.Equal(t, 1, strings.Count(n, "broadcast 8388608 bytes"), n)
	require.Contains(t, n, "an LL gap there is an upper bound")
	require.NotContains(t, AlternativesNote([]Row{row(64 << 10)}, 1), "upper bound")
	// Across nodes a Ring cell below 16 MiB carries the other caveat; on one node it does not.
	require.Contains(t, AlternativesNote([]Row{row(64 << 10)}, 2), "a Ring cell below 16 MiB is doubtful")
	require.NotContains(t, AlternativesNote([]Row{row(64 << 10)}, 1), "doubtful")
	require.NotContains(t, AlternativesNote([]Row{row(32 << 20)}, 2), "doubtful")
}
