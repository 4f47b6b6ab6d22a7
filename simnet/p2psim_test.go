package simnet

import (
	"math"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/planner"
	"github.com/stretchr/testify/require"
)

// p2pBoth replays the point-to-point plans of one nccl-tests size of f on m twice: coll's
// schedule through Simulate, and SimulateP2P with spec's options.
func p2pBoth(t *testing.T, m *Machine, f coll.Func, size int64, spec P2PSpec) (sched *Result, compact *P2PResult, es, ec *Engine) {
	t.Helper()
	plan, _, err := m.Plan(f, size, coll.Float32, coll.Sum)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := m.PlanTiming(plan)
	if err != nil {
		t.Fatal(err)
	}
	plans := []coll.Plan{plan}
	s, err := coll.Compile(plans...)
	if err != nil {
		t.Fatal(err)
	}
	es, cl, err := m.engine()
	if err != nil {
		t.Fatal(err)
	}
	if sched, err = Simulate(es, cl, s, tm, Options{}); err != nil {
		t.Fatal(err)
	}
	ops, err := P2POps(plans)
	if err != nil {
		t.Fatal(err)
	}
	spec.Ops = ops
	ec, cl, err = m.engine()
	if err != nil {
		t.Fatal(err)
	}
	if compact, err = SimulateP2P(ec, cl, spec, tm); err != nil {
		t.Fatal(err)
	}
	return sched, compact, es, ec
}

// The compact point-to-point executor replays all-to-all and send/recv as the schedule
// executor does: the same time to a picosecond's rounding and the same bytes on every link, per
// rank and with one rank per orbit of the node rotation.
func TestP2PMatchesSchedule(t *testing.T) {
	for _, c := range []struct {
		nodes int
		f     coll.Func
		size  int64
	}{
		{1, coll.AllToAll, 64 << 20},
		{2, coll.AllToAll, 1 << 20},
		{2, coll.AllToAll, 256 << 20},
		{4, coll.AllToAll, 32 << 20},
		{4, coll.SendRecv, 64 << 20},
		{3, coll.SendRecv, 64 << 20},
	} {
		m, _ := testMachine(t, "dgx-h100", c.nodes, nil, "", "")
		for _, perRank := range []bool{true, false} {
			sched, compact, es, ec := p2pBoth(t, m, c.f, c.size, P2PSpec{PerRank: perRank})
			rel := math.Abs(float64(compact.Time-sched.Time)) / float64(sched.Time)
			t.Logf("%d nodes %v %d B per-rank=%v: schedule %v, compact %v (rotation %d, %d programs, %d messages against %d)",
				c.nodes, c.f, c.size, perRank, sched.Time, compact.Time, compact.Rotation, compact.Programs, compact.Messages, sched.Messages)
			// Per rank the replays agree to the picosecond; the symmetric one shares links among
			// an orbit's members (capacity / members), whose rates round differently: a few ps.
			tol := 1e-9
			if !perRank {
				tol = 1e-8
			}
			if rel > tol {
				t.Errorf("%d nodes %v %d B per-rank=%v: compact %d ps against schedule %d ps", c.nodes, c.f, c.size, perRank, int64(compact.Time), int64(sched.Time))
			}
			if !perRank && c.nodes > 1 && compact.Rotation != 1 {
				t.Errorf("%d nodes %v: rotation %d, want one node", c.nodes, c.f, compact.Rotation)
			}
			for l := 0; l < m.tmpl.e.NumLinks(); l++ { // the machine's links (SharedCTA adds its own)
				x, y := ec.LinkBytes(LinkID(l)), es.LinkBytes(LinkID(l))
				if math.Abs(x-y) > 1e-9*max(y, 1) {
					t.Fatalf("%d nodes %v: link %s carried %g bytes against %g", c.nodes, c.f, es.LinkName(LinkID(l)), x, y)
				}
			}
		}
	}
}

