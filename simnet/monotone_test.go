package simnet

import (
	"fmt"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/stretchr/testify/require"
)

// A call of twice the bytes on the same plan (algorithm, protocol, channels) never takes less
// time: whatever executor or mode times each size (schedule replay, compact, symmetric, folded),
// more bytes on the same channels cannot finish sooner. Where the plan changes with the size, the
// time may fall (NCCL's tuner picks by its own model: 2 DGX H100 nodes' all-reduce from 256 to
// 512 KiB, Tree/LL128 to NVLSTree, 64.4 → 57.9 µs), and that is not checked. The same sweep on
// every embedded topology at 1, 2 and 16 nodes, and 128 nodes of DGX H100 and A100, 8 B–4 GiB,
// had no decrease on a same plan either (stop 51, `simccl run --json` from 8 B to 4 GiB).
func TestTimeGrowsWithSizeOnAPlan(t *testing.T) {
	funcs := []coll.Func{coll.AllReduce, coll.AllGather, coll.ReduceScatter, coll.Broadcast, coll.Reduce, coll.AllToAll, coll.SendRecv}
	checked := 0
	for _, c := range []struct {
		topo  string
		nodes int
	}{{"dgx-h100", 1}, {"dgx-h100", 2}, {"dgx-a100", 4}, {"../testdata/nccl/h200x2/real_topo.xml", 1}} {
		m, _ := testMachine(t, c.topo, c.nodes, nil, "", "")
		for _, f := range funcs {
			var prev Row
			for size := int64(8); size <= 256<<20; size *= 4 {
				row, _, err := m.Run(f, size, coll.Float32, coll.Sum, RunOptions{})
				require.NoError(t, err)
				what := fmt.Sprintf("%s × %d, %v, %d → %d B (%s/%s/%d, %s)", c.topo, c.nodes, f, prev.Bytes, size, row.Algo, row.Proto, row.NChannels, row.Mode)
				if prev.Bytes > 0 && prev.Algo == row.Algo && prev.Proto == row.Proto && prev.NChannels == row.NChannels {
					require.GreaterOrEqual(t, row.TimeUs, prev.TimeUs*(1-1e-9), what)
					checked++
				}
				prev = row
			}
		}
	}
	require.Greater(t, checked, 150, "pairs of sizes on one plan (216 at stop 51)")
	t.Logf("%d pairs of sizes on one plan", checked)
}
