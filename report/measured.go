package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/internal/input"
	"github.com/simccl/simccl/simnet"
)

// ncclTestsHeader is nccl-tests' first header line: "# nThread 1 nGpus 8 minBytes … graph: 0"
// (graph: since nccl-tests 2.13; older outputs have none).
var ncclTestsHeader = regexp.MustCompile(`^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\b(?:.*\bgraph:\s*(\d+))?`)

// MeasuredLaunch reads how an nccl-tests text output launched its calls, from its header line
// ("# nThread T nGpus G … graph: K"): the GPUs each thread drives (G: -g) and whether the calls
// were replayed from CUDA graphs (K ≥ 1: -G). ok is false where data has no such line (CSV,
// runccl JSON, simccl run's table); a log of several runs gives its first.
func MeasuredLaunch(data []byte) (gpusPerThread int, graph, ok bool) {
	sc := input.NewScanner(bytes.NewReader(data), "")
	for sc.Scan() {
		m := ncclTestsHeader.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		g, err := strconv.Atoi(m[2])
		if err != nil || g < 1 {
			return 0, false, false
		}
		k, _ := strconv.Atoi(m[3])
		return g, k > 0, true
	}
	return 0, false, false
}

// ReadMeasured reads measured timings in one of three forms, told apart by their content:
//   - runccl --json ({"nranks":N,"rows":[{"coll","bytes","time_us","busbw","in_place"…}]}): the
//     out-of-place rows;
//   - the CSV of testdata/nccl/*/nccl_perf.csv (tag,coll,world,bytes,us,algbw,busbw);
//   - nccl-tests' own text output (one "#  Rank" line per rank, then size count type redop root
//     time algbw busbw #wrong …): the out-of-place columns. nccl-tests does not print the
//     collective's name in its table: the rows are of the collective of the last binary named
//     before them (its command line: all_gather_perf, ./build/all_reduce_perf_mpi …); coll, when
//     not empty (e.g. "all_reduce"), must agree with it and names the rows of a log that names
//     no binary; a log that names none with coll empty is refused. simccl run's table is read
//     as such: its "# simccl run: …, = N ranks" line gives the ranks where it has no "#  Rank"
//     lines, and its coll column (after nccl-tests' columns and algo, proto, nch) names each
//     row's collective (with coll set, only its rows are kept).
//
// Rows read from JSON or text get the tag "default". name is used in errors ("file:line: …").
// The input is bounded as internal/input bounds a file (64 MiB, 1 MiB a line) and every form to
// simnet.MaxMeasuredRows rows, each checked by simnet.Measured.Check (no NaN or infinity, sizes
// within units.MaxSize).
func ReadMeasured(data []byte, name, coll string) ([]simnet.Measured, error) {
	if len(data) > input.MaxBytes {
		return nil, fmt.Errorf("%w: %w", ErrInput, input.TooLarge(name, input.MaxBytes))
	}
	trim := bytes.TrimSpace(data)
	if len(trim) == 0 {
		return nil, fmt.Errorf("%w: %s: empty", ErrInput, name)
	}
	if trim[0] == '{' {
		return readRuncclJSON(trim, name)
	}
	first, _, _ := strings.Cut(string(trim[:min(len(trim), input.MaxLine)]), "\n")
	if strings.HasPrefix(first, "tag,") || strings.Count(first, ",") == 6 {
		rows, err := simnet.ReadMeasuredCSV(bytes.NewReader(trim), name)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInput, err)
		}
		return rows, nil
	}
	return readNcclTests(trim, name, coll)
}

// runccl's JSON row.
type runcclRow struct {
	Coll    string  `json:"coll"`
	Bytes   int64   `json:"bytes"`
	TimeUs  float64 `json:"time_us"`
	AlgBW   float64 `json:"algbw"`
	BusBW   float64 `json:"busbw"`
	InPlace bool    `json:"in_place"`
}

// readRuncclJSON decodes runccl's document as a stream, so that the rows are counted as they
// come (a 64 MiB array of empty objects would otherwise be millions of rows in memory).
func readRuncclJSON(data []byte, name string) ([]simnet.Measured, error) {
	bad := func(err error) error { return fmt.Errorf("%w: %s: runccl JSON: %v", ErrInput, name, err) }
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, bad(err)
	}
	nranks := 0
	var rows []runcclRow
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad(err)
		}
		key, _ := tok.(string)
		switch key {
		case "nranks":
			if err := dec.Decode(&nranks); err != nil {
				return nil, bad(fmt.Errorf("nranks: %v", err))
			}
		case "rows":
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return nil, bad(fmt.Errorf("\"rows\" is not an array"))
			}
			for dec.More() {
				if len(rows) == simnet.MaxMeasuredRows {
					return nil, fmt.Errorf("%w: %s: runccl JSON: more than %d rows", ErrInput, name, simnet.MaxMeasuredRows)
				}
				var r runcclRow
				if err := dec.Decode(&r); err != nil {
					return nil, bad(fmt.Errorf("rows[%d]: %v", len(rows), err))
				}
				rows = append(rows, r)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, bad(err)
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, bad(err)
			}
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, bad(err)
	}
	if nranks < 1 {
		return nil, fmt.Errorf("%w: %s: runccl JSON without \"nranks\"", ErrInput, name)
	}
	var out []simnet.Measured
	for i, r := range rows {
		if r.InPlace {
			continue
		}
		f, err := coll.ParseFunc(r.Coll)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: rows[%d]: %v", ErrInput, name, i, err)
		}
		m := simnet.Measured{Tag: "default", Coll: coll.TestName(f), World: nranks, Bytes: r.Bytes, Us: r.TimeUs, AlgBw: r.AlgBW, BusBw: r.BusBW}
		if err := m.Check(); err != nil {
			return nil, fmt.Errorf("%w: %s: rows[%d]: %v", ErrInput, name, i, err)
		}
		out = append(out, m)
	}
	return out, nil
}

