package comm_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/coll/colltest"
	"github.com/simccl/simccl/comm"
	"github.com/stretchr/testify/require"
)

// The collective conformance kit (coll/colltest) on the CPU engine, on every transport; the
// Tree and PAT schedules (comm_test.go) and the multi-process runs (multiproc_test.go) run it too.
// The default run keeps CI short; -long (or SIMCCL_LONG=1) runs the kit's exhaustive matrix.

// confTimeout bounds a wait without progress in the conformance runs. The suite checks results, the
// fault tests check how fast a dead peer is noticed; on a host where other work leaves a rank
// without a core for seconds (seen at load 20 on 2 cores), the default 10 s failed correct runs.
const confTimeout = time.Minute

// testSlot is small so that modest counts already span many chunks, slices and slot wrap-arounds.
const testSlot = 2048

// world is one communicator of n ranks on one transport, driven from one goroutine; it is the
// kit's World.
type world struct {
	cs []*comm.Comm
}

func (w *world) close() {
	for _, c := range w.cs {
		c.Destroy()
	}
}

func (w *world) sync(t *testing.T, what string) {
	t.Helper()
	for r, c := range w.cs {
		require.NoError(t, c.Synchronize(), "%s: rank %d", what, r)
	}
}

// Run makes the call on every rank, one goroutine each.
func (w *world) Run(c colltest.Call, bufs []colltest.Buffers) error {
	return colltest.EachRank(len(w.cs), func(r int) error { return runRank(w.cs[r], c, bufs[r]) })
}

// Close destroys the communicators.
func (w *world) Close() error {
	w.close()
	return nil
}

// runRank makes call c on one rank and waits for it (every rank of the communicator makes it).
func runRank(cm *comm.Comm, c colltest.Call, b colltest.Buffers) error {
	n, r := cm.Count(), cm.Rank()
	op := c.Op
	if op == coll.PreMulSum {
		op = cm.RedOpCreatePreMulSum(c.Scalar)
		defer cm.RedOpDestroy(op)
	}
	var err error
	switch c.Func {
	case coll.AllReduce:
		err = cm.AllReduce(b.Send, b.Recv, c.Count, c.DataType, op, nil)
	case coll.Reduce:
		err = cm.Reduce(b.Send, b.Recv, c.Count, c.DataType, op, c.Root, nil)
	case coll.ReduceScatter:
		err = cm.ReduceScatter(b.Send, b.Recv, c.Count, c.DataType, op, nil)
	case coll.Broadcast:
		err = cm.Broadcast(b.Send, b.Recv, c.Count, c.DataType, c.Root, nil)
	case coll.AllGather:
		err = cm.AllGather(b.Send, b.Recv, c.Count, c.DataType, nil)
	case coll.AllToAll:
		err = cm.AllToAll(b.Send, b.Recv, c.Count, c.DataType, nil)
	case coll.SendRecv:
		cm.GroupStart()
		err = errors.Join(cm.Send(b.Send, c.Count, c.DataType, (r+1)%n, nil), cm.Recv(b.Recv, c.Count, c.DataType, (r+n-1)%n, nil), cm.GroupEnd())
	default:
		err = fmt.Errorf("no call for %v", c.Func)
	}
	if err == nil {
		err = cm.Synchronize()
	}
	if err != nil {
		return fmt.Errorf("rank %d: %w", r, err)
	}
	return nil
}

// executor opens worlds on one transport with cfg (its Transport set).
func executor(transport string, cfg comm.Config) colltest.Executor {
	cfg.Transport = transport
	if cfg.SlotBytes == 0 {
		cfg.SlotBytes = testSlot
	}
	if cfg.Planners == nil {
		cfg.Planners = cpuPlanners("", 2)
	}
	withSlots(&cfg)
	if cfg.Timeout == 0 {
		cfg.Timeout = confTimeout
	}
	return colltest.ExecutorFunc(func(n int) (colltest.World, error) {
		cs, err := comm.InitAll(n, &cfg)
		if err != nil {
			return nil, fmt.Errorf("InitAll(%d) over %s: %w", n, transport, err)
		}
		return &world{cs: cs}, nil
	})
}

// shortTypes are the types of the TCP and shared-memory runs at large counts in the default run.
var shortTypes = []coll.DataType{coll.Int8, coll.Uint64, coll.Float16, coll.Float32, coll.Bfloat16, coll.Float8e4m3, coll.Float8e5m2}

func TestConformance(t *testing.T) {
	sumAvg := []coll.RedOp{coll.Sum, coll.Avg}
	matrix := map[string][]colltest.Matrix{
		"inproc": colltest.Default(),
		"tcp":    {{Ranks: []int{3}, Counts: []int{1237}, Types: shortTypes}, {Ranks: []int{2}, Counts: []int{5}, Ops: sumAvg}},
		"shm":    {{Ranks: []int{4}, Counts: []int{1237}, Types: shortTypes}, {Ranks: []int{2}, Counts: []int{5}, Ops: sumAvg}},
	}
	for _, tr := range []string{"inproc", "tcp", "shm"} {
		t.Run(tr, func(t *testing.T) {
			colltest.Run(t, executor(tr, comm.Config{Planners: cpuPlanners("", 0)}), colltest.Options{Matrix: matrix[tr]})
		})
	}
}
