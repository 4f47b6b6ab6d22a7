package simnet

import (
	"encoding/csv"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/planner"
)

// TestMemcpyFromProbe recomputes MemcpyLat and the H200's copy rate from the probe's rows
// (bench/gpuprobe/memcpy.cu, two leases: least squares over 32 MiB–1 GiB), and OneRankHost and
// OneRankP2PHost from NCCL's enqueue behind a spin (testdata/nccl/onerank.sh's _host rows).
func TestMemcpyFromProbe(t *testing.T) {
	var xs, ys []float64
	for _, name := range []string{"h200-memcpy-2026-11-29.csv", "h200-memcpy-2026-11-29b.csv"} {
		f, err := os.Open("../bench/gpuprobe/results/" + name)
		require.NoError(t, err)
		recs, err := csv.NewReader(f).ReadAll()
		f.Close()
		require.NoError(t, err)
		for _, r := range recs[1:] {
			b, err1 := strconv.ParseFloat(r[1], 64)
			us, err2 := strconv.ParseFloat(r[2], 64)
			require.NoError(t, err1)
			require.NoError(t, err2)
			if b >= 32<<20 {
				xs, ys = append(xs, b), append(ys, us)
			}
		}
	}
	require.Len(t, xs, 24)
	var mx, my, sxy, sxx float64
	for i := range xs {
		mx, my = mx+xs[i]/float64(len(xs)), my+ys[i]/float64(len(xs))
	}
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	slope := sxy / sxx // µs per byte
	require.InDelta(t, MemcpyLat.Micros(), my-slope*mx, 0.005, "µs")
	require.InDelta(t, gpuMemories[0x2335].Copy.GBps(), 1e-3/slope, 0.05, "GB/s")

	f, err := os.Open("../testdata/nccl/h200x1/onerank-2026-11-29b.csv")
	require.NoError(t, err)
	defer f.Close()
	rows, err := ReadMeasuredCSV(f, "onerank-2026-11-29b.csv")
	require.NoError(t, err)
	var colls, p2p []float64
	for _, r := range rows {
		if !strings.HasPrefix(r.Tag, "onerank_spin_") || !strings.HasSuffix(r.Tag, "_host") {
			continue
		}
		if r.Coll == "alltoall" || r.Coll == "sendrecv" {
			p2p = append(p2p, r.Us)
		} else {
			colls = append(colls, r.Us)
		}
	}
	require.Len(t, colls, 180)
	require.Len(t, p2p, 72)
	require.InDelta(t, OneRankHost.Micros(), median(colls), 0.0005, "µs")
	require.InDelta(t, OneRankP2PHost.Micros(), median(p2p), 0.0005, "µs")
}

// TestOneRankMatchesNCCL simulates NCCL 2.28's one-rank calls on one H200 (two leases,
// testdata/nccl/h200x1/onerank-2026-11-29*.csv, nccl-tests' loop, both runs of each) from 32 MiB,
// where the GPU sets the pace: the collectives are a device memcpy, within 3% of every measured
// time; the all-to-all and send/recv a copy to self over all 64 p2p channels (NCCL's count for one
// rank), which share the GPU's memory: 11–14% fast from 128 MiB (NCCL's 64 channels copy 12% slower
// than the memcpy the memory's figure comes from). Before 2026-11-30 the collectives took 40×
// and the copies to self 23× NCCL's time at 1 GiB (one CTA; 2 p2p channels).
func TestOneRankMatchesNCCL(t *testing.T) {
	m, p := settingsMachine(t, "../testdata/nccl/h200x2/real_topo.xml", 1, 1, nil, planner.Settings{})
	require.Equal(t, "H200", m.GPU.Memory.Name, "by the topology's PCI device id")
	total, perPeer := p.Table.P2PChannels()
	require.Equal(t, 64, total, "NCCL: 64 p2p channels")
	require.Equal(t, 64, perPeer, "NCCL: 64 p2p channels per peer")
	require.Equal(t, int64(512<<10), p.Table.P2PChunkSize(), "NCCL: P2P Chunksize set to 524288")
	sim := map[string]float64{}
	checked := 0
	for _, name := range []string{"onerank-2026-11-29.csv", "onerank-2026-11-29b.csv"} {
		f, err := os.Open("../testdata/nccl/h200x1/" + name)
		require.NoError(t, err)
		rows, err := ReadMeasuredCSV(f, name)
		f.Close()
		require.NoError(t, err)
		for _, r := range rows {
			if (r.Tag != "onerank_r1" && r.Tag != "onerank_r2") || r.Bytes < 32<<20 {
				continue
			}
			fn, err := coll.FuncOfTest(r.Coll)
			require.NoError(t, err)
			key := r.Coll + strconv.FormatInt(r.Bytes, 10)
			us, ok := sim[key]
			if !ok {
				row, _, err := m.Run(fn, r.Bytes, coll.Float32, coll.Sum, RunOptions{})
				require.NoError(t, err)
				us, sim[key] = row.TimeUs, row.TimeUs
			}
			e := us/r.Us - 1
			switch {
			case fn != coll.AllToAll && fn != coll.SendRecv:
				require.Less(t, math.Abs(e), 0.03, "%s %s %d B: simulated %.2f µs, measured %.2f", name, r.Coll, r.Bytes, us, r.Us)
			case r.Bytes >= 128<<20:
				require.True(t, e > -0.15 && e < 0, "%s %s %d B: simulated %.2f µs, measured %.2f (%+.1f%%)", name, r.Coll, r.Bytes, us, r.Us, 100*e)
			default:
				continue
			}
			checked++
		}
	}
	require.Equal(t, 2*2*(5*6+2*4), checked)
}

