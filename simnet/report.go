package simnet

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Traced is one simulated run whose records go into a trace or op log.
type Traced struct {
	Label  string // e.g. "all_reduce 1048576"
	Ops    []OpRecord
	Offset Time // where the run starts on the trace's time line
	Names  func(LinkID) string
}

type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   json.Number    `json:"ts"`
	Dur  *json.Number   `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	ID   int64          `json:"id,omitempty"` // flow events ("s", "f")
	Bp   string         `json:"bp,omitempty"` // "e": a flow's end binds to the slice enclosing it
	Args map[string]any `json:"args,omitempty"`
}

// recvTidBase numbers a rank's receive threads apart from its send threads (TraceThreads numbers
// those from 1).
const recvTidBase = 1 << 20

// WriteTrace writes Chrome trace-event JSON (the "JSON Object Format" Perfetto and chrome://tracing
// open): one process per rank and one complete ("X") slice per message, from its first byte
// leaving the sender to its arrival, with bytes, peer, protocol and route in args. Timestamps are
// microseconds with nanosecond digits (Perfetto's resolution).
//
// Tracks. Perfetto's JSON importer keeps the slices of one thread (pid, tid) as a stack: a slice
// that starts inside another must end inside it, or the importer drops or truncates it. Messages
// are not like that: a connection keeps several messages in flight (NCCL's slots), and a channel
// talks to several peers at once (tree parent and children, all-to-all), so their intervals cross.
// Each rank's messages therefore go on one thread per (channel, peer) connection — "ch C → P" —
// and where messages of a connection overlap in time, on extra lanes of it ("ch C → P (2)", …),
// each message on the first lane free since before it starts (TraceLanes). The slices of a thread
// never overlap, so everything displays, and the number of lanes of a connection is the number of
// messages it had in flight at most. Complete events on threads of our own were chosen over async
// events ("b"/"e" with ids): those leave the packing of overlapping messages into rows to the
// viewer, which differs between Perfetto and chrome://tracing, while fixed threads display the
// same everywhere and keep the output deterministic.
//
// Receivers and flows. Each message also has a slice on its receiver, "recv S->R", over the same
// interval, on the receiver's thread for that connection ("ch C ← S", with the sender's lane, so
// those threads nest as the sender's do), and a flow arrow from the send slice to the receive
// slice (a "s" event bound to the send slice at its start, an "f" event with "bp":"e" bound to the
// receive slice at its start), so that Perfetto draws who sent what to whom and lets one follow a
// message from either end.
func WriteTrace(w io.Writer, runs []Traced) error {
	threads, of := TraceThreads(runs)
	// The receive threads: for each send thread (sender S, channel C, peer R, lane L), thread
	// (R, C, S, L) on the receiver, numbered from recvTidBase within R in the send threads' order.
	type recvKey struct{ rank, channel, peer, lane int }
	recvTid := make(map[recvKey]int, len(threads))
	recvNext := map[int]int{}
	type recvThread struct {
		recvKey
		tid int
	}
	var recvThreads []recvThread
	for _, k := range threads {
		rk := recvKey{k.Peer, k.Channel, k.Rank, k.Lane}
		tid := recvTidBase + recvNext[rk.rank]
		recvNext[rk.rank]++
		recvTid[rk] = tid
		recvThreads = append(recvThreads, recvThread{rk, tid})
	}
	sort.SliceStable(recvThreads, func(a, b int) bool { return recvThreads[a].rank < recvThreads[b].rank })
	bw := bufio.NewWriter(w)
	bw.WriteString("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")
	first := true
	emit := func(ev traceEvent) error {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		if !first {
			bw.WriteString(",\n")
		}
		first = false
		_, err = bw.Write(b)
		return err
	}
	named := map[int]bool{}
	process := func(rank int) error {
		if named[rank] {
			return nil
		}
		named[rank] = true
		if err := emit(traceEvent{Name: "process_name", Ph: "M", Pid: rank, Args: map[string]any{"name": fmt.Sprintf("rank %d", rank)}}); err != nil {
			return err
		}
		return emit(traceEvent{Name: "process_sort_index", Ph: "M", Pid: rank, Args: map[string]any{"sort_index": rank}})
	}
	thread := func(rank, tid int, name string) error {
		if err := emit(traceEvent{Name: "thread_name", Ph: "M", Pid: rank, Tid: tid, Args: map[string]any{"name": name}}); err != nil {
			return err
		}
		return emit(traceEvent{Name: "thread_sort_index", Ph: "M", Pid: rank, Tid: tid, Args: map[string]any{"sort_index": tid}})
	}
	for _, k := range threads {
		if err := process(k.Rank); err != nil {
			return err
		}
		if err := thread(k.Rank, k.Tid, k.Name()); err != nil {
			return err
		}
	}
	for _, k := range recvThreads {
		if err := process(k.rank); err != nil {
			return err
		}
		name := fmt.Sprintf("ch %d ← %d", k.channel, k.peer)
		if k.lane > 0 {
			name += fmt.Sprintf(" (%d)", k.lane+1)
		}
		if err := thread(k.rank, k.tid, name); err != nil {
			return err
		}
	}
	var flow int64
	for i, r := range runs {
		for j, op := range r.Ops {
			start, end := traceNs(r.Offset+op.Start), traceNs(r.Offset+op.End)
			dur := traceMicros(end - start)
			ev := traceEvent{Name: fmt.Sprintf("send %d->%d", op.Rank, op.Peer), Cat: r.Label, Ph: "X", Ts: traceMicros(start), Dur: &dur,
				Pid: op.Rank, Tid: threads[of[i][j]].Tid, Args: map[string]any{
					"run": r.Label, "peer": op.Peer, "channel": op.Channel, "bytes": op.Bytes, "wire_bytes": op.Wire, "proto": op.Proto.String(),
					"step": op.Step, "seq": op.Seq, "chunk": op.Chunk, "class": op.Class.String(), "route": routeString(op.Route, r.Names)}}
			if err := emit(ev); err != nil {
				return err
			}
			st := threads[of[i][j]]
			rtid := recvTid[recvKey{op.Peer, op.Channel, op.Rank, st.Lane}]
			rev := traceEvent{Name: fmt.Sprintf("recv %d->%d", op.Rank, op.Peer), Cat: r.Label, Ph: "X", Ts: ev.Ts, Dur: &dur,
				Pid: op.Peer, Tid: rtid, Args: map[string]any{"run": r.Label, "peer": op.Rank, "channel": op.Channel, "bytes": op.Bytes, "seq": op.Seq, "chunk": op.Chunk}}
			if err := emit(rev); err != nil {
				return err
			}
			flow++
			if err := emit(traceEvent{Name: "message", Cat: "flow", Ph: "s", Ts: ev.Ts, Pid: op.Rank, Tid: st.Tid, ID: flow}); err != nil {
				return err
			}
			if err := emit(traceEvent{Name: "message", Cat: "flow", Ph: "f", Bp: "e", Ts: ev.Ts, Pid: op.Peer, Tid: rtid, ID: flow}); err != nil {
				return err
			}
		}
	}
	if _, err := bw.WriteString("\n]}\n"); err != nil {
		return err
	}
	return bw.Flush()
}

// traceNs is t rounded to the nanosecond, the trace's resolution.
func traceNs(t Time) int64 { return int64((t + Nanosecond/2) / Nanosecond) }

// traceMicros writes ns nanoseconds as microseconds with three decimals, exactly.
func traceMicros(ns int64) json.Number {
	return json.Number(strconv.FormatInt(ns/1000, 10) + "." + fmt.Sprintf("%03d", ns%1000))
}

// TraceThread is one thread of a trace: a lane of the connection (Rank, Channel, Peer), numbered
// Tid from 1 within its rank.
type TraceThread struct {
	Rank, Channel, Peer, Lane, Tid int
}

// Name is the thread's name in the trace: "ch C → P", with " (L)" for lanes after the first.
func (t TraceThread) Name() string {
	name := fmt.Sprintf("ch %d → %d", t.Channel, t.Peer)
	if t.Lane > 0 {
		name += fmt.Sprintf(" (%d)", t.Lane+1)
	}
	return name
}

// TraceThreads lays the ops of runs out on threads as WriteTrace draws them: the threads, in
// (rank, channel, peer, lane) order so that the output does not depend on the order of the ops,
// each rank's numbered from 1; and each op's thread (of[i][j] for runs[i].Ops[j], an index into
// threads), its lane from TraceLanes.
func TraceThreads(runs []Traced) (threads []TraceThread, of [][]int32) {
	lanes := TraceLanes(runs)
	type key struct{ rank, channel, peer, lane int }
	index := map[key]int{}
	for i, r := range runs {
		for j, op := range r.Ops {
			k := key{op.Rank, op.Channel, op.Peer, int(lanes[i][j])}
			if _, ok := index[k]; !ok {
				index[k] = 0
				threads = append(threads, TraceThread{Rank: k.rank, Channel: k.channel, Peer: k.peer, Lane: k.lane})
			}
		}
	}
	sort.Slice(threads, func(a, b int) bool {
		x, y := threads[a], threads[b]
		if x.Rank != y.Rank {
			return x.Rank < y.Rank
		}
		if x.Channel != y.Channel {
			return x.Channel < y.Channel
		}
		if x.Peer != y.Peer {
			return x.Peer < y.Peer
		}
		return x.Lane < y.Lane
	})
	for i := range threads {
		t := &threads[i]
		t.Tid = 1
		if i > 0 && threads[i-1].Rank == t.Rank {
			t.Tid = threads[i-1].Tid + 1
		}
		index[key{t.Rank, t.Channel, t.Peer, t.Lane}] = i
	}
	of = make([][]int32, len(runs))
	for i, r := range runs {
		of[i] = make([]int32, len(r.Ops))
		for j, op := range r.Ops {
			of[i][j] = int32(index[key{op.Rank, op.Channel, op.Peer, int(lanes[i][j])}])
		}
	}
	return threads, of
}

// TraceLanes returns, for each op of runs (lanes[i][j] for runs[i].Ops[j]), the lane of its
// connection (rank, channel, peer) that WriteTrace draws it on: taken in order of start (then
// end, then position), each op goes on the lowest lane whose last op ended by the time it starts,
// at the trace's nanosecond resolution. A message that starts as the one before it arrives stays
// on its lane: Perfetto rounds ts×1000 to the nanosecond, which gives the written nanoseconds
// back exactly, and closes a slice that ends where the next starts.
func TraceLanes(runs []Traced) [][]int32 {
	type ref struct {
		i, j       int
		start, end int64
	}
	type conn struct{ rank, channel, peer int }
	byConn := map[conn][]ref{}
	var conns []conn
	lanes := make([][]int32, len(runs))
	for i, r := range runs {
		lanes[i] = make([]int32, len(r.Ops))
		for j, op := range r.Ops {
			k := conn{op.Rank, op.Channel, op.Peer}
			if _, ok := byConn[k]; !ok {
				conns = append(conns, k)
			}
			byConn[k] = append(byConn[k], ref{i, j, traceNs(r.Offset + op.Start), traceNs(r.Offset + op.End)})
		}
	}
	var ends []int64 // last end of each lane
	for _, k := range conns {
		refs := byConn[k]
		sort.SliceStable(refs, func(a, b int) bool {
			if refs[a].start != refs[b].start {
				return refs[a].start < refs[b].start
			}
			return refs[a].end < refs[b].end
		})
		ends = ends[:0]
		for _, rf := range refs {
			l := 0
			for l < len(ends) && ends[l] > rf.start {
				l++
			}
			if l == len(ends) {
				ends = append(ends, 0)
			}
			ends[l] = rf.end
			lanes[rf.i][rf.j] = int32(l)
		}
	}
	return lanes
}

func routeString(r []LinkID, names func(LinkID) string) string {
	parts := make([]string, len(r))
	for i, l := range r {
		if names != nil {
			parts[i] = names(l)
		} else {
			parts[i] = fmt.Sprint(int(l))
		}
	}
	return strings.Join(parts, " > ")
}

// WriteOpsCSV writes the op log: one line per message with its route (link names joined by " > ").
func WriteOpsCSV(w io.Writer, runs []Traced) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "run,rank,peer,channel,step,chunk,bytes,wire_bytes,proto,start_us,end_us,class,route")
	for _, r := range runs {
		for _, op := range r.Ops {
			fmt.Fprintf(bw, "%s,%d,%d,%d,%d,%d,%d,%d,%s,%.6f,%.6f,%s,%q\n", r.Label, op.Rank, op.Peer, op.Channel, op.Step, op.Chunk,
				op.Bytes, op.Wire, op.Proto, op.Start.Micros(), op.End.Micros(), op.Class, routeString(op.Route, r.Names))
		}
	}
	return bw.Flush()
}

// RunHeader says what a simccl run simulated: the comment lines above WriteTable's table and the
// "header" object of WriteJSON. Its JSON keys are snake_case, as runccl's header (comm/perf.Header)
// and the rows' keys; where both headers say the same thing they use the same key (program,
// version, nranks, nccl_release, collectives).
type RunHeader struct {
	Program     string `json:"program"` // "simccl"
	Version     string `json:"version"`
	Topology    string `json:"topology"` // the node topology's name
	Nodes       int    `json:"nodes"`
	GPUsPerNode int    `json:"gpus_per_node"`
	NRanks      int    `json:"nranks"`
	NChannels   int    `json:"nchannels"`
	// Fabric is the network between the nodes; nil (left out) on one node.
	Fabric      *FabricHeader `json:"fabric,omitempty"`
	NCCLRelease string        `json:"nccl_release"`
	// Collectives simulated, in order, as nccl-tests spells them (all_reduce, …).
	Collectives []string `json:"collectives"`
	DataType    string   `json:"datatype"`
	Op          string   `json:"op"`
	// Launch is the launch mode (per-gpu, per-node, graph).
	Launch string `json:"launch"`
	// HostEnqueueUs is the host's enqueue of a one-channel collective call the host floors take
	// (Machine.HostEnqueue, or the measured HostEnqueue), µs.
	HostEnqueueUs float64 `json:"host_enqueue_us"`
	// BackToBack is the loop of calls that times each row (Machine.BackToBack; 0: nccl-tests'
	// loop of NCCLTestsLoop calls for broadcast and reduce, one call otherwise; left out).
	BackToBack int `json:"back_to_back,omitempty"`
}

// FabricHeader is the part of a Fabric a run's header shows.
type FabricHeader struct {
	Topology         string  `json:"topology"`
	Tiers            int     `json:"tiers"`
	HostsPerLeaf     int     `json:"hosts_per_leaf"`
	Oversubscription float64 `json:"oversubscription"`
	Routing          string  `json:"routing"`
	ECMPSeed         uint64  `json:"ecmp_seed,omitempty"`
	// QPs is the queue pairs a connection spreads over the equal-cost links, where ECMP routing
	// hashes more than one (Fabric.QPs, NCCL_IB_QPS_PER_CONNECTION).
	QPs int `json:"qps_per_connection,omitempty"`
}

// Header returns f's part of a run's header.
func (f *Fabric) Header() *FabricHeader {
	h := &FabricHeader{Topology: f.Topology, Tiers: f.Tiers, HostsPerLeaf: f.HostsPerLeaf, Oversubscription: f.Oversub, Routing: f.Routing, ECMPSeed: f.ECMPSeed}
	if q := f.qps(); q > 1 {
		h.QPs = q
	}
	return h
}

// WriteTable writes a run as nccl-tests prints it, so that nccl-tests' parsers read it: comment
// lines (h, the notes), then nccl-tests' three header lines and one line per row with its
// columns first — size, count, type, redop, root, then out-of-place and in-place time, algbw,
// busbw, #wrong, in nccl-tests' formats (src/common.cu, as comm/perf.FormatLine) — then the
// columns simccl adds: algo, proto, nch (as runccl), coll, mode (how the row was simulated,
// Row.Mode) and, when a row is not NCCL's decision, what NCCL runs. The simulator has no in-place
// difference: both placements show the simulated time. #wrong is "N/A", as nccl-tests prints it
// when it does not check (-c 0). The footer is nccl-tests' ("# Out of bounds values", "# Avg bus
// bandwidth").
func WriteTable(w io.Writer, h RunHeader, rows []Row, notes []string) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# simccl run: %s, %d node(s) x %d GPUs = %d ranks, %d channels, NCCL %s rules\n", h.Topology, h.Nodes, h.GPUsPerNode, h.NRanks, h.NChannels, h.NCCLRelease)
	if f := h.Fabric; f != nil {
		qps := ""
		if f.QPs > 1 {
			qps = fmt.Sprintf(", %d queue pairs a connection", f.QPs)
		}
		fmt.Fprintf(bw, "# fabric: %s, %d tiers, %d hosts/leaf, oversubscription %g, routing %s%s\n", f.Topology, f.Tiers, f.HostsPerLeaf, f.Oversubscription, RoutingName(f.Routing, f.ECMPSeed), qps)
	}
	fmt.Fprintf(bw, "# %s %s: %s, datatype %s, op %s\n", h.Program, h.Version, strings.Join(h.Collectives, ", "), h.DataType, h.Op)
	for _, n := range notes {
		fmt.Fprintf(bw, "# note: %s\n", n)
	}
	subst := false
	for _, r := range rows {
		subst = subst || r.NCCL != ""
	}
	ncclHead, ncclUnit := "", ""
	if subst {
		// NCCL's decision where the row is not it (an algorithm the simulator lacks).
		ncclHead, ncclUnit = fmt.Sprintf("  %-20s", "nccl runs"), fmt.Sprintf("  %-20s", "(if not simulated)")
	}
	// nccl-tests' header lines (src/common.cu), as comm/perf.ColumnHeader, then simccl's columns.
	head := []string{
		fmt.Sprintf("#\n# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place", "", "", "", "", ""),
		fmt.Sprintf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s  %6s  %6s  %3s  %-14s  %-28s%s", "size", "count", "type", "redop", "root",
			"time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "algo", "proto", "nch", "coll", "mode", ncclHead),
		fmt.Sprintf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s  %6s  %6s  %3s  %-14s  %-28s%s", "(B)", "(elements)", "", "", "",
			"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "", "", "", "", "(how simulated)", ncclUnit),
	}
	for _, l := range head {
		fmt.Fprintln(bw, strings.TrimRight(l, " "))
	}
	var sum float64
	for _, r := range rows {
		nccl := ""
		if subst {
			nccl = fmt.Sprintf("  %-20s", r.NCCL)
		}
		// nccl-tests: "%12li  %12li  %8s  %6s  %6i", then per placement "  %7s  %6.2f  %6.2f  %5g"
		// (#wrong a double, "%5s" of "N/A" when not checked).
		place := fmt.Sprintf("  %7s  %6.2f  %6.2f  %5s", FormatTime(r.TimeUs), r.AlgBw, r.BusBw, "N/A")
		line := fmt.Sprintf("%12d  %12d  %8s  %6s  %6d%s%s  %6s  %6s  %3d  %-14s  %-28s%s", r.Bytes, r.Count, r.Type, r.RedOp, tableRoot(r.Coll),
			place, place, r.Algo, r.Proto, r.NChannels, r.Coll, r.Mode, nccl)
		fmt.Fprintln(bw, strings.TrimRight(line, " "))
		sum += r.BusBw
	}
	if len(rows) > 0 {
		// nccl-tests: PRINT("# Out of bounds values : %d %s\n", errors, errors ? "FAILED" : "OK")
		// (0 when not checking); PRINT("# Avg bus bandwidth    : %g %s\n", bw, "") — C's %g is
		// Go's %.6g (6 significant digits, trailing zeros dropped), and the empty %s leaves a
		// trailing space.
		fmt.Fprintf(bw, "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : %.6g \n", sum/float64(len(rows)))
	}
	return bw.Flush()
}

// tableRoot is nccl-tests' root column: the root rank (0, nccl-tests' default -r) of the rooted
// collectives, -1 for the others.
func tableRoot(collName string) int {
	if collName == "broadcast" || collName == "reduce" {
		return 0
	}
	return -1
}

// FormatTime is nccl-tests' time column (src/common.cu): "%7.0f" from 10000 µs, "%7.1f" from
// 100 µs, "%7.2f" below, so that a time fits its 7 characters up to 10 s (comm/perf.FormatTime,
// without its C spelling of infinities: simulated times are finite).
func FormatTime(us float64) string {
	switch {
	case us >= 10000:
		return fmt.Sprintf("%7.0f", us)
	case us >= 100:
		return fmt.Sprintf("%7.1f", us)
	}
	return fmt.Sprintf("%7.2f", us)
}

// WriteJSON writes {"header":{…},"rows":[…],"notes":[…]}: the run's header, its rows and the
// machine's notes (left out when there are none).
func WriteJSON(w io.Writer, h RunHeader, rows []Row, notes []string) error {
	if rows == nil {
		rows = []Row{}
	}
	if h.Collectives == nil {
		h.Collectives = []string{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Header RunHeader `json:"header"`
		Rows   []Row     `json:"rows"`
		Notes  []string  `json:"notes,omitempty"`
	}{h, rows, notes})
}

// RoutingName is a fabric's routing as tables name it: with its ECMP seed where that is not the
// default hash (Fabric.ECMPSeed).
func RoutingName(routing string, seed uint64) string {
	if seed != 0 {
		return fmt.Sprintf("%s (seed %d)", routing, seed)
	}
	return routing
}
