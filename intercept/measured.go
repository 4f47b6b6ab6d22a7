package intercept

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"github.com/simccl/simccl/internal/input"
)

// MeasuredRank is what a timed program wrote for one rank (bench/intercept/torch_mixed.py):
// the host window of its timed loop, its calls in order and the NCCL kernels the profiler saw,
// one per call, in order.
type MeasuredRank struct {
	Rank    int              `json:"rank"`
	World   int              `json:"world"`
	StartNs int64            `json:"start_ns"` // Unix ns, the clock of the trace's t_ns
	EndNs   int64            `json:"end_ns"`
	Calls   []MeasuredEvent  `json:"calls"`
	Kernels []MeasuredKernel `json:"kernels"`
}

// MeasuredEvent is one call of a measured rank.
type MeasuredEvent struct {
	Op      string  `json:"op"`
	Bytes   int64   `json:"bytes"`
	EventUs float64 `json:"event_us"`
	WallUs  float64 `json:"wall_us"`
}

// MeasuredKernel is one NCCL kernel the profiler saw.
type MeasuredKernel struct {
	Name string  `json:"name"`
	Ts   float64 `json:"ts"`  // µs, one clock for all ranks of a host
	Dur  float64 `json:"dur"` // µs
}

// MaxMeasuredCalls bounds the calls (and kernels) of one measured file: as many as a trace may
// hold records.
const MaxMeasuredCalls = MaxRecords

// readMeasuredRank decodes one rank's file as a stream, counting calls and kernels as they come
// (a 64 MiB array of empty objects would otherwise be millions of them in memory).
func readMeasuredRank(data []byte, name string) (MeasuredRank, error) {
	var m MeasuredRank
	bad := func(err error) error { return fmt.Errorf("%w: %s: %v", ErrTrace, name, err) }
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return m, bad(fmt.Errorf("not a JSON object"))
	}
	array := func(key string, each func() error) error {
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return fmt.Errorf("%q is not an array", key)
		}
		for n := 0; dec.More(); n++ {
			if n == MaxMeasuredCalls {
				return fmt.Errorf("more than %d %s", MaxMeasuredCalls, key)
			}
			if err := each(); err != nil {
				return fmt.Errorf("%s[%d]: %v", key, n, err)
			}
		}
		_, err := dec.Token()
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return m, bad(err)
		}
		switch key, _ := tok.(string); key {
		case "rank":
			err = dec.Decode(&m.Rank)
		case "world":
			err = dec.Decode(&m.World)
		case "start_ns":
			err = dec.Decode(&m.StartNs)
		case "end_ns":
			err = dec.Decode(&m.EndNs)
		case "calls":
			err = array(key, func() error {
				var c MeasuredEvent
				err := dec.Decode(&c)
				m.Calls = append(m.Calls, c)
				return err
			})
		case "kernels":
			err = array(key, func() error {
				var k MeasuredKernel
				err := dec.Decode(&k)
				m.Kernels = append(m.Kernels, k)
				return err
			})
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return m, bad(err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return m, bad(err)
	}
	return m, nil
}

// MeasuredCall is one call's measured communication time: from the start of the last rank's
// NCCL kernel to the end of the last one (the time all ranks were in the collective, without the
// skew of one rank arriving early).
type MeasuredCall struct {
	Op     string  `json:"op"`
	Bytes  int64   `json:"bytes"`
	TimeUs float64 `json:"time_us"`
}

// Measured is a whole timed run.
type Measured struct {
	StartNs, EndNs int64
	Calls          []MeasuredCall
	TotalUs        float64
}

