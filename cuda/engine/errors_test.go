package engine_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/coll/colltest"
	"github.com/simccl/simccl/comm/perf"
	"github.com/simccl/simccl/cuda"
	"github.com/simccl/simccl/cuda/engine"
	"github.com/stretchr/testify/require"
)

func allocEach(t *testing.T, comms []*engine.Comm, n int) []cuda.DevPtr {
	t.Helper()
	ps := make([]cuda.DevPtr, len(comms))
	for r, c := range comms {
		p, err := upload(c.Device(), make([]byte, n))
		if err != nil {
			t.Fatal(err)
		}
		ps[r] = p
	}
	return ps
}

func TestBadCalls(t *testing.T) {
	comms, err := initAll(needDevs(t, 2), &engine.Config{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			_ = c.Destroy()
		}
	}()
	p := allocEach(t, comms, 1024)
	c := comms[0]
	for name, err := range map[string]error{
		"root":      c.Broadcast(p[0], p[0], 4, coll.Float32, 2, 0),
		"count":     c.AllReduce(p[0], p[0], -1, coll.Float32, coll.Sum, 0),
		"type":      c.AllGather(p[0], p[0], 4, coll.DataType(99), 0),
		"op":        c.AllReduce(p[0], p[0], 4, coll.Float32, coll.RedOp(42), 0),
		"peer":      c.Send(p[0], 4, coll.Float32, 5, 0),
		"null recv": c.AllReduce(p[0], 0, 4, coll.Float32, coll.Sum, 0),
		"group end": c.GroupEnd(),
	} {
		if !errors.Is(err, engine.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := engine.InitAll(nil, nil); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Errorf("InitAll with no devices: %v", err)
	}
	if _, err := engine.InitAll(needDevs(t, 1), &engine.Config{Planner: cpuPlanner(t, 3, 0)}); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Errorf("a planner of 3 ranks for one device: %v", err)
	}
	if _, err := engine.InitAll(needDevs(t, 1), nil); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Errorf("no planner: %v", err)
	}
}