// Across leaves, with relaxed switch links, stand-ins of oversubscribed uplinks and rotations of
// several nodes, the exact compact replay is still the schedule's; without Exact it is either
// that or says which approximation it is (latency-mean, ecmp-mean), within 1%.
func TestP2PFabricsMatchSchedule(t *testing.T) {
	fabs := map[string][]string{
		"ecmp, 2 per leaf":           {"hosts_per_leaf", "2"},
		"rail, 2 per leaf":           {"hosts_per_leaf", "2", "routing", "rail"},
		"fat tree 2:1, 2 per leaf":   {"topology", "fattree", "hosts_per_leaf", "2", "oversubscription", "2"},
		"3 tiers, 2 pods, rail 2:1":  {"tiers", "3", "hosts_per_leaf", "1", "leaves_per_pod", "2", "oversubscription", "2", "routing", "rail"},
		"3 tiers, 2 pods, ecmp 2:1 ": {"tiers", "3", "hosts_per_leaf", "1", "leaves_per_pod", "2", "oversubscription2", "2"},
	}
	for name, kv := range fabs {
		m, _ := testMachine(t, "dgx-h100", 4, fabricOf(t, kv...), "", "")
		for _, f := range []coll.Func{coll.AllToAll, coll.SendRecv} {
			for _, exact := range []bool{true, false} {
				sched, compact, _, _ := p2pBoth(t, m, f, 64<<20, P2PSpec{Exact: exact})
				rel := float64(compact.Time-sched.Time) / float64(sched.Time)
				t.Logf("%s %v exact=%v: schedule %v, compact %v (%+.3f%%, %s, rotation %d, %d relaxed)", name, f, exact, sched.Time, compact.Time, 100*rel, compact.Mode(), compact.Rotation, compact.Relaxed)
				approx := compact.ECMPMean || compact.LatencyMean || compact.RateInterval > 0
				if (exact || !approx) && math.Abs(rel) > 1e-9 {
					t.Errorf("%s %v: compact %v against schedule %v", name, f, compact.Time, sched.Time)
				}
				if exact && approx {
					t.Errorf("%s %v: mode %s with Exact", name, f, compact.Mode())
				}
				if math.Abs(rel) > 0.01 {
					t.Errorf("%s %v: compact %v against schedule %v", name, f, compact.Time, sched.Time)
				}
			}
		}
	}
}

// Machine.Run switches all-to-all and send/recv to the compact executor above CompactQuiet steps
// and gets the schedule's time.
func TestMachineRunP2PCompact(t *testing.T) {
	m, _ := testMachine(t, "dgx-h100", 4, nil, "", "")
	for _, f := range []coll.Func{coll.AllToAll, coll.SendRecv} {
		old, oldP2P := CompactQuiet, P2PQuiet
		CompactQuiet, P2PQuiet = 1<<40, 1<<40
		exact, _, err := m.Run(f, 8<<20, coll.Float32, coll.Sum, RunOptions{})
		CompactQuiet, P2PQuiet = old, oldP2P
		if err != nil {
			t.Fatal(err)
		}
		CompactQuiet = 1
		compact, _, err := m.Run(f, 8<<20, coll.Float32, coll.Sum, RunOptions{})
		CompactQuiet = old
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: %s %.3f us, %s %.3f us", f, exact.Mode, exact.TimeUs, compact.Mode, compact.TimeUs)
		if exact.Mode != "schedule" || compact.Mode != "p2p-compact" {
			t.Fatalf("modes %q and %q", exact.Mode, compact.Mode)
		}
		if math.Abs(compact.TimeUs-exact.TimeUs) > 1e-6*exact.TimeUs || compact.BusBw <= 0 {
			t.Errorf("%v: compact %.3f us against schedule %.3f us", f, compact.TimeUs, exact.TimeUs)
		}
	}
}

