package perf

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/realnet"
)

func TestDetectLaunch(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	cases := []struct {
		env     func(string) string
		ok      bool
		want    Launch
		wantErr string
	}{
		{env(), false, Launch{}, ""},
		{env("RANK", "3", "WORLD_SIZE", "8", "LOCAL_RANK", "3", "MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "29500"), true,
			Launch{Launcher: "torchrun", Rank: 3, Size: 8, LocalRank: 3, Addr: "10.0.0.1:29501"}, ""},
		{env("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_LOCAL_RANK", "1", "SIMCCL_COMM_ID", "h:5000"), true,
			Launch{Launcher: "mpirun", Rank: 1, Size: 2, LocalRank: 1, Addr: "h:5000"}, ""},
		{env("SLURM_PROCID", "0", "SLURM_NTASKS", "4", "SLURM_LOCALID", "0", "SIMCCL_COMM_ID", "node1:7000"), true,
			Launch{Launcher: "srun", Rank: 0, Size: 4, Addr: "node1:7000"}, ""},
		{env("SLURM_PROCID", "0", "SLURM_NTASKS", "4"), true, Launch{}, "SIMCCL_COMM_ID"},
		{env("RANK", "9", "WORLD_SIZE", "8", "MASTER_ADDR", "a", "MASTER_PORT", "1"), true, Launch{}, "rank 9 of 8"},
		{env("RANK", "x", "WORLD_SIZE", "8"), true, Launch{}, "RANK"},
		{env("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "a", "MASTER_PORT", "http"), true, Launch{}, "MASTER_PORT"},
		{env("RANK", "1", "WORLD_SIZE", "2", "SIMCCL_COMM_ID", "h:5000#s3cret", "TORCHELASTIC_RUN_ID", "r7"), true,
			Launch{Launcher: "torchrun", Rank: 1, Size: 2, Addr: "h:5000", Secret: "s3cret", Job: "torchelastic r7"}, ""},
		{env("SLURM_PROCID", "0", "SLURM_NTASKS", "4", "SLURM_JOB_ID", "42", "SLURM_STEP_ID", "1", "SIMCCL_COMM_ID", "n:7000", "HOME", "/home/u"), true,
			Launch{Launcher: "srun", Size: 4, Addr: "n:7000", SecretFile: "/home/u/.config/simccl/secret", Job: "slurm 42.1"}, ""},
		{env("RANK", "0", "WORLD_SIZE", "2", "SIMCCL_COMM_ID", "h:1#"), true, Launch{}, "empty secret"},
		{env("RANK", "0", "WORLD_SIZE", "2000000", "SIMCCL_COMM_ID", "h:1#s"), true, Launch{}, "at most 1048576"},
	}
	for i, c := range cases {
		l, ok, err := DetectLaunch(c.env)
		if ok != c.ok {
			t.Errorf("case %d: ok %v", i, ok)
		}
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("case %d: error %v, want one naming %s", i, err, c.wantErr)
			}
			continue
		}
		if err != nil || l != c.want {
			t.Errorf("case %d: %+v, %v; want %+v", i, l, err, c.want)
		}
	}
}

// Every rank of a launcher job derives one id from its environment; another secret, address, size
// or (with a secret file) job gives another id; no secret at all is an error.
func TestLaunchUniqueID(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secret")
	base := Launch{Launcher: "torchrun", Size: 4, Addr: "10.0.0.1:29501", SecretFile: file, Job: "torchelastic a"}
	id := func(l Launch) realnet.UniqueID {
		t.Helper()
		v, err := l.UniqueID()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ref := id(base)
	r3 := base
	r3.Rank = 3
	if id(r3) != ref {
		t.Errorf("ranks 0 and 3 derive different ids")
	}
	for _, change := range []func(*Launch){
		func(l *Launch) { l.Job = "torchelastic b" },
		func(l *Launch) { l.Size = 8 },
		func(l *Launch) { l.Addr = "10.0.0.1:29601" },
		func(l *Launch) { l.Secret = "explicit" },
	} {
		l := base
		change(&l)
		if id(l).Secret() == ref.Secret() {
			t.Errorf("%+v: the same secret as %+v", l, base)
		}
	}
	if _, err := (Launch{Launcher: "mpirun", Size: 2, Addr: "h:1"}).UniqueID(); err == nil || !strings.Contains(err.Error(), "SIMCCL_COMM_ID") {
		t.Errorf("no secret: %v", err)
	}
}

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
