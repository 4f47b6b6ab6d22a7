package intercept

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/intercept/trace"
)

func TestAppendRecordRoundTrip(t *testing.T) {
	in := []Record{
		{Seq: 0, TimeNs: 17, DurNs: 3, Rank: 1, NRanks: 4, Comm: "u1", Op: OpCommInit, Root: -1, Host: "h\"x", PID: 9, Mode: "virtual", Topo: "dgx-h100"},
		{Seq: 1, TimeNs: 18, Rank: 1, NRanks: 4, Comm: "u1", Op: OpAllReduce, Count: 1 << 40, Dtype: "bfloat16", RedOp: "avg", Root: -1, Stream: "0x10", Group: 2, GID: 7},
		{Seq: 2, Rank: 0, NRanks: 2, Comm: "u1/s0c1", Op: OpCommSplit, Root: -1, Parent: "u1", Color: 1},
		{Seq: 3, Rank: 0, NRanks: 2, Comm: "u1/s0c1", Op: OpSend, Count: 5, Dtype: "int8", Root: 1},
	}
	var b []byte
	for i := range in {
		b = AppendRecord(b, &in[i])
	}
	out, err := ReadTrace(strings.NewReader("# comment\n\n"+string(b)), "t.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
	}
	if got := out[1].Bytes(); got != 2<<40 {
		t.Errorf("Bytes = %d", got)
	}
}

func TestReadTraceErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"seq":0,"rank":0,"nranks":2,"comm":"c","op":"AllReduce","count":1,"dtype":"float","root":-1,"group":0}` + "\n{", "t.jsonl:2"},
		{`{"seq":0,"rank":0,"nranks":2,"comm":"c","op":"AllReduce","count":1,"dtype":"float","root":-1,"group":0,"bogus":1}`, "unknown field"},
		{`{"seq":0,"rank":2,"nranks":2,"comm":"c","op":"AllReduce","count":1,"dtype":"float","root":-1,"group":0}`, "rank 2 of 2"},
		{`{"seq":0,"rank":0,"nranks":2,"comm":"c","op":"AllReduce","count":1,"dtype":"float9","root":-1,"group":0}`, "unknown data type"},
		{`{"seq":0,"rank":0,"nranks":2,"comm":"c","op":"Send","count":1,"dtype":"float","root":-1,"group":0}`, "root/peer -1"},
		{`{"seq":0,"rank":0,"nranks":2,"op":"AllReduce","count":1,"dtype":"float","root":-1,"group":0}`, "no comm"},
		{`{"seq":0,"rank":0,"nranks":2,"comm":"c","op":"AllReduce","count":-1,"dtype":"float","root":-1,"group":0}`, "count -1"},
	} {
		_, err := ReadTrace(strings.NewReader(c.in), "t.jsonl")
		if err == nil || !errors.Is(err, ErrTrace) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.in, err, c.want)
		}
	}
}

func TestNames(t *testing.T) {
	if DtypeName(9) != "bfloat16" || DtypeName(7) != "float" || DtypeName(42) != "dtype42" {
		t.Error(DtypeName(9), DtypeName(7), DtypeName(42))
	}
	if RedOpName(4) != "avg" || RedOpName(9) != "premulsum" || RedOpName(-1) != "redop-1" {
		t.Error(RedOpName(4), RedOpName(9), RedOpName(-1))
	}
}

func FuzzReadTrace(f *testing.F) {
	f.Add(`{"seq":0,"rank":0,"nranks":2,"comm":"c","op":"AllReduce","count":1,"dtype":"float","root":-1,"group":0}`)
	f.Fuzz(func(t *testing.T, s string) {
		recs, err := ReadTrace(strings.NewReader(s), "fuzz")
		if err != nil {
			return
		}
		if _, err := Launches(recs); err != nil && !errors.Is(err, ErrReplay) {
			t.Fatalf("Launches: unmarked error %v", err)
		}
	})
}

// Package trace keeps its own copy of coll's type and reduction names (the shim must not link
// the simulator): they must agree.
func TestTraceNamesMatchColl(t *testing.T) {
	for v := 0; v < int(coll.NumDataTypes); v++ {
		d := coll.DataType(v)
		if DtypeName(v) != d.String() || trace.ElemSize(d.String()) != d.Size() {
			t.Errorf("dtype %d: trace %q size %d, coll %q size %d", v, DtypeName(v), trace.ElemSize(d.String()), d.String(), d.Size())
		}
	}
	for v := 0; v < int(coll.NumRedOps); v++ {
		if RedOpName(v) != coll.RedOp(v).String() {
			t.Errorf("redop %d: trace %q, coll %q", v, RedOpName(v), coll.RedOp(v).String())
		}
	}
}

// FuzzDecodeRecord: wherever the fast decoder accepts a line, encoding/json (DisallowUnknownFields)
// decodes it to the same record.
func FuzzDecodeRecord(f *testing.F) {
	for _, s := range []string{
		`{"seq":0,"t_ns":1795328946573142280,"dur_ns":324889039,"rank":0,"nranks":2,"comm":"udf18ccee6a13bbcb","op":"CommInit","root":-1,"group":0,"host":"vm","pid":751,"mode":"record"}`,
		`{"seq":1,"rank":0,"nranks":2,"comm":"c","op":"AllReduce","count":2097152,"dtype":"float","redop":"sum","root":-1,"group":1,"gid":3}`,
		`{}`, ` { "seq" : -0 , "op":"x" } `, `{"seq":01}`, `{"seq":1e3}`, `{"Seq":1}`, `{"op":"\u0041"}`, `{"op":null}`,
		`{"seq":1} x`, `{"rank":9223372036854775808}`, `{"comm":"é"}`, "{\"comm\":\"\xff\"}", `{"seq":1,}`, `{"seq":1,"seq":2}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var fast Record
		if !decodeRecord(s, &fast) {
			return
		}
		var ref Record
		dec := json.NewDecoder(strings.NewReader(s))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ref); err != nil {
			t.Fatalf("%q: fast decoder accepted, encoding/json: %v", s, err)
		}
		if fast != ref {
			t.Fatalf("%q: fast %+v, encoding/json %+v", s, fast, ref)
		}
	})
}

// TestDecodeRecordRoundTrip: every record the shim writes takes the fast path.
func TestDecodeRecordRoundTrip(t *testing.T) {
	for _, r := range []Record{
		{Seq: 1, TimeNs: -5, DurNs: 7, Rank: 3, NRanks: 64, Comm: "u0123/s1c2", Op: OpAllGather, Count: 1 << 40, Dtype: "bfloat16", RedOp: "premulsum", Root: -1, Stream: "0x7f", Group: 2, GID: 9, Parent: "p", Color: -1, Host: "h", PID: 42, Mode: "virtual", Topo: "dgx-h100"},
		{},
	} {
		line := strings.TrimSpace(string(AppendRecord(nil, &r)))
		var got Record
		if !decodeRecord(line, &got) || got != r {
			t.Errorf("%s: fast path %+v", line, got)
		}
	}
}
