package intercept

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildShim builds the c-shared shim, the fake libnccl and the C driver of testdata/intercept/c
// into dir, or skips when cgo or a C compiler is missing.
func buildShim(t *testing.T) (dir string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a c-shared library (-short)")
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc: the shim needs cgo")
	}
	dir = t.TempDir()
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run("go", "build", "-buildmode=c-shared", "-o", filepath.Join(dir, "libsimccl_nccl.so"), "./shim")
	run(cc, "-O2", "-shared", "-fPIC", "-o", filepath.Join(dir, "libfakenccl.so"), "../testdata/intercept/c/fake_nccl.c")
	run(cc, "-O2", "-o", filepath.Join(dir, "driver"), "../testdata/intercept/c/driver.c", "-L"+dir, "-lsimccl_nccl", "-Wl,-rpath,"+dir)
	run(cc, "-O2", "-shared", "-fPIC", "-DFAKE_NEWER", "-o", filepath.Join(dir, "libfakenccl_newer.so"), "../testdata/intercept/c/fake_nccl.c")
	run(cc, "-O2", "-o", filepath.Join(dir, "driver_newer"), "../testdata/intercept/c/driver_newer.c", "-L"+dir, "-lsimccl_nccl", "-Wl,-rpath,"+dir)
	return dir
}

func runDriver(t *testing.T, dir string, env []string, args ...string) (string, error) {
	return runProgram(t, dir, "driver", env, args...)
}

