package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/simnet"
)

// Focus is "where time goes" for one collective and size: its schedule simulated with every
// message recorded.
type Focus struct {
	Coll      string  `json:"coll"`
	Size      int64   `json:"size"`
	Plan      string  `json:"plan"` // algo/proto/channels
	TimeUs    float64 `json:"time_us"`
	Messages  int     `json:"messages"`
	Bins      int     `json:"bins"`
	LinkCount int     `json:"links"`      // links in the simulated machine
	Used      int     `json:"links_used"` // links that carried bytes
	// Links are the busiest links, busiest first, each with its utilisation per time bin.
	Links []LinkUse `json:"busiest_links"`
	// Classes sums the links per class (NVLink, PCIe, NIC, fabric uplinks).
	Classes  []ClassUse `json:"classes"`
	Ops      []OpBox    `json:"timeline"` // ops drawn in the timeline (a subset)
	Rows     []string   `json:"timeline_rows"`
	OpsShown int        `json:"timeline_ops"`
	// Trace holds ops for Perfetto: [rank, channel, peer, start ns, duration ns, bytes, thread,
	// lane], on the threads simnet.WriteTrace lays out: one per rank, channel and peer, with
	// lanes where its messages overlap, numbered from 1 per rank in that order.
	Trace      [][8]int64 `json:"-"`
	TraceTotal int        `json:"trace_ops"`
	// Compact holds the link totals at the requested size when its schedule was too large to
	// record (simulated by simnet's compact executor, without per-message records).
	Compact *Compact `json:"compact,omitempty"`
	// Asked is the size the section was asked for when Size is smaller (its schedule has more
	// than MaxSteps steps, too many to record op by op); 0 when Size is the size asked.
	Asked    int64 `json:"asked_size,omitempty"`
	MaxSteps int   `json:"max_steps,omitempty"`
	// Unrecorded, when set, says why nothing was recorded: even the smallest size has too many
	// steps at this scale. Only Coll, Size, MaxSteps and Compact (link totals at Size) are set.
	Unrecorded string `json:"unrecorded,omitempty"`
	// UpToNodes is the largest power-of-two node count whose schedule can be recorded (0: not
	// known, Options.PlannerAt unset, or none).
	UpToNodes int `json:"recorded_up_to_nodes,omitempty"`
}

// Compact is a run of the compact executor: link totals, no time profile.
type Compact struct {
	Size      int64      `json:"size"`
	Plan      string     `json:"plan"`
	TimeUs    float64    `json:"time_us"`
	Used      int        `json:"links_used"`
	LinkCount int        `json:"links"`
	Links     []LinkUse  `json:"busiest_links"`
	Classes   []ClassUse `json:"classes"`
}

// compactLinks replays f at size with simnet's compact executor (ring collectives on rings, tree
// all-reduce) on a fresh engine, for the busiest links at a size whose schedule is too large to
// record. It returns nil when the plan has no compact executor.
func compactLinks(m *simnet.Machine, f coll.Func, size int64, opt Options) (*Compact, error) {
	plan, _, err := m.Plan(f, size, opt.DataType, opt.Op)
	if err != nil {
		return nil, err
	}
	_, algBytes := coll.TestCount(f, size, opt.DataType.Size(), m.NRanks())
	ringColl := f == coll.AllReduce || f == coll.AllGather || f == coll.ReduceScatter
	e := simnet.NewEngine(nil)
	cl, err := simnet.NewCluster(e, m.Node, m.Nodes, m.Fabric)
	if err != nil {
		return nil, err
	}
	tm, err := m.PlanTiming(plan)
	if err != nil {
		return nil, err
	}
	var rr *simnet.RingResult
	switch {
	case f == coll.AllReduce && plan.Algo == coll.Tree:
		rr, err = simnet.SimulateTree(e, cl, simnet.TreeSpec{Bytes: algBytes, Proto: plan.Proto, Trees: plan.Trees[:plan.NChannels], Chunk: plan.ChunkSize}, tm)
	case ringColl && plan.Algo == coll.Ring:
		rr, err = simnet.SimulateRing(e, cl, simnet.RingSpec{Func: f, Bytes: algBytes, Proto: plan.Proto, Rings: plan.Rings[:plan.NChannels], Chunk: plan.ChunkSize}, tm)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("focus %s %d bytes (compact): %w", coll.TestName(f), size, err)
	}
	c := &Compact{Size: size, Plan: fmt.Sprintf("%v/%v/%d ch", plan.Algo, plan.Proto, plan.NChannels), TimeUs: rr.Time.Micros(), LinkCount: e.NumLinks()}
	if rr.Merge > 1 {
		c.Plan += fmt.Sprintf(", coarse ×%d", rr.Merge)
	}
	_, c.Links, c.Used = busiest(e, float64(rr.Time))
	c.Classes = classes(e, float64(rr.Time))
	return c, nil
}

