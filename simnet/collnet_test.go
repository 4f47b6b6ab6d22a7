package simnet

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/planner"
)

// collnetMachine is nodes DGX H100 nodes with a CollNet (SHARP) plugin: every NIC reduces in the
// network (planner marks them), NVLS on or off.
func collnetMachine(t *testing.T, nodes int, nvls bool) *Machine {
	t.Helper()
	m, _ := settingsMachine(t, "dgx-h100", nodes, 0, nil, planner.Settings{CollNet: true, NVLS: &nvls})
	return m
}

// With a CollNet plugin NCCL 2.28 picks CollNetDirect (NVLS off, 1–16 MiB), CollNetChain (NVLS
// off, larger) and NVLS across nodes (NVLS+SHARP, NVLS on) for all-reduces on DGX H100 nodes;
// each is simulated, not substituted. Every
// message to or from the network's reduction crosses one NIC of the sender's node and nothing
// beyond the NIC's link to its leaf, each channel's head uses its own NIC so that all eight
// NICs of a node carry the call, and the call is no faster than those NICs allow.
func TestCollNetSimulated(t *testing.T) {
	for _, tc := range []struct {
		nvls bool
		algo string
		size int64
	}{{false, "CollNetChain", 64 << 20}, {false, "CollNetDirect", 4 << 20}, {true, "NVLS", 4 << 20}} {
		t.Run(tc.algo, func(t *testing.T) {
			m := collnetMachine(t, 2, tc.nvls)
			size := tc.size
			row, res, err := m.Run(coll.AllReduce, size, coll.Float32, coll.Sum, RunOptions{Record: true})
			require.NoError(t, err)
			require.Equal(t, tc.algo, row.Algo)
			require.Empty(t, row.NCCL, "NCCL's choice is simulated, not substituted")
			n := m.NRanks()
			nics := map[int]map[string]bool{0: {}, 1: {}}
			var up int64
			for _, o := range res.Ops {
				if o.Rank < n && o.Peer < n {
					continue
				}
				if o.Rank >= n && o.Peer >= n {
					continue // between two switches: none in these schedules
				}
				if o.Peer >= n && o.Class == ClassNet {
					up += o.Bytes
				}
				var names []string
				for _, l := range o.Route {
					names = append(names, res.LinkName(l))
				}
				route := strings.Join(names, " > ")
				if !strings.Contains(route, "NIC") {
					continue // to or from the node's NVSwitch
				}
				require.Equal(t, ClassNet, o.Class, route)
				require.NotContains(t, route, "spine", route)
				rank := o.Rank
				if rank >= n {
					rank = o.Peer
				}
				for _, nm := range names {
					if i := strings.Index(nm, "NIC/"); i >= 0 {
						nics[rank/m.Node.NumGPUs][nm[i:i+5]] = true
					}
				}
			}
			require.Len(t, nics[0], 8, "node 0's NICs used: %v", nics[0])
			require.Len(t, nics[1], 8, "node 1's NICs used: %v", nics[1])
			// Each node sends every byte of the buffer to the network once.
			require.Equal(t, int64(2*size), up)
			// Eight 400 Gb/s NICs a node: the buffer goes up and comes back through them.
			require.Less(t, row.AlgBw, 8*50.0*1.0001, "algbw %.1f GB/s above the NICs", row.AlgBw)
			t.Logf("%s %d MiB on 2 nodes: %.1f µs, busbw %.1f GB/s", row.Algo, size>>20, row.TimeUs, row.BusBw)
		})
	}
}

// NVLS with CollNet folds its channels as one-node NVLS does (every channel's heads take the same
// NICs to the network): the folded replay gives the whole schedule's time, so 1,024 ranks at 1 GiB
// are simulated rather than run as Tree.
func TestNVLSCollNetFoldMatchesSchedule(t *testing.T) {
	m := collnetMachine(t, 4, true)
	const size = 256 << 20
	folded, _, err := m.Run(coll.AllReduce, size, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, "NVLS", folded.Algo)
	require.Equal(t, "nvls-symmetric", folded.Mode)
	defer func(q int64) { CompactQuiet = q }(CompactQuiet)
	CompactQuiet = math.MaxInt64 // the schedule itself
	whole, _, err := m.Run(coll.AllReduce, size, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, "schedule", whole.Mode)
	require.InDelta(t, whole.TimeUs, folded.TimeUs, 1e-6*whole.TimeUs, "folded %.3f µs, schedule %.3f µs", folded.TimeUs, whole.TimeUs)
}
