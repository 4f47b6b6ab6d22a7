package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simccl/simccl/realnet"
)

var built struct {
	once sync.Once
	bin  string
	err  error
	out  []byte
}

// buildRunccl builds runccl once for the tests that run it as processes.
func buildRunccl(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "runccl-test-")
		if err != nil {
			built.err = err
			return
		}
		built.bin = filepath.Join(dir, "runccl")
		built.out, built.err = exec.Command("go", "build", "-o", built.bin, ".").CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build: %v\n%s", built.err, built.out)
	}
	return built.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.bin != "" {
		os.RemoveAll(filepath.Dir(built.bin))
	}
	os.Exit(code)
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// startProcs starts runccl --procs with n ranks running small all-reduces for a long time and
// returns it with its n children, once they are there, and a function that reads its stderr. The
// output goes to a file, not a pipe, so that waiting for the parent does not wait for the children
// that share its stderr.
func startProcs(t *testing.T, n int, extra ...string) (*exec.Cmd, []int, func() string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds runccl and starts processes")
	}
	args := append([]string{"--procs", "-g", strconv.Itoa(n), "--collective", "allreduce", "-b", "8", "-e", "8", "-n", "100000000", "-w", "0"}, extra...)
	cmd := exec.Command(buildRunccl(t), args...)
	errf, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	cmd.Stderr = errf
	stderr := func() string { b, _ := os.ReadFile(errf.Name()); return string(b) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if kids := childrenOf(cmd.Process.Pid); len(kids) == n {
			return cmd, kids, stderr
		}
	}
	t.Fatalf("runccl --procs did not start %d children: %s", n, stderr())
	return nil, nil, nil
}

// waitGone waits until none of pids is alive (zombies count as gone) and fails the test otherwise.
func waitGone(t *testing.T, pids []int, within time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var alive []int
		for _, p := range pids {
			if realnet.ProcessAlive(p) {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range alive {
				syscall.Kill(p, syscall.SIGKILL) // do not leave them to the next test
			}
			t.Fatalf("%s: ranks %v still running after %v", what, alive, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A parent killed with SIGKILL (it can do nothing about it) takes its ranks with it. Before, they
// went on running.
func TestProcsParentKilledLeavesNoChildren(t *testing.T) {
	cmd, kids, _ := startProcs(t, 3)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	waitGone(t, kids, 5*time.Second, "parent killed")
}

// SIGTERM to the parent reaches the ranks: they abort and the parent exits with an error.
func TestProcsSignalForwarded(t *testing.T) {
	cmd, kids, stderr := startProcs(t, 2)
	time.Sleep(200 * time.Millisecond) // in the middle of the all-reduces
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(stderr(), "interrupted") {
			t.Errorf("parent after SIGTERM: %v, %s", err, stderr())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("parent still running 10 s after SIGTERM")
	}
	waitGone(t, kids, 5*time.Second, "SIGTERM")
}

// A stopped rank does not hang the run: the others fail after --timeout without progress, and the
// parent then ends the stopped one and exits with an error. Before, the parent waited forever.
func TestProcsStoppedChild(t *testing.T) {
	cmd, kids, stderr := startProcs(t, 3, "--timeout", "1s")
	time.Sleep(200 * time.Millisecond)
	syscall.Kill(kids[1], syscall.SIGSTOP)
	defer syscall.Kill(kids[1], syscall.SIGKILL)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("parent succeeded with a stopped rank: %s", stderr())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("parent still running 20 s after a rank stopped (--timeout 1s): %s", stderr())
	}
	waitGone(t, kids, 5*time.Second, "stopped rank")
}

// A rank that never comes fails the bootstrap after --timeout, not after the 60 s default: here
// rank 0 of 2 under a launcher, alone.
func TestBootstrapHonoursTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	env := map[string]string{"RANK": "0", "WORLD_SIZE": "2", "SIMCCL_COMM_ID": addr + "#a test secret"}
	var out, errb bytes.Buffer
	start := time.Now()
	code := mainRun([]string{"-b", "8", "-e", "8", "--timeout", "1s"}, &out, &errb, func(k string) string { return env[k] })
	if code == 0 {
		t.Fatalf("rank 0 of 2 alone succeeded")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("bootstrap failed after %v with --timeout 1s: %s", el, errb.String())
	}
}