// LinkUse is one link's load over the run.
type LinkUse struct {
	Name   string    `json:"name"`
	GBps   float64   `json:"gbps"`
	Bytes  float64   `json:"bytes"`
	Util   float64   `json:"utilisation"` // bytes / (capacity × run time)
	BusyUs float64   `json:"busy_us"`
	Bins   []float64 `json:"bins"` // utilisation per time bin, 0..1
}

// OpBox is one P2P op of the timeline.
type OpBox struct {
	Row     int     `json:"row"`
	Peer    int     `json:"peer"`
	StartUs float64 `json:"start_us"`
	EndUs   float64 `json:"end_us"`
	Bytes   int64   `json:"bytes"`
}

const (
	focusBins     = 60
	focusLinks    = 24
	timelineRanks = 8
	timelineChans = 4
)

// focus picks the size, compiles and simulates the schedule with records on a fresh engine (so
// that link capacities and totals can be read back), and summarises it.
func (r *Report) focus(m *simnet.Machine, opt Options) error {
	f := opt.Funcs[0]
	if opt.FocusColl != "" {
		var err error
		if f, err = coll.ParseFunc(opt.FocusColl); err != nil {
			return fmt.Errorf("%w: focus collective: %v", ErrInput, err)
		}
	}
	size := opt.FocusSize
	if size == 0 {
		size = nearest(opt.Sizes, 1<<20)
	}
	maxSteps := opt.FocusMaxSteps
	if maxSteps <= 0 {
		maxSteps = 300_000
	}
	if opt.TimelineOps <= 0 {
		opt.TimelineOps = 3000
	}
	if opt.TraceOps <= 0 {
		opt.TraceOps = 20_000
	}
	asked := size
	// The smallest size has the fewest steps: when even its schedule is too large to record, the
	// section is the compact executor's link totals at the size asked and a line saying why.
	// The floor is the smallest nccl-tests size with an element for every rank (an all-gather of
	// 8 bytes on 1,024 ranks has none: a focus that halved down to it failed the report).
	floor := int64(8)
	for floor < size {
		if n, _ := coll.TestCount(f, floor, opt.DataType.Size(), m.NRanks()); n > 0 {
			break
		}
		floor *= 2
	}
	floor = min(floor, size)
	fplan, _, err := m.Plan(f, floor, opt.DataType, opt.Op)
	if err != nil {
		return fmt.Errorf("focus %s %d bytes: %w", coll.TestName(f), floor, err)
	}
	if n, ok := recordable(fplan, maxSteps); !ok {
		fo := &Focus{Coll: coll.TestName(f), Size: asked, MaxSteps: maxSteps}
		fo.Unrecorded = fmt.Sprintf("the schedule of one %s at %d node(s) (%d ranks) has %s steps even at %s; the time profile, the per-link time bins and the timeline need a recorded schedule (at most %s steps)",
			coll.TestName(f), m.Nodes, m.NRanks(), n, sizeText(floor), groupDigits(int64(maxSteps)))
		upTo, err := recordedUpTo(m, f, floor, maxSteps, opt)
		if err != nil {
			return err
		}
		switch {
		case upTo > 0:
			fo.UpToNodes = upTo
			fo.Unrecorded += fmt.Sprintf(", done up to %d node(s) of this machine (counting in powers of two)", upTo)
		case opt.PlannerAt != nil:
			fo.Unrecorded += ", not even on 1 node of this machine"
		}
		if why := r.unaffordable(f, asked); why != "" {
			fo.Unrecorded += "; " + why
			r.Focus = fo
			return nil
		}
		c, err := compactLinks(m, f, asked, opt)
		if err != nil {
			return err
		}
		if c == nil {
			fo.Unrecorded += fmt.Sprintf("; no compact executor for %s at %s, so no link totals either", coll.TestName(f), units.FormatSize(asked))
		}
		fo.Compact = c
		r.Focus = fo
		return nil
	}
	var sched *coll.Schedule
	var plan coll.Plan
	for {
		plan, _, err = m.Plan(f, size, opt.DataType, opt.Op)
		if err != nil {
			return fmt.Errorf("focus %s %d bytes: %w", coll.TestName(f), size, err)
		}
		if plan.Count == 0 {
			return fmt.Errorf("%w: focus %s %d bytes: no element at this size", ErrInput, coll.TestName(f), size)
		}
		if plan.EstimatedSteps() <= coll.MaxSteps {
			sched, err = coll.Compile(plan)
			if err == nil && sched.NumSteps() <= maxSteps {
				break
			}
		}
		if size <= floor {
			return fmt.Errorf("focus %s: schedule too large to record at %d bytes (internal: the floor check passed)", coll.TestName(f), size)
		}
		size = max(size/2, floor)
	}
	var compact *Compact
	if size != asked {
		r.Notes = append(r.Notes, fmt.Sprintf("where time goes: %s at %d bytes has a schedule too large to record (more than %d steps); its timeline is shown at %d bytes", coll.TestName(f), asked, maxSteps, size))
		if why := r.unaffordable(f, asked); why != "" {
			r.Notes = append(r.Notes, "where time goes: "+why)
		} else if compact, err = compactLinks(m, f, asked, opt); err != nil {
			return err
		} else if compact == nil {
			r.Notes = append(r.Notes, fmt.Sprintf("where time goes: no compact executor for %s at %d bytes; no link totals at that size", coll.TestName(f), asked))
		}
	}
	e := simnet.NewEngine(nil)
	cl, err := simnet.NewCluster(e, m.Node, m.Nodes, m.Fabric)
	if err != nil {
		return err
	}
	tm, err := m.PlanTiming(plan)
	if err != nil {
		return err
	}
	res, err := simnet.Simulate(e, cl, sched, tm, simnet.Options{Record: true})
	if err != nil {
		return fmt.Errorf("focus %s %d bytes: %w", coll.TestName(f), size, err)
	}
	fo := &Focus{Coll: coll.TestName(f), Size: size, Plan: fmt.Sprintf("%v/%v/%d ch", plan.Algo, plan.Proto, plan.NChannels),
		TimeUs: res.Time.Micros(), Messages: len(res.Ops), Bins: focusBins, LinkCount: e.NumLinks()}
	fo.Compact = compact
	if size != asked {
		fo.Asked, fo.MaxSteps = asked, maxSteps
	}
	if k := m.LoopCalls(f); k > 1 {
		// The timeline is one call's; the busbw section's row is one call in nccl-tests' loop.
		r.Notes = append(r.Notes, fmt.Sprintf("where time goes: %s at %s is one call alone (%.2f µs); the busbw section times it as nccl-tests does, one call in a loop of %d back-to-back calls, which overlaps consecutive calls down the chain", fo.Coll, sizeText(size), fo.TimeUs, k))
	}
	summariseLinks(fo, e, res)
	timeline(fo, res, opt)
	r.Focus = fo
	return nil
}

