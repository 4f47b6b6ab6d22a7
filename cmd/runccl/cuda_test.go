package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/simccl/simccl/cuda"
)

// The cuda backend's driver is process-wide (real, emulated or absent), so each case runs in a
// child process: this test binary again, running TestCUDAChild with the arguments in the
// environment.

const childArgsEnv = "RUNCCL_TEST_CHILD_ARGS"

func TestCUDAChild(t *testing.T) {
	args := os.Getenv(childArgsEnv)
	if args == "" {
		t.Skip("run as a child by the cuda backend tests")
	}
	os.Exit(mainRun(strings.Split(args, "\x1f"), os.Stdout, os.Stderr, os.Getenv))
}

func runChild(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCUDAChild$")
	cmd.Env = append(os.Environ(), append(env, childArgsEnv+"="+strings.Join(args, "\x1f"))...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestCUDABackendWithoutDriver(t *testing.T) {
	if cuda.Init() == nil {
		t.Skip("this machine has a CUDA driver")
	}
	out, errs, code := runChild(t, nil, "--backend", "cuda", "-g", "2", "-b", "8", "-e", "1K")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stdout %q stderr %q", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "runccl: --backend cuda: cuda: no CUDA driver") || out != "" {
		t.Errorf("want one error line naming the missing driver; stdout %q stderr %q", out, errs)
	}
}

func TestCUDABackendEmulated(t *testing.T) {
	env := []string{EmulateEnv + "=3"}
	out, errs, code := runChild(t, env, "--backend", "cuda", "-g", "3", "--collective", "all", "-b", "8", "-e", "8K", "-f", "32", "--check", "-n", "1", "-d", "half")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"nGpus 3", "transport cuda-p2p (emulated)", "device  2 [0000:12:00] Emulated GPU\n", "# Collective test starting: all_reduce_perf", "# Collective test starting: sendrecv_perf", "# Out of bounds values : 0 OK"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	out, errs, code = runChild(t, env, "--backend", "cuda", "-g", "2", "--collective", "reducescatter", "-b", "1K", "-e", "1K", "--json", "--check", "-n", "1", "-o", "avg", "--algo", "ring")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		NRanks int `json:"nranks"`
		Rows   []struct {
			Coll  string `json:"coll"`
			Bytes int64  `json:"bytes"`
			Wrong int64  `json:"wrong"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if res.NRanks != 2 || len(res.Rows) != 2 || res.Rows[0].Bytes != 1024 || res.Rows[0].Wrong != 0 || res.Rows[1].Wrong != 0 {
		t.Errorf("JSON %+v", res)
	}
	if _, errs, code = runChild(t, env, "--backend", "cuda", "-g", "5", "-b", "8", "-e", "8"); code != 1 || !strings.Contains(errs, "this machine has 3 GPUs") {
		t.Errorf("-g 5 of 3: exit %d, %q", code, errs)
	}
	if _, errs, code = runChild(t, env, "--backend", "rocm"); code != 2 || !strings.Contains(errs, "want cpu or cuda") {
		t.Errorf("--backend rocm: exit %d, %q", code, errs)
	}
	// --share-gpus: 5 ranks on the 3 emulated devices, checked.
	out, errs, code = runChild(t, env, "--backend", "cuda", "-g", "5", "--share-gpus", "-b", "8", "-e", "4K", "-f", "8", "--check", "-n", "1")
	if code != 0 || !strings.Contains(out, "nGpus 5") || !strings.Contains(out, "# Out of bounds values : 0 OK") {
		t.Errorf("-g 5 --share-gpus: exit %d, stderr %q\n%s", code, errs, out)
	}
	// -o all and -N 2: every reduction, each sweep twice, in one table.
	out, errs, code = runChild(t, env, "--backend", "cuda", "-g", "2", "all_reduce", "-b", "8", "-e", "64", "-f", "8", "-n", "1", "-o", "all", "-N", "2")
	if rows := strings.Count(out, "\n   "); code != 0 || rows != 6*2*2 || strings.Count(out, " mulsum ") != 4 || !strings.Contains(out, "# Out of bounds values : 0 OK") {
		t.Errorf("-o all -N 2: exit %d, %d rows, stderr %q\n%s", code, rows, errs, out)
	}
	// -G: the emulator has no CUDA graphs; one error line, exit 1.
	if out, errs, code = runChild(t, env, "--backend", "cuda", "-g", "2", "-b", "8", "-e", "8", "-G", "2"); code != 1 ||
		!strings.Contains(errs, "graphs are not emulated") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("-G on the emulator: exit %d, stdout %q stderr %q", code, out, errs)
	}
	for _, bad := range [][]string{{"-G", "2"}, {"--share-gpus"}, {"--backend", "cuda", "-G", "-1"}} {
		if _, errs, code = runChild(t, env, bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage): %q", bad, code, errs)
		}
	}
}
