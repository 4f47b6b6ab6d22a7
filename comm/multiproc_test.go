package comm_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/coll/colltest"
	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/realnet"
)

// The conformance matrix across processes: one rank per process, bootstrap through a fixed root
// address, data over TCP (or shared memory). TestConformanceNetns puts the processes in two network
// namespaces joined by a veth pair, so TCP really crosses an interface (root only; SIMCCL_NETNS=1).

// procMatrix is the multi-process runs' matrix (the rank count is the run's).
func procMatrix(long bool) colltest.Matrix {
	if long {
		return colltest.Matrix{Counts: []int{1, 7, 1237, 70001}}
	}
	return colltest.Matrix{Counts: []int{1237}, Types: []coll.DataType{coll.Int32, coll.Float16, coll.Float32, coll.Bfloat16, coll.Float8e4m3, coll.Uint64}}
}

// confChild is one rank of a multi-process conformance run.
func confChild() int {
	rank, _ := strconv.Atoi(os.Getenv("SIMCCL_RANK"))
	n, _ := strconv.Atoi(os.Getenv("SIMCCL_NRANKS"))
	id, err := realnet.UniqueIDFromAddr(os.Getenv("SIMCCL_ADDR"), realnet.SecretFromString(os.Getenv("SIMCCL_SECRET")))
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	if rank == 0 {
		root, err := realnet.StartRoot(id, time.Minute)
		if err != nil {
			fmt.Println("ERR", err)
			return 1
		}
		defer root.Close()
	}
	c, err := comm.InitRank(n, id, rank, slotted(comm.Config{Planners: cpuPlanners("", 0), Transport: os.Getenv("SIMCCL_TRANSPORT"), Listen: os.Getenv("SIMCCL_LISTEN"), SlotBytes: testSlot, Timeout: confTimeout}))
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	cases, wrong := 0, 0
	for _, cs := range procMatrix(os.Getenv("SIMCCL_LONG") == "1").Cases(n) {
		b := cs.Buffers(rank)
		if err := runRank(c, cs.Call, b); err != nil {
			fmt.Println("ERR", cs, err)
			return 1
		}
		w, msgs := cs.Check(rank, b)
		for _, m := range msgs {
			fmt.Fprintln(os.Stderr, m)
		}
		cases++
		wrong += w
	}
	kinds := map[string]bool{}
	for p := 0; p < n; p++ {
		if p != rank {
			kinds[c.TransportOf(p)] = true
		}
	}
	if err := c.Finalize(); err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	c.Destroy()
	fmt.Printf("CONF %d %d %v\n", cases, wrong, kinds)
	return 0
}

// runProcs starts one child per rank (prefix[r] is the command prefix, e.g. ip netns exec) and
// collects their verdicts.
func runProcs(t *testing.T, n int, addr, transport string, prefix [][]string, listen []string) {
	t.Helper()
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, n)
	errs := make([]error, n)
	secret := strconv.FormatUint(rand.Uint64(), 36) + strconv.FormatUint(rand.Uint64(), 36)
	for r := 0; r < n; r++ {
		args := append(append([]string{}, prefix[r]...), os.Args[0], "-test.run=^$")
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "SIMCCL_CONF_CHILD=1", "SIMCCL_RANK="+strconv.Itoa(r), "SIMCCL_NRANKS="+strconv.Itoa(n),
			"SIMCCL_ADDR="+addr, "SIMCCL_SECRET="+secret, "SIMCCL_TRANSPORT="+transport, "SIMCCL_LISTEN="+listen[r])
		if colltest.Long() {
			cmd.Env = append(cmd.Env, "SIMCCL_LONG=1")
		}
		cmd.Stdout = &outs[r]
		cmd.Stderr = os.Stderr
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = cmd.Run()
		}()
	}
	wg.Wait()
	for r := 0; r < n; r++ {
		line := strings.TrimSpace(outs[r].String())
		f := strings.Fields(line)
		if errs[r] != nil || len(f) < 3 || f[0] != "CONF" {
			t.Errorf("rank %d: %v: %q", r, errs[r], line) // every rank's verdict, not just the first
			continue
		}
		if f[2] != "0" {
			t.Errorf("rank %d: %s wrong elements in %s cases", r, f[2], f[1])
		}
		t.Logf("rank %d: %s cases, %s wrong elements, transports %s", r, f[1], f[2], strings.Join(f[3:], " "))
	}
}

func freeAddr(t *testing.T, host string) string {
	ln, err := net.Listen("tcp", host+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestConformanceProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, tr := range []string{"tcp", "shm"} {
		t.Run(tr, func(t *testing.T) {
			const n = 3
			runProcs(t, n, freeAddr(t, "127.0.0.1"), tr, make([][]string, n), []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"})
		})
	}
}

func TestConformanceNetns(t *testing.T) {
	if os.Getenv("SIMCCL_NETNS") != "1" || os.Geteuid() != 0 {
		t.Skip("needs root and SIMCCL_NETNS=1 (creates two network namespaces joined by a veth pair)")
	}
	tag := strconv.Itoa(os.Getpid() % 100000)
	nsA, nsB := "simccl-a-"+tag, "simccl-b-"+tag
	vA, vB := "sca"+tag, "scb"+tag
	ipA, ipB := "10.231.7.1", "10.231.7.2"
	sh := func(args ...string) {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	defer exec.Command("ip", "netns", "del", nsA).Run()
	defer exec.Command("ip", "netns", "del", nsB).Run()
	sh("netns", "add", nsA)
	sh("netns", "add", nsB)
	sh("link", "add", vA, "type", "veth", "peer", "name", vB)
	sh("link", "set", vA, "netns", nsA)
	sh("link", "set", vB, "netns", nsB)
	sh("-n", nsA, "addr", "add", ipA+"/24", "dev", vA)
	sh("-n", nsB, "addr", "add", ipB+"/24", "dev", vB)
	for _, ns := range []string{nsA, nsB} {
		sh("-n", ns, "link", "set", "lo", "up")
	}
	sh("-n", nsA, "link", "set", vA, "up")
	sh("-n", nsB, "link", "set", vB, "up")
	// Ranks 0,1 in A and 2,3 in B; the root (rank 0) listens in A.
	const n = 4
	addr := ipA + ":" + strconv.Itoa(20000+os.Getpid()%20000)
	prefix := [][]string{{"ip", "netns", "exec", nsA}, {"ip", "netns", "exec", nsA}, {"ip", "netns", "exec", nsB}, {"ip", "netns", "exec", nsB}}
	runProcs(t, n, addr, "tcp", prefix, []string{ipA, ipA, ipB, ipB})
}
