package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/simnet"
)

// ReadMeasured reads measured timings in one of three forms, told apart by their content:
//   - runccl --json ({"nranks":N,"rows":[{"coll","bytes","time_us","busbw","in_place"…}]}): the
//     out-of-place rows;
//   - the CSV of testdata/nccl/*/nccl_perf.csv (tag,coll,world,bytes,us,algbw,busbw);
//   - nccl-tests' own text output (one "#  Rank" line per rank, then size count type redop root
//     time algbw busbw #wrong …): the out-of-place columns, for the collective coll (nccl-tests
//     does not print its name), e.g. "all_reduce".
//
// Rows read from JSON or text get the tag "default". name is used in errors ("file:line: …").
func ReadMeasured(data []byte, name, coll string) ([]simnet.Measured, error) {
	trim := bytes.TrimSpace(data)
	if len(trim) == 0 {
		return nil, fmt.Errorf("%w: %s: empty", ErrInput, name)
	}
	if trim[0] == '{' {
		return readRuncclJSON(trim, name)
	}
	first, _, _ := strings.Cut(string(trim), "\n")
	if strings.HasPrefix(first, "tag,") || strings.Count(first, ",") == 6 {
		return simnet.ReadMeasuredCSV(bytes.NewReader(trim), name)
	}
	return readNcclTests(trim, name, coll)
}

func readRuncclJSON(data []byte, name string) ([]simnet.Measured, error) {
	var doc struct {
		NRanks int `json:"nranks"`
		Rows   []struct {
			Coll    string  `json:"coll"`
			Bytes   int64   `json:"bytes"`
			TimeUs  float64 `json:"time_us"`
			AlgBW   float64 `json:"algbw"`
			BusBW   float64 `json:"busbw"`
			InPlace bool    `json:"in_place"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %s: runccl JSON: %v", ErrInput, name, err)
	}
	if doc.NRanks < 1 {
		return nil, fmt.Errorf("%w: %s: runccl JSON without \"nranks\"", ErrInput, name)
	}
	var out []simnet.Measured
	for i, r := range doc.Rows {
		if r.InPlace {
			continue
		}
		f, err := coll.ParseFunc(r.Coll)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: rows[%d]: %v", ErrInput, name, i, err)
		}
		if r.Bytes < 0 || !(r.TimeUs > 0) {
			return nil, fmt.Errorf("%w: %s: rows[%d]: bytes %d, time_us %g", ErrInput, name, i, r.Bytes, r.TimeUs)
		}
		out = append(out, simnet.Measured{Tag: "default", Coll: coll.TestName(f), World: doc.NRanks, Bytes: r.Bytes, Us: r.TimeUs, AlgBw: r.AlgBW, BusBw: r.BusBW})
	}
	return out, nil
}

func readNcclTests(data []byte, name, collName string) ([]simnet.Measured, error) {
	f, err := coll.FuncOfTest(collName)
	if err != nil {
		if f, err = coll.ParseFunc(collName); err != nil {
			return nil, fmt.Errorf("%w: %s: collective %q: %v", ErrInput, name, collName, err)
		}
	}
	world := 0
	var out []simnet.Measured
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		s := sc.Text()
		// NCCL INFO lines interleave with nccl-tests' when NCCL_DEBUG is set.
		if strings.Contains(s, "NCCL INFO") || strings.Contains(s, "NCCL WARN") {
			continue
		}
		t := strings.TrimSpace(s)
		if strings.HasPrefix(t, "#") {
			if fs := strings.Fields(strings.TrimPrefix(t, "#")); len(fs) >= 2 && fs[0] == "Rank" {
				world++
			}
			continue
		}
		fs := strings.Fields(t)
		if len(fs) < 8 {
			continue
		}
		size, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			continue // not a data line
		}
		// size count type redop root time algbw busbw #wrong (out-of-place) …; nccl-tests before
		// 2.13 has no root column.
		ti := 5
		if _, err := strconv.ParseFloat(fs[4], 64); err != nil || len(fs) < 9 {
			ti = 4
		}
		if len(fs) < ti+3 {
			return nil, fmt.Errorf("%w: %s:%d: %d fields", ErrInput, name, line, len(fs))
		}
		us, e1 := strconv.ParseFloat(fs[ti], 64)
		alg, e2 := strconv.ParseFloat(fs[ti+1], 64)
		bus, e3 := strconv.ParseFloat(fs[ti+2], 64)
		if e1 != nil || e2 != nil || e3 != nil || !(us > 0) || size < 0 {
			return nil, fmt.Errorf("%w: %s:%d: bad nccl-tests row %q", ErrInput, name, line, t)
		}
		out = append(out, simnet.Measured{Tag: "default", Coll: coll.TestName(f), Bytes: size, Us: us, AlgBw: alg, BusBw: bus})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInput, name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s: neither CSV, runccl JSON nor nccl-tests output (no data row)", ErrInput, name)
	}
	if world == 0 {
		return nil, fmt.Errorf("%w: %s: nccl-tests output without its \"#  Rank\" lines (the number of ranks is unknown)", ErrInput, name)
	}
	for i := range out {
		out[i].World = world
	}
	return out, nil
}
