package simnet

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/coll"

	"github.com/simccl/simccl/internal/input"
)

// Simulated against measured NCCL 2.28.9 on the 2×H200 machine (testdata/nccl/h200x2). The
// guards are the project's targets (≤ 10% median |error| at ≥ 1 MiB, ≤ 25% below) where the model
// meets them and regression guards elsewhere (bench/sim/README.md "Simulated vs measured" says
// why each miss is left). Medians with the GPU-side cost model (BENCHMARKS.md, 2026-11-28):
// ≥ 1 MiB all_reduce 9.7%, all_gather 8.8%, reduce_scatter 11.5%, broadcast 5.4%, reduce 3.1%,
// alltoall 8.0%, sendrecv 8.9%.
func TestCompareMeasuredH200x2(t *testing.T) {
	f, err := os.Open("../testdata/nccl/h200x2/nccl_perf.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	meas, err := ReadMeasuredCSV(f, "nccl_perf.csv")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := testMachine(t, "../testdata/nccl/h200x2/real_topo.xml", 1, nil, "", "")
	m.BackToBack = 3         // nccl-tests' loop of back-to-back launches, as bench/sim/compare times it
	m.Launch = LaunchPerNode // nccl_perf.cu drove both GPUs from one process (ncclCommInitAll)
	_, sums, err := Compare(m, meas, "default")
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 7 {
		t.Fatalf("%d collectives compared, want 7", len(sums))
	}
	for _, s := range sums {
		t.Logf("%-15s median |err| >= 1MiB %5.1f%% (%d sizes), < 1MiB %5.1f%% (%d sizes)", s.Coll, s.MedianLarge, s.NLarge, s.MedianSmall, s.NSmall)
		large := 10.0
		switch s.Coll {
		case "reduce_scatter":
			large = 12 // regression guard: 4–64 MiB come out 9–14% fast (15–20% before the memory-traffic model)
		}
		if s.MedianLarge > large {
			t.Errorf("%s: median |error| %.1f%% at >= 1 MiB, guard %.0f%%", s.Coll, s.MedianLarge, large)
		}
	}
	// Below 1 MiB every row is the host's: one thread enqueuing the call on both GPUs, which the
	// model takes as HostEnqueue + HostPerRank and each GPU's further channels (17.8 µs at one
	// channel, 20.8 at 24: the pooled measurements of testdata/nccl/enqueuescan.sh and
	// commscan.sh, TestHostPerRankFromCommscan, TestHostPerChannelFromEnqueuescan). The host runs
	// in a fast or a slow mode (12.4–13.9 or 16.1–21.4 µs a call over 25 runs), and this capture
	// was in the fast one for every collective but all_gather, so no median error stands for the
	// model here. What must hold is that the simulation brackets every row: the GPUs' own
	// simulated time (no host floor) is not above the measured time (within the 10% the device
	// model is held to at 1 MiB and up: the largest of these rows are the GPUs'), and the
	// simulated call, the slow mode's host floor where it binds, bounds it.
	n := 0
	for _, r := range meas {
		if r.Tag != "default" || r.Bytes >= 1<<20 {
			continue
		}
		f, err := coll.FuncOfTest(r.Coll)
		require.NoError(t, err)
		gpu, _, err := m.Run(f, r.Bytes, coll.Float32, coll.Sum, RunOptions{GPUTime: true})
		require.NoError(t, err)
		if gpu.TimeUs == 0 {
			continue
		}
		call, _, err := m.Run(f, r.Bytes, coll.Float32, coll.Sum, RunOptions{})
		require.NoError(t, err)
		require.GreaterOrEqual(t, call.TimeUs, LaunchPerNode.hostFloor(2, hostWork{chans: 1}).Micros())
		n++
		require.Less(t, gpu.TimeUs, 1.1*r.Us, "%s %d B: the GPUs' simulated time is above the measured loop's", r.Coll, r.Bytes)
		require.Less(t, r.Us, 1.1*call.TimeUs, "%s %d B: measured above the slow mode's host floor", r.Coll, r.Bytes)
	}
	require.Equal(t, 113, n, "rows below 1 MiB")
}

// Tree/Simple all-reduce forced on the 2×H200 machine (tag tree_simple: NCCL_ALGO=Tree
// NCCL_PROTO=Simple), against the same rows simulated: trees are charged the flat per-CTA rate
// (NCCL's perChMaxTreeBws) by both tree executors. Medians 3.8% (≥ 1 MiB) and 0.8% (< 1 MiB); with
// trees timed without the CTA they were 20.7% and 2.1% (BENCHMARKS.md, "2026-11-28 (fid2)").
func TestCompareMeasuredH200x2Tree(t *testing.T) {
	f, err := os.Open("../testdata/nccl/h200x2/nccl_perf.csv")
	require.NoError(t, err)
	defer f.Close()
	meas, err := ReadMeasuredCSV(f, "nccl_perf.csv")
	require.NoError(t, err)
	m, _ := testMachine(t, "../testdata/nccl/h200x2/real_topo.xml", 1, nil, "tree", "simple")
	m.BackToBack = 3
	m.Launch = LaunchPerNode
	rows, sums, err := Compare(m, meas, "tree_simple")
	require.NoError(t, err)
	require.Len(t, sums, 1)
	for _, r := range rows {
		require.Equal(t, "Tree", r.SimAlgo, "%d B", r.Bytes)
	}
	s := sums[0]
	t.Logf("%s median |err| >= 1MiB %.1f%% (%d sizes), < 1MiB %.1f%% (%d sizes)", s.Coll, s.MedianLarge, s.NLarge, s.MedianSmall, s.NSmall)
	if s.MedianLarge > 6 || s.MedianSmall > 5 {
		t.Errorf("tree_simple: median |error| %.1f%% / %.1f%%, guard 6%% / 5%%", s.MedianLarge, s.MedianSmall)
	}
}

// Simulated against NCCL 2.28.9 measured with one process per GPU on 4 H200s behind NVSwitch
// (testdata/nccl/h200x4: smallmsg.csv, tag mp_default, one row per rank, the slowest kept). The
// guards are the project's targets (≤ 10% at ≥ 1 MiB, ≤ 25% below); with the GPU-side cost model
// (BENCHMARKS.md, 2026-11-28) the ≥ 1 MiB medians are 2.3–7.6% (reduce_scatter 5.3%, 13.3% before).
func TestCompareMeasuredH200x4(t *testing.T) {
	f, err := os.Open("../testdata/nccl/h200x4/smallmsg.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	meas, err := ReadMeasuredCSV(f, "smallmsg.csv")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := testMachine(t, "../testdata/nccl/h200x4/real_topo.xml", 1, nil, "", "")
	m.BackToBack = 3
	m.Launch = LaunchPerGPU
	_, sums, err := Compare(m, meas, "mp_default")
	if err != nil {
		t.Fatal(err)
	}
	require.Len(t, sums, 5)
	for _, s := range sums {
		t.Logf("%-15s median |err| >= 1MiB %5.1f%% (%d sizes), < 1MiB %5.1f%% (%d sizes)", s.Coll, s.MedianLarge, s.NLarge, s.MedianSmall, s.NSmall)
		large := 10.0
		if s.MedianLarge > large || s.MedianSmall > 25 {
			t.Errorf("%s: median |error| %.1f%% (>= 1 MiB) / %.1f%% (< 1 MiB), guard %.0f%% / 25%%", s.Coll, s.MedianLarge, s.MedianSmall, large)
		}
	}
}

// Rows with a rank column are one measurement per rank: the slowest rank's is kept.
func TestReadMeasuredCSVRanks(t *testing.T) {
	in := "tag,coll,world,bytes,us,algbw,busbw\nmp,all_reduce,2,8,9.5,0,0,0\nmp,all_reduce,2,8,11.25,0,0,1\nmp,all_reduce,2,16,9,0,0,1\nsp,all_reduce,2,8,7,0,0\n"
	got, err := ReadMeasuredCSV(strings.NewReader(in), "r.csv")
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, 11.25, got[0].Us)
	require.Equal(t, int64(16), got[1].Bytes)
	require.Equal(t, "sp", got[2].Tag)
	_, err = ReadMeasuredCSV(strings.NewReader("mp,all_reduce,2,8,9.5,0,0,x\n"), "r.csv")
	require.ErrorContains(t, err, "r.csv:1: rank")
}

func TestReadMeasuredCSVErrors(t *testing.T) {
	for _, bad := range []string{"tag,coll\nx,y\n", "tag,coll,world,bytes,us,algbw,busbw\nd,all_reduce,two,8,1,1,1\n"} {
		if _, err := ReadMeasuredCSV(strings.NewReader(bad), "m.csv"); err == nil || !strings.Contains(err.Error(), "m.csv:2") {
			t.Errorf("%q: err %v, want one naming m.csv:2", bad, err)
		}
	}
}

// TestReadMeasuredCSVBounds: finding 10 (and 6) of the input-bounds issue. A NaN or an infinity
// in any column was accepted and poisoned every chart; sizes over units.MaxSize, too many rows
// and inputs over internal/input's bounds are refused, naming the file and the line.
func TestReadMeasuredCSVBounds(t *testing.T) {
	head := "tag,coll,world,bytes,us,algbw,busbw\n"
	for _, tc := range []struct{ in, want string }{
		{head + "d,all_reduce,8,1024,10,NaN,1\n", "m.csv:2: algbw NaN (want a number in 0..1e+06 GB/s)"},
		{head + "d,all_reduce,8,1024,10,1,+Inf\n", "m.csv:2: busbw +Inf (want a number in 0..1e+06 GB/s)"},
		{head + "d,all_reduce,8,1024,10,1,-3\n", "m.csv:2: busbw -3"},
		{head + "d,all_reduce,8,1024,Inf,1,1\n", "m.csv:2: us +Inf (want a positive number up to 8.64e+10)"},
		// Finite but past any measurement: the charts' scales overflowed to infinity.
		{head + "d,all_reduce,8,1024,10,1,1e308\n", "m.csv:2: busbw 1e+308"},
		{head + "d,all_reduce,8,1024,1e308,1,1\n", "m.csv:2: us 1e+308"},
		{head + "d,all_reduce,8,1024,10,1,1\nd,all_reduce,8,4611686018427387904,10,1,1\n", "m.csv:3: bytes: 4611686018427387904 bytes, more than 1 TiB"},
		{head + "d,all_reduce,0,8,10,1,1\n", "m.csv:2: world 0"},
		{head + "d,\"all_reduce,8,8,10,1,1\n", "m.csv:2: extraneous or missing \" in quoted-field"},
		{head + strings.Repeat("d,all_reduce,8,8,10,1,1\n", MaxMeasuredRows+1), "m.csv:10002: more than 10000 rows"},
	} {
		_, err := ReadMeasuredCSV(strings.NewReader(tc.in), "m.csv")
		require.ErrorContains(t, err, tc.want)
	}
	// The -c spellings of a collective read as nccl-tests names it.
	rows, err := ReadMeasuredCSV(strings.NewReader(head+"d,allreduce,8,8,10,1,1\nd,AllGather,8,8,10,1,1\nd,oneway,2,8,10,1,1\n"), "m.csv")
	require.NoError(t, err)
	require.Equal(t, []string{"all_reduce", "all_gather", "oneway"}, []string{rows[0].Coll, rows[1].Coll, rows[2].Coll})
	_, err = ReadMeasuredCSV(zeros{}, "/dev/zero")
	require.ErrorIs(t, err, input.ErrTooLarge)
	require.EqualError(t, err, "/dev/zero: input too large (more than 64 MiB)")
}
