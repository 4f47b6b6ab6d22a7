package coll

import (
	"fmt"
	"strings"
)

// Func is a collective function, numbered as NCCL's tuning tables number them (NCCL 2.28
// tuning.cc: Broadcast 0, Reduce 1, AllGather 2, ReduceScatter 3, AllReduce 4). SendRecv and AllToAll are
// not in NCCL's cost table; they follow the tuned functions.
type Func int

const (
	Broadcast Func = iota
	Reduce
	AllGather
	ReduceScatter
	AllReduce
	SendRecv
	AllToAll
	// NumTunedFuncs is the number of functions with a row in NCCL's cost table.
	NumTunedFuncs = 5
)

var funcNames = [...]string{"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "SendRecv", "AllToAll"}

// IsP2P reports whether f is point-to-point work (send/recv, all-to-all) rather than a collective
// primitive loop.
func (f Func) IsP2P() bool { return f == SendRecv || f == AllToAll }

func (f Func) String() string {
	if f >= 0 && int(f) < len(funcNames) {
		return funcNames[f]
	}
	return fmt.Sprintf("Func(%d)", int(f))
}

// ParseFunc accepts NCCL's names and nccl-tests' spellings, case-insensitively
// ("AllReduce", "allreduce", "all_reduce", "sendrecv", "alltoall").
func ParseFunc(s string) (Func, error) {
	k := strings.ToLower(strings.ReplaceAll(s, "_", ""))
	for i, n := range funcNames {
		if strings.ToLower(n) == k {
			return Func(i), nil
		}
	}
	return 0, fmt.Errorf("unknown collective %q (want allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv)", s)
}

// Algo is an algorithm, numbered as in NCCL 2.28 (Tree 0, Ring 1, CollNetDirect 2, CollNetChain 3,
// NVLS 4, NVLSTree 5, PAT 6).
type Algo int

const (
	Tree Algo = iota
	Ring
	CollNetDirect
	CollNetChain
	NVLS
	NVLSTree
	PAT
	NumAlgos
)

var algoNames = [...]string{"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"}

func (a Algo) String() string {
	if a >= 0 && a < NumAlgos {
		return algoNames[a]
	}
	return fmt.Sprintf("Algo(%d)", int(a))
}

// algoLogNames are ncclAlgoToString's spellings, used in the per-call TUNING line.
var algoLogNames = [...]string{"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"}

// LogName is the spelling of NCCL's per-call TUNING line ("RING", "NVLS_TREE").
func (a Algo) LogName() string {
	if a >= 0 && a < NumAlgos {
		return algoLogNames[a]
	}
	return a.String()
}

// ParseAlgo accepts NCCL's algorithm names case-insensitively, in the table spelling
// ("NVLSTree") or the log spelling ("NVLS_TREE").
func ParseAlgo(s string) (Algo, error) {
	k := strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	for i, n := range algoNames {
		if strings.EqualFold(n, k) {
			return Algo(i), nil
		}
	}
	return 0, fmt.Errorf("unknown algorithm %q (want Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT)", s)
}

// Proto is a protocol, numbered as in NCCL (LL 0, LL128 1, Simple 2).
type Proto int32

const (
	LL Proto = iota
	LL128
	Simple
	NumProtos
)

var protoNames = [...]string{"LL", "LL128", "Simple"}

func (p Proto) String() string {
	if p >= 0 && p < NumProtos {
		return protoNames[p]
	}
	return fmt.Sprintf("Proto(%d)", int(p))
}

// LogName is the spelling of NCCL's per-call TUNING line ("LL", "LL128", "SIMPLE").
func (p Proto) LogName() string {
	if p >= 0 && p < NumProtos {
		return strings.ToUpper(protoNames[p])
	}
	return p.String()
}

// ParseProto accepts NCCL's protocol names case-insensitively.
func ParseProto(s string) (Proto, error) {
	for i, n := range protoNames {
		if strings.EqualFold(n, strings.TrimSpace(s)) {
			return Proto(i), nil
		}
	}
	return 0, fmt.Errorf("unknown protocol %q (want LL, LL128, Simple)", s)
}
