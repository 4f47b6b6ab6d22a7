package perf

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/planner"
)

func TestRunAllCollectivesChecked(t *testing.T) {
	cs, err := comm.InitAll(3, &comm.Config{Transport: "inproc", SlotBytes: 4096, Planners: planner.CPU{Settings: slots4K}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range cs {
			c.Destroy()
		}
	}()
	for _, dt := range []coll.DataType{coll.Float32, coll.Int8, coll.Bfloat16, coll.Float8e5m2} {
		for _, op := range []coll.RedOp{coll.Sum, coll.Avg, coll.Max, coll.PreMulSum} {
			res, err := Run(cs, Options{Colls: Collectives, Sizes: []int64{8, 1000, 65536}, DataType: dt, Op: op, Iters: 2, Warmup: 1, Check: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.Wrong != 0 {
				var b bytes.Buffer
				WriteTable(&b, res)
				t.Fatalf("%v %v: %d wrong\n%s", dt, op, res.Wrong, b.String())
			}
			if want := len(Collectives)*3*2 - 3; len(res.Rows) != want {
				t.Fatalf("%d rows, want %d", len(res.Rows), want)
			}
		}
	}
	res, err := Run(cs, Options{Colls: []string{"allreduce", "allgather"}, Sizes: []int64{1 << 20}, DataType: coll.Float32, Op: coll.Sum, Iters: 2, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Rows[0]
	if r.Bytes != 1<<20 || r.Count != 1<<18 || r.Wrong != 0 || math.Abs(r.BusBW-r.AlgBW*4/3) > 1e-9*r.BusBW {
		t.Fatalf("allreduce row %+v (busbw factor 2(n-1)/n = 4/3)", r)
	}
	ag := res.Rows[2]
	if ag.Coll != "allgather" || ag.Count != (1<<18)/3/4*4 || ag.Bytes != ag.Count*3*4 || math.Abs(ag.BusBW-ag.AlgBW*2/3) > 1e-9*ag.BusBW {
		t.Fatalf("allgather row %+v", ag)
	}
	var tb, jb bytes.Buffer
	WriteTable(&tb, res)
	if !strings.Contains(tb.String(), "# Out of bounds values : 0 OK") || !strings.Contains(tb.String(), "     1048576        262144     float     sum      -1") {
		t.Fatalf("table:\n%s", tb.String())
	}
	if err := WriteJSON(&jb, res); err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(jb.Bytes(), &back); err != nil || len(back.Rows) != len(res.Rows) || back.Rows[0].Coll != "allreduce" {
		t.Fatalf("json round trip: %v", err)
	}
}

// TestWriteTableAvgBusBw: the footer as nccl-tests prints it ("%g %s\n" with an empty %s: 6
// significant digits and a trailing space).
func TestWriteTableAvgBusBw(t *testing.T) {
	var b bytes.Buffer
	WriteTable(&b, &Result{NRanks: 2, Transport: "shm", AvgBusBW: 93.01666878329968})
	if want := "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 93.0167 \n#\n"; !strings.HasSuffix(b.String(), want) {
		t.Fatalf("table:\n%q\nwant suffix %q", b.String(), want)
	}
}

func TestParseColls(t *testing.T) {
	if c, err := ParseColls("all_reduce,broadcast"); err != nil || len(c) != 2 || c[0] != "allreduce" {
		t.Fatalf("%v %v", c, err)
	}
	if c, _ := ParseColls("all"); len(c) != len(Collectives) {
		t.Fatalf("all: %v", c)
	}
	if _, err := ParseColls("allscatter"); err == nil {
		t.Fatalf("unknown collective accepted")
	}
}

// slots4K is NCCL_BUFFSIZE of 8 slots of 4 KiB, the connections the tests' communicators have.
var slots4K = func() planner.Settings {
	var s planner.Settings
	s.Tuning.BuffSize = 8 * 4096
	return s
}()
