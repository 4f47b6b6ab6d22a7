package intercept

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/simnet"
)

// ErrReplay marks a trace that cannot be replayed on the given machine.
var ErrReplay = errors.New("intercept: replay")

// Launch is what one communicator runs as one unit: a single call made outside any group, or
// all the calls of one outermost ncclGroupStart/End on that communicator (NCCL fuses them into
// one launch, group.cc). Launches of one communicator keep their order.
type Launch struct {
	Comm   string
	NRanks int   // the communicator's size in the trace
	Index  int   // position among the communicator's launches
	TimeNs int64 // host time of the launch's first call on the lowest rank seen (0 when unknown)
	Colls  []Record
	P2P    []Transfer
	// Log: the communicator's calls come from NCCL COLL logs, which print no group boundaries
	// (every line says opCount 0 in NCCL 2.28): the launch is one call, a collective or one
	// message, not NCCL's launch (see Launches).
	Log bool
}

// Transfer is one point-to-point message of a launch (from a Send, or from a Recv whose Send is
// not in the trace).
type Transfer struct {
	Src, Dst int
	Bytes    int64
}

// Ops is the launch's op names joined by "+" (e.g. "AllReduce", "Send+Recv").
func (l *Launch) Ops() string {
	var ops []string
	seen := map[string]bool{}
	for _, c := range l.Colls {
		if !seen[c.Op] {
			seen[c.Op] = true
			ops = append(ops, c.Op)
		}
	}
	if len(l.P2P) > 0 {
		ops = append(ops, "SendRecv")
	}
	return strings.Join(ops, "+")
}

// Launches turns the records of all ranks into each communicator's launches: per rank, calls are
// split into launches (consecutive calls sharing an outermost group number, or single calls);
// the k-th launches of the ranks of a communicator are merged (NCCL requires every rank to issue
// a communicator's collectives in the same order). Collectives are taken from the lowest rank
// that has them; point-to-point messages from every rank's Sends, and from Recvs where the
// matching Send is absent. The records are those of files CheckTraces accepted (ranks that
// disagree are not reconciled here); a call over units.MaxSize is refused again.
//
// A communicator whose records all come from NCCL COLL logs (Record.Mode "log") carries no group
// boundaries, so its launches are not known: each of its calls is a Launch of its own (Log set),
// a collective (the k-th of every rank merged) or one message (the k-th Send from a rank to a
// peer with the peer's k-th Recv from that rank, as CheckTraces matches them). Merging the k-th
// calls of the ranks would pair unrelated calls there: two ranks that each send and then receive
// make a launch of both Sends and one of both Recvs, each message counted twice. The calls of
// such a communicator are what a shim trace of the same program holds (Report.Calls), without
// its grouping.
func Launches(recs []Record) ([]Launch, error) {
	type key struct {
		comm string
		rank int
	}
	// Records are referred to by index until they go into their launch: copying them into
	// per-rank slices, growing record by record, was most of the time of a large trace.
	perRank := map[key][]int{}
	sizes := map[string]int{}
	notLog := map[string]bool{} // communicators with a call that is not from an NCCL log
	var comms []string
	for i := range recs {
		r := &recs[i]
		if !IsCollective(r.Op) {
			continue
		}
		if err := checkSize("trace", r); err != nil {
			return nil, err
		}
		if n, ok := sizes[r.Comm]; ok && n != r.NRanks {
			return nil, fmt.Errorf("%w: communicator %s has size %d and %d in the trace", ErrReplay, r.Comm, n, r.NRanks)
		}
		if _, ok := sizes[r.Comm]; !ok {
			comms = append(comms, r.Comm)
		}
		sizes[r.Comm] = r.NRanks
		k := key{r.Comm, r.Rank}
		perRank[k] = append(perRank[k], i)
		if r.Mode != "log" || r.GID != 0 {
			notLog[r.Comm] = true
		}
	}
	sort.Strings(comms)
	var out []Launch
	for _, c := range comms {
		n := sizes[c]
		if !notLog[c] {
			idx := make([][]int, n)
			for rank := range idx {
				idx[rank] = perRank[key{c, rank}]
			}
			out = append(out, logLaunches(recs, c, idx)...)
			continue
		}
		// split[rank]: the rank's calls in order (indices into recs) and where each launch starts.
		type calls struct{ idx, starts []int }
		split := make([]calls, n)
		nl := 0
		for rank := 0; rank < n; rank++ {
			idx := perRank[key{c, rank}]
			sort.SliceStable(idx, func(i, j int) bool { return recs[idx[i]].Seq < recs[idx[j]].Seq })
			var starts []int
			for i, x := range idx {
				r, prev := &recs[x], (*Record)(nil)
				if i > 0 {
					prev = &recs[idx[i-1]]
				}
				if prev != nil && r.GID != 0 && r.GID == prev.GID && r.PID == prev.PID {
					continue
				}
				starts = append(starts, i)
			}
			split[rank] = calls{idx, append(starts, len(idx))}
			nl = max(nl, len(starts))
		}
		out = slices.Grow(out, nl)
		for k := 0; k < nl; k++ {
			l := Launch{Comm: c, NRanks: n, Index: k}
			collFrom := -1
			var sends, recvs map[Transfer]int
			for rank, cs := range split {
				if k >= len(cs.starts)-1 {
					continue
				}
				for _, x := range cs.idx[cs.starts[k]:cs.starts[k+1]] {
					r := &recs[x]
					if l.TimeNs == 0 {
						l.TimeNs = r.TimeNs
					}
					switch r.Op {
					case OpSend:
						if sends == nil {
							sends = map[Transfer]int{}
						}
						sends[Transfer{rank, r.Root, r.Bytes()}]++
					case OpRecv:
						if recvs == nil {
							recvs = map[Transfer]int{}
						}
						recvs[Transfer{r.Root, rank, r.Bytes()}]++
					default:
						if collFrom < 0 {
							collFrom = rank
						}
						if collFrom == rank {
							l.Colls = append(l.Colls, *r)
						}
					}
				}
			}
			if len(sends) > 0 && recvs == nil {
				recvs = map[Transfer]int{}
			}
			for t, s := range sends {
				recvs[t] = max(recvs[t], s)
			}
			for t, m := range recvs {
				for i := 0; i < m; i++ {
					l.P2P = append(l.P2P, t)
				}
			}
			sort.Slice(l.P2P, func(i, j int) bool {
				a, b := l.P2P[i], l.P2P[j]
				if a.Src != b.Src {
					return a.Src < b.Src
				}
				if a.Dst != b.Dst {
					return a.Dst < b.Dst
				}
				return a.Bytes < b.Bytes
			})
			out = append(out, l)
		}
	}
	return out, nil
}

