// Package trace is the workload trace's record and its JSON-lines encoder, kept free of the
// simulator's packages so that the preloadable NCCL shim (intercept/shim) links only this. Package
// intercept reads, checks, replays and executes traces.
package trace

import "strconv"

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

// Bytes is the size of the caller's send buffer for the call (count × element size; 0 for an
// unknown type).
func (r *Record) Bytes() int64 { return r.Count * int64(ElemSize(r.Dtype)) }

// Data type and reduction names: coll.DataType's and coll.RedOp's spellings, in ncclDataType_t and
// ncclRedOp_t order (NCCL 2.28 nccl.h: Int8 0 … Float8e5m2 11; Sum 0 … Avg 4, ≥5 user
// PreMulSum ops). intercept's tests check that they match package coll.
var (
	dtypeNames = [...]string{"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"}
	dtypeSizes = [...]int{1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1}
	redopNames = [...]string{"sum", "prod", "max", "min", "avg", "premulsum"}
)

// DtypeName maps ncclDataType_t to coll's spelling ("dtype<v>" when unknown).
func DtypeName(v int) string {
	if v >= 0 && v < len(dtypeNames) {
		return dtypeNames[v]
	}
	return "dtype" + strconv.Itoa(v)
}

// ElemSize is the element size of a type spelt as DtypeName spells it (0 when unknown).
func ElemSize(name string) int {
	for i, n := range dtypeNames {
		if n == name {
			return dtypeSizes[i]
		}
	}
	return 0
}

// RedOpName maps ncclRedOp_t to coll's spelling; every user op (≥5) is "premulsum".
func RedOpName(v int) string {
	switch {
	case v >= 0 && v < len(redopNames)-1:
		return redopNames[v]
	case v >= len(redopNames)-1:
		return redopNames[len(redopNames)-1]
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
