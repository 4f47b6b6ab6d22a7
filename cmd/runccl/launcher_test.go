package main

import (
	"bytes"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type rankRun struct {
	code     int
	out, err string
}

// launchJob runs the ranks of a torchrun-style job as goroutines (each rank a mainRun with its own
// environment), starting them delay apart.
func launchJob(env map[string]string, n int, args []string, delay time.Duration) []rankRun {
	res := make([]rankRun, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := map[string]string{"RANK": fmt.Sprint(r), "WORLD_SIZE": fmt.Sprint(n)}
			for k, v := range env {
				e[k] = v
			}
			var out, errb bytes.Buffer
			res[r].code = mainRun(args, &out, &errb, func(k string) string { return e[k] })
			res[r].out, res[r].err = out.String(), errb.String()
		}()
		time.Sleep(delay)
	}
	wg.Wait()
	return res
}

// Two launcher jobs of one user on one host, at the same time, over shared memory: neither sees
// the other's files (before, both named them from one public constant and collided).
func TestLauncherTwoJobsOneHost(t *testing.T) {
	home := t.TempDir() // the user's secret file is created there
	args := []string{"--collective", "allreduce,allgather", "-b", "1K", "-e", "256K", "-f", "16", "--check", "-n", "3", "--transport", "shm"}
	var wg sync.WaitGroup
	jobs := make([][]rankRun, 2)
	for j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := map[string]string{"HOME": home, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": fmt.Sprint(freePort(t))}
			jobs[j] = launchJob(env, 2, args, 0)
		}()
	}
	wg.Wait()
	for j, ranks := range jobs {
		for r, rr := range ranks {
			if rr.code != 0 {
				t.Errorf("job %d rank %d: exit %d: %s", j, r, rr.code, rr.err)
			}
		}
		if !strings.Contains(ranks[0].out, "Out of bounds values : 0 OK") {
			t.Errorf("job %d: %s", j, ranks[0].out)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(home, ".config", "simccl", "secret")); len(m) != 1 {
		t.Errorf("no secret file in %s", home)
	}
}

// Two launcher jobs given one port: the second's rank 0 cannot start its root there and its rank 1
// is refused by the first job's root (the secrets differ) at once; the first job runs undisturbed.
// Before, the second job's rank 1 could register with the first job's root.
func TestLauncherTwoJobsOnePort(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := []string{"--collective", "allreduce", "-b", "1K", "-e", "1K", "--check", "-n", "2", "--timeout", "5s"}
	a := make(chan []rankRun, 1)
	go func() {
		a <- launchJob(map[string]string{"SIMCCL_COMM_ID": addr + "#job A"}, 2, args, 300*time.Millisecond)
	}()
	time.Sleep(100 * time.Millisecond) // job A's root is up, its rank 1 not yet
	start := time.Now()
	b := launchJob(map[string]string{"SIMCCL_COMM_ID": addr + "#job B"}, 2, args, 0)
	if b[0].code == 0 || b[1].code == 0 {
		t.Errorf("job B ran on job A's port: %+v", b)
	}
	if !strings.Contains(b[1].err, "another communicator") {
		t.Errorf("job B rank 1: %s", b[1].err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("job B took %v to fail", el)
	}
	for r, rr := range <-a {
		if rr.code != 0 {
			t.Errorf("job A rank %d: exit %d: %s", r, rr.code, rr.err)
		}
	}
}
