package realreplay

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/intercept"
)

// RankTrace is what one process of the traced program called: one trace file of the shim (or one
// NCCL log), by name for errors.
type RankTrace = intercept.TraceFile

// ReadRankTrace reads one trace file, or one NCCL INFO log with COLL lines (ParseLog) when the
// file does not start with a JSON object (intercept.ReadTraceOrLog, with internal/input's bounds).
func ReadRankTrace(path string) (RankTrace, error) {
	return intercept.ReadTraceOrLog(path)
}

// Comm is one communicator of a real replay: its trace id, its size, and which rank trace
// (index into Program.Actors) holds each of its ranks.
type Comm struct {
	ID      string `json:"comm"`
	Size    int    `json:"nranks"`
	Members []int  `json:"-"`
	Calls   int    `json:"calls"` // data calls of all its ranks
}

// Actor is one rank trace turned into launches: what that process runs, in its order.
type Actor struct {
	Name     string
	Launches []Launch
}

// Launch is one unit a process issues: a single call, or the calls of one outermost group
// (they may span communicators). Key is equal on the launches of all ranks that belong together
// (see keyLaunches).
type Launch struct {
	Key   string
	Calls []Call
}

// Call is one data call of a launch with what executing and checking it needs.
type Call struct {
	Rec  intercept.Record
	File string // the rank trace it comes from (for errors)
	dt   coll.DataType
	op   coll.RedOp
	seed int // input pattern number, equal on every rank the call involves
	n    int // communicator size
}

// Program is a set of rank traces checked for a real replay (NewProgram).
type Program struct {
	Actors []Actor
	Comms  []Comm // sorted by id; only communicators with data calls
	Notes  []string
}

// where names a record for errors: "file: seq 12 (AllReduce 1024 float sum, comm c rank 0 of 2)".
func where(file string, r *intercept.Record) string { return intercept.Where(file, r) }

