package coll

import (
	"encoding/json"
	"fmt"
	"io"
)

// UnmarshalJSON reads an Op and restores its enumerations from their names.
func (o *Op) UnmarshalJSON(b []byte) error {
	type plain Op
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var err error
	if p.Func, err = ParseFunc(p.FuncName); err != nil {
		return fmt.Errorf("coll: op: %w", err)
	}
	if (p.Func == SendRecv || p.Func == AllToAll) && p.AlgoName == "P2P" {
		p.Algo = Ring // point-to-point has no algorithm (addOp)
	} else if p.Algo, err = ParseAlgo(p.AlgoName); err != nil {
		return fmt.Errorf("coll: op: %w", err)
	}
	if p.Proto, err = ParseProto(p.ProtoName); err != nil {
		return fmt.Errorf("coll: op: %w", err)
	}
	if p.DataType, err = ParseDataType(p.TypeName); err != nil {
		return fmt.Errorf("coll: op: %w", err)
	}
	if p.RedOp, err = ParseRedOp(p.OpName); err != nil {
		return fmt.Errorf("coll: op: %w", err)
	}
	*o = Op(p)
	return nil
}

// WriteJSON writes the schedule as indented JSON.
func WriteJSON(w io.Writer, s *Schedule) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(s)
}

// ReadJSON reads a schedule written by WriteJSON (or anyone keeping the contract) and validates it.
func ReadJSON(r io.Reader) (*Schedule, error) {
	var s Schedule
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("coll: reading schedule JSON: %w", err)
	}
	if err := Validate(&s); err != nil {
		return nil, err
	}
	return &s, nil
}
