package simnet

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/simccl/simccl/internal/input"
	"github.com/simccl/simccl/internal/stats"
	"github.com/simccl/simccl/internal/units"

	"github.com/simccl/simccl/coll"
)

// Measured is one row of a measured-timings CSV (tag,coll,world,bytes,us,algbw,busbw), as
// testdata/nccl/*/nccl_perf.csv holds them; coll uses nccl-tests' names (all_reduce, …). Rows
// with an eighth column, the rank (nccl_perf.cu with one process per GPU prints one row per
// rank), are one measurement per rank: ReadMeasuredCSV keeps the slowest rank's, as nccl-tests
// reports the slowest rank's time.
type Measured struct {
	Tag, Coll        string
	World            int
	Bytes            int64
	Us, AlgBw, BusBw float64
}

// MaxMeasuredRows bounds the rows of a measured-timings input: every row is simulated when it is
// compared, and a real nccl-tests sweep has a few dozen sizes per collective.
const MaxMeasuredRows = 10000

// maxMeasuredUs and maxMeasuredGBps bound a measured row's time (a day, in µs) and bandwidths
// (1 PB/s): far past any measurement, and small enough that the charts' scales and ratios stay
// finite (1e308 GB/s made them infinite).
const (
	maxMeasuredUs   = 86400e6
	maxMeasuredGBps = 1e6
)

// Check validates one measured row: a world of at least one rank, a size within units.MaxSize,
// a positive time, and finite, non-negative bandwidths (a NaN or an infinity in any column would
// poison every chart and summary it enters).
func (m *Measured) Check() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case m.World < 1:
		return fmt.Errorf("world %d (want >= 1)", m.World)
	case m.Bytes < 0:
		return fmt.Errorf("bytes %d (want >= 0)", m.Bytes)
	case !(m.Us > 0) || !finite(m.Us) || m.Us > maxMeasuredUs:
		return fmt.Errorf("us %v (want a positive number up to %g)", m.Us, float64(maxMeasuredUs))
	case !(m.AlgBw >= 0) || !finite(m.AlgBw) || m.AlgBw > maxMeasuredGBps:
		return fmt.Errorf("algbw %v (want a number in 0..%g GB/s)", m.AlgBw, float64(maxMeasuredGBps))
	case !(m.BusBw >= 0) || !finite(m.BusBw) || m.BusBw > maxMeasuredGBps:
		return fmt.Errorf("busbw %v (want a number in 0..%g GB/s)", m.BusBw, float64(maxMeasuredGBps))
	}
	return units.CheckSize("bytes", m.Bytes)
}

// ReadMeasuredCSV reads measured timings with internal/input's bounds and at most
// MaxMeasuredRows rows; name is used in errors ("file.csv:12: …").
func ReadMeasuredCSV(r io.Reader, name string) ([]Measured, error) {
	cr := csv.NewReader(input.Limit(r, name, input.MaxBytes))
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	var out []Measured
	ranked := map[measuredKey]int{} // index in out of each per-rank measurement
	for i := 0; ; i++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if errors.Is(err, input.ErrTooLarge) {
			return nil, err
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s:%d: %v", name, pe.Line, pe.Err)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		line, _ := cr.FieldPos(0)
		if i == 0 && len(rec) > 0 && rec[0] == "tag" {
			continue
		}
		if len(rec) < 7 {
			return nil, fmt.Errorf("%s:%d: %d fields, want 7 (tag,coll,world,bytes,us,algbw,busbw)", name, line, len(rec))
		}
		if len(out) == MaxMeasuredRows {
			return nil, fmt.Errorf("%s:%d: more than %d rows", name, line, MaxMeasuredRows)
		}
		w, e1 := strconv.Atoi(rec[2])
		b, e2 := strconv.ParseInt(rec[3], 10, 64)
		us, e3 := strconv.ParseFloat(rec[4], 64)
		ab, e4 := strconv.ParseFloat(rec[5], 64)
		bb, e5 := strconv.ParseFloat(rec[6], 64)
		if e1 != nil || e2 != nil || e3 != nil || e4 != nil || e5 != nil {
			return nil, fmt.Errorf("%s:%d: bad row %s", name, line, clipRow(rec))
		}
		name1 := rec[1]
		if f, err := coll.ParseFunc(name1); err == nil {
			name1 = coll.TestName(f) // "allreduce", "AllReduce": as nccl-tests names it
		}
		m := Measured{Tag: rec[0], Coll: name1, World: w, Bytes: b, Us: us, AlgBw: ab, BusBw: bb}
		if err := m.Check(); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		if len(rec) >= 8 {
			if _, err := strconv.Atoi(rec[7]); err != nil {
				return nil, fmt.Errorf("%s:%d: rank %q is not a number", name, line, rec[7])
			}
			k := measuredKey{m.Tag, m.Coll, m.World, m.Bytes}
			if j, ok := ranked[k]; ok {
				if m.Us > out[j].Us {
					out[j] = m
				}
				continue
			}
			ranked[k] = len(out)
		}
		out = append(out, m)
	}
	return out, nil
}