// NewProgram checks a set of rank traces for a real replay and turns each into its launches. It
// fails, naming the file and record, on: an unknown op; a communicator recorded with two sizes; a
// rank of a communicator held by no trace (a missing rank file) or by two; a trace holding two
// ranks of one communicator (ncclCommInitAll in one process: not replayable rank by rank); the
// ranks of a communicator disagreeing on its k-th collective (op, count, type, reduction, root)
// or on their number; a Send without its matching Recv (same count and type, in order per pair of
// ranks), or the reverse.
//
// Launches: consecutive calls of a trace that share an outermost group number (gid) form one
// launch, issued between GroupStart and GroupEnd on every communicator they touch. NCCL logs print
// no group marks; consecutive Send/Recv calls of one communicator from a log are put in one group
// (programs must group the send/recv pairs that would otherwise block, e.g.
// torch.distributed.batch_isend_irecv).
func NewProgram(traces []RankTrace) (*Program, error) {
	if len(traces) == 0 {
		return nil, fmt.Errorf("%w: no rank trace", intercept.ErrTrace)
	}
	// What both replays refuse (intercept.CheckTraces); what follows only this one does.
	if err := intercept.CheckTraces(traces, intercept.CheckOptions{}); err != nil {
		return nil, err
	}
	traces = append([]RankTrace(nil), traces...) // records are sorted below; the caller's stay as they are
	type ck struct {
		comm string
		rank int
	}
	sizeOf := map[string]int{}
	holder := map[ck]int{} // (comm, rank) → actor
	rankIn := map[[2]string]int{}
	dataCalls := map[string]int{}
	prog := &Program{}
	premul := false
	for a, t := range traces {
		recs := append([]intercept.Record(nil), t.Records...)
		sort.SliceStable(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
		for _, r := range recs {
			sizeOf[r.Comm] = r.NRanks
			if prev, ok := rankIn[[2]string{t.Name, r.Comm}]; ok && prev != r.Rank {
				return nil, fmt.Errorf("%w: %s: the trace holds ranks %d and %d of communicator %s (several ranks per process, as ncclCommInitAll makes, cannot be replayed rank by rank)", intercept.ErrTrace, where(t.Name, &r), prev, r.Rank, r.Comm)
			}
			rankIn[[2]string{t.Name, r.Comm}] = r.Rank
			holder[ck{r.Comm, r.Rank}] = a
			if intercept.IsCollective(r.Op) {
				dataCalls[r.Comm]++
				if r.RedOp == "premulsum" {
					premul = true
				}
			}
		}
		prog.Actors = append(prog.Actors, Actor{Name: t.Name})
		traces[a].Records = recs
	}
	var ids []string
	for id := range dataCalls {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		c := Comm{ID: id, Size: sizeOf[id], Calls: dataCalls[id]}
		for r := 0; r < c.Size; r++ {
			c.Members = append(c.Members, holder[ck{id, r}]) // CheckTraces: every rank is held
		}
		prog.Comms = append(prog.Comms, c)
	}
	if len(prog.Comms) == 0 {
		return nil, fmt.Errorf("%w: the traces have no collective or point-to-point call", intercept.ErrTrace)
	}
	if premul {
		prog.Notes = append(prog.Notes, "premulsum reductions (scalar not in the trace) replayed as sum")
	}
	if err := prog.split(traces); err != nil {
		return nil, err
	}
	return prog, nil
}

// split gives every call its input pattern (the same number on every rank it involves) and
// splits each trace into launches. The ranks' agreement was checked by intercept.CheckTraces.
func (p *Program) split(traces []RankTrace) error {
	size := map[string]int{}
	for _, c := range p.Comms {
		size[c.ID] = c.Size
	}
	type ck struct {
		comm string
		rank int
	}
	type pk struct {
		comm     string
		src, dst int
	}
	colls := map[ck]int{}
	sends := map[pk]int{}
	recvs := map[pk]int{}
	calls := make([][]*Call, len(traces))
	for a, t := range traces {
		for i := range t.Records {
			r := t.Records[i]
			if !intercept.IsCollective(r.Op) {
				continue
			}
			dt, err := coll.ParseDataType(r.Dtype)
			if err != nil {
				return fmt.Errorf("%w: %s: %v", intercept.ErrTrace, where(t.Name, &r), err)
			}
			op := coll.Sum
			if r.RedOp != "" {
				if op, err = coll.ParseRedOp(r.RedOp); err != nil {
					return fmt.Errorf("%w: %s: %v", intercept.ErrTrace, where(t.Name, &r), err)
				}
			}
			if op == coll.PreMulSum {
				op = coll.Sum
			}
			c := &Call{Rec: r, File: t.Name, dt: dt, op: op, n: size[r.Comm]}
			if b := float64(r.Count) * float64(dt.Size()) * float64(c.n); b > 1<<50 {
				return fmt.Errorf("%w: %s: buffers of %.3g bytes cannot be allocated", intercept.ErrTrace, where(t.Name, &r), b)
			}
			calls[a] = append(calls[a], c)
			switch r.Op {
			case intercept.OpSend:
				k := pk{r.Comm, r.Rank, r.Root}
				c.seed = sends[k]
				sends[k]++
			case intercept.OpRecv:
				k := pk{r.Comm, r.Root, r.Rank}
				c.seed = recvs[k]
				recvs[k]++
			default:
				k := ck{r.Comm, r.Rank}
				c.seed = colls[k]
				colls[k]++
			}
		}
	}
	for a, cs := range calls {
		for i := 0; i < len(cs); i++ {
			c := cs[i]
			l := Launch{Calls: []Call{*c}}
			for i+1 < len(cs) && sameLaunch(c, cs[i+1]) {
				i++
				l.Calls = append(l.Calls, *cs[i])
			}
			p.Actors[a].Launches = append(p.Actors[a].Launches, l)
		}
	}
	p.keyLaunches()
	return nil
}

// callID names a call the same way on every rank it involves: "<comm>#c<k>" for the k-th
// collective of a communicator, "<comm>#p<src>><dst>.<j>" for the j-th message between two of its
// ranks (on the Send and on the Recv).
func (c *Call) callID() string {
	r := &c.Rec
	switch r.Op {
	case intercept.OpSend:
		return fmt.Sprintf("%s#p%d>%d.%d", r.Comm, r.Rank, r.Root, c.seed)
	case intercept.OpRecv:
		return fmt.Sprintf("%s#p%d>%d.%d", r.Comm, r.Root, r.Rank, c.seed)
	}
	return fmt.Sprintf("%s#c%d", r.Comm, c.seed)
}

// keyLaunches gives launches that belong together the same key: the launches of different ranks
// that share a call (a collective, or the two ends of a message) are one launch of the program,
// named after the first call of its first rank's launch. Ranks may group differently (torch's
// send on one rank and recv on the other, a batched exchange, a group spanning communicators):
// the key follows the calls, not the positions.
func (p *Program) keyLaunches() {
	type node struct{ a, l int }
	parent := map[node]node{}
	var find func(x node) node
	find = func(x node) node {
		if q, ok := parent[x]; ok && q != x {
			r := find(q)
			parent[x] = r
			return r
		}
		return x
	}
	less := func(x, y node) bool { return x.a < y.a || (x.a == y.a && x.l < y.l) }
	union := func(x, y node) {
		rx, ry := find(x), find(y)
		if rx == ry {
			return
		}
		if less(ry, rx) {
			rx, ry = ry, rx
		}
		parent[ry] = rx // the root is the component's first launch
	}
	owner := map[string]node{}
	for a := range p.Actors {
		for l := range p.Actors[a].Launches {
			me := node{a, l}
			parent[me] = me
			for j := range p.Actors[a].Launches[l].Calls {
				id := p.Actors[a].Launches[l].Calls[j].callID()
				if o, ok := owner[id]; ok {
					union(o, me)
				} else {
					owner[id] = me
				}
			}
		}
	}
	for a := range p.Actors {
		for l := range p.Actors[a].Launches {
			r := find(node{a, l})
			p.Actors[a].Launches[l].Key = p.Actors[r.a].Launches[r.l].Calls[0].callID()
		}
	}
}

// sameLaunch reports whether next goes in the launch of first: the same outermost group of one
// process, or (NCCL logs, which print no groups) consecutive Send/Recv calls of one communicator.
func sameLaunch(first, next *Call) bool {
	a, b := &first.Rec, &next.Rec
	if a.GID != 0 {
		return b.GID == a.GID && b.PID == a.PID
	}
	p2p := func(r *intercept.Record) bool { return r.Op == intercept.OpSend || r.Op == intercept.OpRecv }
	return a.Mode == "log" && b.Mode == "log" && b.GID == 0 && p2p(a) && p2p(b) && a.Comm == b.Comm && a.Stream == b.Stream
}

// sizes are the call's send and receive buffer sizes in bytes on its rank.
func (c *Call) sizes() (send, recv int64) {
	b := c.Rec.Count * int64(c.dt.Size())
	n := int64(c.n)
	switch c.Rec.Op {
	case intercept.OpAllGather:
		return b, b * n
	case intercept.OpReduceScatter:
		return b * n, b
	case intercept.OpAllToAll:
		return b * n, b * n
	case intercept.OpSend:
		return b, 0
	case intercept.OpRecv:
		return 0, b
	}
	return b, b
}

// bytes is the call's nccl-tests size (the larger of its buffers).
func (c *Call) bytes() int64 {
	s, r := c.sizes()
	return max(s, r)
}

// Footprint is the buffer memory actor a needs: that of its largest launch (send and receive
// buffers of all its calls), and the launch's first call.
func (p *Program) Footprint(a int) (int64, string) {
	var big int64
	what := ""
	for _, l := range p.Actors[a].Launches {
		var b int64
		for j := range l.Calls {
			s, r := l.Calls[j].sizes()
			b += s + r
		}
		if b > big {
			big, what = b, where(l.Calls[0].File, &l.Calls[0].Rec)
		}
	}
	return big, what
}

// inputValue is element i of rank r's input for pattern seed: small integers 0..7, exact in every
// type and in sums of a few ranks; period 8 in i, different on neighbouring ranks and calls.
func inputValue(seed, r int, i int64) float64 {
	return float64((int64(seed)*7 + int64(r)*3 + i*5) & 7)
}

// LaunchTime is one launch as one rank ran it (Unix ns: one clock for the processes of a host).
type LaunchTime struct {
	Key     string `json:"key"`
	Ops     string `json:"ops"`
	Calls   int    `json:"calls"`
	Bytes   int64  `json:"bytes"`
	StartNs int64  `json:"start_ns"`
	EndNs   int64  `json:"end_ns"`
}

// ActorResult is what one rank trace's replay produced.
type ActorResult struct {
	Actor    int          `json:"actor"`
	Launches []LaunchTime `json:"launches"`
	Checked  int64        `json:"checked"` // elements compared
	Wrong    int64        `json:"wrong"`
	FirstBad string       `json:"first_bad,omitempty"`
}

// RunActor replays actor a's launches on its communicators (comms: trace id → this process's
// member), one launch at a time: buffers of the recorded sizes and types filled with a pattern
// every rank can recompute, the calls issued (in a group on each communicator they touch when
// the launch has several), every touched communicator synchronised, and with check every element
// the launch wrote compared with its definition (computed in float64 and rounded to the type).
func (p *Program) RunActor(a int, comms map[string]*comm.Comm, check bool) (*ActorResult, error) {
	act := &p.Actors[a]
	res := &ActorResult{Actor: a}
	var pool [][]byte
	poolType := []coll.DataType{}
	slot := func(k int, n int64) []byte {
		for len(pool) <= k {
			pool = append(pool, nil)
			poolType = append(poolType, -1)
		}
		if int64(cap(pool[k])) < n {
			pool[k] = make([]byte, n)
			poolType[k] = -1
		}
		return pool[k][:n]
	}
	for _, l := range act.Launches {
		type bufs struct{ send, recv []byte }
		bs := make([]bufs, len(l.Calls))
		var involved []*comm.Comm
		seen := map[*comm.Comm]bool{}
		lt := LaunchTime{Key: l.Key, Calls: len(l.Calls)}
		var ops []string
		for j := range l.Calls {
			c := &l.Calls[j]
			cm := comms[c.Rec.Comm]
			if cm == nil {
				return nil, fmt.Errorf("%w: %s: this process has no member of communicator %s", intercept.ErrReplay, where(c.File, &c.Rec), c.Rec.Comm)
			}
			if !seen[cm] {
				seen[cm] = true
				involved = append(involved, cm)
			}
			s, r := c.sizes()
			bs[j] = bufs{slot(2*j, s), slot(2*j+1, r)}
			// Send buffers: the call's pattern when checking; otherwise filled once per type (the
			// values then do not matter, but must be ordinary numbers: no NaN or denormal slows
			// the reductions down).
			if check || poolType[2*j] != c.dt {
				seed := c.seed
				if !check {
					seed = 0
				}
				tile(c.dt, bs[j].send, func(i int64) float64 { return inputValue(seed, c.Rec.Rank, i) })
				poolType[2*j] = c.dt
			}
			if check && len(bs[j].recv) > 0 {
				poison(bs[j].recv)
			}
			lt.Bytes += c.bytes()
			if !containsStr(ops, c.Rec.Op) {
				ops = append(ops, c.Rec.Op)
			}
		}
		lt.Ops = strings.Join(ops, "+")
		grouped := len(l.Calls) > 1
		start := time.Now()
		if grouped {
			for _, cm := range involved {
				cm.GroupStart()
			}
		}
		var err error
		var bad *Call
		for j := range l.Calls {
			c := &l.Calls[j]
			if err = issue(comms[c.Rec.Comm], c, bs[j].send, bs[j].recv); err != nil {
				bad = c
				break
			}
		}
		if grouped {
			for _, cm := range involved {
				if e := cm.GroupEnd(); err == nil {
					err = e
				}
			}
		}
		for _, cm := range involved {
			if e := cm.Synchronize(); err == nil {
				err = e
			}
		}
		end := time.Now()
		if err != nil {
			if bad == nil {
				bad = &l.Calls[0]
			}
			what := where(bad.File, &bad.Rec)
			if len(l.Calls) > 1 {
				what = fmt.Sprintf("the launch of %d calls starting at %s", len(l.Calls), what)
			}
			return res, fmt.Errorf("%w: %s: %v", intercept.ErrReplay, what, err)
		}
		lt.StartNs, lt.EndNs = start.UnixNano(), end.UnixNano()
		res.Launches = append(res.Launches, lt)
		if check {
			for j := range l.Calls {
				c := &l.Calls[j]
				n, w := checkCall(c, bs[j].recv)
				res.Checked += n
				if w > 0 && res.FirstBad == "" {
					res.FirstBad = where(c.File, &c.Rec)
				}
				res.Wrong += w
			}
		}
	}
	return res, nil
}

func containsStr(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// issue queues one call on its communicator.
func issue(cm *comm.Comm, c *Call, send, recv []byte) error {
	r, cnt := &c.Rec, int(c.Rec.Count)
	switch r.Op {
	case intercept.OpAllReduce:
		return cm.AllReduce(send, recv, cnt, c.dt, c.op, nil)
	case intercept.OpBroadcast:
		return cm.Broadcast(send, recv, cnt, c.dt, r.Root, nil)
	case intercept.OpReduce:
		return cm.Reduce(send, recv, cnt, c.dt, c.op, r.Root, nil)
	case intercept.OpAllGather:
		return cm.AllGather(send, recv, cnt, c.dt, nil)
	case intercept.OpReduceScatter:
		return cm.ReduceScatter(send, recv, cnt, c.dt, c.op, nil)
	case intercept.OpAllToAll:
		return cm.AllToAll(send, recv, cnt, c.dt, nil)
	case intercept.OpSend:
		return cm.Send(send, cnt, c.dt, r.Root, nil)
	case intercept.OpRecv:
		return cm.Recv(recv, cnt, c.dt, r.Root, nil)
	}
	return fmt.Errorf("op %s cannot be executed", r.Op)
}

// period is the period of inputValue in its element index.
const period = 8

// tile writes gen(i) (rounded to dt) into every element of b; gen must have period 8 in i.
func tile(dt coll.DataType, b []byte, gen func(i int64) float64) {
	elt := dt.Size()
	n := len(b) / elt
	m := min(n, period)
	for i := 0; i < m; i++ {
		comm.SetElement(dt, b, i, gen(int64(i)))
	}
	for p := m * elt; p < len(b); p *= 2 {
		copy(b[p:], b[:p])
	}
}

// poison fills a receive buffer with 0xA5 bytes, so that an element the call should have written
// and did not is seen.
func poison(b []byte) {
	if len(b) == 0 {
		return
	}
	b[0] = 0xA5
	for p := 1; p < len(b); p *= 2 {
		copy(b[p:], b[:p])
	}
}

// checkCall compares what the call left in its receive buffer with its definition (coll.ReduceRef
// for reductions); it returns the elements compared and the wrong ones. Blocks of the buffer
// whose expected values repeat with period 8 are compared as bytes first, element by element
// only where the bytes differ.
func checkCall(c *Call, recv []byte) (checked, wrong int64) {
	r, n, cnt := c.Rec.Rank, c.n, c.Rec.Count
	dt, seed := c.dt, c.seed
	bitsOf := func(q int, i int64) uint64 { return dt.FromFloat(inputValue(seed, q, i)) }
	exact := func(q int, off int64) func(i int64) coll.Expect {
		return func(i int64) coll.Expect { return coll.Expect{Bits: bitsOf(q, off+i)} }
	}
	reduced := func(off int64) func(i int64) coll.Expect {
		in := make([]uint64, n)
		return func(i int64) coll.Expect {
			for q := range in {
				in[q] = bitsOf(q, off+i)
			}
			return coll.ReduceRef(dt, c.op, 0, in)
		}
	}
	var blocks []func(i int64) coll.Expect // one per cnt-element block of recv
	switch c.Rec.Op {
	case intercept.OpAllReduce, intercept.OpReduce:
		if c.Rec.Op == intercept.OpReduce && r != c.Rec.Root {
			return 0, 0
		}
		blocks = append(blocks, reduced(0))
	case intercept.OpReduceScatter:
		blocks = append(blocks, reduced(int64(r)*cnt))
	case intercept.OpBroadcast:
		blocks = append(blocks, exact(c.Rec.Root, 0))
	case intercept.OpAllGather:
		for q := 0; q < n; q++ {
			blocks = append(blocks, exact(q, 0))
		}
	case intercept.OpAllToAll:
		for q := 0; q < n; q++ {
			blocks = append(blocks, exact(q, int64(r)*cnt))
		}
	case intercept.OpRecv:
		blocks = append(blocks, exact(c.Rec.Root, 0))
	default:
		return 0, 0
	}
	elt := int64(dt.Size())
	for q, want := range blocks {
		b := recv[int64(q)*cnt*elt : int64(q+1)*cnt*elt]
		wrong += checkBlock(dt, b, want)
		checked += cnt
	}
	return checked, wrong
}

// checkBlock compares b element by element with want(i); want has period 8.
func checkBlock(dt coll.DataType, b []byte, want func(i int64) coll.Expect) int64 {
	elt := dt.Size()
	n := int64(len(b) / elt)
	if n == 0 {
		return 0
	}
	const chunkElems = period * 2048
	ref := make([]byte, min(n, chunkElems)*int64(elt))
	tile(dt, ref, func(i int64) float64 {
		e := want(i)
		if !e.Approx {
			e.Value = dt.Float(e.Bits)
		}
		return e.Value
	})
	var wrong int64
	for off := int64(0); off < n; off += chunkElems {
		m := min(chunkElems, n-off)
		got := b[off*int64(elt) : (off+m)*int64(elt)]
		if bytes.Equal(got, ref[:len(got)]) {
			continue
		}
		for i := int64(0); i < m; i++ {
			if !want(off+i).Holds(dt, dt.Bits(got, int(i))) {
				wrong++
			}
		}
	}
	return wrong
}

// LaunchResult is one launch of the replay, all ranks together: from the last rank's issue
// to the last rank's completion (the time every rank was in it, without the skew of a rank that
// arrived early).
type LaunchResult struct {
	Key    string  `json:"key"`
	Ops    string  `json:"ops"`
	Calls  int     `json:"calls"` // on all ranks
	Ranks  int     `json:"ranks"` // ranks that ran it
	Bytes  int64   `json:"bytes"` // largest per-rank sum of the calls' nccl-tests sizes
	TimeUs float64 `json:"time_us"`
	Start  int64   `json:"-"`
}

// OpTotal sums the launches of one kind.
type OpTotal struct {
	Ops      string  `json:"ops"`
	Launches int     `json:"launches"`
	Bytes    int64   `json:"bytes"`
	TimeUs   float64 `json:"time_us"`
}

// Report is a real replay's outcome.
type Report struct {
	Transport string         `json:"transport"`
	Procs     bool           `json:"procs"`
	Ranks     int            `json:"ranks"` // rank traces (processes)
	Comms     []Comm         `json:"comms"`
	Launches  []LaunchResult `json:"launches"`
	ByOp      []OpTotal      `json:"by_op"`
	TotalUs   float64        `json:"total_us"` // sum of the launch times
	WallUs    float64        `json:"wall_us"`  // first issue to last completion, buffers and checks included
	Check     bool           `json:"check"`    // results were checked (Checked, Wrong)
	Checked   int64          `json:"checked"`
	Wrong     int64          `json:"wrong"`
	FirstBad  string         `json:"first_bad,omitempty"`
	Notes     []string       `json:"notes,omitempty"`
}

// Merge puts the ranks' results together launch by launch (matched by key).
func (p *Program) Merge(results []*ActorResult) *Report {
	rep := &Report{Ranks: len(p.Actors), Comms: p.Comms, Notes: p.Notes}
	byKey := map[string]*LaunchResult{}
	ends := map[string]int64{}
	actors := map[string]map[int]bool{}
	var first, last int64
	for _, res := range results {
		if res == nil {
			continue
		}
		rep.Checked += res.Checked
		rep.Wrong += res.Wrong
		if rep.FirstBad == "" {
			rep.FirstBad = res.FirstBad
		}
		for _, l := range res.Launches {
			if first == 0 || l.StartNs < first {
				first = l.StartNs
			}
			last = max(last, l.EndNs)
			m := byKey[l.Key]
			if m == nil {
				m = &LaunchResult{Key: l.Key}
				byKey[l.Key] = m
			}
			if actors[l.Key] == nil {
				actors[l.Key] = map[int]bool{}
			}
			if !actors[l.Key][res.Actor] {
				actors[l.Key][res.Actor] = true
				m.Ranks++
			}
			m.Calls += l.Calls
			m.Bytes = max(m.Bytes, l.Bytes)
			m.Ops = joinOps(m.Ops, l.Ops)
			m.Start = max(m.Start, l.StartNs)
			ends[l.Key] = max(ends[l.Key], l.EndNs)
		}
	}
	byOp := map[string]*OpTotal{}
	for k, m := range byKey {
		m.TimeUs = max(0, float64(ends[k]-m.Start)/1e3)
		rep.Launches = append(rep.Launches, *m)
		rep.TotalUs += m.TimeUs
		t := byOp[m.Ops]
		if t == nil {
			t = &OpTotal{Ops: m.Ops}
			byOp[m.Ops] = t
		}
		t.Launches++
		t.Bytes += m.Bytes
		t.TimeUs += m.TimeUs
	}
	sort.Slice(rep.Launches, func(i, j int) bool {
		if rep.Launches[i].Start != rep.Launches[j].Start {
			return rep.Launches[i].Start < rep.Launches[j].Start
		}
		return rep.Launches[i].Key < rep.Launches[j].Key
	})
	for _, t := range byOp {
		rep.ByOp = append(rep.ByOp, *t)
	}
	sort.Slice(rep.ByOp, func(i, j int) bool {
		if rep.ByOp[i].TimeUs != rep.ByOp[j].TimeUs {
			return rep.ByOp[i].TimeUs > rep.ByOp[j].TimeUs
		}
		return rep.ByOp[i].Ops < rep.ByOp[j].Ops
	})
	if last > first {
		rep.WallUs = float64(last-first) / 1e3
	}
	return rep
}

// opOrder is the order of ops in a merged launch's name.
var opOrder = []string{intercept.OpAllReduce, intercept.OpBroadcast, intercept.OpReduce, intercept.OpAllGather, intercept.OpReduceScatter, intercept.OpAllToAll, intercept.OpSend, intercept.OpRecv}

// joinOps merges two "+"-joined op lists into one, in opOrder.
func joinOps(a, b string) string {
	have := map[string]bool{}
	for _, op := range strings.Split(a+"+"+b, "+") {
		have[op] = true
	}
	var out []string
	for _, op := range opOrder {
		if have[op] {
			out = append(out, op)
		}
	}
	return strings.Join(out, "+")
}

// Slowest returns the n slowest launches, slowest first.
func (r *Report) Slowest(n int) []LaunchResult {
	s := append([]LaunchResult(nil), r.Launches...)
	sort.SliceStable(s, func(i, j int) bool { return s[i].TimeUs > s[j].TimeUs })
	if len(s) > n {
		s = s[:n]
	}
	return s
}

// RunInProcess replays the program with every rank trace as a goroutine of this process:
// every communicator is made with comm.InitAll (its size from the trace, cfg's transport) and its
// ranks handed to the goroutines of the traces that hold them. A failing rank aborts every
// communicator, so the others stop at once instead of waiting for cfg's timeout.
func RunInProcess(p *Program, cfg *comm.Config, check bool) (*Report, error) {
	comms := make([]map[string]*comm.Comm, len(p.Actors))
	for a := range comms {
		comms[a] = map[string]*comm.Comm{}
	}
	var all []*comm.Comm
	defer func() {
		for _, c := range all {
			c.Destroy()
		}
	}()
	for _, c := range p.Comms {
		cs, err := comm.InitAll(c.Size, cfg)
		if err != nil {
			return nil, fmt.Errorf("%w: communicator %s (%d ranks): %v", intercept.ErrReplay, c.ID, c.Size, err)
		}
		all = append(all, cs...)
		for r, a := range c.Members {
			comms[a][c.ID] = cs[r]
		}
	}
	results := make([]*ActorResult, len(p.Actors))
	errs := make([]error, len(p.Actors))
	failedAt := make([]time.Time, len(p.Actors))
	var once sync.Once
	var wg sync.WaitGroup
	for a := range p.Actors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[a], errs[a] = p.RunActor(a, comms[a], check)
			if errs[a] != nil {
				failedAt[a] = time.Now()
				once.Do(func() {
					for _, c := range all {
						c.Abort()
					}
				})
			}
		}()
	}
	wg.Wait()
	// The first failure is the cause; the others followed from the abort.
	first := -1
	for a, err := range errs {
		if err != nil && (first < 0 || failedAt[a].Before(failedAt[first])) {
			first = a
		}
	}
	if first >= 0 {
		return nil, errs[first]
	}
	rep := p.Merge(results)
	rep.Check = check
	if cfg != nil {
		rep.Transport = cfg.Transport
	}
	return rep, nil
}