func TestMismatchAndTimeout(t *testing.T) {
	devs := needDevs(t, 2)
	comms, err := initAll(devs, &engine.Config{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p := allocEach(t, comms, 1024)
	// Counts that disagree fail on every rank, naming the mismatch.
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = c.AllReduce(p[r], p[r], 10+r, coll.Float32, coll.Sum, 0)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if !errors.Is(err, engine.ErrMismatch) {
			t.Errorf("rank %d: %v, want ErrMismatch", r, err)
		}
	}
	for _, c := range comms {
		if !errors.Is(c.AllReduce(p[0], p[0], 1, coll.Float32, coll.Sum, 0), engine.ErrMismatch) {
			t.Error("a failed communicator accepted a call")
		}
		_ = c.Destroy()
	}

	// One goroutine calling rank 0 without a group: the others never come; a timeout, not a hang.
	comms, err = initAll(devs, &engine.Config{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = comms[0].AllReduce(p[0], p[0], 4, coll.Float32, coll.Sum, 0)
	if !errors.Is(err, engine.ErrTimeout) {
		t.Errorf("lone rank: %v, want ErrTimeout", err)
	}
	for _, c := range comms {
		_ = c.Destroy()
	}
	if err := comms[1].AllReduce(p[1], p[1], 4, coll.Float32, coll.Sum, 0); !errors.Is(err, engine.ErrDestroyed) {
		t.Errorf("after Destroy: %v", err)
	}
}

// TestGroupOfCollectivesAndP2P runs, in one process-wide group, an all-reduce, an all-gather and
// a ring of sends plus sends to self on every rank: one launch, one schedule of three operations.
func TestGroupOfCollectivesAndP2P(t *testing.T) {
	for n := 1; n <= min(4, len(devs)); n++ {
		comms, err := initAll(needDevs(t, n), &engine.Config{SlotBytes: 512})
		if err != nil {
			t.Fatal(err)
		}
		const cnt = 777
		type bufs struct{ ar, ag, agOut, snd, rcv, self, selfOut cuda.DevPtr }
		b := make([]bufs, n)
		for r, c := range comms {
			vals := make([]byte, 4*cnt)
			for i := 0; i < cnt; i++ {
				coll.Int32.SetValue(vals, i, float64(r*1000+i))
			}
			up := func(data []byte) cuda.DevPtr {
				p, err := upload(c.Device(), data)
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			b[r] = bufs{ar: up(vals), ag: up(vals), agOut: up(make([]byte, 4*cnt*n)), snd: up(vals), rcv: up(make([]byte, 4*cnt)),
				self: up(vals), selfOut: up(make([]byte, 4*cnt))}
		}
		engine.GroupStart()
		for r, c := range comms {
			check := func(err error) {
				if err != nil {
					t.Fatal(err)
				}
			}
			check(c.AllReduce(b[r].ar, b[r].ar, cnt, coll.Int32, coll.Max, 0))
			check(c.AllGather(b[r].ag, b[r].agOut, cnt, coll.Int32, 0))
			check(c.Send(b[r].snd, cnt, coll.Int32, (r+1)%n, 0))
			check(c.Recv(b[r].rcv, cnt, coll.Int32, (r+n-1)%n, 0))
			check(c.Send(b[r].self, cnt, coll.Int32, r, 0))
			check(c.Recv(b[r].selfOut, cnt, coll.Int32, r, 0))
		}
		if err := engine.GroupEnd(); err != nil {
			t.Fatal(err)
		}
		for r, c := range comms {
			read := func(p cuda.DevPtr, elems int) []byte {
				out, err := download(c.Device(), p, 4*elems, 0)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			ar, ag, rcv, self := read(b[r].ar, cnt), read(b[r].agOut, cnt*n), read(b[r].rcv, cnt), read(b[r].selfOut, cnt)
			for i := 0; i < cnt; i++ {
				if g, w := coll.Int32.Value(ar, i), float64((n-1)*1000+i); g != w {
					t.Fatalf("%d ranks, rank %d all-reduce max [%d] = %v, want %v", n, r, i, g, w)
				}
				if g, w := coll.Int32.Value(rcv, i), float64(((r+n-1)%n)*1000+i); g != w {
					t.Fatalf("%d ranks, rank %d recv [%d] = %v, want %v", n, r, i, g, w)
				}
				if g, w := coll.Int32.Value(self, i), float64(r*1000+i); g != w {
					t.Fatalf("%d ranks, rank %d send to self [%d] = %v, want %v", n, r, i, g, w)
				}
			}
			for i := 0; i < cnt*n; i++ {
				if g, w := coll.Int32.Value(ag, i), float64((i/cnt)*1000+i%cnt); g != w {
					t.Fatalf("%d ranks, rank %d all-gather [%d] = %v, want %v", n, r, i, g, w)
				}
			}
		}
		for _, c := range comms {
			if err := c.Destroy(); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestEmptyCalls: count 0 (null buffers allowed) is a launch that does nothing, on every rank.
func TestEmptyCalls(t *testing.T) {
	comms, err := initAll(needDevs(t, 2), nil)
	if err != nil {
		t.Fatal(err)
	}
	engine.GroupStart()
	for _, c := range comms {
		if err := c.AllReduce(0, 0, 0, coll.Float32, coll.Sum, 0); err != nil {
			t.Fatal(err)
		}
		if err := c.Send(0, 0, coll.Int8, 1-c.Rank(), 0); err != nil {
			t.Fatal(err)
		}
		if err := c.Recv(0, 0, coll.Int8, 1-c.Rank(), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := engine.GroupEnd(); err != nil {
		t.Fatal(err)
	}
	for _, c := range comms {
		if err := c.Destroy(); err != nil {
			t.Error(err)
		}
	}
}

// TestBench runs the nccl-tests-style sweep with its element check on every collective.
func TestBench(t *testing.T) {
	comms, err := initAll(needDevs(t, min(3, len(devs))), &engine.Config{SlotBytes: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			_ = c.Destroy()
		}
	}()
	for _, op := range []coll.RedOp{coll.Avg, coll.PreMulSum, coll.Min} {
		res, err := engine.Bench(comms, perf.Options{Colls: perf.Collectives, Sizes: []int64{8, 20000}, DataType: coll.Bfloat16,
			Op: op, Root: 1, Iters: 2, Warmup: 1, Check: true})
		if err != nil {
			t.Fatal(err)
		}
		// 2 sizes × (5 collectives in and out of place + alltoall and sendrecv out of place only).
		if len(res.Rows) != 2*12 || res.Wrong != 0 || res.NRanks != len(comms) {
			t.Fatalf("%v: %d rows, %d wrong, %d ranks", op, len(res.Rows), res.Wrong, res.NRanks)
		}
		for _, r := range res.Rows {
			if r.Wrong != 0 || r.TimeUs <= 0 || (r.Bytes > 0 && r.AlgBW <= 0) {
				t.Errorf("%v: row %+v", op, r)
			}
		}
	}
}

// Several ranks on one GPU (Config.ShareGPUs): refused by default as NCCL refuses it, refused
// for one cuda.Device given twice (its one thread would enqueue for two ranks that wait for each
// other), and correct when each rank has its own handle on the GPU.
func TestShareGPUs(t *testing.T) {
	d0 := needDevs(t, 1)[0]
	ds := []*cuda.Device{d0}
	for i := 0; i < 2; i++ {
		d, err := cuda.Open(d0.Ordinal)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		ds = append(ds, d)
	}
	if _, err := engine.InitAll(ds, &engine.Config{Planner: cpuPlanner(t, 3, 0)}); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Errorf("one GPU for three ranks without ShareGPUs: %v, want ErrInvalidArgument", err)
	}
	if _, err := engine.InitAll([]*cuda.Device{d0, d0}, &engine.Config{ShareGPUs: true, Planner: cpuPlanner(t, 2, 0)}); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Errorf("one device handle for two ranks: %v, want ErrInvalidArgument", err)
	}
	comms, err := engine.InitAll(ds, &engine.Config{ShareGPUs: true, SlotBytes: 512, Planner: cpuPlanner(t, 3, 512), Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			if err := c.Destroy(); err != nil {
				t.Error(err)
			}
		}
	}()
	w := &engineWorld{comms: comms, premul: map[float64][]coll.RedOp{}}
	m := colltest.Matrix{
		TypeOps: map[coll.DataType][]coll.RedOp{coll.Float32: {coll.Sum, coll.PreMulSum}, coll.Int32: {coll.Max}},
		Counts:  []int{13, 1031},
	}
	n, wrong := 0, 0
	for _, c := range m.Cases(len(comms)) {
		if colltest.SkipInPlaceP2P(c) {
			continue
		}
		n++
		wrong += colltest.RunCase(t, w, c)
	}
	require.Zero(t, wrong, "3 ranks on GPU %d", d0.Ordinal)
	t.Logf("%d cases, %d wrong elements, 3 ranks on one GPU (emulated: %v)", n, wrong, emulated)
}

// A group of one-rank calls (nccl-tests wraps every call in ncclGroupStart/End) takes the one-rank
// path: each out-of-place call is a copy of its input on the caller's stream, per communicator
// group and in the process-wide group alike; a group with a point-to-point call keeps the schedule
// path and still gives the input back. (Calls of one group are unordered, as in NCCL: each reads
// only src.)
func TestOneRankGroup(t *testing.T) {
	comms, err := initAll(needDevs(t, 1), nil)
	require.NoError(t, err)
	c := comms[0]
	d := c.Device()
	s, err := newStream(d)
	require.NoError(t, err)
	in := make([]byte, 4096)
	for i := range in {
		in[i] = byte(i*7 + 3)
	}
	src, err := upload(d, in)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		run  func(a, b, o cuda.DevPtr) error
	}{
		{"comm group", func(a, b, o cuda.DevPtr) error {
			c.GroupStart()
			require.NoError(t, c.AllReduce(src, a, 1024, coll.Float32, coll.Sum, s))
			require.NoError(t, c.AllGather(src, b, 1024, coll.Float32, s))
			require.NoError(t, c.ReduceScatter(src, o, 1024, coll.Float32, coll.Max, s))
			return c.GroupEnd()
		}},
		{"process group", func(a, b, o cuda.DevPtr) error {
			engine.GroupStart()
			require.NoError(t, c.Broadcast(src, a, 4096, coll.Int8, 0, s))
			require.NoError(t, c.Reduce(src, b, 1024, coll.Float32, coll.Min, 0, s))
			require.NoError(t, c.AllReduce(src, o, 1024, coll.Int32, coll.Avg, s))
			return engine.GroupEnd()
		}},
		{"with send/recv", func(a, b, o cuda.DevPtr) error {
			c.GroupStart()
			require.NoError(t, c.AllReduce(src, a, 1024, coll.Float32, coll.Sum, s))
			require.NoError(t, c.Send(src, 4096, coll.Int8, 0, s))
			require.NoError(t, c.Recv(b, 4096, coll.Int8, 0, s))
			require.NoError(t, c.AllGather(src, o, 1024, coll.Float32, s))
			return c.GroupEnd()
		}},
	} {
		bufs := allocEach(t, []*engine.Comm{c, c, c}, 4096)
		require.NoError(t, tc.run(bufs[0], bufs[1], bufs[2]), tc.name)
		for i, p := range bufs {
			got, err := download(d, p, 4096, s)
			require.NoError(t, err)
			require.Equal(t, in, got, "%s: buffer %d", tc.name, i)
		}
	}
	require.NoError(t, c.Destroy())
}

// TestDestroyWaitsForPeersJoin: a rank may destroy its communicator as soon as its call returns
// (api_check.c does after its ncclGroupEnd), while a peer of the same process is still in the
// launch's join, reading the rank's events to make its stream wait for them. Destroy waits for
// the peer to leave the launch; it freed and emptied the events at once, and the peer's join
// panicked ("index out of range [1] with length 0" in peerEvent, recovered as the call's error),
// seen under load on libnccl's TestCAPI. The hook holds rank 1 in its join until rank 0's Destroy
// has begun.
func TestDestroyWaitsForPeersJoin(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(c *engine.Comm, p cuda.DevPtr) error
	}{
		{"all-reduce", func(c *engine.Comm, p cuda.DevPtr) error {
			return c.AllReduce(p, p, 1031, coll.Float32, coll.Sum, 0)
		}},
		{"grouped send and receive", func(c *engine.Comm, p cuda.DevPtr) error {
			peer := 1 - c.Rank()
			c.GroupStart()
			return errors.Join(c.Send(p, 1031, coll.Float32, peer, 0), c.Recv(p.Add(4*1031), 1031, coll.Float32, peer, 0), c.GroupEnd())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms, err := initAll(needDevs(t, 2), &engine.Config{Timeout: 20 * time.Second})
			require.NoError(t, err)
			p := allocEach(t, comms, 8*1031)
			destroying := make(chan struct{})
			engine.SetJoinHook(func(c *engine.Comm) {
				if c == comms[1] {
					<-destroying
					time.Sleep(100 * time.Millisecond) // for a Destroy that does not wait to free the events
				}
			})
			defer engine.SetJoinHook(nil)
			var errs [2]error
			var destroyErr error
			var wg sync.WaitGroup
			for r, c := range comms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[r] = tc.call(c, p[r])
					if r == 0 {
						close(destroying)
						destroyErr = c.Destroy()
					}
				}()
			}
			wg.Wait()
			require.NoError(t, errs[0], "rank 0")
			require.NoError(t, errs[1], "rank 1, in its join while rank 0 destroys")
			require.NoError(t, destroyErr)
			require.NoError(t, comms[1].Destroy())
		})
	}
}
