package report

import (
	"fmt"
	"math"
	"sort"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/simnet"
	"github.com/simccl/simccl/tuning"
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
	// Classes sums the bytes per link class (name prefix: NVLink, PCIe, NIC, fabric).
	Ops      []OpBox  `json:"timeline"` // ops drawn in the timeline (a subset)
	Rows     []string `json:"timeline_rows"`
	OpsShown int      `json:"timeline_ops"`
	// Trace holds ops for Perfetto: [rank, channel, peer, start ns, duration ns, bytes].
	Trace      [][6]int64 `json:"-"`
	TraceTotal int        `json:"trace_ops"`
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
		if f, err = tuning.ParseFunc(opt.FocusColl); err != nil {
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
	var sched *coll.Schedule
	var plan coll.Plan
	asked := size
	for {
		var err error
		plan, _, err = m.Plan(f, size, opt.DataType, opt.Op)
		if err != nil {
			return fmt.Errorf("focus %s %d bytes: %w", simnet.TestName(f), size, err)
		}
		if plan.Count == 0 {
			return fmt.Errorf("%w: focus %s %d bytes: no element at this size", ErrInput, simnet.TestName(f), size)
		}
		sched, err = coll.Compile(plan)
		if err == nil && len(sched.Ops) <= maxSteps {
			break
		}
		if size <= 8 {
			if err == nil {
				err = fmt.Errorf("%d steps", len(sched.Ops))
			}
			return fmt.Errorf("focus %s: schedule too large to record even at %d bytes: %v", simnet.TestName(f), size, err)
		}
		size /= 2
	}
	if size != asked {
		r.Notes = append(r.Notes, fmt.Sprintf("where time goes: %s at %d bytes has a schedule too large to record (more than %d steps); shown at %d bytes", simnet.TestName(f), asked, maxSteps, size))
	}
	e := simnet.NewEngine(nil)
	cl, err := simnet.NewCluster(e, m.Node, m.Nodes, m.Fabric)
	if err != nil {
		return err
	}
	tm, err := simnet.TimingFor(m.Release, plan.Algo, plan.Proto)
	if err != nil {
		return err
	}
	res, err := simnet.Simulate(e, cl, sched, tm, simnet.Options{Record: true})
	if err != nil {
		return fmt.Errorf("focus %s %d bytes: %w", simnet.TestName(f), size, err)
	}
	fo := &Focus{Coll: simnet.TestName(f), Size: size, Plan: fmt.Sprintf("%v/%v/%d ch", plan.Algo, plan.Proto, plan.NChannels),
		TimeUs: res.Time.Micros(), Messages: len(res.Ops), Bins: focusBins, LinkCount: e.NumLinks()}
	summariseLinks(fo, e, res)
	timeline(fo, res, opt)
	r.Focus = fo
	return nil
}

func nearest(sizes []int64, want int64) int64 {
	best := sizes[0]
	for _, s := range sizes {
		if math.Abs(math.Log(float64(max(s, 1))/float64(want))) < math.Abs(math.Log(float64(max(best, 1))/float64(want))) {
			best = s
		}
	}
	return best
}

// summariseLinks keeps the busiest links (by bytes carried, from the engine) and spreads each
// recorded message's wire bytes evenly over its lifetime on every link of its route, in time bins.
func summariseLinks(fo *Focus, e *simnet.Engine, res *simnet.Result) {
	T := float64(res.Time)
	type lb struct {
		id    simnet.LinkID
		bytes float64
	}
	var ls []lb
	for l := 0; l < e.NumLinks(); l++ {
		if b := e.LinkBytes(simnet.LinkID(l)); b > 0 {
			ls = append(ls, lb{simnet.LinkID(l), b})
		}
	}
	fo.Used = len(ls)
	sort.SliceStable(ls, func(i, j int) bool { return ls[i].bytes > ls[j].bytes })
	if len(ls) > focusLinks {
		ls = ls[:focusLinks]
	}
	row := map[simnet.LinkID]int{}
	for i, l := range ls {
		capB := float64(e.LinkCap(l.id)) // bytes per ps
		u := 0.0
		if T > 0 && capB > 0 {
			u = l.bytes / (capB * T)
		}
		fo.Links = append(fo.Links, LinkUse{Name: e.LinkName(l.id), GBps: e.LinkCap(l.id).GBps(), Bytes: l.bytes, Util: u,
			BusyUs: e.LinkBusy(l.id).Micros(), Bins: make([]float64, focusBins)})
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
	for _, op := range res.Ops {
		if len(fo.Trace) < opt.TraceOps {
			fo.Trace = append(fo.Trace, [6]int64{int64(op.Rank), int64(op.Channel), int64(op.Peer), int64(op.Start / simnet.Nanosecond), int64((op.End - op.Start) / simnet.Nanosecond), op.Bytes})
		}
		row, ok := rows[[2]int{op.Rank, op.Channel}]
		if !ok || len(fo.Ops) >= opt.TimelineOps {
			continue
		}
		fo.Ops = append(fo.Ops, OpBox{Row: row, Peer: op.Peer, StartUs: op.Start.Micros(), EndUs: op.End.Micros(), Bytes: op.Bytes})
	}
	fo.OpsShown = len(fo.Ops)
	fo.TraceTotal = len(res.Ops)
}