// unaffordable says why the compact executor's link totals of f at size are not simulated: the
// sweep found that size of f too long to simulate (Report.Cut); "" when they can be.
func (r *Report) unaffordable(f coll.Func, size int64) string {
	if c, ok := r.cutSizes[f]; ok && size >= c {
		return fmt.Sprintf("no link totals at %s either: the sweep did not simulate %s from %s up (too long at this scale)", sizeText(size), coll.TestName(f), sizeText(c))
	}
	return ""
}

// recordedUpTo returns the largest power-of-two node count below m's at which f's schedule at
// floor bytes can be recorded, trying 1, 2, 4 … nodes with opt.PlannerAt until one cannot; 0
// when none can or opt.PlannerAt is nil.
func recordedUpTo(m *simnet.Machine, f coll.Func, floor int64, maxSteps int, opt Options) (int, error) {
	if opt.PlannerAt == nil {
		return 0, nil
	}
	best := 0
	for k := 1; k < m.Nodes; k *= 2 {
		p, err := opt.PlannerAt(k)
		if err != nil {
			return 0, fmt.Errorf("focus: the communicator on %d node(s): %w", k, err)
		}
		mk, err := simnet.NewMachine(p.System, k, opt.Fabric, p, p.Settings.Release)
		if err != nil {
			return 0, fmt.Errorf("focus: the machine of %d node(s): %w", k, err)
		}
		plan, _, err := mk.Plan(f, floor, opt.DataType, opt.Op)
		if err != nil {
			return 0, fmt.Errorf("focus %s %d bytes on %d node(s): %w", coll.TestName(f), floor, k, err)
		}
		if _, ok := recordable(plan, maxSteps); !ok {
			break
		}
		best = k
	}
	return best, nil
}