// logLaunches is Launches for a communicator read from NCCL logs (idx[rank]: the rank's calls,
// indices into recs): one launch per call, collectives merged by their position among the
// ranks' collectives, messages matched Send to Recv in order per pair of ranks. Launches are
// ordered by the position of their call in the log of the rank that issues it (the lowest rank of
// a collective, a message's sender), then by that rank.
func logLaunches(recs []Record, comm string, idx [][]int) []Launch {
	n := len(idx)
	type unit struct {
		pos, rank int
		l         Launch
	}
	var units []unit
	type pair struct{ src, dst int }
	sends := map[pair][]int{} // positions of the sender's Sends, per pair
	recvs := map[pair][]int{} // positions of the receiver's Recvs, per pair
	var colls [][2]int        // the collectives of the lowest rank that has them: (rank, position)
	collRank := -1
	for rank, is := range idx {
		is = slices.Clone(is)
		sort.SliceStable(is, func(i, j int) bool { return recs[is[i]].Seq < recs[is[j]].Seq })
		idx[rank] = is
		for pos, x := range is {
			r := &recs[x]
			switch r.Op {
			case OpSend:
				p := pair{rank, r.Root}
				sends[p] = append(sends[p], pos)
			case OpRecv:
				p := pair{r.Root, rank}
				recvs[p] = append(recvs[p], pos)
			default:
				if collRank < 0 {
					collRank = rank
				}
				if collRank == rank {
					colls = append(colls, [2]int{rank, pos})
				}
			}
		}
	}
	for _, c := range colls {
		r := recs[idx[c[0]][c[1]]]
		units = append(units, unit{c[1], c[0], Launch{Colls: []Record{r}, TimeNs: r.TimeNs}})
	}
	var pairs []pair
	for p := range sends {
		pairs = append(pairs, p)
	}
	for p := range recvs {
		if _, ok := sends[p]; !ok {
			pairs = append(pairs, p)
		}
	}
	for _, p := range pairs {
		s, r := sends[p], recvs[p]
		for k := 0; k < max(len(s), len(r)); k++ {
			// The sender's Send where the log of the sender is here, else the receiver's Recv.
			rank, pos := p.src, 0
			if k < len(s) {
				pos = s[k]
			} else {
				rank, pos = p.dst, r[k]
			}
			rec := &recs[idx[rank][pos]]
			units = append(units, unit{pos, rank, Launch{P2P: []Transfer{{p.src, p.dst, rec.Bytes()}}, TimeNs: rec.TimeNs}})
		}
	}
	sort.Slice(units, func(i, j int) bool {
		a, b := units[i], units[j]
		if a.pos != b.pos {
			return a.pos < b.pos
		}
		return a.rank < b.rank
	})
	out := make([]Launch, len(units))
	for i, u := range units {
		out[i] = u.l
		out[i].Comm, out[i].NRanks, out[i].Index, out[i].Log = comm, n, i, true
	}
	return out
}

