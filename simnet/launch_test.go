package simnet

import (
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/stretchr/testify/require"
)

// The launch modes: a small all-reduce on one DGX H100 costs at least 8 bare launches when one
// thread drives the 8 GPUs; with a process per GPU its kernel outlasts the one host enqueue that
// bounds it, so a CUDA graph (no host floor) gives the same time; a large one, whose kernels
// outlast the enqueues, is unchanged by the per-node floor. On the 2 H200 whose NCCL enqueue was
// measured, the kernel of an 8-byte all-reduce is shorter than the enqueue: a process per GPU
// takes HostEnqueue, one thread for both GPUs its 2 bare launches (the larger), a graph less.
func TestLaunchModes(t *testing.T) {
	m, _ := testMachine(t, "dgx-h100", 1, nil, "", "")
	run := func(l LaunchMode, size int64) float64 {
		m.Launch = l
		row, _, err := m.Run(coll.AllReduce, size, coll.Float32, coll.Sum, RunOptions{})
		require.NoError(t, err)
		return row.TimeUs
	}
	small := run(LaunchPerGPU, 1024)
	require.Less(t, small, 8*BareLaunch.Micros(), "the per-GPU time of 1 KiB is below the floor")
	require.InDelta(t, 8*BareLaunch.Micros(), run(LaunchPerNode, 1024), 1e-6)
	require.Greater(t, small, HostEnqueue.Micros(), "a 1 KiB all-reduce on 8 GPUs outlasts one host enqueue")
	require.Equal(t, small, run(LaunchGraph, 1024))
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
	require.InDelta(t, max(HostEnqueue, 2*BareLaunch).Micros(), run2(LaunchPerNode), 1e-6)

	for _, l := range []LaunchMode{LaunchPerGPU, LaunchPerNode, LaunchGraph} {
		p, err := ParseLaunchMode(l.String())
		require.NoError(t, err)
		require.Equal(t, l, p)
	}
	_, err := ParseLaunchMode("per-rack")
	require.ErrorContains(t, err, "per-gpu, per-node or graph")
}