func readNcclTests(data []byte, name, collName string) ([]simnet.Measured, error) {
	// f is the collective asked for (explicit); cur the one the log's last *_perf command line
	// names (named).
	var f, cur coll.Func
	explicit, named := collName != "", false
	if explicit {
		var err error
		if f, err = coll.FuncOfTest(collName); err != nil {
			if f, err = coll.ParseFunc(collName); err != nil {
				return nil, fmt.Errorf("%w: %s: collective %q: %v", ErrInput, name, collName, err)
			}
		}
	}
	world, simWorld := 0, 0
	var out []simnet.Measured
	// A log of several runs (a *_perf command line before each) has the "#  Rank" lines of each
	// run: part is where the rows of the current run start.
	part := 0
	setWorld := func() error {
		w := world
		if w == 0 {
			w = simWorld
		}
		if w == 0 && part < len(out) {
			return fmt.Errorf("%w: %s: nccl-tests output without its \"#  Rank\" lines (the number of ranks is unknown)", ErrInput, name)
		}
		for i := part; i < len(out); i++ {
			out[i].World = w
		}
		part, world = len(out), 0
		return nil
	}
	simccl := false
	sc := input.NewScanner(bytes.NewReader(data), name)
	for sc.Scan() {
		s := sc.Text()
		// NCCL INFO lines interleave with nccl-tests' when NCCL_DEBUG is set.
		if strings.Contains(s, "NCCL INFO") || strings.Contains(s, "NCCL WARN") {
			continue
		}
		if m := perfBinary.FindStringSubmatch(s); m != nil {
			g, err := coll.FuncOfTest(m[1])
			if err != nil {
				return nil, fmt.Errorf("%w: %s:%d: %s_perf: not a collective simccl simulates", ErrInput, name, sc.Line(), m[1])
			}
			if explicit && g != f {
				return nil, fmt.Errorf("%w: %s:%d: the log is %s_perf's output, not %s's", ErrInput, name, sc.Line(), m[1], coll.TestName(f))
			}
			if len(out) > part {
				if err := setWorld(); err != nil {
					return nil, err
				}
			}
			cur, named = g, true
		}
		t := strings.TrimSpace(s)
		if strings.HasPrefix(t, "#") {
			if fs := strings.Fields(strings.TrimPrefix(t, "#")); len(fs) >= 2 && fs[0] == "Rank" {
				world++
			}
			if m := simcclRanks.FindStringSubmatch(t); m != nil {
				simccl = true
				simWorld, _ = strconv.Atoi(m[1])
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
			return nil, fmt.Errorf("%w: %s:%d: %d fields", ErrInput, name, sc.Line(), len(fs))
		}
		rowColl := f
		switch {
		case simccl && len(fs) > simcclCollField:
			g, err := coll.FuncOfTest(fs[simcclCollField])
			if err != nil {
				return nil, fmt.Errorf("%w: %s:%d: coll column: %v", ErrInput, name, sc.Line(), err)
			}
			if explicit && g != f {
				continue // another collective of the run
			}
			rowColl = g
		case named:
			rowColl = cur
		case !explicit:
			return nil, fmt.Errorf("%w: %s:%d: nccl-tests output that does not name its collective (no all_reduce_perf-like command line before its first row): name it (--measured-coll)", ErrInput, name, sc.Line())
		}
		us, e1 := strconv.ParseFloat(fs[ti], 64)
		alg, e2 := strconv.ParseFloat(fs[ti+1], 64)
		bus, e3 := strconv.ParseFloat(fs[ti+2], 64)
		if e1 != nil || e2 != nil || e3 != nil {
			return nil, fmt.Errorf("%w: %s:%d: bad nccl-tests row %q", ErrInput, name, sc.Line(), clip(t))
		}
		if len(out) == simnet.MaxMeasuredRows {
			return nil, fmt.Errorf("%w: %s:%d: more than %d rows", ErrInput, name, sc.Line(), simnet.MaxMeasuredRows)
		}
		m := simnet.Measured{Tag: "default", Coll: coll.TestName(rowColl), World: 1, Bytes: size, Us: us, AlgBw: alg, BusBw: bus}
		if err := m.Check(); err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %v", ErrInput, name, sc.Line(), err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s: neither CSV, runccl JSON nor nccl-tests output (no data row)", ErrInput, name)
	}
	if err := setWorld(); err != nil {
		return nil, err
	}
	return out, nil
}

// simcclRanks matches simccl run's first line ("# simccl run: dgx-h100, 2 node(s) x 8 GPUs = 16
// ranks, …", simnet.WriteTable) and takes its number of ranks.
var simcclRanks = regexp.MustCompile(`^# simccl run: .* = (\d+) ranks\b`)

// perfBinary matches an nccl-tests binary where a log names it (its command line, an mpirun
// line, a job script's echo): all_gather_perf, ./build/reduce_scatter_perf_mpi …
var perfBinary = regexp.MustCompile(`(?:^|[^A-Za-z0-9_])(all_reduce|all_gather|broadcast|reduce_scatter|reduce|alltoall|scatter|gather|sendrecv|hypercube)_perf(?:_mpi)?(?:[^A-Za-z0-9_]|$)`)

// simcclCollField is the field of simccl run's coll column: after nccl-tests' 13 (size, count,
// type, redop, root, and time, algbw, busbw, #wrong of each placement) and algo, proto, nch.
const simcclCollField = 16

// clip shortens a line quoted in an error to 160 characters.
func clip(s string) string {
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}
