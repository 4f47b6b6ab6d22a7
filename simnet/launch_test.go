package simnet

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/planner"
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

	for _, l := range []LaunchMode{LaunchPerGPU, LaunchPerNode, LaunchGraph, LaunchGraphPerNode} {
		p, err := ParseLaunchMode(l.String())
		require.NoError(t, err)
		require.Equal(t, l, p)
	}
	_, err := ParseLaunchMode("per-rack")
	require.ErrorContains(t, err, "per-gpu, per-node, graph or graph-per-node")
}

// TestGraphPerNode: one process replaying the graphs of a node's GPUs costs each call
// GraphPerNodeCall more on the GPU than a graph per process, at any size and in the executors alike
// (a ring at 8 B and 64 MiB, a point-to-point call), with no host floor; a one-GPU node pays
// nothing more.
func TestGraphPerNode(t *testing.T) {
	m, _ := testMachine(t, "../testdata/nccl/h200x2/real_topo.xml", 1, nil, "", "")
	run := func(m *Machine, l LaunchMode, f coll.Func, size int64) float64 {
		m.Launch = l
		row, _, err := m.Run(f, size, coll.Float32, coll.Sum, RunOptions{})
		require.NoError(t, err)
		return row.TimeUs
	}
	for _, c := range []struct {
		f    coll.Func
		size int64
	}{{coll.AllReduce, 8}, {coll.AllReduce, 64 << 20}, {coll.SendRecv, 16 << 20}, {coll.AllToAll, 1 << 20}} {
		g := run(m, LaunchGraph, c.f, c.size)
		require.InDelta(t, g+GraphPerNodeCall.Micros(), run(m, LaunchGraphPerNode, c.f, c.size), 1e-6, "%v %d", c.f, c.size)
	}
	require.Less(t, run(m, LaunchGraphPerNode, coll.AllReduce, 8), (HostEnqueue + HostPerRank).Micros(), "no host floor")
	// Two one-GPU nodes: each process drives one GPU.
	one, _ := settingsMachine(t, "../testdata/nccl/h200x2/real_topo.xml", 2, 1, nil, planner.Settings{})
	require.Equal(t, run(one, LaunchGraph, coll.AllReduce, 1<<20), run(one, LaunchGraphPerNode, coll.AllReduce, 1<<20))
}

