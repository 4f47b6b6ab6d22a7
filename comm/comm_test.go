package comm_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/coll/colltest"
	"github.com/simccl/simccl/comm"
	"github.com/stretchr/testify/require"
)

// The Tree all-reduce schedule (two lanes per channel: reduce up, broadcast down) on every
// transport, through the conformance kit.
func TestTreeAllReduce(t *testing.T) {
	ranks := map[string][]int{"inproc": {2, 3, 8}, "tcp": {5}, "shm": {4}}
	m := colltest.Matrix{Funcs: []coll.Func{coll.AllReduce}, Types: []coll.DataType{coll.Int32, coll.Float32, coll.Bfloat16, coll.Float8e4m3},
		Counts: []int{1, 1237, 40001}}
	for _, tr := range []string{"inproc", "tcp", "shm"} {
		t.Run(tr, func(t *testing.T) {
			short, long := m, m
			short.Ranks, long.Ranks = ranks[tr], []int{2, 3, 4, 5, 6, 7, 8}
			colltest.Run(t, executor(tr, comm.Config{Planners: cpuPlanners("tree", 0)}), colltest.Options{Matrix: []colltest.Matrix{short}, Long: []colltest.Matrix{long}})
		})
	}
}

// Connections are made on first use, per (channel, peer, connIndex), and their memory reported;
// ConnectAtInit makes the ring ones at init.
func TestLazyConnection(t *testing.T) {
	const n = 4
	cs, err := comm.InitAll(n, slotted(comm.Config{Transport: "inproc", Planners: cpuPlanners("", 2), SlotBytes: 4096}))
	if err != nil {
		t.Fatal(err)
	}
	w := &world{cs: cs}
	defer w.close()
	for _, c := range cs {
		if b, k := c.MemoryBytes(); b != 0 || k != 0 {
			t.Fatalf("rank %d: %d connections (%d bytes) before any call", c.Rank(), k, b)
		}
	}
	allReduce := colltest.Case{Call: colltest.Call{Func: coll.AllReduce, Count: 1 << 16, DataType: coll.Float32, Op: coll.Sum}, NRanks: n, Seed: 1}
	require.Zero(t, colltest.RunCase(t, w, allReduce))
	for _, c := range cs {
		// Ring on 2 channels: a connection to next and one to prev on each.
		b, k := c.MemoryBytes()
		if k != 4 || b <= 0 {
			t.Fatalf("rank %d after a ring all-reduce: %d connections, %d bytes; want 4 and > 0", c.Rank(), k, b)
		}
	}
	allReduce.Seed = 2
	require.Zero(t, colltest.RunCase(t, w, allReduce))
	if _, k := cs[0].MemoryBytes(); k != 4 {
		t.Fatalf("a second all-reduce made new connections: %d", k)
	}
	sendRecv := colltest.Case{Call: colltest.Call{Func: coll.SendRecv, Count: 100, DataType: coll.Float32}, NRanks: n, Seed: 3}
	require.Zero(t, colltest.RunCase(t, w, sendRecv))
	if _, k := cs[0].MemoryBytes(); k != 6 {
		t.Fatalf("send/recv to next and prev should add 2 connIndex-1 connections: %d", k)
	}

	pre, err := comm.InitAll(n, &comm.Config{Transport: "inproc", Planners: cpuPlanners("", 2), ConnectAtInit: true})
	if err != nil {
		t.Fatal(err)
	}
	defer (&world{cs: pre}).close()
	for _, c := range pre {
		if _, k := c.MemoryBytes(); k != 4 {
			t.Fatalf("rank %d with ConnectAtInit: %d connections at init, want 4", c.Rank(), k)
		}
	}
}