// recordable says whether plan's schedule can be recorded (at most maxSteps steps) and, when it
// cannot, how many steps it has: counted when coll.Compile builds it, its estimate (about …)
// when the schedule is too large for Compile itself.
func recordable(plan coll.Plan, maxSteps int) (string, bool) {
	if plan.Count == 0 {
		return "", true // Build reports the size
	}
	if est := plan.EstimatedSteps(); est > coll.MaxSteps {
		return "about " + groupDigits(int64(math.Min(est, 1e18))), false
	}
	sched, err := coll.Compile(plan)
	if err != nil {
		return "too many", false
	}
	if n := sched.NumSteps(); n > maxSteps {
		return groupDigits(int64(n)), false
	}
	return "", true
}

// groupDigits writes n with thousands separators (16,777,216).
func groupDigits(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// steps counts the steps of a schedule, all ranks and channels.

func nearest(sizes []int64, want int64) int64 {
	best := sizes[0]
	for _, s := range sizes {
		if math.Abs(math.Log(float64(max(s, 1))/float64(want))) < math.Abs(math.Log(float64(max(best, 1))/float64(want))) {
			best = s
		}
	}
	return best
}

type linkBytes struct {
	id    simnet.LinkID
	bytes float64
}

// ClassUse sums the links of one class (NVLink, PCIe, NIC, fabric uplinks …).
type ClassUse struct {
	Class   string  `json:"class"`
	Links   int     `json:"links"`
	Used    int     `json:"links_used"`
	Bytes   float64 `json:"bytes"`
	MaxUtil float64 `json:"max_utilisation"`
}

// linkClass names the class of a link from the simulator's link name.
func linkClass(name string) string {
	from, to, _ := strings.Cut(name, "->")
	switch {
	case strings.HasPrefix(to, "leaf") || strings.HasPrefix(from, "leaf") && strings.HasPrefix(to, "n"):
		return "NIC ↔ leaf"
	case strings.HasPrefix(from, "leaf") || strings.HasPrefix(from, "spine") || strings.Contains(from, "agg") || strings.HasPrefix(from, "core"):
		return "switch uplinks"
	case strings.HasSuffix(name, "(NVL)"):
		return "NVLink"
	case strings.HasSuffix(name, "(PCI)"):
		return "PCIe"
	case strings.HasSuffix(name, "(NET)"):
		return "NIC (in node)"
	case strings.HasSuffix(name, "(SYS)"):
		return "CPU interconnect"
	case strings.HasSuffix(name, "(C2C)"):
		return "C2C"
	}
	return "other"
}

// classes sums every link of e by class over a run of T.
func classes(e *simnet.Engine, T float64) []ClassUse {
	idx := map[string]int{}
	var out []ClassUse
	for l := 0; l < e.NumLinks(); l++ {
		id := simnet.LinkID(l)
		c := linkClass(e.LinkName(id))
		i, ok := idx[c]
		if !ok {
			i = len(out)
			idx[c] = i
			out = append(out, ClassUse{Class: c})
		}
		out[i].Links++
		b := e.LinkBytes(id)
		if b <= 0 {
			continue
		}
		out[i].Used++
		out[i].Bytes += b
		if capB := float64(e.LinkCap(id)); capB > 0 && T > 0 {
			out[i].MaxUtil = max(out[i].MaxUtil, b/(capB*T))
		}
	}
	return out
}

// busiest returns the links that carried bytes, busiest first (at most focusLinks), with their
// mean utilisation over a run of T, and how many links carried bytes.
func busiest(e *simnet.Engine, T float64) ([]linkBytes, []LinkUse, int) {
	var ls []linkBytes
	for l := 0; l < e.NumLinks(); l++ {
		if b := e.LinkBytes(simnet.LinkID(l)); b > 0 {
			ls = append(ls, linkBytes{simnet.LinkID(l), b})
		}
	}
	used := len(ls)
	sort.SliceStable(ls, func(i, j int) bool { return ls[i].bytes > ls[j].bytes })
	if len(ls) > focusLinks {
		ls = ls[:focusLinks]
	}
	var out []LinkUse
	for _, l := range ls {
		capB := float64(e.LinkCap(l.id)) // bytes per ps
		u := 0.0
		if T > 0 && capB > 0 {
			u = l.bytes / (capB * T)
		}
		out = append(out, LinkUse{Name: e.LinkName(l.id), GBps: e.LinkCap(l.id).GBps(), Bytes: l.bytes, Util: u, BusyUs: e.LinkBusy(l.id).Micros()})
	}
	return ls, out, used
}

// summariseLinks keeps the busiest links (by bytes carried, from the engine) and spreads each
// recorded message's wire bytes evenly over its lifetime on every link of its route, in time bins.
func summariseLinks(fo *Focus, e *simnet.Engine, res *simnet.Result) {
	T := float64(res.Time)
	ls, links, used := busiest(e, T)
	fo.Used, fo.Links, fo.Classes = used, links, classes(e, T)
	row := map[simnet.LinkID]int{}
	for i, l := range ls {
		fo.Links[i].Bins = make([]float64, focusBins)
		row[l.id] = i
	}
	if T <= 0 {
		return
	}
	bin := T / focusBins
	for _, op := range res.Ops {
		s, en := float64(op.Start), float64(op.End)
		if en <= s {
			en = s + 1
		}
		rate := float64(op.Wire) / (en - s)
		for _, l := range op.Route {
			i, ok := row[l]
			if !ok {
				continue
			}
			rate := rate
			if res.LinkShare != nil {
				rate *= res.LinkShare(l) // a queue pair's part where the link has one
			}
			b := fo.Links[i].Bins
			for k := int(s / bin); k < focusBins && float64(k)*bin < en; k++ {
				lo, hi := max(s, float64(k)*bin), min(en, float64(k+1)*bin)
				if hi > lo {
					b[k] += rate * (hi - lo)
				}
			}
		}
	}
	for i := range fo.Links {
		capB := float64(e.LinkCap(ls[i].id))
		for k := range fo.Links[i].Bins {
			if capB > 0 {
				fo.Links[i].Bins[k] = min(fo.Links[i].Bins[k]/(capB*bin), 1)
			}
		}
	}
}

// timeline keeps the ops of the first ranks and channels for the drawing, and up to opt.TraceOps
// ops for the Perfetto trace.
func timeline(fo *Focus, res *simnet.Result, opt Options) {
	rows := map[[2]int]int{}
	for _, op := range res.Ops {
		if op.Rank < timelineRanks && op.Channel < timelineChans {
			rows[[2]int{op.Rank, op.Channel}] = 0
		}
	}
	keys := make([][2]int, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for i, k := range keys {
		rows[k] = i
		fo.Rows = append(fo.Rows, fmt.Sprintf("rank %d ch %d", k[0], k[1]))
	}
	fo.Trace = perfettoOps(res.Ops[:min(len(res.Ops), max(opt.TraceOps, 0))])
	for _, op := range res.Ops {
		row, ok := rows[[2]int{op.Rank, op.Channel}]
		if !ok || len(fo.Ops) >= opt.TimelineOps {
			continue
		}
		fo.Ops = append(fo.Ops, OpBox{Row: row, Peer: op.Peer, StartUs: op.Start.Micros(), EndUs: op.End.Micros(), Bytes: op.Bytes})
	}
	fo.OpsShown = len(fo.Ops)
	fo.TraceTotal = len(res.Ops)
}

// perfettoOps lays ops out on threads as simnet.WriteTrace does (see Focus.Trace), times rounded
// to the nanosecond as there, so that Perfetto nests every thread's slices.
func perfettoOps(ops []simnet.OpRecord) [][8]int64 {
	if len(ops) == 0 {
		return nil
	}
	threads, of := simnet.TraceThreads([]simnet.Traced{{Ops: ops}})
	ns := func(t simnet.Time) int64 { return int64((t + simnet.Nanosecond/2) / simnet.Nanosecond) }
	out := make([][8]int64, len(ops))
	for i, op := range ops {
		start, end := ns(op.Start), ns(op.End)
		out[i] = [8]int64{int64(op.Rank), int64(op.Channel), int64(op.Peer), start, end - start, op.Bytes,
			int64(threads[of[0][i]].Tid), int64(threads[of[0][i]].Lane)}
	}
	return out
}

// sizeText writes a size for prose: "8 bytes", "16K".
func sizeText(b int64) string {
	if b < 1024 {
		return fmt.Sprintf("%d bytes", b)
	}
	return units.FormatSize(b)
}
