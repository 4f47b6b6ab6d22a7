package perf

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// JSONWriter writes a run as one JSON document, each row as its size finishes:
//
//	{"header": {…Header…}, "nranks": N,
//	 "rows": [{"coll": "all_reduce", "bytes", "count", "type", "redop", "root", "in_place",
//	           "time_us", "algbw", "busbw", "wrong", "algo", "proto", "nchannels", "nccl"}, …],
//	 "tests": [{"coll", "rows", "out_of_bounds", "avg_busbw"}, …],
//	 "avg_busbw": …, "out_of_bounds": …, "wrong": …, "error": "…"}
//
// Keys are snake_case; collectives are spelled as nccl-tests spells them. "nranks" is repeated at
// the top for the readers of runccl's earlier documents (report.ReadMeasured). "wrong" of a row is
// null when it was not checked; "time_us" is the cputime with report_cputime. "tests" sums up each
// collective's rows as nccl-tests' footer does (out_of_bounds: placements with a wrong element).
// "error" is present when the run failed after it began; the document is then still complete.
type JSONWriter struct {
	w     io.Writer
	h     Header
	rows  int
	tests []jsonTest
	all   Result
	err   error
}

type jsonRow struct {
	Coll      string  `json:"coll"`
	Bytes     int64   `json:"bytes"`
	Count     int64   `json:"count"`
	Type      string  `json:"type"`
	RedOp     string  `json:"redop"`
	Root      int     `json:"root"`
	InPlace   bool    `json:"in_place"`
	TimeUs    float64 `json:"time_us"`
	AlgBW     float64 `json:"algbw"`
	BusBW     float64 `json:"busbw"`
	Wrong     *int64  `json:"wrong"`
	Algo      string  `json:"algo,omitempty"`
	Proto     string  `json:"proto,omitempty"`
	NChannels int     `json:"nchannels,omitempty"`
	NCCL      string  `json:"nccl,omitempty"`
}

type jsonTest struct {
	Coll        string  `json:"coll"`
	Rows        int     `json:"rows"`
	OutOfBounds int     `json:"out_of_bounds"`
	AvgBusBW    float64 `json:"avg_busbw"`
	sum         Result
}

// NewJSONWriter returns a writer of h's run to w.
func NewJSONWriter(w io.Writer, h Header) *JSONWriter { return &JSONWriter{w: w, h: h} }

func (j *JSONWriter) write(s string) error {
	if j.err != nil {
		return j.err
	}
	if _, j.err = io.WriteString(j.w, s); j.err == nil {
		if f, ok := j.w.(interface{ Flush() error }); ok {
			j.err = f.Flush()
		}
	}
	return j.err
}

// Begin writes the header and opens the rows.
func (j *JSONWriter) Begin() error {
	h, err := json.MarshalIndent(j.h, "  ", "  ")
	if err != nil {
		return err
	}
	return j.write(fmt.Sprintf("{\n  \"header\": %s,\n  \"nranks\": %d,\n  \"rows\": [", h, j.h.NRanks))
}

// Line writes one size's rows.
func (j *JSONWriter) Line(l Line) error {
	name := NameOf(l.OutOfPlace.Coll)
	if len(j.tests) == 0 || j.tests[len(j.tests)-1].Coll != name {
		j.tests = append(j.tests, jsonTest{Coll: name})
	}
	t := &j.tests[len(j.tests)-1]
	t.sum.Add(l, false)
	j.all.Add(l, false)
	var b strings.Builder
	for _, r := range l.Rows() {
		jr := jsonRow{Coll: name, Bytes: r.Bytes, Count: r.Count, Type: r.Type, RedOp: r.RedOp, Root: r.Root, InPlace: r.InPlace,
			TimeUs: finite(r.TimeUs), AlgBW: finite(r.AlgBW), BusBW: finite(r.BusBW), Algo: r.Algo, Proto: r.Proto, NChannels: r.NChannels, NCCL: r.NCCL}
		if r.Wrong >= 0 {
			w := r.Wrong
			jr.Wrong = &w
		}
		data, err := json.Marshal(jr)
		if err != nil {
			return err
		}
		if j.rows > 0 {
			b.WriteByte(',')
		}
		j.rows++
		b.WriteString("\n    ")
		b.Write(data)
	}
	return j.write(b.String())
}

// finite maps the infinities and NaN JSON cannot hold to 0 (a zero time gives an infinite rate).
func finite(v float64) float64 {
	if v != v || v > 1e308 || v < -1e308 {
		return 0
	}
	return v
}

// End closes the rows and writes the sums; runErr, when not nil, is recorded as "error".
func (j *JSONWriter) End(runErr error) error {
	for i := range j.tests {
		t := &j.tests[i]
		t.Rows, t.OutOfBounds, t.AvgBusBW = t.sum.Placed, t.sum.Failed, finite(t.sum.AvgBusBW)
	}
	tests, err := json.MarshalIndent(j.tests, "  ", "  ")
	if err != nil {
		return err
	}
	if j.tests == nil {
		tests = []byte("[]")
	}
	var b strings.Builder
	if j.rows > 0 {
		b.WriteString("\n  ")
	}
	fmt.Fprintf(&b, "],\n  \"tests\": %s,\n  \"avg_busbw\": %s,\n  \"out_of_bounds\": %d,\n  \"wrong\": %d", tests, jsonNumber(j.all.AvgBusBW), j.all.Failed, j.all.Wrong)
	if runErr != nil {
		msg, _ := json.Marshal(runErr.Error())
		fmt.Fprintf(&b, ",\n  \"error\": %s", msg)
	}
	b.WriteString("\n}\n")
	return j.write(b.String())
}

func jsonNumber(v float64) string {
	data, _ := json.Marshal(finite(v))
	return string(data)
}