// ReplayOptions steer Replay.
type ReplayOptions struct {
	// ScaleRanks is the size data-parallel communicators are scaled to (see Replay); 0 means the
	// machine's rank count.
	ScaleRanks int
	// Links accumulates per-link traffic from calls simulated op by op (schedule mode).
	Links bool
	// MaxOps bounds the recorded messages per distinct call for Links (0: 2,000,000).
	MaxOps int
	// Build makes the machine of another node count (communicators of another size than the
	// base machine's). Nil: only the base machine's size can be replayed.
	Build func(nodes int) (*simnet.Machine, error)
	// Progress, when set, is called after each distinct call is simulated.
	Progress func(done, total int, what string)
	// Alternatives simulates each distinct collective call under every algorithm and protocol
	// NCCL's tuner could give it (simnet.Machine.Alternatives): Report.Alternatives.
	Alternatives bool
}

// CallAlternatives is one distinct collective call of the trace (its communicator's simulated
// size, its nccl-tests size) with its alternatives, fastest on the GPUs first, and how often the
// trace makes it.
type CallAlternatives struct {
	Op           string               `json:"op"`
	DataType     string               `json:"type"`
	Bytes        int64                `json:"bytes"`
	NRanks       int                  `json:"nranks"`
	Calls        int                  `json:"calls"`
	Alternatives []simnet.Alternative `json:"alternatives"`
	// SavedUs is what the trace's calls of it would save on the GPUs with its fastest alternative
	// in place of NCCL's pick (0 where the pick is the fastest).
	SavedUs float64 `json:"saved_us"`
}

// LaunchResult is one simulated launch.
type LaunchResult struct {
	Comm   string `json:"comm"`
	Index  int    `json:"index"`
	TimeNs int64  `json:"t_ns,omitempty"` // host time of the launch in the trace
	Ops    string `json:"ops"`
	Calls  int    `json:"calls"`
	NRanks int    `json:"nranks"` // simulated size (after scaling)
	// Bytes sums the launch's calls: a collective's nccl-tests size (its total buffer, as
	// simulated: scaled where its communicator is), a message's bytes (where the communicator is
	// scaled, the exchange simulated: every rank sends the launch's largest message).
	Bytes int64  `json:"bytes"`
	Algo  string `json:"algo"`
	Proto string `json:"proto"`
	// NChannels is the simulated plan's channel count; NCCL is NCCL's decision when the
	// simulator ran another (simnet.Row.NCCL).
	NChannels int     `json:"nchannels"`
	NCCL      string  `json:"nccl,omitempty"`
	Mode      string  `json:"mode"`
	TimeUs    float64 `json:"time_us"`
	Launches  int     `json:"-"`
}

// LinkUse is the simulated traffic of one link over the whole replay.
type LinkUse struct {
	Link        string  `json:"link"`
	GBps        float64 `json:"capacity_gbps"`
	Bytes       float64 `json:"bytes"`
	Utilisation float64 `json:"utilisation"` // bytes / (capacity × total replay time)
}

// OpTotal sums the launches of one kind.
type OpTotal struct {
	Ops string `json:"ops"`
	// Launches is 0 (left out of the JSON) where the launches are not known (Report.LaunchesKnown).
	Launches int     `json:"launches,omitempty"`
	Calls    int     `json:"calls"`
	Bytes    int64   `json:"bytes"`
	TimeUs   float64 `json:"time_us"`
}

// Report is the outcome of a replay.
type Report struct {
	Machine string `json:"machine"`
	Ranks   int    `json:"ranks"`
	Nodes   int    `json:"nodes"`
	// TraceRanks is the trace's data-parallel size (World): its largest communicators' ranks.
	TraceRanks int            `json:"trace_ranks"`
	Scaled     map[string]int `json:"scaled,omitempty"` // communicator → simulated size, where it changed
	// Calls counts the trace's calls as its communicators run them: each collective once (not
	// once per rank), each point-to-point message (a Send and its Recv) once. A shim trace and the
	// NCCL logs of the same program have the same calls.
	Calls int `json:"calls"`
	// LaunchesKnown is whether the input says how calls were grouped into NCCL launches (a shim
	// trace does; NCCL COLL logs do not, and each of their calls is then a launch of its own:
	// Launch.Log). Where it is false, the entries of Launches are calls, ByOp counts no launches,
	// and the time is an upper bound on what grouping would give (a group shares one launch).
	LaunchesKnown bool           `json:"launches_known"`
	Launches      []LaunchResult `json:"launches"`
	ByOp          []OpTotal      `json:"by_op"`
	TotalUs       float64        `json:"total_us"`
	Links         []LinkUse      `json:"links,omitempty"`
	Notes         []string       `json:"notes,omitempty"`
	// Alternatives, with ReplayOptions.Alternatives, are the distinct collective calls with every
	// cell NCCL's tuner could pick, simulated, the largest saving first.
	Alternatives []CallAlternatives `json:"alternatives,omitempty"`
	// Release is the NCCL release whose rules planned the calls (set by the caller, which chose it).
	Release string `json:"nccl_release,omitempty"`
}

