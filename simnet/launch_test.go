package simnet

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/stretchr/testify/require"
)

// The launch modes: a small all-reduce on one DGX H100 costs at least 8 NCCL enqueues (the first
// HostEnqueue, the others HostPerRank) when one thread drives the 8 GPUs; with a process per GPU
// its kernel outlasts the one host enqueue that bounds it, so a CUDA graph (no host floor) gives
// that time less GraphSaving; a large one, whose kernels outlast the enqueues, is unchanged by the
// per-node floor. On the 2 H200 whose NCCL enqueue was
// measured, the kernel of an 8-byte all-reduce is shorter than the enqueue: a process per GPU
// takes HostEnqueue, one thread for both GPUs HostEnqueue + HostPerRank, a graph less.
func TestLaunchModes(t *testing.T) {
	m, _ := testMachine(t, "dgx-h100", 1, nil, "", "")
	run := func(l LaunchMode, size int64) float64 {
		m.Launch = l
		row, _, err := m.Run(coll.AllReduce, size, coll.Float32, coll.Sum, RunOptions{})
		require.NoError(t, err)
		return row.TimeUs
	}
	small := run(LaunchPerGPU, 1024)
	perNode8 := HostEnqueue + 7*HostPerRank
	require.Less(t, small, perNode8.Micros(), "the per-GPU time of 1 KiB is below the floor")
	require.InDelta(t, perNode8.Micros(), run(LaunchPerNode, 1024), 1e-6)
	require.Greater(t, small, HostEnqueue.Micros(), "a 1 KiB all-reduce on 8 GPUs outlasts one host enqueue")
	require.InDelta(t, small-GraphSaving.Micros(), run(LaunchGraph, 1024), 1e-6, "a graph's kernel starts sooner")
	big := run(LaunchPerGPU, 256<<20)
	require.Equal(t, big, run(LaunchPerNode, 256<<20))

	m2, _ := testMachine(t, "../testdata/nccl/h200x2/real_topo.xml", 1, nil, "", "")
	run2 := func(l LaunchMode) float64 {
		m2.Launch = l
		row, _, err := m2.Run(coll.AllReduce, 8, coll.Float32, coll.Sum, RunOptions{})
		require.NoError(t, err)
		return row.TimeUs
	}
	g := run2(LaunchGraph)
	require.Less(t, g, HostEnqueue.Micros(), "the kernel of 8 B on 2 H200")
	require.InDelta(t, HostEnqueue.Micros(), run2(LaunchPerGPU), 1e-6)
	require.InDelta(t, (HostEnqueue + HostPerRank).Micros(), run2(LaunchPerNode), 1e-6)

	for _, l := range []LaunchMode{LaunchPerGPU, LaunchPerNode, LaunchGraph} {
		p, err := ParseLaunchMode(l.String())
		require.NoError(t, err)
		require.Equal(t, l, p)
	}
	_, err := ParseLaunchMode("per-rack")
	require.ErrorContains(t, err, "per-gpu, per-node or graph")
}

