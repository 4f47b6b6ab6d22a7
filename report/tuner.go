package report

import (
	"fmt"
	"sort"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/simnet"
)

// TunerRow is the tuner's choice against size for one collective.
type TunerRow struct {
	Coll   string       `json:"coll"`
	Points []TunerPoint `json:"points"`
}

// TunerPoint is one size: what the tuning model chose, what was simulated, and the predicted time
// of every usable candidate ("why this choice").
type TunerPoint struct {
	Size       int64       `json:"size"`       // the swept size (-b/-e/-f)
	Bytes      int64       `json:"bytes"`      // nccl-tests size column
	CallBytes  int64       `json:"call_bytes"` // count × element size, as NCCL logs the call
	Algo       string      `json:"algo"`
	Proto      string      `json:"proto"`
	NChannels  int         `json:"nchannels"`
	TimeUs     float64     `json:"predicted_us"`
	SimAlgo    string      `json:"sim_algo"`
	SimProto   string      `json:"sim_proto"`
	SimUs      float64     `json:"simulated_us"`
	Candidates []Candidate `json:"candidates,omitempty"` // fastest first
	// Alternatives are the cells simulated (Options.Alternatives), fastest on the GPUs first.
	Alternatives []simnet.Alternative `json:"alternatives,omitempty"`
}

// Candidate is one algorithm × protocol the cost model could pick.
type Candidate struct {
	Algo   string  `json:"algo"`
	Proto  string  `json:"proto"`
	TimeUs float64 `json:"predicted_us"`
}

// tunePoint asks the planner about one size (the call the simulator plans) and keeps the tuning
// model's whole cost table. Point-to-point functions have no cost table (NCCL 2.28 plans them by
// addP2pToPlan's rule); their point holds the simulated choice only.
func tunePoint(p *planner.Planner, f coll.Func, size int64, n int, opt Options, row simnet.Row) (TunerPoint, string, error) {
	call := coll.TestCall(f, size, opt.DataType, opt.Op, n)
	tp := TunerPoint{Size: size, Bytes: row.Bytes, CallBytes: call.Count * int64(opt.DataType.Size()), SimAlgo: row.Algo, SimProto: row.Proto, SimUs: row.TimeUs,
		Algo: row.Algo, Proto: row.Proto, NChannels: row.NChannels, Alternatives: row.Alternatives}
	if f == coll.SendRecv || f == coll.AllToAll {
		return tp, "", nil
	}
	d, err := p.Decide(call)
	if err != nil {
		return tp, "", fmt.Errorf("%s %d bytes: tuning: %w", coll.TestName(f), size, err)
	}
	ch := d.Choice
	tp.Algo, tp.Proto, tp.NChannels = ch.Shown()
	tp.TimeUs = float64(ch.TimeUs)
	for a := coll.Algo(0); a < coll.NumAlgos; a++ {
		for p := coll.Proto(0); p < coll.NumProtos; p++ {
			if v := ch.Cost[a][p]; v >= 0 {
				tp.Candidates = append(tp.Candidates, Candidate{Algo: a.String(), Proto: p.String(), TimeUs: float64(v)})
			}
		}
	}
	sort.SliceStable(tp.Candidates, func(i, j int) bool { return tp.Candidates[i].TimeUs < tp.Candidates[j].TimeUs })
	note := ""
	if tp.Algo != tp.SimAlgo || tp.Proto != tp.SimProto {
		note = fmt.Sprintf("%s: the tuner's %s/%s is simulated as %s/%s at some sizes (hover the tuner map)", row.Coll, tp.Algo, tp.Proto, tp.SimAlgo, tp.SimProto)
	}
	return tp, note, nil
}

// fasterElsewhere reports whether another cell was simulated faster on the GPUs than NCCL's pick
// at this point (Options.Alternatives; the tuner map stars it).
func (tp TunerPoint) fasterElsewhere() bool {
	_, us, ok := simnet.FasterThanPick(tp.Alternatives)
	return ok && us > 0
}

// hasAlternatives reports whether any point of the tuner map carries simulated alternatives.
func (r *Report) hasAlternatives() bool {
	for _, t := range r.Tuner {
		for _, p := range t.Points {
			if len(p.Alternatives) > 0 {
				return true
			}
		}
	}
	return false
}