// TestHostEnqueueScales: a machine whose host enqueues a call in another time (Machine.HostEnqueue,
// simccl's --host-enqueue) scales the collective terms of every host floor by the same factor, the
// per-GPU terms of one thread per node included, keeps the point-to-point lines, and leaves the
// device time alone: on the 2 H200,
// whose 8-byte all-reduce is host-bound, a host 1.5 times slower raises the floor of each mode by
// half, and one twice as fast leaves the kernel bound (8.76 µs); a host of
// 30 µs makes the 1 KiB all-reduce on 8 GPUs host-bound with a process per GPU. A graph has no floor.
func TestHostEnqueueScales(t *testing.T) {
	m, _ := testMachine(t, "../testdata/nccl/h200x2/real_topo.xml", 1, nil, "", "")
	run := func(m *Machine, l LaunchMode, host Time, size int64) Row {
		m.Launch, m.HostEnqueue = l, host
		row, _, err := m.Run(coll.AllReduce, size, coll.Float32, coll.Sum, RunOptions{})
		require.NoError(t, err)
		return row
	}
	half, slow := HostEnqueue/2, HostEnqueue*3/2
	require.Equal(t, 0.5, (&Machine{HostEnqueue: half}).HostScale())
	require.Equal(t, 1.0, (&Machine{}).HostScale())
	require.InDelta(t, slow.Micros(), run(m, LaunchPerGPU, slow, 8).TimeUs, 1e-6)
	require.InDelta(t, 1.5*(HostEnqueue+HostPerRank).Micros(), run(m, LaunchPerNode, slow, 8).TimeUs, 1e-3)
	g := run(m, LaunchGraph, 0, 8)
	require.Equal(t, g.TimeUs, run(m, LaunchGraph, slow, 8).TimeUs, "a graph has no host floor to scale")
	fast := run(m, LaunchPerGPU, half, 8)
	require.False(t, fast.HostBound, "the 8 B kernel outlasts the halved enqueue")
	require.Equal(t, run(m, LaunchPerGPU, 0, 1<<30).TimeUs, run(m, LaunchPerGPU, half, 1<<30).TimeUs)

	// The all-to-all's line stays as measured on a faster host: on 4 H200 with a process per GPU
	// its floor is the line's 16 operations, 10.19 + 8 × 0.272 µs, whatever the host's collective
	// enqueue (hostscan's 4×H200 lease: 12.1–13.2 µs where its collectives enqueued in 6.6).
	m4, _ := testMachine(t, "../testdata/nccl/h200x4/real_topo.xml", 1, nil, "", "")
	m4.Launch, m4.HostEnqueue = LaunchPerGPU, 6630*Nanosecond
	a2a, _, err := m4.Run(coll.AllToAll, 64, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.True(t, a2a.HostBound)
	require.InDelta(t, HostAllToAll.At(8).Micros(), a2a.TimeUs, 1e-6)
	ar := run(m4, LaunchPerNode, 6630*Nanosecond, 8)
	require.InDelta(t, 6.63*(HostEnqueue+3*HostPerRank).Micros()/HostEnqueue.Micros(), ar.TimeUs, 1e-3, "one thread for 4 GPUs on a 6.63 µs host")

	m8, _ := testMachine(t, "dgx-h100", 1, nil, "", "")
	dev := run(m8, LaunchPerGPU, 0, 1024)
	require.False(t, dev.HostBound)
	bound := run(m8, LaunchPerGPU, 30*Microsecond, 1024)
	require.True(t, bound.HostBound)
	require.InDelta(t, 30.0, bound.TimeUs, 1e-6, "a one-channel call on a 30 µs host")
	require.InDelta(t, dev.TimeUs, bound.DeviceUs, 1e-6, "the device time is not the host's")
}

// TestHostFloorWork: a call's host floor is the enqueue of its busiest rank (callWork): a
// collective's grows with its channels (HostPerChannel), a point-to-point call's with the
// operations it enqueues, on the line of its kind (HostSendRecv, HostAllToAll), never below a
// one-channel collective's HostEnqueue, and with the channels its operations to other ranks span
// (HostP2PPerChannel); one thread per node pays an enqueue per GPU and adds every GPU's work beyond
// a one-channel collective's enqueue; graphs have none.
func TestHostFloorWork(t *testing.T) {
	tr := []coll.Transfer{{From: 0, To: 1}, {From: 0, To: 1}, {From: 1, To: 0}, {From: 2, To: 0}}
	trCh := []coll.Transfer{{From: 0, To: 1, NChannels: 4}, {From: 1, To: 1, NChannels: 8}, {From: 2, To: 1, NChannels: 2}}
	for _, c := range []struct {
		name string
		f    coll.Func
		n    int
		p    coll.Plan
		tr   []coll.Transfer
		want hostWork
	}{
		{"all-reduce, 1 channel", coll.AllReduce, 8, coll.Plan{NChannels: 1}, nil, hostWork{chans: 1}},
		{"all-reduce, 24 channels", coll.AllReduce, 8, coll.Plan{NChannels: 24}, nil, hostWork{chans: 24}},
		{"all-to-all, 1 channel a transfer", coll.AllToAll, 8, coll.Plan{NChannels: 1}, nil, hostWork{ops: 16, line: HostAllToAll}},
		{"all-to-all, 16 channels a transfer", coll.AllToAll, 2, coll.Plan{NChannels: 16}, nil, hostWork{ops: 4, line: HostAllToAll, p2pChans: 30}},
		{"send/recv", coll.SendRecv, 8, coll.Plan{NChannels: 16}, nil, hostWork{ops: 2, line: HostSendRecv, p2pChans: 30}},
		{"send/recv, one rank", coll.SendRecv, 1, coll.Plan{NChannels: 16}, nil, hostWork{ops: 2, line: HostSendRecv}},
		// rank 0: two sends to 1, receives from 1 and 2, each transfer over the plan's 2 channels
		{"traced group", coll.SendRecv, 3, coll.Plan{NChannels: 2}, tr, hostWork{ops: 4, line: HostSendRecv, p2pChans: 4}},
		// the plan's transfers win, each over its own channels; rank 1 receives from 0 and 2 and
		// copies to itself (no channel cost): 3 + 1 further channels, 4 operations
		{"plan's transfers", coll.SendRecv, 3, coll.Plan{NChannels: 16, Transfers: trCh}, tr, hostWork{ops: 4, line: HostSendRecv, p2pChans: 4}},
	} {
		require.Equal(t, c.want, callWork(c.f, c.n, c.p, c.tr), c.name)
	}
	one := hostWork{chans: 1}
	require.Equal(t, HostEnqueue, LaunchPerGPU.hostFloor(8, one))
	require.Equal(t, HostEnqueue+23*HostPerChannel, LaunchPerGPU.hostFloor(8, hostWork{chans: 24}))
	require.InDelta(t, 11.59, LaunchPerGPU.hostFloor(8, hostWork{chans: 24}).Micros(), 0.005, "24 channels: 11.25 µs measured alone (enqueuescan a–c)")
	require.Equal(t, HostEnqueue, LaunchPerGPU.hostFloor(8, hostWork{ops: 4, line: HostSendRecv}), "a few operations cost a collective's enqueue")
	require.Equal(t, HostEnqueue+30*HostP2PPerChannel, LaunchPerGPU.hostFloor(8, hostWork{ops: 2, line: HostSendRecv, p2pChans: 30}))
	require.Equal(t, HostAllToAll.At(2048), LaunchPerGPU.hostFloor(8, hostWork{ops: 2048, line: HostAllToAll}))
	require.Greater(t, HostSendRecv.At(2048), HostAllToAll.At(2048), "a transfer to another rank costs more than to self")
	perNode8 := HostEnqueue + 7*HostPerRank
	require.Equal(t, perNode8, LaunchPerNode.hostFloor(8, one))
	require.Equal(t, perNode8+8*23*HostPerChannel, LaunchPerNode.hostFloor(8, hostWork{chans: 24}), "every GPU's further channels")
	require.Equal(t, perNode8, LaunchPerNode.hostFloor(8, hostWork{ops: 2, line: HostSendRecv}), "a send and a receive cost a collective's enqueue")
	// An all-to-all adds each GPU's work beyond a collective's enqueue to the 8 enqueues.
	a2a := func(ops int) hostWork { return hostWork{ops: ops, line: HostAllToAll} }
	require.Equal(t, perNode8+8*(HostAllToAll.At(16)-HostEnqueue), LaunchPerNode.hostFloor(8, a2a(16)))
	require.InDelta(t, 101.0, LaunchPerNode.hostFloor(8, a2a(16)).Micros(), 0.05, "65.6 µs of enqueues and 8 × 4.42 of operations")
	require.Equal(t, perNode8+8*(HostAllToAll.At(32)-HostEnqueue), LaunchPerNode.hostFloor(8, a2a(32)), "two 8-GPU nodes' all-to-all")
	require.Equal(t, HostEnqueue+HostPerRank+2*(HostAllToAll.At(4)-HostEnqueue), LaunchPerNode.hostFloor(2, a2a(4)), "2 H200: 2 × 1.16 µs over a collective")
	require.Equal(t, HostEnqueue, LaunchPerNode.hostFloor(1, one), "one GPU a thread: one enqueue, as a process per GPU")
	require.Equal(t, HostAllToAll.At(2048), LaunchPerNode.hostFloor(1, a2a(2048)), "one GPU a thread: a process per GPU's line")
	for _, ops := range []int{2, 16, 64, 2048} {
		for _, line := range []HostLine{HostSendRecv, HostAllToAll} {
			w := hostWork{ops: ops, line: line}
			require.GreaterOrEqual(t, LaunchPerNode.hostFloor(8, w), Time(8*ops)*line.PerOp, "one thread does the 8 GPUs' operations")
			require.GreaterOrEqual(t, LaunchPerNode.hostFloor(8, w), LaunchPerGPU.hostFloor(8, w))
		}
	}
	require.Zero(t, LaunchGraph.hostFloor(8, a2a(2048)))
	require.Zero(t, LaunchGraph.hostFloor(8, hostWork{chans: 24}))

	// An all-to-all of 8 KiB on one DGX H100: the GPUs finish before the host has enqueued its 16
	// sends and receives, one channel each.
	m, _ := testMachine(t, "dgx-h100", 1, nil, "", "")
	row, _, err := m.Run(coll.AllToAll, 8<<10, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.True(t, row.HostBound)
	require.Equal(t, 1, row.NChannels)
	require.InDelta(t, HostAllToAll.At(16).Micros(), row.TimeUs, 1e-9)

	// On 2 H200 a 512 KiB all-gather runs on 22 channels and its kernel is shorter than the
	// enqueue: a process per GPU takes HostEnqueue and 21 × HostPerChannel.
	m2, _ := testMachine(t, "../testdata/nccl/h200x2/real_topo.xml", 1, nil, "", "")
	row, _, err = m2.Run(coll.AllGather, 512<<10, coll.Float32, coll.Sum, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, 22, row.NChannels)
	require.True(t, row.HostBound)
	require.InDelta(t, (HostEnqueue + 21*HostPerChannel).Micros(), row.TimeUs, 1e-9)
}

// enqueueRows reads the rows of a process per GPU ("mp_" tags) of the measured CSVs, with the
// channels NCCL spreads each (collective, size) over on the 2 H200 (the planner's, as simccl run
// --dry-run shows them). Measured.Tag gets the file's name in front
// ("enqueuescan-2026-11-29b.csv:mp_default_spin_r1_host"), so that the same run's tag on another
// lease is another run.
func enqueueRows(t *testing.T, files ...string) ([]Measured, map[string]int) {
	t.Helper()
	m, _ := testMachine(t, "../testdata/nccl/h200x2/real_topo.xml", 1, nil, "", "")
	var out []Measured
	chans := map[string]int{}
	for _, name := range files {
		f, err := os.Open(name)
		require.NoError(t, err)
		rows, err := ReadMeasuredCSV(f, name)
		f.Close()
		require.NoError(t, err)
		for _, r := range rows {
			if !strings.HasPrefix(r.Tag, "mp_") {
				continue
			}
			k := fmt.Sprintf("%s/%d", r.Coll, r.Bytes)
			if _, ok := chans[k]; !ok {
				fn, err := coll.ParseFunc(r.Coll)
				require.NoError(t, err)
				row, _, err := m.Run(fn, r.Bytes, coll.Float32, coll.Sum, RunOptions{DryRun: true})
				require.NoError(t, err)
				chans[k] = row.NChannels
			}
			r.Tag = filepath.Base(name) + ":" + r.Tag
			out = append(out, r)
		}
	}
	return out, chans
}

// TestHostPerChannelFromEnqueuescan ties HostEnqueue, HostPerChannel and HostP2PPerChannel to their
// measurement (testdata/nccl/h200x2/enqueuescan-2026-11-29*.csv, three leases, a process per GPU,
// the slower process): HostEnqueue the median of the five collectives' one-channel calls in
// nccl-tests' loop; HostPerChannel the median, over their enqueues alone (behind a spin) on 2–24
// channels, of the time beyond the one-channel enqueues' median per further channel; for
// point-to-point calls (those leases' send/recv and all-to-all, and
// p2popsscan-2026-11-29-big.csv's groups of 1–64 pairs, enqueues alone), the median of the time
// beyond the same run's one-channel median per operation to the other rank and further channel.
func TestHostPerChannelFromEnqueuescan(t *testing.T) {
	scans := []string{"../testdata/nccl/h200x2/enqueuescan-2026-11-29.csv",
		"../testdata/nccl/h200x2/enqueuescan-2026-11-29b.csv", "../testdata/nccl/h200x2/enqueuescan-2026-11-29c.csv"}
	rows, chans := enqueueRows(t, append(scans, "../testdata/nccl/h200x2/p2popsscan-2026-11-29-big.csv")...)
	isP2P := func(r Measured) bool { return r.Coll == "sendrecv" || r.Coll == "alltoall" }
	// alone: the enqueue behind a spin; loop: nccl-tests' loop of the enqueuescan leases.
	alone := func(r Measured) bool {
		return strings.HasSuffix(r.Tag, "_host") && (strings.Contains(r.Tag, "_spin_") || strings.Contains(r.Tag, "groupbig"))
	}
	loop := func(r Measured) bool {
		return strings.HasSuffix(r.Tag, ":mp_default_r1") || strings.HasSuffix(r.Tag, ":mp_default_r2")
	}
	var one, loopOne []float64
	p2pOne := map[string][]float64{} // per run and collective
	for _, r := range rows {
		if chans[fmt.Sprintf("%s/%d", r.Coll, r.Bytes)] != 1 {
			continue
		}
		switch {
		case isP2P(r) && alone(r):
			p2pOne[r.Tag+"/"+r.Coll] = append(p2pOne[r.Tag+"/"+r.Coll], r.Us)
		case isP2P(r) || strings.Contains(r.Tag, "groupbig"):
		case alone(r):
			one = append(one, r.Us)
		case loop(r):
			loopOne = append(loopOne, r.Us)
		}
	}
	require.Len(t, loopOne, 306)
	require.InDelta(t, HostEnqueue.Micros(), median(loopOne), 0.005, "µs, a one-channel collective in the loop")
	require.Len(t, one, 306)
	base := median(one)
	require.InDelta(t, 9.89, base, 0.005, "µs, a one-channel collective's enqueue alone")
	var slopes, p2p []float64
	for _, r := range rows {
		ch := chans[fmt.Sprintf("%s/%d", r.Coll, r.Bytes)]
		if ch < 2 || !alone(r) {
			continue
		}
		if !isP2P(r) {
			slopes = append(slopes, (r.Us-base)/float64(ch-1))
			continue
		}
		k := 1 // pairs (or all-to-alls) a group: a send and a receive to the other rank each
		if i := strings.Index(r.Tag, "groupbig"); i >= 0 {
			_, err := fmt.Sscanf(r.Tag[i:], "groupbig%d", &k)
			require.NoError(t, err, r.Tag)
		}
		g := p2pOne[r.Tag+"/"+r.Coll]
		if len(g) == 0 {
			continue // a group whose one-channel sizes waited on the GPU (_hostwait): no base
		}
		p2p = append(p2p, (r.Us-median(g))/float64(2*k*(ch-1)))
	}
	require.Len(t, slopes, 210)
	require.InDelta(t, HostPerChannel.Micros(), median(slopes), 0.0005, "µs a further channel of a collective")
	require.Len(t, p2p, 182)
	require.InDelta(t, HostP2PPerChannel.Micros(), median(p2p), 0.0005, "µs a further channel of a point-to-point operation")
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
		floor := LaunchPerNode.hostFloor(g, hostWork{chans: 1}).Micros()
		require.InEpsilon(t, med, floor, 0.05, "%d communicator-ranks: model %.2f µs, measured median %.2f", g, floor, med)
	}
}
