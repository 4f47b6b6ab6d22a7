package simnet

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/simccl/simccl/coll"
)

// Alternative is a call simulated under one algorithm and protocol forced as NCCL_ALGO and
// NCCL_PROTO would force them (NCCL then picks the channels), beside NCCL's own estimate of it.
type Alternative struct {
	Algo      string  `json:"algo"`
	Proto     string  `json:"proto"`
	NChannels int     `json:"nchannels"`
	TimeUs    float64 `json:"time_us"`
	// DeviceUs, where the call is host-bound (Row.HostBound), is the GPUs' own time below TimeUs:
	// what tells cells apart that the host's floor makes equal.
	DeviceUs float64 `json:"device_us,omitempty"`
	// NCCLModelUs is NCCL's cost model's time for it (the TUNING table's, as simccl tune gives).
	NCCLModelUs float64 `json:"nccl_model_us"`
	Mode        string  `json:"mode"`
	// Pick marks NCCL's own decision for the call (the row's).
	Pick bool `json:"pick,omitempty"`
	// Error, for a cell NCCL could pick that was not simulated, says why (no time then).
	Error string `json:"error,omitempty"`
}

// timedPlanner is a planner that also gives its tuning model's time for the plan
// (planner.Planner.PlanTimed).
type timedPlanner interface {
	PlanTimed(coll.Call) (coll.Plan, float64, error)
}

// planTimed plans call with m's planner, with the model's time where the planner gives one.
func (m *Machine) planTimed(call coll.Call) (coll.Plan, float64, error) {
	if tp, ok := m.Planner.(timedPlanner); ok {
		return tp.PlanTimed(call)
	}
	plan, err := m.Planner.Plan(call)
	return plan, 0, err
}

// Alternatives times the call of f at size under every algorithm and protocol NCCL's tuner could
// give it: each cell forced as NCCL_ALGO=<algo> NCCL_PROTO=<proto> would force it (the tuner then
// picks its channels, as NCCL does), simulated as Run simulates NCCL's own pick (opt), beside the
// cost model's time for it where Machine.Planner gives one (planner.Planner.PlanTimed). pick is
// the row of NCCL's own decision, reused for its cell. Cells the tuning model leaves out (an
// algorithm the machine cannot run, a protocol disabled for it) are not listed; one the simulator
// has no schedule for is, with its reason and no time. Point-to-point calls and one-rank
// communicators have no choice to compare: nil. The result is sorted fastest first by the GPUs'
// time (Alternative.GPUUs; ties, and cells without a time, in NCCL's algorithm and protocol
// order).
func (m *Machine) Alternatives(f coll.Func, size int64, dt coll.DataType, op coll.RedOp, opt RunOptions, pick Row) []Alternative {
	n := m.NRanks()
	if f == coll.SendRecv || f == coll.AllToAll || n == 1 || pick.Count == 0 {
		return nil
	}
	type cell struct {
		alt   Alternative
		order int
	}
	var cells []cell
	for a := range coll.NumAlgos {
		for pr := range coll.NumProtos {
			var ex coll.Exclude
			for i := range ex.Algos {
				ex.Algos[i] = coll.Algo(i) != a
			}
			for i := range ex.Protos {
				ex.Protos[i] = coll.Proto(i) != pr
			}
			call := coll.TestCall(f, size, dt, op, n)
			call.Exclude = ex
			plan, model, err := m.planTimed(call)
			if err != nil || plan.Algo != a || plan.Proto != pr {
				continue // not a cell NCCL's tuner could pick here
			}
			alt := Alternative{Algo: a.String(), Proto: pr.String(), NChannels: plan.NChannels, NCCLModelUs: model}
			if pick.NCCL == "" && pick.Algo == alt.Algo && pick.Proto == alt.Proto {
				alt.Pick, alt.NChannels, alt.TimeUs, alt.DeviceUs, alt.Mode = true, pick.NChannels, pick.TimeUs, pick.DeviceUs, pick.Mode
			} else {
				o := opt
				o.Exclude, o.Record = ex, false
				row, _, err := m.Run(f, size, dt, op, o)
				switch {
				case err != nil:
					alt.Error = err.Error()
				case row.NCCL != "":
					alt.Error = "not simulated: the simulator ran " + row.Algo + "/" + row.Proto + " instead"
				default:
					alt.NChannels, alt.TimeUs, alt.DeviceUs, alt.Mode = row.NChannels, row.TimeUs, row.DeviceUs, row.Mode
				}
				if errors.Is(err, ErrNotCompiled) {
					alt.Error = fmt.Sprintf("not simulated: simccl has no schedule for %v", a)
				}
			}
			cells = append(cells, cell{alt, int(a)*int(coll.NumProtos) + int(pr)})
		}
	}
	slices.SortStableFunc(cells, func(x, y cell) int {
		xt, yt := x.alt.Error == "", y.alt.Error == ""
		if xt != yt {
			if xt {
				return -1
			}
			return 1
		}
		if xt {
			if c := cmp.Compare(x.alt.GPUUs(), y.alt.GPUUs()); c != 0 {
				return c
			}
		}
		return cmp.Compare(x.order, y.order)
	})
	out := make([]Alternative, len(cells))
	for i, c := range cells {
		out[i] = c.alt
	}
	return out
}