func runProgram(t *testing.T, dir, name string, env []string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(dir, name), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestShim(t *testing.T) {
	dir := buildShim(t)

	t.Run("record", func(t *testing.T) {
		tr := filepath.Join(dir, "rec")
		out, err := runDriver(t, dir, []string{"SIMCCL_REAL_NCCL=" + filepath.Join(dir, "libfakenccl.so"), "SIMCCL_TRACE_DIR=" + tr, "RANK=1"}, "4", "1", "3")
		if err != nil || !strings.Contains(out, "ok") {
			t.Fatalf("driver: %v\n%s", err, out)
		}
		recs, err := ReadTraceFile(filepath.Join(tr, "simccl-trace.rank1.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		type want struct {
			op           string
			count        int64
			dtype, redop string
			root, group  int
			nranks, rank int
		}
		exp := []want{
			{OpCommInit, 0, "", "", -1, 0, 4, 1},
			{OpAllReduce, 1024, "float", "sum", -1, 0, 4, 1},
			{OpBroadcast, 4096, "bfloat16", "", 1, 0, 4, 1},
			{OpReduce, 8, "half", "max", 0, 0, 4, 1},
			{OpAllGather, 256, "float", "", -1, 0, 4, 1},
			{OpReduceScatter, 512, "float", "avg", -1, 0, 4, 1},
			{OpSend, 100, "int8", "", 2, 1, 4, 1},
			{OpRecv, 100, "int8", "", 0, 1, 4, 1},
			{OpCommSplit, 0, "", "", -1, 0, 2, 0}, // the fake splits by parity: rank 1 of 4 → rank 0 of 2
			{OpAllReduce, 64, "float", "sum", -1, 0, 2, 0},
			{OpCommDestroy, 0, "", "", -1, 0, 2, 0},
			{OpAllReduce, 1 << 20, "float", "sum", -1, 0, 4, 1},
			{OpAllReduce, 1 << 20, "float", "sum", -1, 0, 4, 1},
			{OpAllReduce, 1 << 20, "float", "sum", -1, 0, 4, 1},
			{OpCommDestroy, 0, "", "", -1, 0, 4, 1},
		}
		if len(recs) != len(exp) {
			t.Fatalf("%d records, want %d: %+v", len(recs), len(exp), recs)
		}
		for i, r := range recs {
			e := exp[i]
			if r.Op != e.op || r.Count != e.count || r.Dtype != e.dtype || r.RedOp != e.redop || r.Root != e.root || r.Group != e.group || r.NRanks != e.nranks || r.Rank != e.rank || r.Seq != int64(i) {
				t.Errorf("record %d: %+v, want %+v", i, r, e)
			}
			if r.TimeNs <= 0 || r.DurNs <= 0 {
				t.Errorf("record %d: time %d, duration %d", i, r.TimeNs, r.DurNs)
			}
		}
		if recs[6].GID == 0 || recs[6].GID != recs[7].GID {
			t.Errorf("send/recv group ids %d, %d", recs[6].GID, recs[7].GID)
		}
		if recs[8].Comm != recs[1].Comm+"/s0c1" || recs[8].Parent != recs[1].Comm || recs[0].Mode != "record" {
			t.Errorf("split %+v of %+v", recs[8], recs[0])
		}
	})

	t.Run("virtual", func(t *testing.T) {
		tr := filepath.Join(dir, "virt")
		out, err := runDriver(t, dir, []string{"SIMCCL_MODE=virtual", "SIMCCL_TOPO=dgx-h100", "SIMCCL_TRACE_DIR=" + tr, "RANK=3"}, "64", "3", "2")
		if err != nil || !strings.Contains(out, "ok") {
			t.Fatalf("driver: %v\n%s", err, out)
		}
		recs, err := ReadTraceFile(filepath.Join(tr, "simccl-trace.rank3.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 14 || recs[0].Mode != "virtual" || recs[0].Topo != "dgx-h100" || recs[0].NRanks != 64 || recs[0].Rank != 3 || recs[1].DurNs != 0 {
			t.Fatalf("virtual trace: %d records, first %+v", len(recs), recs[:min(2, len(recs))])
		}
		if recs[8].Op != OpCommSplit || recs[8].NRanks != 64 {
			t.Errorf("virtual split keeps the parent's size: %+v", recs[8])
		}
		ls, err := Launches(recs)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Replay(ls, machine(t, "dgx-h100", 8), ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Ranks != 64 || rep.Scaled != nil || rep.TotalUs <= 0 {
			t.Errorf("replay of the virtual trace: %d ranks, scaled %v, %.1f us", rep.Ranks, rep.Scaled, rep.TotalUs)
		}
	})

	t.Run("no real library", func(t *testing.T) {
		out, err := runDriver(t, dir, []string{"SIMCCL_REAL_NCCL=" + filepath.Join(dir, "nonexistent.so"), "SIMCCL_TRACE_DIR=" + filepath.Join(dir, "none")}, "2", "0", "1")
		if err == nil || !strings.Contains(out, "simccl shim: dlopen") || !strings.Contains(out, "unhandled system error") {
			t.Fatalf("want a failing driver naming the library: %v\n%s", err, out)
		}
	})
}

// The shim also catches NCCL's newer and optional calls: ncclCommInitRankScalable (a CommInit
// record), PreMulSum reductions (recorded as "premulsum"), ncclMemAlloc/Free and buffer
// registration (forwarded, not recorded), the legacy ncclBcast (a Broadcast record) and NCCL
// 2.28's ncclAlltoAll (an AllToAll record); in
// virtual mode too (except ncclMemAlloc: no device memory there); and a real library that lacks
// them (an older NCCL) still loads, the calls to them failing with ncclInvalidUsage.
func TestShimNewerAPI(t *testing.T) {
	dir := buildShim(t)
	check := func(t *testing.T, tr string, rank int, mode string) {
		recs, err := ReadTraceFile(filepath.Join(tr, fmt.Sprintf("simccl-trace.rank%d.jsonl", rank)))
		if err != nil {
			t.Fatal(err)
		}
		var ops []string
		for _, r := range recs {
			ops = append(ops, r.Op)
		}
		want := []string{OpCommInit, OpAllReduce, OpBroadcast, OpAllToAll, OpCommDestroy}
		if strings.Join(ops, ",") != strings.Join(want, ",") {
			t.Fatalf("ops %v, want %v", ops, want)
		}
		if recs[0].Mode != mode || recs[0].NRanks != 4 || recs[0].Rank != rank || recs[1].RedOp != "premulsum" || recs[1].Count != 4096 ||
			recs[2].Count != 2048 || recs[2].Dtype != "bfloat16" || recs[2].Root != 0 || recs[1].Comm != recs[0].Comm || recs[3].Count != 64 {
			t.Errorf("records %+v", recs)
		}
	}
	t.Run("record", func(t *testing.T) {
		tr := filepath.Join(dir, "newer-rec")
		out, err := runProgram(t, dir, "driver_newer", []string{"SIMCCL_REAL_NCCL=" + filepath.Join(dir, "libfakenccl_newer.so"), "SIMCCL_TRACE_DIR=" + tr, "RANK=2"}, "4", "2", "1")
		if err != nil || !strings.Contains(out, "ok") {
			t.Fatalf("driver_newer: %v\n%s", err, out)
		}
		check(t, tr, 2, "record")
	})
	t.Run("virtual", func(t *testing.T) {
		tr := filepath.Join(dir, "newer-virt")
		out, err := runProgram(t, dir, "driver_newer", []string{"SIMCCL_MODE=virtual", "SIMCCL_TRACE_DIR=" + tr, "RANK=1"}, "4", "1", "0")
		if err != nil || !strings.Contains(out, "ok") {
			t.Fatalf("driver_newer: %v\n%s", err, out)
		}
		check(t, tr, 1, "virtual")
	})
	t.Run("older real library", func(t *testing.T) {
		// The existing driver runs on a library without the optional functions...
		out, err := runDriver(t, dir, []string{"SIMCCL_REAL_NCCL=" + filepath.Join(dir, "libfakenccl.so"), "SIMCCL_TRACE_DIR=" + filepath.Join(dir, "older")}, "2", "0", "1")
		if err != nil || !strings.Contains(out, "ok") {
			t.Fatalf("driver on an older library: %v\n%s", err, out)
		}
		// ...and a call to one of them fails with ncclInvalidUsage (5), naming no crash.
		out, err = runProgram(t, dir, "driver_newer", []string{"SIMCCL_REAL_NCCL=" + filepath.Join(dir, "libfakenccl.so"), "SIMCCL_TRACE_DIR=" + filepath.Join(dir, "older2")}, "4", "0", "1")
		if err == nil || !strings.Contains(out, "ncclCommInitRankScalable") || !strings.Contains(out, ": 5 ") {
			t.Fatalf("want ncclCommInitRankScalable to fail with 5: %v\n%s", err, out)
		}
	})
}
