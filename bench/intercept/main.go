// Command intercept measures what the preloadable NCCL shim adds to each call in record mode: a C
// driver calls ncclAllReduce in a loop, once linked straight to a fake libnccl (calls return at
// once) and once through the shim forwarding to that fake library, recording every call to a
// trace file; virtual mode (no real library) is measured too. It prints a table and writes JSON.
//
//	go run ./bench/intercept [-n 1000000] [-reps 5] [-json bench/intercept/overhead.json]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

type row struct {
	Mode       string    `json:"mode"`
	NsPerCall  float64   `json:"ns_per_call"` // median over reps
	OverheadNs float64   `json:"overhead_ns"` // against the direct call
	Reps       []float64 `json:"reps"`
}

func main() {
	n := flag.Int("n", 1_000_000, "calls per run")
	reps := flag.Int("reps", 5, "runs per mode (the median is reported)")
	jsonPath := flag.String("json", "", "also write the rows as JSON to this file")
	flag.Parse()
	if err := run(*n, *reps, *jsonPath); err != nil {
		fmt.Fprintln(os.Stderr, "bench/intercept:", err)
		os.Exit(1)
	}
}

func sh(env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func run(n, reps int, jsonPath string) error {
	dir, err := os.MkdirTemp("", "simccl-shim-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := "testdata/intercept/c"
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("run from the repository root (%v)", err)
	}
	steps := [][]string{
		{"go", "build", "-buildmode=c-shared", "-o", filepath.Join(dir, "libsimccl_nccl.so"), "./intercept/shim"},
		{"gcc", "-O2", "-shared", "-fPIC", "-o", filepath.Join(dir, "libfakenccl.so"), src + "/fake_nccl.c"},
		{"gcc", "-O2", "-o", filepath.Join(dir, "drv_shim"), src + "/driver.c", "-L" + dir, "-lsimccl_nccl", "-Wl,-rpath," + dir},
		{"gcc", "-O2", "-o", filepath.Join(dir, "drv_fake"), src + "/driver.c", "-L" + dir, "-lfakenccl", "-Wl,-rpath," + dir},
	}
	for _, s := range steps {
		if _, err := sh([]string{"CGO_ENABLED=1"}, s[0], s[1:]...); err != nil {
			return err
		}
	}
	modes := []struct {
		name, drv string
		env       []string
	}{
		{"direct (fake libnccl)", "drv_fake", nil},
		{"shim record -> fake libnccl", "drv_shim", []string{"SIMCCL_REAL_NCCL=" + filepath.Join(dir, "libfakenccl.so"), "SIMCCL_TRACE_DIR=" + filepath.Join(dir, "trace")}},
		{"shim virtual", "drv_shim", []string{"SIMCCL_MODE=virtual", "SIMCCL_TRACE_DIR=" + filepath.Join(dir, "trace")}},
	}
	var rows []row
	for _, m := range modes {
		r := row{Mode: m.name}
		for i := 0; i < reps; i++ {
			out, err := sh(m.env, filepath.Join(dir, m.drv), "2", "0", strconv.Itoa(n))
			if err != nil {
				return err
			}
			var ns float64
			for _, l := range strings.Split(out, "\n") {
				if v, ok := strings.CutPrefix(l, "ns_per_call "); ok {
					ns, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
				}
			}
			r.Reps = append(r.Reps, ns)
			os.RemoveAll(filepath.Join(dir, "trace"))
		}
		s := append([]float64(nil), r.Reps...)
		sort.Float64s(s)
		r.NsPerCall = s[len(s)/2]
		rows = append(rows, r)
	}
	for i := range rows {
		rows[i].OverheadNs = rows[i].NsPerCall - rows[0].NsPerCall
	}
	host, _ := os.Hostname()
	fmt.Printf("# shim overhead per ncclAllReduce, %d calls x %d runs (median), %s/%s, %d CPUs, host %s, %s\n",
		n, reps, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), host, time.Now().UTC().Format(time.RFC3339))
	fmt.Printf("%-30s %12s %14s\n", "mode", "ns/call", "overhead ns")
	for _, r := range rows {
		fmt.Printf("%-30s %12.1f %14.1f\n", r.Mode, r.NsPerCall, r.OverheadNs)
	}
	if jsonPath != "" {
		b, err := json.MarshalIndent(map[string]any{"calls": n, "reps": reps, "rows": rows}, "", " ")
		if err != nil {
			return err
		}
		return os.WriteFile(jsonPath, append(b, '\n'), 0o644)
	}
	return nil
}