// measuredKey identifies one measurement of several ranks.
type measuredKey struct {
	tag, coll string
	world     int
	bytes     int64
}

// clipRow prints a CSV record for an error, at most 200 characters.
func clipRow(rec []string) string {
	s := fmt.Sprint(rec)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// ComparePoint is one size simulated beside its measurement.
type ComparePoint struct {
	Coll     string  `json:"coll"`
	Bytes    int64   `json:"bytes"`
	MeasUs   float64 `json:"measured_us"`
	SimUs    float64 `json:"simulated_us"`
	MeasBus  float64 `json:"measured_busbw"`
	SimBus   float64 `json:"simulated_busbw"`
	ErrPct   float64 `json:"error_pct"` // 100 × (simulated − measured) / measured
	SimAlgo  string  `json:"sim_algo"`
	SimProto string  `json:"sim_proto"`
	SimNch   int     `json:"sim_nchannels"`
}

// CompareSummary is the median |error| of one collective, for sizes ≥ 1 MiB and below.
type CompareSummary struct {
	Coll        string  `json:"coll"`
	MedianLarge float64 `json:"median_abs_err_pct_ge_1MiB"`
	MedianSmall float64 `json:"median_abs_err_pct_lt_1MiB"`
	NLarge      int     `json:"n_ge_1MiB"`
	NSmall      int     `json:"n_lt_1MiB"`
}

// Compare simulates every measured row with the given tag (float, sum, as nccl-tests runs by
// default) on m and summarises the errors per collective. Rows whose world differs from m's ranks
// are an error; sizes that round to no element are skipped.
func Compare(m *Machine, meas []Measured, tag string) ([]ComparePoint, []CompareSummary, error) {
	var pts []ComparePoint
	for _, r := range meas {
		if r.Tag != tag {
			continue
		}
		if r.World != m.NRanks() {
			return nil, nil, fmt.Errorf("measurement of %s on %d ranks, machine has %d", r.Coll, r.World, m.NRanks())
		}
		f, err := coll.FuncOfTest(r.Coll)
		if err != nil {
			return nil, nil, err
		}
		row, _, err := m.Run(f, r.Bytes, coll.Float32, coll.Sum, RunOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("%s %d: %w", r.Coll, r.Bytes, err)
		}
		if row.TimeUs == 0 {
			continue
		}
		pts = append(pts, ComparePoint{Coll: r.Coll, Bytes: r.Bytes, MeasUs: r.Us, SimUs: row.TimeUs, MeasBus: r.BusBw, SimBus: row.BusBw,
			ErrPct: 100 * (row.TimeUs - r.Us) / r.Us, SimAlgo: row.Algo, SimProto: row.Proto, SimNch: row.NChannels})
	}
	var sums []CompareSummary
	for _, f := range []coll.Func{coll.AllReduce, coll.AllGather, coll.ReduceScatter, coll.Broadcast, coll.Reduce, coll.AllToAll, coll.SendRecv} {
		c := coll.TestName(f)
		var lg, sm []float64
		for _, p := range pts {
			if p.Coll != c {
				continue
			}
			if p.Bytes >= 1<<20 {
				lg = append(lg, math.Abs(p.ErrPct))
			} else {
				sm = append(sm, math.Abs(p.ErrPct))
			}
		}
		if len(lg)+len(sm) > 0 {
			sums = append(sums, CompareSummary{Coll: c, MedianLarge: stats.Median(lg), MedianSmall: stats.Median(sm), NLarge: len(lg), NSmall: len(sm)})
		}
	}
	return pts, sums, nil
}
