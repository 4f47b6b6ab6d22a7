package perf

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/planner"
)

// initComms makes n goroutine ranks over the in-process transport, destroyed with the test.
func initComms(t *testing.T, n int) []*comm.Comm {
	t.Helper()
	cs, err := comm.InitAll(n, &comm.Config{Transport: "inproc", SlotBytes: 4096, Planners: planner.CPU{Settings: slots4K}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Destroy()
		}
	})
	return cs
}

// table prints rows as the text table, for failure messages.
func table(rows []Row) string {
	var b bytes.Buffer
	w := NewTableWriter(&b, Header{Collectives: []string{"?"}})
	for i := 0; i < len(rows); i++ {
		l := Line{OutOfPlace: rows[i]}
		if i+1 < len(rows) && rows[i+1].InPlace {
			l.InPlace = &rows[i+1]
			i++
		}
		_ = w.Line(l)
	}
	_ = w.End(nil)
	return b.String()
}

func TestRunAllCollectivesChecked(t *testing.T) {
	cs := initComms(t, 3)
	for _, dt := range []coll.DataType{coll.Float32, coll.Int8, coll.Bfloat16, coll.Float8e5m2} {
		for _, op := range []coll.RedOp{coll.Sum, coll.Avg, coll.Max, coll.PreMulSum} {
			res, err := Run(cs, Options{Colls: Collectives, Sizes: []int64{8, 1000, 65536}, DataType: dt, Op: op, Iters: 2, Warmup: 1, Check: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.Wrong != 0 || res.Failed != 0 {
				t.Fatalf("%v %v: %d wrong\n%s", dt, op, res.Wrong, table(res.Rows))
			}
			if want := len(Collectives)*3*2 - 3; len(res.Rows) != want || res.Placed != want {
				t.Fatalf("%d rows, %d placements, want %d", len(res.Rows), res.Placed, want)
			}
		}
	}
	res, err := Run(cs, Options{Colls: []string{"allreduce", "allgather"}, Sizes: []int64{1 << 20}, DataType: coll.Float32, Op: coll.PreMulSum, Iters: 2, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Rows[0]
	if r.Bytes != 1<<20 || r.Count != 1<<18 || r.Wrong != 0 || r.RedOp != "mulsum" || math.Abs(r.BusBW-r.AlgBW*4/3) > 1e-9*r.BusBW {
		t.Fatalf("allreduce row %+v (busbw factor 2(n-1)/n = 4/3, nccl-tests' name mulsum)", r)
	}
	ag := res.Rows[2]
	if ag.Coll != "allgather" || ag.RedOp != "none" || ag.Count != (1<<18)/3/4*4 || ag.Bytes != ag.Count*3*4 || math.Abs(ag.BusBW-ag.AlgBW*2/3) > 1e-9*ag.BusBW {
		t.Fatalf("allgather row %+v", ag)
	}
	if want := (r.BusBW + res.Rows[1].BusBW + ag.BusBW + res.Rows[3].BusBW) / 4; math.Abs(res.AvgBusBW-want) > 1e-9*want {
		t.Fatalf("avg busbw %v, want %v", res.AvgBusBW, want)
	}
}

// Every nccl-tests option the CPU engine runs gives checked rows: -m (calls in one group), -z
// (blocking), -C (cputime), -N (cycles), -c N (checked runs), -a (every average).
func TestRunOptions(t *testing.T) {
	cs := initComms(t, 3)
	base := Options{Colls: []string{"allreduce", "sendrecv", "broadcast"}, Sizes: []int64{64, 4096}, DataType: coll.Float32, Iters: 2, Warmup: 1, Check: true, Root: 2}
	cases := []struct {
		name  string
		set   func(*Options)
		lines int
	}{
		{"agg iters", func(o *Options) { o.AggIters = 3 }, 6},
		{"blocking", func(o *Options) { o.Blocking = true }, 6},
		{"cputime", func(o *Options) { o.CPUTime = true }, 6},
		{"cycles", func(o *Options) { o.Cycles = 2 }, 12},
		{"check iters", func(o *Options) { o.CheckIters = 3 }, 6},
		{"rank 0's time", func(o *Options) { o.Average = Rank0 }, 6},
		{"min", func(o *Options) { o.Average = Min }, 6},
		{"max", func(o *Options) { o.Average = Max }, 6},
		{"no check", func(o *Options) { o.Check = false }, 6},
		{"no warm-up", func(o *Options) { o.Warmup = 0 }, 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := base
			c.set(&o)
			var lines []Line
			o.Sink = sinkFunc(func(l Line) error { lines = append(lines, l); return nil })
			res, err := Run(cs, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(lines) != c.lines || len(res.Rows) != 0 || res.Placed != 2*c.lines || res.Wrong != 0 {
				t.Fatalf("%d lines (want %d), %d rows kept, %d placements, %d wrong", len(lines), c.lines, len(res.Rows), res.Placed, res.Wrong)
			}
			for _, l := range lines {
				for _, r := range l.Rows() {
					if r.TimeUs <= 0 || (r.Wrong != 0) != !o.Check || (r.Coll == "broadcast") != (r.Root == 2) {
						t.Fatalf("row %+v", r)
					}
				}
			}
		})
	}
}

type sinkFunc func(Line) error

func (f sinkFunc) Line(l Line) error { return f(l) }

// The ranks' times are combined as -a says: rank 0's, the mean, the shortest or the longest;
// wrong elements are summed, and an unchecked row stays unchecked.
func TestCombine(t *testing.T) {
	cs := initComms(t, 3)
	for _, c := range []struct {
		avg  Average
		want float64
	}{{Mean, 2}, {Rank0, 1}, {Min, 1}, {Max, 3}} {
		got := make([]float64, len(cs))
		wrong := make([]int64, len(cs))
		errs := make([]error, len(cs))
		var wg sync.WaitGroup
		for i, cm := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := &rankState{c: cm, n: 3, rank: cm.Rank(), opt: Options{Average: c.avg}}
				w := int64(cm.Rank()) // checked: 0+1+2
				if c.avg == Max {
					w = -1 // not checked
				}
				got[i], wrong[i], errs[i] = s.combine(float64(cm.Rank()+1), w)
			}()
		}
		wg.Wait()
		for i := range cs {
			wantWrong := int64(3)
			if c.avg == Max {
				wantWrong = -1
			}
			if errs[i] != nil || got[i] != c.want || wrong[i] != wantWrong {
				t.Errorf("average %v rank %d: %v %d %v, want %v %d", c.avg, i, got[i], wrong[i], errs[i], c.want, wantWrong)
			}
		}
	}
}

// A sink that fails stops the run, also one that would never end (-N 0), and every rank returns.
func TestSinkErrorStopsRun(t *testing.T) {
	cs := initComms(t, 2)
	stop := errors.New("stdout closed")
	n := 0
	_, err := Run(cs, Options{Colls: []string{"allreduce"}, Sizes: []int64{8}, DataType: coll.Float32, Iters: 1, Cycles: Forever,
		Sink: sinkFunc(func(Line) error {
			if n++; n == 5 {
				return stop
			}
			return nil
		})})
	if !errors.Is(err, stop) || n != 5 {
		t.Fatalf("err %v after %d lines", err, n)
	}
}

// Devices lists every rank with this process's pid and host, numbered on its host.
func TestDevices(t *testing.T) {
	cs := initComms(t, 3)
	ds, err := Devices(cs, "CPU (goroutine rank)")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if len(ds) != 3 {
		t.Fatalf("%+v", ds)
	}
	for r, d := range ds {
		if d.Rank != r || d.Device != r || d.Pid != os.Getpid() || d.Host != host || d.Bus != "cpu" || !strings.HasPrefix(DeviceLine(d), "#  Rank  ") {
			t.Errorf("device %+v", d)
		}
	}
}

func TestParseColls(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
	}{
		{"all_reduce,broadcast", "allreduce broadcast"},
		{"all_gather_perf", "allgather"},
		{"ReduceScatter", "reducescatter"},
		{"all", strings.Join(Collectives, " ")},
		{"allscatter", `unknown collective "allscatter"`},
		{"all_reduce,gather", `unknown collective "gather"`},
	} {
		cs, err := ParseColls(c.in)
		got := strings.Join(cs, " ")
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%q: %q, want %q", c.in, got, c.want)
		}
	}
}

// slots4K is NCCL_BUFFSIZE of 8 slots of 4 KiB, the connections the tests' communicators have.
var slots4K = func() planner.Settings {
	var s planner.Settings
	s.Tuning.BuffSize = 8 * 4096
	return s
}()