func TestSplit(t *testing.T) {
	const n = 6
	cs, err := comm.InitAll(n, &comm.Config{Planners: cpuPlanners("", 0), Transport: "inproc"})
	if err != nil {
		t.Fatal(err)
	}
	defer (&world{cs: cs}).close()
	subs := make([]*comm.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			color := r % 2
			if r == 5 {
				color = comm.NoColor
			}
			subs[r], errs[r] = c.Split(color, -r, nil) // key −r: reverse order
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if subs[5] != nil {
		t.Fatalf("NoColor rank got a communicator")
	}
	// color 0: ranks 0,2,4 ordered by key −r → 4,2,0; color 1: 1,3 → 3,1.
	want := map[int][2]int{0: {2, 3}, 2: {1, 3}, 4: {0, 3}, 1: {1, 2}, 3: {0, 2}}
	for r, w := range want {
		if subs[r].Rank() != w[0] || subs[r].Count() != w[1] {
			t.Fatalf("rank %d: sub rank %d of %d, want %d of %d", r, subs[r].Rank(), subs[r].Count(), w[0], w[1])
		}
	}
	even := []*comm.Comm{subs[4], subs[2], subs[0]}
	odd := []*comm.Comm{subs[3], subs[1]}
	var wg2 sync.WaitGroup
	for _, g := range [][]*comm.Comm{even, odd} {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			for r, err := range allReduceAll(g, 1001) {
				if err != nil {
					t.Errorf("split communicator of %d ranks: rank %d: %v", len(g), r, err)
				}
			}
		}()
	}
	wg2.Wait()
	for _, s := range subs { // Finalize is collective: every member at once
		if s != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.Finalize(); err != nil {
					t.Errorf("finalize: %v", err)
				}
				s.Destroy()
			}()
		}
	}
	wg.Wait()
}

// A bad configuration fails InitAll once, with one line, before any rank starts.
func TestInitAllBadConfig(t *testing.T) {
	_, err := comm.InitAll(4, &comm.Config{Transport: "bogus"})
	if !errors.Is(err, comm.ErrInvalidArgument) || strings.Count(err.Error(), "bogus") != 1 || strings.Contains(err.Error(), "\n") {
		t.Fatalf("InitAll with transport bogus: %q", err)
	}
}