// GPUUs is the GPUs' time of a, which ranks the cells: its device time where the host's floor
// set its time (every cell of such a call takes about the floor, which differs between them only
// by the host's cost of their channels), else its time.
func (a Alternative) GPUUs() float64 {
	if a.DeviceUs > 0 {
		return a.DeviceUs
	}
	return a.TimeUs
}

// PickOf is NCCL's own pick among alts, where it was simulated (false: not among them, or no time).
func PickOf(alts []Alternative) (Alternative, bool) {
	for _, a := range alts {
		if a.Pick {
			return a, a.Error == "" && a.TimeUs > 0
		}
	}
	return Alternative{}, false
}

// FasterThanPick is the fastest simulated alternative that is not NCCL's pick and how much less
// it takes than the pick on the GPUs (µs; 0 where the pick is the fastest); ok is false where the
// two cannot be compared (no timed pick, or no other timed cell).
func FasterThanPick(alts []Alternative) (best Alternative, savedUs float64, ok bool) {
	pick, timed := PickOf(alts)
	if !timed {
		return best, 0, false
	}
	for _, a := range alts {
		if !a.Pick && a.Error == "" && a.TimeUs > 0 {
			return a, max(0, pick.GPUUs()-a.GPUUs()), true
		}
	}
	return best, 0, false
}

// AlternativesNote sums up the rows' alternatives (calls on nodes nodes): at how many calls NCCL's pick was the fastest
// simulated, and the largest gaps where it was not ("" when no row has two timed alternatives).
func AlternativesNote(rows []Row, nodes int) string {
	type gap struct {
		r    Row
		best Alternative
		by   float64
	}
	var gaps []gap
	calls := 0
	for _, r := range rows {
		best, saved, ok := FasterThanPick(r.Alternatives)
		if !ok {
			continue
		}
		calls++
		if saved > 0 {
			gaps = append(gaps, gap{r, best, saved / best.GPUUs()})
		}
	}
	if calls == 0 {
		return ""
	}
	s := fmt.Sprintf("--alternatives: NCCL's pick was the fastest simulated on the GPUs at %d of %d calls", calls-len(gaps), calls)
	if len(gaps) == 0 {
		return s
	}
	slices.SortStableFunc(gaps, func(x, y gap) int { return cmp.Compare(y.by, x.by) })
	var worst []string
	llBig := false     // an LL cell of 1 MiB or more among them
	ringSmall := false // across nodes, a Ring cell below 16 MiB among them
	for _, g := range gaps {
		if len(worst) == 3 {
			break
		}
		w := fmt.Sprintf("%s %d bytes, %s/%s (the pick, %s/%s, %.1f%% slower)",
			g.r.Coll, g.r.Bytes, g.best.Algo, g.best.Proto, g.r.Algo, g.r.Proto, 100*g.by)
		if !slices.Contains(worst, w) { // the same call in two data types or communicators
			worst = append(worst, w)
			llBig = llBig || (g.best.Proto == coll.LL.String() && g.r.Bytes >= 1<<20)
			ringSmall = ringSmall || (nodes > 1 && g.best.Algo == coll.Ring.String() && g.r.Bytes < 16<<20)
		}
	}
	s += "; the largest gaps: " + strings.Join(worst, "; ") + " (simulated GPU time, a host-bound call's device_us; beside each cell NCCL's cost model's time, nccl_model_us)"
	if llBig {
		// BENCHMARKS.md, stop 74: NCCL with the cell forced on 2 H200 (testdata/nccl/h200x2/nccl_perf.csv).
		s += "; LL from 1 MiB is the least checked cell: forced on 2 H200 its simulated time was 20–26% under NCCL's from 64 MiB, so an LL gap there is an upper bound"
	}
	if ringSmall {
		// BENCHMARKS.md, stop 74: nccl-tests#309's gj-aion cluster, 2 H100 nodes, NCCL_ALGO=Ring.
		s += "; across nodes a Ring cell below 16 MiB is doubtful: on a public 2-node H100 cluster a Ring run (with NCCL_MIN_CTAS=24) took 157–178 µs at 1–8 MiB where the simulation's Ring cells take 42–120 µs"
	}
	return s
}