// A send/recv whose transfers the planner cuts differently (at 4 KiB: LL on the NVLink peers,
// another choice for the peer across the network) is not one operation from every rank alike:
// P2POps refuses it and Machine.Run replays its schedule, even above CompactQuiet.
func TestSendRecvMixedTransfersRunSchedule(t *testing.T) {
	m, _ := testMachine(t, "dgx-h100", 3, nil, "", "")
	plan, _, err := m.Plan(coll.SendRecv, 4<<10, coll.Float32, coll.Sum)
	if err != nil {
		t.Fatal(err)
	}
	differ := false
	for _, tr := range plan.Transfers {
		t0 := plan.Transfers[0]
		differ = differ || tr.NChannels != t0.NChannels || tr.LL != t0.LL || tr.ChunkSize != t0.ChunkSize
	}
	if !differ {
		t.Fatalf("transfers all cut alike: %+v", plan.Transfers[:2])
	}
	if _, err := P2POps([]coll.Plan{plan}); err == nil {
		t.Fatal("P2POps accepted transfers cut differently")
	}
	old := CompactQuiet
	CompactQuiet = 1
	row, _, err := m.Run(coll.SendRecv, 4<<10, coll.Float32, coll.Sum, RunOptions{})
	CompactQuiet = old
	if err != nil {
		t.Fatal(err)
	}
	if row.Mode != "schedule" || row.TimeUs <= 0 {
		t.Errorf("mode %q, %.3f us; want the schedule", row.Mode, row.TimeUs)
	}
}

// SharedCTA: a channel's send and receive share its CTA's traffic rate as they need it. A
// send/recv of one Simple chunk per channel sends the chunk, then copies it out of the FIFO; with
// the CTA shared each half runs at the whole rate where a fixed share gave it half, so the call
// is faster by at least the copy's traffic at the whole rate, and no faster than both halves at
// the whole rate allow.
func TestP2PSharedCTA(t *testing.T) {
	m, _ := testMachine(t, "dgx-h100", 1, nil, "", "")
	run := func(shared bool) (Time, Timing, coll.Plan) {
		defer func(v bool) { SharedCTA = v }(SharedCTA)
		SharedCTA = shared
		plan, _, err := m.Plan(coll.SendRecv, 4<<20, coll.Float32, coll.Sum)
		if err != nil {
			t.Fatal(err)
		}
		tm, err := m.PlanTiming(plan)
		if err != nil {
			t.Fatal(err)
		}
		_, compact, _, _ := p2pBoth(t, m, coll.SendRecv, 4<<20, P2PSpec{PerRank: true})
		return compact.Time, tm, plan
	}
	off, tm, plan := run(false)
	on, _, _ := run(true)
	if plan.Proto != coll.Simple || tm.CTAMem[coll.Simple] <= 0 {
		t.Fatalf("plan %v/%v, CTA traffic rate %v: want Simple with the memory-traffic model", plan.Algo, plan.Proto, tm.CTAMem[coll.Simple])
	}
	part := float64(4<<20) / float64(plan.NChannels)
	chunk := plan.ChunkSize
	if chunk == 0 {
		chunk = coll.DefaultP2PChunkSize
	}
	if part > float64(chunk) {
		t.Fatalf("%g bytes per channel, chunk %d: want one chunk per channel", part, chunk)
	}
	mem := float64(tm.CTAMem[coll.Simple])
	copyFull := Time(ctaTraffic(coll.Recv, part, part, 0) / mem)
	sendFull := Time(ctaTraffic(coll.Send, part, part, 1) / mem)
	t.Logf("%d channels, %g B each: fixed shares %v, shared %v (copy at the whole rate %v)", plan.NChannels, part, off, on, copyFull)
	if off-on < copyFull*99/100 {
		t.Errorf("shared CTA %v against fixed shares %v: want at least %v faster", on, off, copyFull)
	}
	if on < tm.Launch+sendFull+copyFull {
		t.Errorf("shared CTA %v: below launch %v + send %v + copy %v at the whole rate", on, tm.Launch, sendFull, copyFull)
	}
}