// ScaleRankTraces makes the rank traces of a data-parallel run of n ranks from those of a smaller
// one, the way simccl replay scales (same per-rank counts): the traces are copied n/W times (W: the
// largest communicator size, the recorded world); copy b's ranks of a W-rank communicator become
// ranks b·W+r of one n-rank communicator (its collectives keep their per-rank counts: AllReduce,
// Broadcast and Reduce their count, AllGather its send count, ReduceScatter its receive count),
// and its send/recv stay inside the copy (peer b·W+p); smaller communicators (tensor- or
// pipeline-parallel groups) are copied, one per copy ("<id>@b"). n must be a multiple of W.
func ScaleRankTraces(traces []RankTrace, n int) ([]RankTrace, error) {
	w := 0
	for _, t := range traces {
		for _, r := range t.Records {
			w = max(w, r.NRanks)
		}
	}
	if w == 0 {
		return nil, fmt.Errorf("%w: no records to scale", intercept.ErrTrace)
	}
	if n < w || n%w != 0 || n > 1<<16 {
		return nil, fmt.Errorf("%w: cannot scale a run whose largest communicator has %d ranks to %d ranks (want a multiple of %d)", intercept.ErrReplay, w, n, w)
	}
	var out []RankTrace
	for b := 0; b < n/w; b++ {
		for _, t := range traces {
			c := RankTrace{Name: fmt.Sprintf("%s@%d", t.Name, b), Records: make([]intercept.Record, len(t.Records))}
			for i, r := range t.Records {
				if r.NRanks == w {
					r.Rank += b * w
					r.NRanks = n
					if r.Op == intercept.OpSend || r.Op == intercept.OpRecv {
						r.Root += b * w
					}
				} else {
					r.Comm = fmt.Sprintf("%s@%d", r.Comm, b)
				}
				c.Records[i] = r
			}
			out = append(out, c)
		}
	}
	return out, nil
}
