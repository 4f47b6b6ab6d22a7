package comm_test

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/realnet"
)

func TestMain(m *testing.M) {
	if os.Getenv("SIMCCL_FAULT_CHILD") != "" {
		os.Exit(faultChild())
	}
	if os.Getenv("SIMCCL_CONF_CHILD") != "" {
		os.Exit(confChild())
	}
	os.Exit(m.Run())
}

// allReduceAll issues one AllReduce of count float32 on every comm and waits.
func allReduceAll(cs []*comm.Comm, count int) []error {
	bufs := make([][]float32, len(cs))
	for r, c := range cs {
		bufs[r] = make([]float32, count)
		for i := range bufs[r] {
			bufs[r][i] = 1
		}
		if err := c.AllReduce(comm.Bytes(bufs[r]), comm.Bytes(bufs[r]), count, coll.Float32, coll.Sum, nil); err != nil {
			return []error{err}
		}
	}
	errs := make([]error, len(cs))
	for r, c := range cs {
		errs[r] = c.Synchronize()
		if errs[r] == nil && count > 0 && bufs[r][count-1] != float32(len(cs)) {
			errs[r] = fmt.Errorf("rank %d: wrong result %v", r, bufs[r][count-1])
		}
	}
	return errs
}

// A rank that goes away in the middle of a large all-reduce makes every other rank fail quickly, and
// the survivors can build a new communicator that works.
func TestFaultPeerAbortMidCollective(t *testing.T) {
	for _, tr := range []string{"inproc", "tcp", "shm"} {
		t.Run(tr, func(t *testing.T) {
			const n, victim = 4, 2
			cs, err := comm.InitAll(n, &comm.Config{Planners: cpuPlanners("", 0), Transport: tr, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			count := 16 << 20 // 64 MiB of float32
			bufs := make([][]float32, n)
			for r, c := range cs {
				if r == victim {
					continue
				}
				bufs[r] = make([]float32, count)
				// Several in a row: the victim takes part in the first only, so the survivors fail even
				// where one 64 MiB all-reduce ends within the victim's 30 ms (16 cores: ~20 ms).
				for i := 0; i < 4; i++ {
					if err := c.AllReduce(comm.Bytes(bufs[r]), comm.Bytes(bufs[r]), count, coll.Float32, coll.Sum, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			// The victim joins, then dies part-way (its transports vanish).
			vb := make([]float32, count)
			cs[victim].AllReduce(comm.Bytes(vb), comm.Bytes(vb), count, coll.Float32, coll.Sum, nil)
			time.Sleep(30 * time.Millisecond)
			start := time.Now()
			cs[victim].Abort()
			eachSurvivor(cs, victim, func(r int, c *comm.Comm) {
				err := c.Synchronize()
				el := time.Since(start)
				if err == nil {
					t.Errorf("rank %d: all-reduce with a dead peer succeeded", r)
				} else if el > 10*time.Second {
					t.Errorf("rank %d: error after %v (bound 10 s): %v", r, el, err)
				} else {
					t.Logf("rank %d: error after %v: %v", r, el.Round(time.Millisecond), err)
				}
				if c.GetAsyncError() == nil {
					t.Errorf("rank %d: GetAsyncError is nil after a failure", r)
				}
				// Later calls fail at once.
				b := make([]float32, 4)
				if err := c.AllReduce(comm.Bytes(b), comm.Bytes(b), 4, coll.Float32, coll.Sum, nil); err == nil {
					if err = c.Synchronize(); err == nil {
						t.Errorf("rank %d: a later call on a failed communicator succeeded", r)
					}
				}
			})
			// Rebuild from the survivors.
			id, err := comm.GetUniqueID("")
			if err != nil {
				t.Fatal(err)
			}
			var survivors []*comm.Comm
			var mu sync.Mutex
			errs := make([]error, n)
			eachSurvivor(cs, victim, func(r int, _ *comm.Comm) {
				newRank := r
				if r > victim {
					newRank--
				}
				c, err := comm.InitRank(n-1, id, newRank, &comm.Config{Planners: cpuPlanners("", 0), Transport: tr})
				errs[r] = err
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					survivors = append(survivors, c)
				}
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rebuild: rank %d: %v", r, err)
				}
			}
			for r, err := range allReduceAll(sortByRank(survivors), 1<<16+3) {
				if err != nil {
					t.Errorf("rebuilt communicator: rank %d: %v", r, err)
				}
			}
			for _, c := range append(survivors, cs...) {
				c.Destroy()
			}
		})
	}
}

// A rank that is gone before the others connect to it (connections are lazy): they stop waiting for
// it at once (a failed rank of this process, a refused TCP dial), not after Config.Timeout.
func TestFaultPeerGoneBeforeConnect(t *testing.T) {
	for _, tr := range []string{"inproc", "tcp", "shm"} {
		t.Run(tr, func(t *testing.T) {
			const n, victim = 4, 2
			cs, err := comm.InitAll(n, &comm.Config{Planners: cpuPlanners("", 0), Transport: tr, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer (&world{cs: cs}).close()
			cs[victim].Abort()
			start := time.Now()
			eachSurvivor(cs, victim, func(r int, c *comm.Comm) {
				b := make([]float32, 1<<16)
				err := c.AllReduce(comm.Bytes(b), comm.Bytes(b), len(b), coll.Float32, coll.Sum, nil)
				if err == nil {
					err = c.Synchronize()
				}
				el := time.Since(start)
				switch {
				case err == nil:
					t.Errorf("rank %d: all-reduce with a dead peer succeeded", r)
				case el > 10*time.Second:
					t.Errorf("rank %d: error after %v (timeout 1 min, bound 10 s): %v", r, el, err)
				default:
					t.Logf("rank %d: error after %v: %v", r, el.Round(time.Millisecond), err)
				}
			})
		})
	}
}

// eachSurvivor runs f for every rank but victim, each in its own goroutine, and waits for all.
func eachSurvivor(cs []*comm.Comm, victim int, f func(r int, c *comm.Comm)) {
	var wg sync.WaitGroup
	for r, c := range cs {
		if r == victim {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(r, c)
		}()
	}
	wg.Wait()
}

func sortByRank(cs []*comm.Comm) []*comm.Comm {
	out := make([]*comm.Comm, len(cs))
	for _, c := range cs {
		out[c.Rank()] = c
	}
	return out
}

// A peer that never issues its call: the others fail after the configured timeout, not later.
func TestFaultTimeoutWithoutProgress(t *testing.T) {
	cs, err := comm.InitAll(3, &comm.Config{Planners: cpuPlanners("", 0), Transport: "inproc", Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range cs {
			c.Destroy()
		}
	}()
	b := [][]float32{make([]float32, 1000), make([]float32, 1000)}
	start := time.Now()
	for r := 0; r < 2; r++ {
		cs[r].AllReduce(comm.Bytes(b[r]), comm.Bytes(b[r]), 1000, coll.Float32, coll.Sum, nil)
	}
	for r := 0; r < 2; r++ {
		err := cs[r].Synchronize()
		if err == nil || !errors.Is(err, comm.ErrRemote) && !errors.Is(err, realnet.ErrPeerGone) && !errors.Is(err, realnet.ErrClosed) {
			t.Fatalf("rank %d: %v, want a remote/timeout error", r, err)
		}
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("timeout of 300 ms took %v", el)
	}
}

// Abort unblocks a call that is waiting for peers.
func TestFaultAbortUnblocks(t *testing.T) {
	cs, err := comm.InitAll(2, &comm.Config{Planners: cpuPlanners("", 0), Transport: "tcp", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer cs[1].Destroy()
	b := make([]float32, 1<<20)
	cs[0].AllReduce(comm.Bytes(b), comm.Bytes(b), len(b), coll.Float32, coll.Sum, nil)
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	cs[0].Abort()
	err = cs[0].Synchronize()
	if !errors.Is(err, comm.ErrAborted) {
		t.Fatalf("after Abort: %v, want ErrAborted", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Abort took %v to unblock", el)
	}
	if err := cs[0].AllReduce(comm.Bytes(b), comm.Bytes(b), len(b), coll.Float32, coll.Sum, nil); err == nil {
		t.Fatalf("call after Abort accepted")
	}
}

// 100,000 small collectives in a row: zero wrong elements.
func TestManySmallCollectives(t *testing.T) {
	iters := 100000
	cs, err := comm.InitAll(2, &comm.Config{Transport: "inproc", Planners: cpuPlanners("", 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range cs {
			c.Destroy()
		}
	}()
	in := [][]int32{make([]int32, 7), make([]int32, 7)}
	out := [][]int32{make([]int32, 7), make([]int32, 7)}
	wrong := 0
	start := time.Now()
	for it := 0; it < iters; it++ {
		for r := range cs {
			for i := range in[r] {
				in[r][i] = int32(it*7 + i + r)
			}
			if err := cs[r].AllReduce(comm.Bytes(in[r]), comm.Bytes(out[r]), 7, coll.Int32, coll.Sum, nil); err != nil {
				t.Fatal(err)
			}
		}
		for r := range cs {
			if err := cs[r].Synchronize(); err != nil {
				t.Fatalf("iteration %d: %v", it, err)
			}
			for i := range out[r] {
				if out[r][i] != int32(2*(it*7+i)+1) {
					wrong++
				}
			}
		}
	}
	t.Logf("%d all-reduces in %v (%.1f µs each), %d wrong elements", iters, time.Since(start), float64(time.Since(start).Microseconds())/float64(iters), wrong)
	if wrong != 0 {
		t.Fatalf("%d wrong elements", wrong)
	}
}

// ---- across processes: kill -9 one rank during a 64 MiB all-reduce ----

// faultChild is one rank of TestFaultKillProcess (run as a child process of the test binary).
func faultChild() int {
	rank, _ := strconv.Atoi(os.Getenv("SIMCCL_RANK"))
	n, _ := strconv.Atoi(os.Getenv("SIMCCL_NRANKS"))
	victim, _ := strconv.Atoi(os.Getenv("SIMCCL_VICTIM"))
	tr := os.Getenv("SIMCCL_TRANSPORT")
	idb, _ := hex.DecodeString(os.Getenv("SIMCCL_ID"))
	var id comm.UniqueID
	copy(id[:], idb)
	c, err := comm.InitRank(n, id, rank, &comm.Config{Planners: cpuPlanners("", 0), Transport: tr})
	if err != nil {
		fmt.Println("INITERR", err)
		return 1
	}
	count := 16 << 20
	b := make([]float32, count)
	// Warm up (connections made), then say we are ready and start the big one.
	if err := c.AllReduce(comm.Bytes(b[:1024]), comm.Bytes(b[:1024]), 1024, coll.Float32, coll.Sum, nil); err != nil || c.Synchronize() != nil {
		fmt.Println("WARMERR")
		return 1
	}
	fmt.Println("READY")
	// 64 MiB all-reduces back to back until one fails (the kill lands in one of them, however fast
	// the host); the error's wall-clock time goes to the test, which knows when it killed.
	start := time.Now()
	for err == nil {
		if time.Since(start) > 2*time.Minute {
			fmt.Println("NOERR")
			return 1
		}
		if err = c.AllReduce(comm.Bytes(b), comm.Bytes(b), count, coll.Float32, coll.Sum, nil); err == nil {
			err = c.Synchronize()
		}
	}
	fmt.Printf("ERR %d %s\n", time.Now().UnixNano(), strings.ReplaceAll(err.Error(), "\n", " "))
	c.Abort()
	// Rebuild among the survivors through a fixed root the test runs.
	id2b, _ := hex.DecodeString(os.Getenv("SIMCCL_ID2"))
	var id2 comm.UniqueID
	copy(id2[:], id2b)
	nr := rank
	if rank > victim {
		nr--
	}
	c2, err := comm.InitRank(n-1, id2, nr, &comm.Config{Planners: cpuPlanners("", 0), Transport: tr})
	if err != nil {
		fmt.Println("REBUILDERR", err)
		return 1
	}
	x := make([]float32, 100003)
	for i := range x {
		x[i] = 1
	}
	if err := c2.AllReduce(comm.Bytes(x), comm.Bytes(x), len(x), coll.Float32, coll.Sum, nil); err != nil {
		fmt.Println("REBUILDERR", err)
		return 1
	}
	if err := c2.Synchronize(); err != nil || x[len(x)-1] != float32(n-1) {
		fmt.Println("REBUILDERR", err, x[len(x)-1])
		return 1
	}
	c2.Finalize()
	c2.Destroy()
	fmt.Println("REBUILT")
	return 0
}

func TestFaultKillProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, tr := range []string{"shm", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			const n, victim = 4, 1
			id, err := comm.GetUniqueID("")
			if err != nil {
				t.Fatal(err)
			}
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			addr2 := ln.Addr().String()
			ln.Close()
			id2, _ := realnet.UniqueIDFromAddr(addr2, realnet.SecretFromString(t.Name()))
			root2, err := realnet.StartRoot(id2, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			defer root2.Close()
			procs := make([]*exec.Cmd, n)
			outs := make([]*bufio.Scanner, n)
			for r := 0; r < n; r++ {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), "SIMCCL_FAULT_CHILD=1", "SIMCCL_RANK="+strconv.Itoa(r), "SIMCCL_NRANKS="+strconv.Itoa(n),
					"SIMCCL_VICTIM="+strconv.Itoa(victim), "SIMCCL_TRANSPORT="+tr, "SIMCCL_ID="+hex.EncodeToString(id[:]), "SIMCCL_ID2="+hex.EncodeToString(id2[:]))
				out, _ := cmd.StdoutPipe()
				cmd.Stderr = os.Stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				procs[r], outs[r] = cmd, bufio.NewScanner(out)
			}
			defer func() {
				for r, p := range procs {
					p.Process.Kill()
					if r != victim {
						p.Wait()
					}
				}
			}()
			for r := 0; r < n; r++ {
				if !outs[r].Scan() || outs[r].Text() != "READY" {
					t.Fatalf("rank %d did not get ready: %q", r, outs[r].Text())
				}
			}
			time.Sleep(100 * time.Millisecond) // in the middle of the 64 MiB all-reduces
			killed := time.Now()
			procs[victim].Process.Signal(os.Kill)
			go procs[victim].Wait() // reap it, as a launcher would
			for r := 0; r < n; r++ {
				if r == victim {
					continue
				}
				var lines []string
				for outs[r].Scan() {
					lines = append(lines, outs[r].Text())
				}
				procs[r].Wait()
				text := strings.Join(lines, "\n")
				if len(lines) == 0 || !strings.HasPrefix(lines[0], "ERR ") {
					t.Fatalf("rank %d: %q, want an error", r, text)
				}
				f := strings.Fields(lines[0])
				ns, _ := strconv.ParseInt(f[1], 10, 64)
				el := time.Unix(0, ns).Sub(killed)
				t.Logf("rank %d: error %v after the kill: %s", r, el.Round(time.Millisecond), strings.Join(f[2:], " "))
				if el > 10*time.Second {
					t.Errorf("rank %d: error %v after the kill (bound 10 s)", r, el)
				}
				if !strings.Contains(text, "REBUILT") {
					t.Errorf("rank %d: rebuild from survivors failed: %q", r, text)
				}
			}
		})
	}
}

// Shrink after a failure: the survivors build a communicator without the dead rank from the broken
// one alone (no new id handed around), twice in a row.
func TestShrinkAfterFailure(t *testing.T) {
	for _, tr := range []string{"inproc", "tcp", "shm"} {
		t.Run(tr, func(t *testing.T) {
			const n = 5
			cs, err := comm.InitAll(n, &comm.Config{Planners: cpuPlanners("", 0), Transport: tr, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer (&world{cs: cs}).close()
			allReduceAll(cs, 1000) // connections made
			cs[1].Abort()          // rank 1 dies
			shrink := func(parent []*comm.Comm, exclude []int) []*comm.Comm {
				t.Helper()
				out := make([]*comm.Comm, len(parent))
				errs := make([]error, len(parent))
				var wg sync.WaitGroup
				for r, c := range parent {
					if c == nil || slicesContains(exclude, r) {
						continue
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						out[r], errs[r] = c.Shrink(exclude, nil)
					}()
				}
				wg.Wait()
				var got []*comm.Comm
				for r, e := range errs {
					if e != nil {
						t.Fatalf("rank %d: shrink: %v", r, e)
					}
					if out[r] != nil {
						got = append(got, out[r])
					}
				}
				return sortByRank(got)
			}
			s1 := shrink(cs, []int{1})
			defer (&world{cs: s1}).close()
			if len(s1) != n-1 || s1[1].Count() != n-1 {
				t.Fatalf("shrunk to %d ranks", len(s1))
			}
			for r, err := range allReduceAll(s1, 77777) {
				if err != nil {
					t.Fatalf("shrunk communicator: rank %d: %v", r, err)
				}
			}
			// Then the new rank 2 (old rank 3) fails too: shrink again.
			s1[2].Abort()
			s2 := shrink(s1, []int{2})
			defer (&world{cs: s2}).close()
			for r, err := range allReduceAll(s2, 4097) {
				if err != nil {
					t.Fatalf("twice-shrunk communicator: rank %d: %v", r, err)
				}
			}
			if _, err := cs[0].Shrink([]int{0}, nil); err == nil {
				t.Fatalf("a rank excluding itself was accepted")
			}
		})
	}
}

func slicesContains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
