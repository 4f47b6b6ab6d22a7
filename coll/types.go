package coll

import (
	"fmt"
	"strings"
)

// DataType is an element type, numbered as ncclDataType_t (NCCL 2.28 nccl.h).
type DataType int

const (
	Int8 DataType = iota
	Uint8
	Int32
	Uint32
	Int64
	Uint64
	Float16
	Float32
	Float64
	Bfloat16
	Float8e4m3
	Float8e5m2
	NumDataTypes
)

var dtNames = [...]string{"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"}
var dtSizes = [...]int{1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1}

// Size is the element size in bytes.
func (d DataType) Size() int {
	if d >= 0 && d < NumDataTypes {
		return dtSizes[d]
	}
	return 0
}

// String gives the nccl-tests spelling (float, half, bfloat16, …).
func (d DataType) String() string {
	if d >= 0 && d < NumDataTypes {
		return dtNames[d]
	}
	return fmt.Sprintf("DataType(%d)", int(d))
}

// ParseDataType accepts nccl-tests' names and common aliases (float32, fp16, bf16, char, int, fp8_e4m3, …).
func ParseDataType(s string) (DataType, error) {
	aliases := map[string]DataType{
		"int8": Int8, "char": Int8, "uint8": Uint8, "int32": Int32, "int": Int32, "uint32": Uint32,
		"int64": Int64, "uint64": Uint64, "half": Float16, "float16": Float16, "fp16": Float16,
		"float": Float32, "float32": Float32, "fp32": Float32, "double": Float64, "float64": Float64, "fp64": Float64,
		"bfloat16": Bfloat16, "bf16": Bfloat16, "f8e4m3": Float8e4m3, "fp8_e4m3": Float8e4m3, "float8e4m3": Float8e4m3,
		"f8e5m2": Float8e5m2, "fp8_e5m2": Float8e5m2, "float8e5m2": Float8e5m2,
	}
	if d, ok := aliases[strings.ToLower(strings.TrimSpace(s))]; ok {
		return d, nil
	}
	return 0, fmt.Errorf("unknown data type %q (want int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2)", s)
}

// RedOp is a reduction operation, numbered as ncclRedOp_t (Sum 0, Prod 1, Max 2, Min 3, Avg 4);
// PreMulSum stands for the user-created ncclRedOpCreatePreMulSum ops (≥5 in NCCL).
type RedOp int

const (
	Sum RedOp = iota
	Prod
	Max
	Min
	Avg
	PreMulSum
	NumRedOps
)

var opNames = [...]string{"sum", "prod", "max", "min", "avg", "premulsum"}

func (o RedOp) String() string {
	if o >= 0 && o < NumRedOps {
		return opNames[o]
	}
	return fmt.Sprintf("RedOp(%d)", int(o))
}

// ParseRedOp accepts nccl-tests' names (sum, prod, max, min, avg, premulsum), case-insensitively.
func ParseRedOp(s string) (RedOp, error) {
	for i, n := range opNames {
		if strings.EqualFold(n, strings.TrimSpace(s)) {
			return RedOp(i), nil
		}
	}
	return 0, fmt.Errorf("unknown reduction %q (want sum, prod, max, min, avg, premulsum)", s)
}