// World is the data-parallel size of a trace: the largest communicator size in it.
func World(launches []Launch) int {
	w := 0
	for _, l := range launches {
		w = max(w, l.NRanks)
	}
	return w
}

// funcOf maps a trace op to the tuning function simulated for it.
func funcOf(op string) (coll.Func, bool) {
	switch op {
	case OpAllReduce:
		return coll.AllReduce, true
	case OpBroadcast:
		return coll.Broadcast, true
	case OpReduce:
		return coll.Reduce, true
	case OpAllGather:
		return coll.AllGather, true
	case OpReduceScatter:
		return coll.ReduceScatter, true
	case OpAllToAll:
		return coll.AllToAll, true
	}
	return 0, false
}

// testSize is the nccl-tests size (the total buffer, what simnet.Machine.Run takes) of one call
// whose count argument is count, on n ranks: AllGather's count is the per-rank send count and
// ReduceScatter's the per-rank receive count, so their total buffer is count×n elements (NCCL
// 2.28 ncclFuncMaxSendRecvCount); AllToAll's count is per peer; the others move count
// elements.
func testSize(f coll.Func, count int64, elt, n int) int64 {
	switch f {
	case coll.AllGather, coll.ReduceScatter, coll.AllToAll:
		return count * int64(elt) * int64(n)
	}
	return count * int64(elt)
}

type simKey struct {
	f     coll.Func
	size  int64
	dt    coll.DataType
	op    coll.RedOp
	ranks int
	p2p   string // a launch's own messages (transfersKey), "" for every rank sending size
}

// transfersKey is the launch's messages as a key: "src>dst:bytes" in their order.
func transfersKey(ts []Transfer) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d>%d:%d", t.Src, t.Dst, t.Bytes)
	}
	return b.String()
}

// sampledTransfers times a launch's messages ts that are too many to schedule from two samples
// of them, every 2k-th and every k-th (the same mix of peers and sizes), for the smallest k whose
// samples can be scheduled, extrapolated linearly in the message count: a group's messages to
// its peers are sent in order, so its time grows with their number (on 2 H200, 8,750, 17,500,
// 35,000 and 70,000 one-way messages of 1 KiB, each scheduled: 780.0, 1,552.1, 3,096.0 and
// 6,184.0 µs; 70,000 from 17,500 and 35,000: 6,183.8 µs, −0.003%).
func sampledTransfers(m *simnet.Machine, k simKey, ts []coll.Transfer) (simnet.Row, bool) {
	sample := func(every int) []coll.Transfer {
		var out []coll.Transfer
		for i := 0; i < len(ts); i += every {
			out = append(out, ts[i])
		}
		return out
	}
	for every := 2; every <= len(ts)/2; every *= 2 {
		s2 := sample(every)
		r2, _, err := m.Run(k.f, k.size, k.dt, k.op, simnet.RunOptions{Transfers: s2, GPUTime: true})
		if err != nil {
			continue
		}
		s1 := sample(2 * every)
		r1, _, err := m.Run(k.f, k.size, k.dt, k.op, simnet.RunOptions{Transfers: s1, GPUTime: true})
		if err != nil || len(s2) == len(s1) {
			return simnet.Row{}, false
		}
		slope := (r2.TimeUs - r1.TimeUs) / float64(len(s2)-len(s1))
		r2.TimeUs += slope * float64(len(ts)-len(s2))
		r2.Mode = fmt.Sprintf("messages-steady (%d, %d of %d messages: %s)", len(s1), len(s2), len(ts), r2.Mode)
		return r2, true
	}
	return simnet.Row{}, false
}

// collTransfers is ts as the planner's transfers, counted in bytes (coll.Int8).
func collTransfers(ts []Transfer) []coll.Transfer {
	out := make([]coll.Transfer, len(ts))
	for i, t := range ts {
		out[i] = coll.Transfer{From: t.Src, To: t.Dst, Count: t.Bytes}
	}
	return out
}

