package intercept

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/intercept/trace"
	"github.com/simccl/simccl/internal/input"
)

// ErrTrace marks a malformed workload trace.
var ErrTrace = errors.New("intercept: bad trace")

// Record is one line of a workload trace (see package trace).
type Record = trace.Record

// The trace's op names (package trace).
const (
	OpAllReduce     = trace.OpAllReduce
	OpBroadcast     = trace.OpBroadcast
	OpReduce        = trace.OpReduce
	OpAllGather     = trace.OpAllGather
	OpReduceScatter = trace.OpReduceScatter
	OpSend          = trace.OpSend
	OpRecv          = trace.OpRecv
	OpAllToAll      = trace.OpAllToAll
	OpCommInit      = trace.OpCommInit
	OpCommSplit     = trace.OpCommSplit
	OpCommFinalize  = trace.OpCommFinalize
	OpCommDestroy   = trace.OpCommDestroy
)

// IsCollective reports whether op moves data (a collective or a point-to-point call).
func IsCollective(op string) bool { return trace.IsCollective(op) }

// DtypeName maps ncclDataType_t (NCCL 2.28 nccl.h numbering) to coll's spelling.
func DtypeName(v int) string { return trace.DtypeName(v) }

// RedOpName maps ncclRedOp_t (Sum 0 … Avg 4; ≥5 user ops from ncclRedOpCreatePreMulSum,
// NCCL 2.11+ nccl.h) to coll's spelling.
func RedOpName(v int) string { return trace.RedOpName(v) }

// AppendRecord appends r as one JSON line (with its newline) to b (package trace).
func AppendRecord(b []byte, r *Record) []byte { return trace.AppendRecord(b, r) }

// dataType returns the record's element type.
func dataType(r *Record) (coll.DataType, error) { return coll.ParseDataType(r.Dtype) }

// ReadTrace reads a JSON-lines trace, with internal/input's bounds (64 MiB, 1 MiB a line) and at
// most MaxRecords records. name is used in errors ("trace.jsonl:12: …"). Blank lines and lines
// starting with '#' are skipped.
func ReadTrace(r io.Reader, name string) ([]Record, error) { return readTrace(r, name, 0) }

// readTrace is ReadTrace with room for hint records made at once (growing the slice record by
// record copied it five times over: two fifths of the time of a 64 MiB trace).
func readTrace(r io.Reader, name string, hint int) ([]Record, error) {
	sc := input.NewScanner(r, name)
	out := make([]Record, 0, min(hint, MaxRecords))
	for sc.Scan() {
		line := sc.Line()
		t := strings.TrimSpace(sc.Text())
		if t == "" || t[0] == '#' {
			continue
		}
		if len(out) == MaxRecords {
			return nil, fmt.Errorf("%w: %s:%d: more than %d records", ErrTrace, name, line, MaxRecords)
		}
		var rec Record
		if !decodeRecord(t, &rec) {
			rec = Record{}
			dec := json.NewDecoder(strings.NewReader(t))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&rec); err != nil {
				return nil, fmt.Errorf("%w: %s:%d: %v", ErrTrace, name, line, err)
			}
		}
		if err := checkRecord(&rec); err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %v", ErrTrace, name, line, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTrace, err)
	}
	return out, nil
}

// ReadTraceFile reads one trace file.
func ReadTraceFile(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadTrace(f, path)
}

// check validates the fields one record needs.
func checkRecord(r *Record) error {
	switch {
	case r.Op == "":
		return errors.New("no op")
	case r.Comm == "":
		return fmt.Errorf("%s: no comm", r.Op)
	case r.NRanks < 1 || r.NRanks > 1<<24:
		return fmt.Errorf("%s: nranks %d", r.Op, r.NRanks)
	case r.Rank < 0 || r.Rank >= r.NRanks:
		return fmt.Errorf("%s: rank %d of %d", r.Op, r.Rank, r.NRanks)
	case r.Count < 0:
		return fmt.Errorf("%s: count %d", r.Op, r.Count)
	case r.Group < 0:
		return fmt.Errorf("%s: group depth %d", r.Op, r.Group)
	}
	if IsCollective(r.Op) {
		// The trace's own spelling first (coll.ParseDataType, which also takes aliases, builds
		// its table at every call: an eighth of the time of reading a large trace).
		if trace.ElemSize(r.Dtype) == 0 {
			if _, err := coll.ParseDataType(r.Dtype); err != nil {
				return fmt.Errorf("%s: %v", r.Op, err)
			}
		}
		if r.RedOp != "" {
			if _, err := coll.ParseRedOp(r.RedOp); err != nil {
				return fmt.Errorf("%s: %v", r.Op, err)
			}
		}
		if (r.Op == OpSend || r.Op == OpRecv || r.Op == OpBroadcast || r.Op == OpReduce) && (r.Root < 0 || r.Root >= r.NRanks) {
			return fmt.Errorf("%s: root/peer %d of %d ranks", r.Op, r.Root, r.NRanks)
		}
	}
	return nil
}

// SortRecords orders records by time, then sequence (stable for records of one process).
func SortRecords(recs []Record) {
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].TimeNs != recs[j].TimeNs {
			return recs[i].TimeNs < recs[j].TimeNs
		}
		return recs[i].Seq < recs[j].Seq
	})
}
