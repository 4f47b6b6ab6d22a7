package intercept

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/simccl/simccl/coll"
)

// ErrTrace marks a malformed workload trace.
var ErrTrace = errors.New("intercept: bad trace")

// Op names of the trace: NCCL's own function names without the "nccl" prefix, as NCCL's COLL
// log lines spell them ("AllReduce: opCount …").
const (
	OpAllReduce     = "AllReduce"
	OpBroadcast     = "Broadcast"
	OpReduce        = "Reduce"
	OpAllGather     = "AllGather"
	OpReduceScatter = "ReduceScatter"
	OpSend          = "Send"
	OpRecv          = "Recv"
	OpAllToAll      = "AllToAll"
	// Communicator events (no data moves).
	OpCommInit     = "CommInit"     // ncclCommInitRank, ncclCommInitRankConfig, ncclCommInitAll (one per comm)
	OpCommSplit    = "CommSplit"    // ncclCommSplit: the new communicator
	OpCommFinalize = "CommFinalize" // ncclCommFinalize
	OpCommDestroy  = "CommDestroy"  // ncclCommDestroy or ncclCommAbort
)

// IsCollective reports whether op moves data (a collective or a point-to-point call).
func IsCollective(op string) bool {
	switch op {
	case OpAllReduce, OpBroadcast, OpReduce, OpAllGather, OpReduceScatter, OpSend, OpRecv, OpAllToAll:
		return true
	}
	return false
}

// Record is one line of a workload trace: one NCCL call made by one rank. Count is the count
// argument of the call as NCCL takes it (sendcount for AllGather, recvcount for ReduceScatter,
// elements per peer for Send/Recv).
type Record struct {
	Seq    int64  `json:"seq"`              // per-process call number (from 0)
	TimeNs int64  `json:"t_ns"`             // host time of the call (Unix ns; 0 when unknown, e.g. from a log)
	DurNs  int64  `json:"dur_ns,omitempty"` // host time spent inside the real call (record mode)
	Rank   int    `json:"rank"`             // the caller's rank in Comm
	NRanks int    `json:"nranks"`           // size of Comm
	Comm   string `json:"comm"`             // communicator id, equal on every member rank
	Op     string `json:"op"`               // AllReduce, Send, CommInit, … (constants above)
	Count  int64  `json:"count,omitempty"`
	Dtype  string `json:"dtype,omitempty"` // coll.DataType spelling (float, half, bfloat16, …)
	RedOp  string `json:"redop,omitempty"` // coll.RedOp spelling (sum, …)
	Root   int    `json:"root"`            // root of Broadcast/Reduce, peer of Send/Recv, -1 otherwise
	Stream string `json:"stream,omitempty"`
	Group  int    `json:"group"`         // group nesting depth at the call (0: outside any group)
	GID    int64  `json:"gid,omitempty"` // outermost group number on this process (from 1), 0 outside groups
	Parent string `json:"parent,omitempty"`
	Color  int    `json:"color,omitempty"` // ncclCommSplit colour
	Host   string `json:"host,omitempty"`
	PID    int    `json:"pid,omitempty"`
	Mode   string `json:"mode,omitempty"` // "record", "virtual" or "log" (set on communicator events)
	Topo   string `json:"topo,omitempty"` // virtual mode: the topology file the communicator is placed on
}

// DataType returns the record's element type.
func (r *Record) DataType() (coll.DataType, error) { return coll.ParseDataType(r.Dtype) }

// Bytes is the size of the caller's send buffer for the call (count × element size).
func (r *Record) Bytes() int64 {
	dt, err := coll.ParseDataType(r.Dtype)
	if err != nil {
		return 0
	}
	return r.Count * int64(dt.Size())
}

// DtypeName maps ncclDataType_t (NCCL 2.28 numbering, fact sheet §8.1) to coll's spelling.
func DtypeName(v int) string {
	d := coll.DataType(v)
	if d >= 0 && d < coll.NumDataTypes {
		return d.String()
	}
	return "dtype" + strconv.Itoa(v)
}

// RedOpName maps ncclRedOp_t (Sum 0 … Avg 4; ≥5 user ops from ncclRedOpCreatePreMulSum,
// NCCL 2.11+, fact sheet §8.1) to coll's spelling.
func RedOpName(v int) string {
	switch {
	case v >= 0 && v < int(coll.PreMulSum):
		return coll.RedOp(v).String()
	case v >= int(coll.PreMulSum):
		return coll.PreMulSum.String()
	}
	return "redop" + strconv.Itoa(v)
}

// AppendRecord appends r as one JSON line (with its newline) to b. It is the shim's hot path:
// no reflection, no allocation beyond b's growth. ReadTrace reads what it writes.
func AppendRecord(b []byte, r *Record) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, r.Seq, 10)
	b = append(b, `,"t_ns":`...)
	b = strconv.AppendInt(b, r.TimeNs, 10)
	if r.DurNs != 0 {
		b = append(b, `,"dur_ns":`...)
		b = strconv.AppendInt(b, r.DurNs, 10)
	}
	b = append(b, `,"rank":`...)
	b = strconv.AppendInt(b, int64(r.Rank), 10)
	b = append(b, `,"nranks":`...)
	b = strconv.AppendInt(b, int64(r.NRanks), 10)
	b = appendStr(b, "comm", r.Comm)
	b = appendStr(b, "op", r.Op)
	if r.Count != 0 {
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, r.Count, 10)
	}
	if r.Dtype != "" {
		b = appendStr(b, "dtype", r.Dtype)
	}
	if r.RedOp != "" {
		b = appendStr(b, "redop", r.RedOp)
	}
	b = append(b, `,"root":`...)
	b = strconv.AppendInt(b, int64(r.Root), 10)
	if r.Stream != "" {
		b = appendStr(b, "stream", r.Stream)
	}
	b = append(b, `,"group":`...)
	b = strconv.AppendInt(b, int64(r.Group), 10)
	if r.GID != 0 {
		b = append(b, `,"gid":`...)
		b = strconv.AppendInt(b, r.GID, 10)
	}
	if r.Parent != "" {
		b = appendStr(b, "parent", r.Parent)
	}
	if r.Color != 0 {
		b = append(b, `,"color":`...)
		b = strconv.AppendInt(b, int64(r.Color), 10)
	}
	if r.Host != "" {
		b = appendStr(b, "host", r.Host)
	}
	if r.PID != 0 {
		b = append(b, `,"pid":`...)
		b = strconv.AppendInt(b, int64(r.PID), 10)
	}
	if r.Mode != "" {
		b = appendStr(b, "mode", r.Mode)
	}
	if r.Topo != "" {
		b = appendStr(b, "topo", r.Topo)
	}
	return append(b, "}\n"...)
}

func appendStr(b []byte, key, val string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendQuote(b, val)
}

// ReadTrace reads a JSON-lines trace. name is used in errors ("trace.jsonl:12: …"). Blank lines
// and lines starting with '#' are skipped.
func ReadTrace(r io.Reader, name string) ([]Record, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var out []Record
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || t[0] == '#' {
			continue
		}
		var rec Record
		dec := json.NewDecoder(strings.NewReader(t))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %v", ErrTrace, name, line, err)
		}
		if err := rec.check(); err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %v", ErrTrace, name, line, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s:%d: %v", ErrTrace, name, line+1, err)
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
func (r *Record) check() error {
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
		if _, err := coll.ParseDataType(r.Dtype); err != nil {
			return fmt.Errorf("%s: %v", r.Op, err)
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