type simOut struct {
	row   simnet.Row
	links map[string]float64
}

// Replay simulates every launch of the trace on base (its node template, node count and fabric),
// one launch after another (the replay is serial: launches of different communicators, which NCCL
// may overlap on different streams, are added up).
//
// Scaling rule (--scale-ranks): a communicator whose size equals the trace's world size (the
// largest communicator) is taken as data-parallel and simulated at ScaleRanks ranks with the same
// per-rank counts: AllReduce, Broadcast and Reduce keep their count; AllGather keeps its per-rank
// send count and ReduceScatter its per-rank receive count (their total buffers grow with the
// ranks); the point-to-point messages of a launch become a neighbour exchange of the largest
// message among all ScaleRanks ranks. Smaller communicators (tensor- or pipeline-parallel groups)
// keep their size; one that does not fill whole nodes is simulated on the whole nodes that hold it
// (an upper bound, noted), and one-rank communicators take no time.
//
// A launch's time: each collective is simulated on its own (simnet.Machine.Run); the collectives
// of one group share one kernel launch, so a group of k collectives costs the sum of their times
// less (k−1) launch costs; its point-to-point messages, added after the collectives, are
// simulated as they were traced (each from its sender to its receiver: a dist.send is one message
// one way) where the communicator keeps its size, and as a send/recv exchange of the largest
// message where it is scaled.
func Replay(launches []Launch, base *simnet.Machine, opt ReplayOptions) (*Report, error) {
	if len(launches) == 0 {
		return nil, fmt.Errorf("%w: the trace has no collective or point-to-point call", ErrReplay)
	}
	world := World(launches)
	scale := opt.ScaleRanks
	if scale == 0 {
		scale = base.NRanks()
	}
	rep := &Report{Machine: base.Node.Name, Ranks: base.NRanks(), Nodes: base.Nodes, TraceRanks: world, Scaled: map[string]int{}, LaunchesKnown: true}
	for _, l := range launches {
		rep.Calls += len(l.Colls) + len(l.P2P)
		if l.Log {
			rep.LaunchesKnown = false
		}
	}
	rep.Notes = append(rep.Notes, base.Notes...)
	machines := map[int]*simnet.Machine{base.NRanks(): base}
	machine := func(ranks int) (*simnet.Machine, error) {
		if m, ok := machines[ranks]; ok {
			return m, nil
		}
		if opt.Build == nil {
			return nil, fmt.Errorf("%w: a communicator of %d ranks on a machine of %d (no way to build another size)", ErrReplay, ranks, base.NRanks())
		}
		m, err := opt.Build(ranks / base.Node.NumGPUs)
		if err != nil {
			return nil, err
		}
		machines[ranks] = m
		return m, nil
	}
	maxOps := opt.MaxOps
	if maxOps <= 0 {
		maxOps = 2_000_000
	}
	cache := map[simKey]*simOut{}
	uses := map[simKey]int{}
	// Distinct calls first (for progress), then the launches.
	type todo struct {
		k         simKey
		what      string
		transfers []coll.Transfer // SendRecv of a launch's own messages (k.p2p)
	}
	var order []todo
	plan := make([][]simKey, len(launches))
	noteOnce := map[string]bool{}
	note := func(s string) {
		if !noteOnce[s] {
			noteOnce[s] = true
			rep.Notes = append(rep.Notes, s)
		}
	}
	for i, l := range launches {
		ranks := l.NRanks
		if l.NRanks == world && world != scale {
			ranks = scale
			rep.Scaled[l.Comm] = scale
		}
		if ranks == 1 {
			// NCCL runs a one-rank communicator as a local copy with no communication
			// (NCCL 2.28 topoGetAlgoInfo: nRanks 1 → time 0).
			note("one-rank communicators take no communication time")
			continue
		}
		if g := base.Node.NumGPUs; ranks%g != 0 {
			up := (ranks + g - 1) / g * g
			note(fmt.Sprintf("a communicator of %d ranks is simulated on %d (whole nodes of %d GPUs): an upper bound", ranks, up, g))
			ranks = up
		}
		for _, c := range l.Colls {
			f, ok := funcOf(c.Op)
			if !ok {
				return nil, fmt.Errorf("%w: %s launch %d: op %s cannot be simulated", ErrReplay, l.Comm, l.Index, c.Op)
			}
			dt, err := dataType(&c)
			if err != nil {
				return nil, fmt.Errorf("%w: %s launch %d: %v", ErrReplay, l.Comm, l.Index, err)
			}
			op := coll.Sum
			if c.RedOp != "" {
				if op, err = coll.ParseRedOp(c.RedOp); err != nil {
					return nil, fmt.Errorf("%w: %s launch %d: %v", ErrReplay, l.Comm, l.Index, err)
				}
			}
			if op == coll.PreMulSum {
				// User-created PreMulSum ops run as a scaled sum (NCCL 2.11+); simulated as Sum.
				op = coll.Sum
				note("ncclRedOpCreatePreMulSum reductions simulated as sum")
			}
			k := simKey{f, testSize(f, c.Count, dt.Size(), ranks), dt, op, ranks, ""}
			if err := units.CheckSize(fmt.Sprintf("%s launch %d: %s of count %d on %d ranks", l.Comm, l.Index, c.Op, c.Count, ranks), k.size); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrReplay, err)
			}
			plan[i] = append(plan[i], k)
			if uses[k] == 0 {
				order = append(order, todo{k, fmt.Sprintf("%s %d B on %d ranks", c.Op, k.size, ranks), nil})
			}
			uses[k]++
		}
		if len(l.P2P) > 0 {
			var big int64
			for _, t := range l.P2P {
				big = max(big, t.Bytes)
			}
			k := simKey{coll.SendRecv, big, coll.Int8, coll.Sum, ranks, ""}
			var ts []coll.Transfer
			if !(l.NRanks == world && world != scale) {
				// Not scaled: the launch's own messages, from and to the ranks that make them (a
				// dist.send is one message one way, not every rank sending to the next).
				k.p2p, ts = transfersKey(l.P2P), collTransfers(l.P2P)
			}
			plan[i] = append(plan[i], k)
			if uses[k] == 0 {
				what := fmt.Sprintf("SendRecv %d B on %d ranks", big, ranks)
				if ts != nil {
					what = fmt.Sprintf("%d messages of up to %d B on %d ranks", len(ts), big, ranks)
				}
				order = append(order, todo{k, what, ts})
			}
			uses[k]++
		}
	}
	recorded, unlinked := 0, 0
	for i, t := range order {
		m, err := machine(t.k.ranks)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrReplay, t.what, err)
		}
		rec := opt.Links && recorded < maxOps
		if rec {
			// A call too large to replay message by message, or replayable so only as another
			// algorithm, is timed without the records, as simccl run times it (a compact
			// executor, or a form over sizes or node counts: a 32 MiB broadcast on 1,400 DGX
			// H100 nodes, where until stop 36 NCCL's cost model timed it; a 128 MiB NVLSTree
			// all-reduce there, until then Tree). A dry run says which, without replaying. Its
			// traffic is not counted per link (the per-link note says how much time that is).
			dry, _, err := m.Run(t.k.f, t.k.size, t.k.dt, t.k.op, simnet.RunOptions{Record: true, DryRun: true, Transfers: t.transfers})
			if err != nil || dry.NCCL != "" {
				if plain, _, err := m.Run(t.k.f, t.k.size, t.k.dt, t.k.op, simnet.RunOptions{DryRun: true, Transfers: t.transfers}); err == nil && plain.NCCL == "" {
					rec = false
				}
			}
		}
		row, res, err := m.Run(t.k.f, t.k.size, t.k.dt, t.k.op, simnet.RunOptions{Record: rec, Transfers: t.transfers, GPUTime: true})
		if err != nil && len(t.transfers) > 1 {
			// Too many messages to schedule: timed from samples of them.
			if r, ok := sampledTransfers(m, t.k, t.transfers); ok {
				row, res, err = r, nil, nil
				note("launches with more point-to-point messages than can be scheduled: timed from every 2k-th and every k-th of their messages, extrapolated linearly in the message count (mode messages-steady)")
			}
		}
		fellBack := err != nil
		if err != nil {
			var fb string
			if row, fb, err = fallback(t.k, m, machine, err); err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrReplay, t.what, err)
			}
			note(fb)
			res = nil
		}
		if opt.Alternatives && t.k.f != coll.SendRecv && !fellBack {
			row.Alternatives = m.Alternatives(t.k.f, t.k.size, t.k.dt, t.k.op, simnet.RunOptions{Transfers: t.transfers, GPUTime: true}, row)
		}
		out := &simOut{row: row}
		if rec && res != nil && len(res.Ops) > 0 && res.LinkName != nil {
			recorded += len(res.Ops)
			out.links = map[string]float64{}
			for _, o := range res.Ops {
				for _, l := range o.Route {
					w := float64(o.Wire)
					if res.LinkShare != nil {
						w *= res.LinkShare(l) // a queue pair's part where the link has one
					}
					out.links[res.LinkName(l)] += w
				}
			}
		} else if opt.Links && row.TimeUs > 0 {
			unlinked++
		}
		cache[t.k] = out
		if opt.Progress != nil {
			opt.Progress(i+1, len(order), t.what)
		}
	}
	launchCost := float64(simnet.KernelLaunch) / float64(simnet.Microsecond)
	byOp := map[string]*OpTotal{}
	linkBytes := map[string]float64{}
	linkedUs := 0.0
	for i, l := range launches {
		lr := LaunchResult{Comm: l.Comm, Index: l.Index, TimeNs: l.TimeNs, Ops: l.Ops(), Calls: len(l.Colls) + len(l.P2P)}
		if len(plan[i]) == 0 {
			lr.NRanks, lr.Mode = l.NRanks, "single-rank"
		}
		nColl := 0
		linked := true
		for j, k := range plan[i] {
			o := cache[k]
			lr.NRanks = k.ranks
			switch {
			case k.f != coll.SendRecv:
				lr.Bytes += o.row.Bytes
			case l.NRanks == world && world != scale:
				lr.Bytes += int64(scale) * k.size // every rank sends the largest message
			default:
				for _, t := range l.P2P {
					lr.Bytes += t.Bytes
				}
			}
			lr.TimeUs += o.row.TimeUs
			if k.f != coll.SendRecv {
				nColl++
			}
			if j == 0 || lr.Algo == "" {
				lr.Algo, lr.Proto, lr.Mode, lr.NChannels, lr.NCCL = o.row.Algo, o.row.Proto, o.row.Mode, o.row.NChannels, o.row.NCCL
			} else if lr.Algo != o.row.Algo || lr.Proto != o.row.Proto || lr.NChannels != o.row.NChannels || lr.NCCL != o.row.NCCL {
				lr.Algo, lr.Proto, lr.NChannels, lr.NCCL = "mixed", "mixed", 0, ""
			}
			for name, b := range o.links {
				linkBytes[name] += b
			}
			if o.links == nil && o.row.TimeUs > 0 {
				linked = false
			}
		}
		if nColl > 1 {
			lr.TimeUs -= float64(nColl-1) * launchCost
		}
		rep.Launches = append(rep.Launches, lr)
		rep.TotalUs += lr.TimeUs
		if linked {
			linkedUs += lr.TimeUs
		}
		t := byOp[lr.Ops]
		if t == nil {
			t = &OpTotal{Ops: lr.Ops}
			byOp[lr.Ops] = t
		}
		if rep.LaunchesKnown {
			t.Launches++
		}
		t.Calls += lr.Calls
		t.Bytes += lr.Bytes
		t.TimeUs += lr.TimeUs
	}
	for _, t := range byOp {
		rep.ByOp = append(rep.ByOp, *t)
	}
	sort.Slice(rep.ByOp, func(i, j int) bool { return rep.ByOp[i].TimeUs > rep.ByOp[j].TimeUs })
	if len(rep.Scaled) == 0 {
		rep.Scaled = nil
	} else {
		rep.Notes = append(rep.Notes, fmt.Sprintf("data-parallel communicators (size %d in the trace) scaled to %d ranks with the same per-rank counts", world, scale))
	}
	if !rep.LaunchesKnown {
		rep.Notes = append(rep.Notes, fmt.Sprintf("NCCL's COLL logs print no group boundaries (every line says opCount 0 in NCCL 2.28): which calls shared a launch is not known, so each of the %d calls is simulated as a launch of its own, at least the time of the grouped calls (a shim trace of the same program has its launches)", rep.Calls))
	}
	if opt.Links && unlinked > 0 && rep.TotalUs > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("per-link traffic counts the calls simulated message by message: %d of %d distinct calls ran in compact executors or the cost model, which keep no per-message record; the counted launches make %.1f%% of the total time", unlinked, len(order), 100*linkedUs/rep.TotalUs))
	}
	if opt.Links && len(linkBytes) > 0 {
		caps, err := linkCapacities(base)
		if err != nil {
			return nil, err
		}
		for name, b := range linkBytes {
			u := LinkUse{Link: name, Bytes: b}
			if c, ok := caps[name]; ok && c > 0 {
				u.GBps = c
				if rep.TotalUs > 0 {
					u.Utilisation = b / (c * 1e9 * rep.TotalUs * 1e-6)
				}
			}
			rep.Links = append(rep.Links, u)
		}
		sort.Slice(rep.Links, func(i, j int) bool {
			if rep.Links[i].Utilisation != rep.Links[j].Utilisation {
				return rep.Links[i].Utilisation > rep.Links[j].Utilisation
			}
			return rep.Links[i].Link < rep.Links[j].Link
		})
	}
	if opt.Alternatives {
		var rows []simnet.Row
		saved := 0.0
		for _, t := range order {
			row := cache[t.k].row
			if len(row.Alternatives) == 0 {
				continue
			}
			rows = append(rows, row)
			ca := CallAlternatives{Op: coll.TestName(t.k.f), DataType: t.k.dt.String(), Bytes: row.Bytes, NRanks: t.k.ranks, Calls: uses[t.k], Alternatives: row.Alternatives}
			if _, us, ok := simnet.FasterThanPick(row.Alternatives); ok {
				ca.SavedUs = float64(ca.Calls) * us
			}
			saved += ca.SavedUs
			rep.Alternatives = append(rep.Alternatives, ca)
		}
		sort.SliceStable(rep.Alternatives, func(i, j int) bool { return rep.Alternatives[i].SavedUs > rep.Alternatives[j].SavedUs })
		if n := simnet.AlternativesNote(rows, base.Nodes); n != "" {
			if rep.TotalUs > 0 {
				n += fmt.Sprintf("; with the fastest cell of each distinct call the trace's calls would take %.1f µs less on the GPUs (%.1f%% of the %.1f µs simulated)", saved, 100*saved/rep.TotalUs, rep.TotalUs)
			}
			rep.Notes = append(rep.Notes, n)
		}
	}
	return rep, nil
}

