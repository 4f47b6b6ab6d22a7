package simnet

import (
	"math"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/stretchr/testify/require"
)

// NVLS all-reduce through the NVSwitch endpoint: every GPU's link to the switch carries S + S/n
// (its whole buffer scattered, plus the reduced share it returns as head) and the switch's link to
// it S/n + S (the reduced share it gets as head, plus every multicast share), in wire bytes
// divided by the switch efficiency; at a large size the time approaches that traffic over the
// link's bandwidth.
func TestNVLSThroughTheSwitch(t *testing.T) {
	const n, bw, eff = 8, 100.0, 0.85
	const count = 32 << 20 / 4 // 32 MiB of float32
	node := SwitchedNode("hgx", n, bw, 0, 0, 16)
	e := NewEngine(nil)
	cl, err := NewCluster(e, node, 1, nil)
	require.NoError(t, err)
	s, err := coll.Compile(coll.Plan{Func: coll.AllReduce, Algo: coll.NVLS, Proto: coll.Simple, NRanks: n, NNodes: 1,
		NChannels: 4, Count: count, DataType: coll.Float32, Op: coll.Sum, ChunkSize: 128 << 10})
	require.NoError(t, err)
	require.Len(t, s.Switches, 1)
	res, err := Simulate(e, cl, s, Timing{SwitchEff: eff}, Options{})
	require.NoError(t, err)
	S := float64(count * 4)
	want := (S + S/n) / eff
	for g := 0; g < n; g++ {
		for _, l := range []int{node.GPUToNVS[g], node.NVSToGPU[g]} {
			got := e.LinkBytes(cl.nodeLink(0, l))
			require.InDelta(t, want, got, want*1e-3, "link %s", e.LinkName(cl.nodeLink(0, l)))
		}
	}
	ideal := want / (bw * 1e9) * 1e6 // µs
	got := res.Time.Micros()
	require.Greater(t, got, ideal, "faster than the links allow")
	require.Less(t, got, ideal*1.25, "NVLS should keep the switch links busy (ideal %.1f µs)", ideal)

	// A node without an NVSwitch cannot place the switch endpoint.
	flat := &NodeModel{Name: "flat", NumGPUs: n, Links: node.Links, GPUPaths: node.GPUPaths}
	e2 := NewEngine(nil)
	cl2, err := NewCluster(e2, flat, 1, nil)
	require.NoError(t, err)
	_, err = Simulate(e2, cl2, s, Timing{}, Options{})
	require.ErrorContains(t, err, "no NVSwitch")
}

// On a DGX H100, run simulates NCCL's NVLS choice instead of substituting Ring, and its rows
// carry no substitution; on a PCIe machine, which has no NVLS, nothing is said about NVLS.
func TestNVLSRunsWhereNCCLPicksIt(t *testing.T) {
	m, _ := testMachine(t, "dgx-h100", 1, nil, "", "")
	row, _, err := m.Run(coll.AllReduce, 256<<20, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, "NVLS", row.Algo)
	require.Empty(t, row.NCCL, "NVLS is simulated, not substituted")
	require.Equal(t, "schedule", row.Mode)
	// busbw from the links: 2(n−1)/n·S over the time; bounded by what the switch links allow.
	link := node0NVLinkGBps(t, m)
	bound := 2 * 7.0 / 8 * link * 0.85 / (1 + 1.0/8)
	require.Less(t, row.BusBw, bound*1.0001)
	require.Greater(t, row.BusBw, 0.8*bound, "NVLS far below its link bound (%.0f GB/s)", bound)

	p, _ := testMachine(t, "pcie-8gpu-2socket", 1, nil, "", "")
	row, _, err = p.Run(coll.AllReduce, 256<<20, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.False(t, strings.Contains(row.NCCL, "NVLS") || row.Algo == "NVLS", "NVLS on a PCIe machine: %+v", row)
}

// node0NVLinkGBps is the bandwidth of GPU 0's link to the NVSwitch.
func node0NVLinkGBps(t *testing.T, m *Machine) float64 {
	require.NotNil(t, m.Node.GPUToNVS, "no NVSwitch in %s", m.Node.Name)
	v := m.Node.Links[m.Node.GPUToNVS[0]].GBps
	require.False(t, math.IsNaN(v) || v <= 0)
	return v
}