// TestCopyToSelfRate times the copy to self of a 2-H200 all-to-all alone, as NCCL's selfcopy rows
// ran it (testdata/nccl/h200x2/selfscan-2026-11-29.csv: S/2 from each rank to itself on the
// all-to-all's channels), with the direct copy's rate (GPUModel.Copy, from bench/gpuprobe): within
// 4% of both runs at 256 MiB–1 GiB, where the ring-derived rate made it 18–21% slow.
func TestCopyToSelfRate(t *testing.T) {
	m, _ := testMachine(t, "../testdata/nccl/h200x2/real_topo.xml", 1, nil, "", "")
	f, err := os.Open("../testdata/nccl/h200x2/selfscan-2026-11-29.csv")
	require.NoError(t, err)
	defer f.Close()
	rows, err := ReadMeasuredCSV(f, "selfscan-2026-11-29.csv")
	require.NoError(t, err)
	checked := 0
	for _, r := range rows {
		if r.Coll != "selfcopy" || r.Bytes < 512<<20 {
			continue
		}
		plan, _, err := m.Plan(coll.AllToAll, r.Bytes, coll.Float32, coll.Sum)
		require.NoError(t, err)
		tm, err := m.PlanTiming(plan)
		require.NoError(t, err)
		all, err := P2POps([]coll.Plan{plan})
		require.NoError(t, err)
		var self []P2POp
		for _, op := range all {
			if op.Dist == 0 {
				self = append(self, op)
			}
		}
		require.Len(t, self, 1)
		e, cl, err := m.engine()
		require.NoError(t, err)
		res, err := SimulateP2P(e, cl, P2PSpec{Ops: self}, tm)
		require.NoError(t, err)
		us := res.Time.Micros()
		t.Logf("%s %d B: simulated %.2f µs, measured %.2f", r.Tag, r.Bytes, us, r.Us)
		require.InEpsilon(t, r.Us, us, 0.04, "%d B (copies of %d B): simulated %.2f µs, measured %.2f", r.Bytes, r.Bytes/2, us, r.Us)
		checked++
	}
	require.Equal(t, 4, checked)
}

// TestOneRankP2PMatchesSchedule: the copies to self of a one-rank all-to-all and send/recv, on 64
// p2p channels sharing the GPU's memory (Timing.MemTraffic: a link in both executors), take the
// same time in the schedule replay and the compact executor, with the memory binding (1 GiB) and
// without (1 MiB, few channels), on a GPU with the traffic model (H200) and one with the flat CTA
// rate (B200); bound by the memory, a 1 GiB copy takes at least its 2 GiB of traffic at twice the
// memcpy's rate, and not much more (it ran past the memory on B200 before the flat model's copies
// took the link).
func TestOneRankP2PMatchesSchedule(t *testing.T) {
	for _, topo := range []string{"../testdata/nccl/h200x2/real_topo.xml", "dgx-b200"} {
		m, _ := settingsMachine(t, topo, 1, 1, nil, planner.Settings{})
		for _, f := range []coll.Func{coll.AllToAll, coll.SendRecv} {
			for _, size := range []int64{1 << 20, 1 << 30} {
				sched, compact, _, _ := p2pBoth(t, m, f, size, P2PSpec{PerRank: true})
				rel := math.Abs(float64(compact.Time-sched.Time)) / float64(sched.Time)
				require.Less(t, rel, 1e-9, "%s %v %d B: compact %v, schedule %v", topo, f, size, compact.Time, sched.Time)
			}
		}
		_, compact, _, _ := p2pBoth(t, m, coll.AllToAll, 1<<30, P2PSpec{PerRank: true})
		floor := float64(2<<30) / (2 * m.GPU.Memory.Copy.GBps() * 1e9)
		require.Greater(t, compact.Time.Seconds(), floor, "%s: the memory's bound", topo)
		require.Less(t, compact.Time.Seconds(), 1.05*floor+20e-6, topo)
	}
}