// linkCapacities instantiates the machine's links on a fresh engine (as Machine.Run does) and
// returns each link's capacity in GB/s by name.
func linkCapacities(m *simnet.Machine) (map[string]float64, error) {
	e := simnet.NewEngine(nil)
	if _, err := simnet.NewCluster(e, m.Node, m.Nodes, m.Fabric); err != nil {
		return nil, err
	}
	caps := make(map[string]float64, e.NumLinks())
	for l := simnet.LinkID(0); int(l) < e.NumLinks(); l++ {
		caps[e.LinkName(l)] = e.LinkCap(l).GBps()
	}
	return caps, nil
}

// Slowest returns the n launches with the largest simulated time, slowest first.
func (r *Report) Slowest(n int) []LaunchResult {
	s := append([]LaunchResult(nil), r.Launches...)
	sort.SliceStable(s, func(i, j int) bool { return s[i].TimeUs > s[j].TimeUs })
	if len(s) > n {
		s = s[:n]
	}
	return s
}

// fallback times a call whose schedule simnet cannot materialise (too many steps at this scale,
// and no compact executor for it): a send/recv neighbour exchange is simulated on two nodes
// (every rank sends one message to the next, so each link's load does not grow with the node
// count); other collectives take NCCL's own cost-model time (NCCL 2.28 topoGetAlgoInfo: the
// smallest lat + bytes/bw over the enabled algorithms and protocols). The note says which.
func fallback(k simKey, m *simnet.Machine, machine func(int) (*simnet.Machine, error), cause error) (simnet.Row, string, error) {
	g := m.Node.NumGPUs
	if k.f == coll.SendRecv && m.Nodes > 2 {
		m2, err := machine(2 * g)
		if err != nil {
			return simnet.Row{}, "", err
		}
		row, _, err := m2.Run(k.f, k.size, k.dt, k.op, simnet.RunOptions{})
		if err != nil {
			return simnet.Row{}, "", err
		}
		row.Mode = "sendrecv-2-nodes"
		return row, fmt.Sprintf("send/recv exchanges too large to schedule on %d ranks simulated on 2 nodes (same per-link load)", k.ranks), nil
	}
	dec, ok := m.Planner.(interface {
		Decide(coll.Call) (planner.Decision, error)
	})
	if !ok {
		return simnet.Row{}, "", cause
	}
	call := coll.TestCall(k.f, k.size, k.dt, k.op, k.ranks)
	count := call.Count
	d, err := dec.Decide(call)
	if err == nil && d.Choice == nil {
		err = fmt.Errorf("%v has no cost-model time", k.f)
	}
	if err != nil {
		return simnet.Row{}, "", fmt.Errorf("%v; tuning model: %v", cause, err)
	}
	ch := d.Choice
	row := simnet.Row{Coll: coll.TestName(k.f), Bytes: k.size, Count: count, Type: k.dt.String(), RedOp: k.op.String(),
		TimeUs: float64(ch.TimeUs), Algo: ch.Algo.String(), Proto: ch.Proto.String(), NChannels: ch.NChannels, Mode: "tuning-model"}
	return row, fmt.Sprintf("%s too large to schedule on %d ranks: timed by NCCL's cost model (tuning), not simulated", coll.TestName(k.f), k.ranks), nil
}