// TestHostFloorP2POps: a point-to-point call's host floor grows with the operations its busiest
// rank enqueues, on the line of its kind (HostSendRecv, HostAllToAll), never below a collective's
// HostEnqueue; one thread per node pays an enqueue per GPU and adds every GPU's point-to-point work
// beyond a collective's enqueue; graphs have none.
func TestHostFloorP2POps(t *testing.T) {
	tr := []coll.Transfer{{From: 0, To: 1}, {From: 0, To: 1}, {From: 1, To: 0}, {From: 2, To: 0}}
	for _, c := range []struct {
		f    coll.Func
		n    int
		tr   []coll.Transfer
		want int
		line HostLine
	}{
		{coll.AllReduce, 8, nil, 0, HostLine{}},
		{coll.AllToAll, 8, nil, 16, HostAllToAll},
		{coll.SendRecv, 8, nil, 2, HostSendRecv},
		{coll.SendRecv, 3, tr, 4, HostSendRecv}, // rank 0: two sends to 1, receives from 1 and 2
	} {
		ops, line := p2pOps(c.f, c.n, c.tr)
		require.Equal(t, c.want, ops, "%v on %d ranks", c.f, c.n)
		require.Equal(t, c.line, line, "%v", c.f)
	}
	require.Equal(t, HostEnqueue, LaunchPerGPU.hostFloor(8, 0, HostLine{}))
	require.Equal(t, HostEnqueue, LaunchPerGPU.hostFloor(8, 4, HostSendRecv), "a few operations cost a collective's enqueue")
	require.Equal(t, HostAllToAll.At(2048), LaunchPerGPU.hostFloor(8, 2048, HostAllToAll))
	require.Greater(t, HostSendRecv.At(2048), HostAllToAll.At(2048), "a transfer to another rank costs more than to self")
	perNode8 := HostEnqueue + 7*HostPerRank
	require.Equal(t, perNode8, LaunchPerNode.hostFloor(8, 0, HostLine{}))
	require.Equal(t, perNode8, LaunchPerNode.hostFloor(8, 2, HostSendRecv), "a send and a receive cost a collective's enqueue")
	// An all-to-all adds each GPU's work beyond a collective's enqueue to the 8 enqueues.
	require.Equal(t, perNode8+8*(HostAllToAll.At(16)-HostEnqueue), LaunchPerNode.hostFloor(8, 16, HostAllToAll))
	require.InDelta(t, 100.3, LaunchPerNode.hostFloor(8, 16, HostAllToAll).Micros(), 0.05, "65.7 µs of enqueues and 8 × 4.32 of operations")
	require.Equal(t, perNode8+8*(HostAllToAll.At(32)-HostEnqueue), LaunchPerNode.hostFloor(8, 32, HostAllToAll), "two 8-GPU nodes' all-to-all")
	require.Equal(t, HostEnqueue+HostPerRank+2*(HostAllToAll.At(4)-HostEnqueue), LaunchPerNode.hostFloor(2, 4, HostAllToAll), "2 H200: 2 × 1.06 µs over a collective")
	require.Equal(t, HostEnqueue, LaunchPerNode.hostFloor(1, 0, HostLine{}), "one GPU a thread: one enqueue, as a process per GPU")
	require.Equal(t, HostAllToAll.At(2048), LaunchPerNode.hostFloor(1, 2048, HostAllToAll), "one GPU a thread: a process per GPU's line")
	for _, ops := range []int{2, 16, 64, 2048} {
		for _, line := range []HostLine{HostSendRecv, HostAllToAll} {
			require.GreaterOrEqual(t, LaunchPerNode.hostFloor(8, ops, line), Time(8*ops)*line.PerOp, "one thread does the 8 GPUs' operations")
			require.GreaterOrEqual(t, LaunchPerNode.hostFloor(8, ops, line), LaunchPerGPU.hostFloor(8, ops, line))
		}
	}
	require.Zero(t, LaunchGraph.hostFloor(8, 2048, HostAllToAll))

	// An all-to-all of 8 KiB on one DGX H100: the GPUs finish before the host has enqueued its 16
	// sends and receives.
	m, _ := testMachine(t, "dgx-h100", 1, nil, "", "")
	row, _, err := m.Run(coll.AllToAll, 8<<10, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.True(t, row.HostBound)
	require.InDelta(t, HostAllToAll.At(16).Micros(), row.TimeUs, 1e-9)
}

// TestHostPerRankFromCommscan ties the per-node floor to its measurement
// (testdata/nccl/h200x2/commscan-2026-11-29.csv): the least-squares line of NCCL's enqueue time
// per call against the communicator-ranks one thread enqueues (2K for one process driving both
// GPUs with K communicators, K for a process per GPU) has HostPerRank's slope, and the floor of
// one thread for G GPUs is within 5% of the median measured at G = 2 and 8.
func TestHostPerRankFromCommscan(t *testing.T) {
	f, err := os.Open("../testdata/nccl/h200x2/commscan-2026-11-29.csv")
	require.NoError(t, err)
	defer f.Close()
	rows, err := ReadMeasuredCSV(f, "commscan-2026-11-29.csv")
	require.NoError(t, err)
	var xs, ys []float64
	at := map[int][]float64{}
	for _, r := range rows {
		// Only the enqueue behind the spin (sp_comms3_spin_r1_host): NCCL's host work alone.
		if !strings.Contains(r.Tag, "_spin_") || !strings.HasSuffix(r.Tag, "_host") {
			continue
		}
		var k int
		_, err := fmt.Sscanf(r.Tag[3:], "comms%d", &k)
		require.NoError(t, err, r.Tag)
		g := k
		if strings.HasPrefix(r.Tag, "sp_") {
			g = 2 * k // one thread for both GPUs
		}
		xs, ys = append(xs, float64(g)), append(ys, r.Us)
		at[g] = append(at[g], r.Us)
	}
	require.Len(t, xs, 1568)
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i], my+ys[i]
	}
	mx, my = mx/float64(len(xs)), my/float64(len(xs))
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	require.InDelta(t, HostPerRank.Micros(), sxy/sxx, 0.005, "µs a communicator-rank")
	for _, g := range []int{2, 8} {
		v := slices.Clone(at[g])
		slices.Sort(v)
		med := (v[(len(v)-1)/2] + v[len(v)/2]) / 2
		floor := LaunchPerNode.hostFloor(g, 0, HostLine{}).Micros()
		require.InEpsilon(t, med, floor, 0.05, "%d communicator-ranks: model %.2f µs, measured median %.2f", g, floor, med)
	}
}