// On two ranks a send/recv of S bytes and an all-to-all of 2S carry the same message to the peer
// (the all-to-all's other half is a copy to self), planned alike: one protocol, the same
// channels. Both take the same time, small (LL) and large (Simple): a send/recv plan's own
// protocol is Simple whatever its transfers use, and its launch once paid Simple's base latency
// where its LL transfers take LL's (1.8 µs more than the all-to-all on 2 H200).
func TestSendRecvLaunchAsAllToAll(t *testing.T) {
	m, _ := settingsMachine(t, "dgx-h100", 1, 2, nil, planner.Settings{})
	// The GPUs' time: the host enqueues the two calls' operations on different lines
	// (HostSendRecv, HostAllToAll), so their loop floors differ.
	m.Launch = LaunchGraph
	for _, size := range []int64{64, 4 << 10, 64 << 10, 4 << 20} {
		sr, _, err := m.Run(coll.SendRecv, size, coll.Float32, coll.Sum, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a2a, _, err := m.Run(coll.AllToAll, 2*size, coll.Float32, coll.Sum, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sr.Proto != a2a.Proto || sr.NChannels != a2a.NChannels {
			t.Fatalf("%d B: send/recv planned %s/%d, all-to-all of twice the size %s/%d", size, sr.Proto, sr.NChannels, a2a.Proto, a2a.NChannels)
		}
		if d := math.Abs(sr.TimeUs - a2a.TimeUs); d > 0.01 {
			t.Errorf("%d B (%s): send/recv %.3f µs, all-to-all of twice the size %.3f µs", size, sr.Proto, sr.TimeUs, a2a.TimeUs)
		}
	}
}

// Where connection classes cross a link orbit unequally, the symmetric replay still stands: the
// private link keeps the orbit's capacity and each route its number of crossings as a weight.
// rtx3090-8gpu-pcie-2socket-ib56g.xml has one NIC without GPUDirect RDMA, so a connection
// between nodes stages through host memory at both ends and meets, under the rotation of one
// node, the same CPU link orbit twice, where one inside a node meets it once. The replay of one
// node equals the replay of every rank (until stop 38 that case replayed every rank: 24 nodes,
// 128 MiB, 98 s).
func TestP2PSymmetricUnequalCrossings(t *testing.T) {
	m, _ := settingsMachine(t, "../testdata/topos/rtx3090-8gpu-pcie-2socket-ib56g.xml", 4, 0, nil, planner.Settings{})
	for _, size := range []int64{64 << 10, 2 << 20} {
		_, sym, _, _ := p2pBoth(t, m, coll.AllToAll, size, P2PSpec{})
		_, all, _, _ := p2pBoth(t, m, coll.AllToAll, size, P2PSpec{PerRank: true})
		t.Logf("%d B: one node %v (rotation %d), every rank %v", size, sym.Time, sym.Rotation, all.Time)
		require.Equal(t, 1, sym.Rotation)
		require.InDelta(t, float64(all.Time), float64(sym.Time), 1e-9*float64(all.Time))
	}
}

// The sizes of a sweep share one walk of every route (p2pWalkCache) and, where the symmetric
// replay takes its members' mean latency unchecked (past checkPairs), their latency sums: the rows
// are those of machines that walk afresh for every size, and the calls whose operations take the
// same channels walk once.
func TestP2PWalkCacheSharedAcrossSizes(t *testing.T) {
	sizes := []int64{4 << 20, 64 << 20, 1 << 30}
	saved := checkPairs
	checkPairs = 1 << 10 // unchecked, as an all-to-all on 520 DGX H100 nodes and more is
	defer func() { checkPairs = saved }()
	for _, f := range []coll.Func{coll.AllToAll, coll.SendRecv} {
		m, _ := testMachine(t, "dgx-h100", 8, fabricOf(t, "hosts_per_leaf", "4"), "", "")
		latMean := false
		for _, size := range sizes {
			shared, _, err := m.Run(f, size, coll.Float32, coll.Sum, RunOptions{})
			require.NoError(t, err)
			fresh, _ := testMachine(t, "dgx-h100", 8, fabricOf(t, "hosts_per_leaf", "4"), "", "")
			alone, _, err := fresh.Run(f, size, coll.Float32, coll.Sum, RunOptions{})
			require.NoError(t, err)
			require.Equal(t, alone.TimeUs, shared.TimeUs, "%v %d B", f, size)
			require.Equal(t, alone.Mode, shared.Mode, "%v %d B", f, size)
			t.Logf("%v %d B: %.3f µs (%s)", f, size, shared.TimeUs, shared.Mode)
			latMean = latMean || strings.Contains(shared.Mode, "latency-mean") && strings.Contains(shared.Mode, "unchecked")
		}
		require.Len(t, m.tmpl.p2p.m, 1, "%v: one walk for the %d sizes", f, len(sizes))
		if f == coll.AllToAll {
			require.True(t, latMean, "the all-to-all takes the mean latency unchecked")
		}
		for _, w := range m.tmpl.p2p.m {
			require.Equal(t, latMean, len(w.lat) > 0, "%v: the latency sums kept where the mean latency is taken unchecked", f)
		}
	}
}

func TestIntervalName(t *testing.T) {
	for _, c := range []struct {
		iv   Time
		want string
	}{
		{1, "1ps"}, {212, "212ps"}, {999, "999ps"}, {1000, "1ns"}, {1499, "1ns"}, {1500, "2ns"}, {217_400, "217ns"},
	} {
		require.Equal(t, c.want, intervalName(c.iv), "%d ps", c.iv)
	}
}

// Where a GPU has no memory-traffic model (Blackwell here), a point-to-point lane holds a fixed
// share of its CTA: the CTA rate over the lanes of its batch, as NCCL's kernel splits a CTA's
// warps among the works of the batch it runs. An all-to-all of 4 GiB on one GB200 NVL72 rack puts
// 9 peers on each p2p channel (4 channels a peer, 32 channels): a batch of 8 works (16 lanes),
// then one of a single work (2 lanes). With the share over every lane of the call the last batch
// ran at 2/16 of the CTA, alone on an idle NVLink, and the call took 8,843 µs where 2 GiB (2
// channels a peer, 233 steps a channel) took 3,009: now its time per byte is 2 GiB's within 1%,
// and both executors agree.
func TestP2PLaneShareByBatch(t *testing.T) {
	m, _ := testMachine(t, "gb200-nvl72", 1, nil, "", "")
	plan, _, err := m.Plan(coll.AllToAll, 4<<30, coll.Float32, coll.Sum)
	require.NoError(t, err)
	tm, err := m.PlanTiming(plan)
	require.NoError(t, err)
	require.Zero(t, tm.CTAMem[coll.Simple], "this test wants a GPU without the memory-traffic model")
	require.Equal(t, coll.Simple, plan.Proto)
	s, err := coll.Compile(plan)
	require.NoError(t, err)
	pr := &s.Programs[1] // rank 0, channel 1 (channel 0 holds its copy to self: one lane)
	require.Equal(t, 0, pr.Rank)
	bl := batchLanes(pr.Steps)
	require.NotNil(t, bl, "rank 0 channel 1: want batches of unequal lanes")
	require.Equal(t, int32(2*coll.P2PBatch), bl[1], "first batch")
	require.Equal(t, int32(2), bl[len(bl)-1], "last batch: one work")
	require.Equal(t, programLanes(pr.Steps), 2*coll.P2PBatch)

	sched, compact, _, _ := p2pBoth(t, m, coll.AllToAll, 4<<30, P2PSpec{PerRank: true})
	require.InDelta(t, 1, float64(compact.Time)/float64(sched.Time), 1e-9, "compact %v, schedule %v", compact.Time, sched.Time)
	_, half, _, _ := p2pBoth(t, m, coll.AllToAll, 2<<30, P2PSpec{PerRank: true})
	t.Logf("all-to-all on 72 GB200: 2 GiB %v, 4 GiB %v", half.Time, compact.Time)
	require.Less(t, float64(compact.Time), 2.02*float64(half.Time), "4 GiB against twice 2 GiB")
}
