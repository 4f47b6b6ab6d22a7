package comm_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/coll/colltest"
	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/simnet"
)

// One plan on both executors: for each call, the plan the simulator replays and the plan the CPU
// engine runs are the same (the planner's, for the engine's machine, with what the engine lacks
// excluded on both), and the messages the simulator records are the messages the engine sends,
// one to one: the same (sender, receiver, channel, step of the sender's program, bytes). Bytes per
// connection and per step therefore agree too.
func TestOnePlanOnBothExecutors(t *testing.T) {
	const n = 4
	var s planner.Settings
	m, err := planner.CPUMachine(n, 1, s)
	require.NoError(t, err)
	p, err := planner.New(m)
	require.NoError(t, err)
	sim, err := simnet.NewMachine(p.System, 1, nil, excluding{p, comm.Exclude}, "")
	require.NoError(t, err)

	var mu sync.Mutex
	var sent []comm.Message
	cs, err := comm.InitAll(n, &comm.Config{Transport: "inproc", Planners: planner.CPU{Settings: s}, Observe: func(msg comm.Message) {
		mu.Lock()
		sent = append(sent, msg)
		mu.Unlock()
	}})
	require.NoError(t, err)
	defer func() {
		for _, c := range cs {
			c.Destroy()
		}
	}()
	// A message: its connection, its number on it, the sending step, its payload. Send/recv
	// schedules are the rank's own transfers in the engine and everyone's in the simulator, so a
	// rank's steps come in another order there: their messages match by connection and number.
	type msgKey struct {
		from, to, ch, seq, step int
		bytes                   int64
	}
	for _, tc := range []struct {
		f    coll.Func
		size int64
	}{
		{coll.AllReduce, 1 << 20}, {coll.AllReduce, 16 << 10}, {coll.AllReduce, 4 << 20},
		{coll.AllGather, 1 << 20}, {coll.ReduceScatter, 1 << 20}, {coll.Broadcast, 1 << 20},
		{coll.Reduce, 1 << 20}, {coll.AllToAll, 1 << 20}, {coll.AllToAll, 4 << 10}, {coll.SendRecv, 1 << 20},
	} {
		t.Run(fmt.Sprintf("%v/%d", tc.f, tc.size), func(t *testing.T) {
			simPlan, note, err := sim.Plan(tc.f, tc.size, coll.Float32, coll.Sum)
			require.NoError(t, err)
			require.Empty(t, note)
			call := coll.TestCall(tc.f, tc.size, coll.Float32, coll.Sum, n)
			ran, _, err := cs[0].Plan(call)
			require.NoError(t, err)
			for _, pl := range []*coll.Plan{&simPlan, &ran} {
				pl.Rings, pl.Trees = nil, nil // compared below through the messages
			}
			require.Equal(t, simPlan, ran, "the simulator and the engine run one plan")

			// One call's messages (a broadcast or reduce is otherwise timed in nccl-tests' loop,
			// whose records are those of one call too).
			row, res, err := sim.Run(tc.f, tc.size, coll.Float32, coll.Sum, simnet.RunOptions{Record: true, BackToBack: 1})
			require.NoError(t, err)
			require.Equal(t, "schedule", row.Mode)
			step := func(s int) int {
				if tc.f == coll.SendRecv {
					return -1
				}
				return s
			}
			want := map[msgKey]int{}
			for _, op := range res.Ops {
				want[msgKey{op.Rank, op.Peer, op.Channel, op.Seq, step(op.Step), op.Bytes}]++
			}

			mu.Lock()
			sent = sent[:0]
			mu.Unlock()
			cas := colltest.Case{Call: colltest.Call{Func: tc.f, Count: int(call.Count), DataType: coll.Float32, Op: coll.Sum}, NRanks: n, Seed: 7}
			require.NoError(t, colltest.EachRank(n, func(r int) error {
				b := cas.Buffers(r)
				if err := runRank(cs[r], cas.Call, b); err != nil {
					return err
				}
				if wrong, msgs := cas.Check(r, b); wrong > 0 {
					return fmt.Errorf("rank %d: %d wrong: %v", r, wrong, msgs)
				}
				return nil
			}))
			got := map[msgKey]int{}
			mu.Lock()
			for _, m := range sent {
				got[msgKey{m.From, m.To, m.Channel, m.Seq, step(m.Step), m.Bytes}]++
			}
			mu.Unlock()
			require.Equal(t, len(res.Ops), len(sent), "messages")
			require.Equal(t, want, got, "the simulator's ops are the engine's messages")
			// Bytes per connection, from either side.
			perConn := func(k map[msgKey]int) []string {
				tot := map[[3]int]int64{}
				for m, c := range k {
					tot[[3]int{m.from, m.to, m.ch}] += m.bytes * int64(c)
				}
				var out []string
				for c, b := range tot {
					out = append(out, fmt.Sprintf("%v:%d", c, b))
				}
				sort.Strings(out)
				return out
			}
			require.Equal(t, perConn(want), perConn(got))
		})
	}
}

// excluding is a planner whose calls exclude ex (what the engine lacks).
type excluding struct {
	coll.Planner
	ex coll.Exclude
}

func (e excluding) Plan(c coll.Call) (coll.Plan, error) {
	c.Exclude = e.ex
	return e.Planner.Plan(c)
}