func TestBadArguments(t *testing.T) {
	cs, err := comm.InitAll(2, &comm.Config{Planners: cpuPlanners("", 0), Transport: "inproc"})
	if err != nil {
		t.Fatal(err)
	}
	defer (&world{cs: cs}).close()
	c := cs[0]
	b := make([]byte, 16)
	for name, err := range map[string]error{
		"short recv":     c.AllReduce(b, b[:8], 4, coll.Float32, coll.Sum, nil),
		"bad type":       c.AllReduce(b, b, 1, coll.DataType(42), coll.Sum, nil),
		"bad op":         c.AllReduce(b, b, 1, coll.Float32, coll.RedOp(77), nil),
		"negative count": c.Broadcast(b, b, -1, coll.Int8, 0, nil),
		"bad root":       c.Reduce(b, b, 1, coll.Int8, coll.Sum, 2, nil),
		"bad peer":       c.Send(b, 1, coll.Int8, 5, nil),
		"allgather recv": c.AllGather(b, b[:8], 8, coll.Int8, nil),
		"alltoall alias": c.AllToAll(b, b, 2, coll.Int32, nil),
	} {
		if !errors.Is(err, comm.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if err := c.GroupEnd(); err == nil {
		t.Errorf("GroupEnd without GroupStart accepted")
	}
	if err := comm.GroupEnd(); err == nil {
		t.Errorf("package GroupEnd without GroupStart accepted")
	}
	if _, err := comm.InitRank(2, comm.UniqueID{}, 0, nil); err == nil {
		t.Errorf("InitRank with an empty id succeeded")
	}
	if _, err := comm.InitRank(2, comm.UniqueID{}, 0, &comm.Config{Transport: "carrier-pigeon"}); err == nil {
		t.Errorf("unknown transport accepted")
	}
	// The communicator still works after rejected calls.
	for r, err := range allReduceAll(cs, 10) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// One goroutine drives every rank inside a process-wide group (the NCCL single-thread pattern).
func TestProcessWideGroup(t *testing.T) {
	const n = 3
	cs, err := comm.InitAll(n, &comm.Config{Planners: cpuPlanners("", 0), Transport: "inproc"})
	if err != nil {
		t.Fatal(err)
	}
	defer (&world{cs: cs}).close()
	bufs := make([][]int64, n)
	comm.GroupStart()
	for r, c := range cs {
		bufs[r] = make([]int64, 2*n)
		for p := 0; p < n; p++ {
			bufs[r][p] = int64(10*r + p)
		}
		// Exchange with both neighbours and all-reduce, all in one group.
		c.Send(comm.Bytes(bufs[r][:1]), 1, coll.Int64, (r+1)%n, nil)
		c.Recv(comm.Bytes(bufs[r][n:n+1]), 1, coll.Int64, (r+n-1)%n, nil)
		c.AllReduce(comm.Bytes(bufs[r][1:2]), comm.Bytes(bufs[r][n+1:n+2]), 1, coll.Int64, coll.Max, nil)
	}
	if err := comm.GroupEnd(); err != nil {
		t.Fatal(err)
	}
	for r, c := range cs {
		if err := c.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if got := bufs[r][n]; got != int64(10*((r+n-1)%n)) {
			t.Errorf("rank %d received %d", r, got)
		}
		if got := bufs[r][n+1]; got != int64(10*(n-1)+1) {
			t.Errorf("rank %d all-reduce max = %d", r, got)
		}
	}
}

// Calls queued on one communicator run in call order (results of many queued calls, one
// Synchronize); two communicators over the same goroutine ranks run independently and concurrently.
func TestOrderingAndIndependentCommunicators(t *testing.T) {
	const n, calls = 3, 40
	a, err := comm.InitAll(n, &comm.Config{Planners: cpuPlanners("", 0), Transport: "inproc"})
	if err != nil {
		t.Fatal(err)
	}
	defer (&world{cs: a}).close()
	b, err := comm.InitAll(n, &comm.Config{Planners: cpuPlanners("", 0), Transport: "shm"})
	if err != nil {
		t.Fatal(err)
	}
	defer (&world{cs: b}).close()
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// One buffer updated in place by every call: the result depends on the order.
			x := []int64{int64(r + 1)}
			y := make([]float64, 1000)
			y[0] = float64(r) // buffers of queued calls are not touched until Synchronize
			for i := 0; i < calls; i++ {
				if err := a[r].AllReduce(comm.Bytes(x), comm.Bytes(x), 1, coll.Int64, coll.Sum, nil); err != nil {
					t.Error(err)
					return
				}
				if err := b[r].AllReduce(comm.Bytes(y), comm.Bytes(y), len(y), coll.Float64, coll.Max, nil); err != nil {
					t.Error(err)
					return
				}
			}
			if err := a[r].Synchronize(); err != nil {
				t.Error(err)
			}
			if err := b[r].Synchronize(); err != nil {
				t.Error(err)
			}
			// x = (1+2+3) × 3^(calls-1) wrapped to int64, the same on every rank.
			want := int64(6)
			for i := 1; i < calls; i++ {
				want *= n
			}
			if x[0] != want {
				t.Errorf("rank %d: %d after %d in-place sums, want %d", r, x[0], calls, want)
			}
			if y[0] != n-1 {
				t.Errorf("rank %d: max %v", r, y[0])
			}
		}()
	}
	wg.Wait()
}

// The PAT AllGather and ReduceScatter schedules on every transport, through the conformance kit.
// NCCL_ALGO=pat on a machine of one rank per host (where NCCL enables PAT); PAT ReduceScatter has
// no Avg or PreMulSum (NCCL 2.28 updateCollCostTable), so those reductions are left out.
func TestPATAllGatherReduceScatter(t *testing.T) {
	ranks := map[string][]int{"inproc": {1, 3, 8}, "tcp": {5}, "shm": {4}}
	longRanks := map[string][]int{"inproc": {1, 2, 3, 4, 5, 6, 7, 8}, "tcp": {2, 3, 4, 5, 6, 7, 8}, "shm": {2, 3, 4, 5, 6, 7, 8}}
	m := colltest.Matrix{Funcs: []coll.Func{coll.AllGather, coll.ReduceScatter},
		Types: []coll.DataType{coll.Int8, coll.Float32, coll.Float16, coll.Float8e5m2},
		Ops:   []coll.RedOp{coll.Sum, coll.Prod, coll.Max, coll.Min}}
	for _, tr := range []string{"inproc", "tcp", "shm"} {
		t.Run(tr, func(t *testing.T) {
			short, long := m, m
			short.Ranks, short.Counts = ranks[tr], []int{1, 333, 2001}
			long.Ranks, long.Counts = longRanks[tr], []int{1, 333, 20001}
			colltest.Run(t, executor(tr, comm.Config{Planners: cpuPlanners("pat", 0)}), colltest.Options{Matrix: []colltest.Matrix{short}, Long: []colltest.Matrix{long}})
		})
	}
}
