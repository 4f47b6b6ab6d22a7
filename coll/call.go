package coll

import "fmt"

// Call is one call as an application makes it through NCCL's API: the collective, its count,
// type, reduction and root. What NCCL runs for it (algorithm, protocol, channels, chunking) is a
// Plan, which a Planner decides.
type Call struct {
	Func Func
	// Count is in elements as NCCL's API takes it: AllReduce/Broadcast/Reduce the buffer, AllGather
	// the per-rank send count, ReduceScatter the per-rank receive count, AllToAll the count per
	// peer, SendRecv the count each rank sends.
	Count    int64
	DataType DataType
	Op       RedOp
	Root     int // Broadcast, Reduce
	// Peer (SendRecv): rank r sends to r+Peer and receives from r−Peer (mod n); 0 means 1, the
	// nccl-tests sendrecv pattern.
	Peer int
	// Transfers (SendRecv), when set, are a group's sends and receives, counted in DataType
	// elements (Count and Peer are then unused): the planner plans each as NCCL plans a transfer
	// of its size to its peer, and the plan carries them (Plan.Transfers). An engine that knows
	// only its own rank's sends and receives lists those; its peers list theirs, and both ends of
	// a transfer plan it alike.
	Transfers []Transfer
	// Exclude names algorithms and protocols the executor cannot run. The planner then decides
	// what NCCL decides with them disabled (as NCCL_ALGO=^… and NCCL_PROTO=^… would), and an
	// executor that asks for this reports both decisions: it never substitutes silently.
	Exclude Exclude
}

// Exclude is a set of algorithms and protocols taken out of a decision.
type Exclude struct {
	Algos  [NumAlgos]bool
	Protos [NumProtos]bool
}

// Empty reports whether nothing is excluded.
func (e Exclude) Empty() bool { return e == Exclude{} }

// String lists the excluded names ("NVLS,NVLSTree;LL,LL128"), or "" when empty.
func (e Exclude) String() string {
	s := ""
	sep := ""
	for a := Algo(0); a < NumAlgos; a++ {
		if e.Algos[a] {
			s += sep + a.String()
			sep = ","
		}
	}
	psep := ""
	if s != "" {
		psep = ";"
	}
	for p := Proto(0); p < NumProtos; p++ {
		if e.Protos[p] {
			s += psep + p.String()
			psep = ","
		}
	}
	return s
}

// Planner decides the plan of a call. Package planner implements it with NCCL's rules for one
// machine; every executor (the simulator, the CPU engine, the GPU engine) takes its plans from
// one, so that a simulated call and a real one run the same schedule.
type Planner interface {
	// NRanks is the size of the communicator the planner plans for.
	NRanks() int
	// Plan returns what NCCL runs for c.
	Plan(c Call) (Plan, error)
}

// CallOf is the Call a plan answers (the inverse of planning, used to check a plan's arguments).
func CallOf(p *Plan) Call {
	return Call{Func: p.Func, Count: p.Count, DataType: p.DataType, Op: p.Op, Root: p.Root, Peer: p.Peer, Transfers: p.Transfers}
}

// Check returns an error for arguments no plan can serve on n ranks.
func (c Call) Check(n int) error {
	switch {
	case c.Func < 0 || c.Func > AllToAll:
		return fmt.Errorf("coll: unknown collective %v", c.Func)
	case c.Count < 0:
		return fmt.Errorf("coll: %v of %d elements", c.Func, c.Count)
	case c.DataType.Size() == 0:
		return fmt.Errorf("coll: unknown data type %v", c.DataType)
	case len(c.Transfers) > 0 && c.Func != SendRecv:
		return fmt.Errorf("coll: %v with transfers (only SendRecv has them)", c.Func)
	case (c.Func == Broadcast || c.Func == Reduce) && (c.Root < 0 || c.Root >= n):
		return fmt.Errorf("coll: %v root %d out of range 0..%d", c.Func, c.Root, n-1)
	}
	for i, t := range c.Transfers {
		if t.From < 0 || t.From >= n || t.To < 0 || t.To >= n || t.Count < 0 {
			return fmt.Errorf("coll: transfer %d: %d→%d of %d elements over %d ranks", i, t.From, t.To, t.Count, n)
		}
	}
	return nil
}