// ReadMeasured reads the per-rank files of one run and combines them call by call.
func ReadMeasured(paths []string) (*Measured, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: no measured file", ErrTrace)
	}
	var ranks []MeasuredRank
	for _, p := range paths {
		b, err := input.ReadFile(p)
		if err != nil {
			return nil, err
		}
		m, err := readMeasuredRank(b, p)
		if err != nil {
			return nil, err
		}
		if len(m.Kernels) != len(m.Calls) {
			return nil, fmt.Errorf("%w: %s: %d calls but %d NCCL kernels (one kernel per call expected)", ErrTrace, p, len(m.Calls), len(m.Kernels))
		}
		ranks = append(ranks, m)
	}
	sort.Slice(ranks, func(i, j int) bool { return ranks[i].Rank < ranks[j].Rank })
	n := len(ranks[0].Calls)
	out := &Measured{StartNs: ranks[0].StartNs, EndNs: ranks[0].EndNs}
	for i, r := range ranks {
		if len(r.Calls) != n {
			return nil, fmt.Errorf("%w: %s: %d calls, rank %d has %d", ErrTrace, paths[i], len(r.Calls), ranks[0].Rank, n)
		}
	}
	for c := 0; c < n; c++ {
		start, end := math.Inf(-1), math.Inf(-1)
		for _, r := range ranks {
			k := r.Kernels[c]
			start = math.Max(start, k.Ts)
			end = math.Max(end, k.Ts+k.Dur)
		}
		mc := MeasuredCall{Op: ranks[0].Calls[c].Op, Bytes: ranks[0].Calls[c].Bytes, TimeUs: end - start}
		out.Calls = append(out.Calls, mc)
		out.TotalUs += mc.TimeUs
	}
	return out, nil
}

// ComparedCall is one launch simulated beside its measurement.
type ComparedCall struct {
	Op      string  `json:"op"` // the measured program's name for it
	Bytes   int64   `json:"bytes"`
	SimUs   float64 `json:"sim_us"`
	MeasUs  float64 `json:"measured_us"`
	Launch  int     `json:"launch"`
	SimOps  string  `json:"sim_ops"`
	SimAlgo string  `json:"sim_algo"`
}

// Comparison sums a replay against a measured run.
type Comparison struct {
	Calls   []ComparedCall `json:"calls"`
	SimUs   float64        `json:"sim_total_us"`
	MeasUs  float64        `json:"measured_total_us"`
	RelErr  float64        `json:"rel_err"` // (sim − measured) / measured
	PerOp   []OpCompare    `json:"per_op"`
	Skipped int            `json:"launches_outside_window"`
}

// OpCompare is the comparison restricted to one measured op name.
type OpCompare struct {
	Op     string  `json:"op"`
	Calls  int     `json:"calls"`
	SimUs  float64 `json:"sim_us"`
	MeasUs float64 `json:"measured_us"`
	RelErr float64 `json:"rel_err"`
}

// Compare matches the replay's launches that the trace places inside the measured window (host
// time of the launch between the run's start and end) with the measured calls, in order.
func Compare(rep *Report, m *Measured) (*Comparison, error) {
	var in []LaunchResult
	skipped := 0
	for _, l := range rep.Launches {
		if l.TimeNs >= m.StartNs && l.TimeNs <= m.EndNs {
			in = append(in, l)
		} else {
			skipped++
		}
	}
	sort.SliceStable(in, func(i, j int) bool { return in[i].TimeNs < in[j].TimeNs })
	if len(in) != len(m.Calls) {
		return nil, fmt.Errorf("%w: %d launches inside the measured window, %d measured calls", ErrReplay, len(in), len(m.Calls))
	}
	c := &Comparison{Skipped: skipped}
	per := map[string]*OpCompare{}
	var names []string
	for i, l := range in {
		mc := m.Calls[i]
		c.Calls = append(c.Calls, ComparedCall{Op: mc.Op, Bytes: mc.Bytes, SimUs: l.TimeUs, MeasUs: mc.TimeUs, Launch: l.Index, SimOps: l.Ops, SimAlgo: l.Algo + "/" + l.Proto})
		c.SimUs += l.TimeUs
		c.MeasUs += mc.TimeUs
		p := per[mc.Op]
		if p == nil {
			p = &OpCompare{Op: mc.Op}
			per[mc.Op] = p
			names = append(names, mc.Op)
		}
		p.Calls++
		p.SimUs += l.TimeUs
		p.MeasUs += mc.TimeUs
	}
	if c.MeasUs > 0 {
		c.RelErr = (c.SimUs - c.MeasUs) / c.MeasUs
	}
	for _, n := range names {
		p := per[n]
		if p.MeasUs > 0 {
			p.RelErr = (p.SimUs - p.MeasUs) / p.MeasUs
		}
		c.PerOp = append(c.PerOp, *p)
	}
	return c, nil
}
