// Command cpu benchmarks all-reduce on CPUs: the simccl engine over shared memory and loopback TCP
// (one process per rank) side by side with Open MPI's MPI_Allreduce on the same host, in one run.
// It builds mpi/mpi_allreduce.c with mpicc when Open MPI is installed
// (apt-get install -y openmpi-bin libopenmpi-dev), prints a table and writes JSON.
//
//	go run ./bench/cpu [-np 8] [-b 8] [-e 64M] [-iters 20] [-rounds 1] [-o bench/cpu/results.json]
//
// Further flags: -backends shm,tcp, -channels, -slot (comm's SlotBytes), -timeout (comm's Timeout:
// raise it where ranks far outnumber free cores), -ompi=false (skip Open MPI), -cpuprofile DIR (a
// CPU profile per simccl rank).
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/comm/perf"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/realnet"
)

type row struct {
	Bytes     int64              `json:"bytes"`
	BusBW     map[string]float64 `json:"busbw"`   // GB/s per backend
	TimeUs    map[string]float64 `json:"time_us"` // per backend
	RatioShm  float64            `json:"ratio_shm_over_ompi,omitempty"`
	RatioTCP  float64            `json:"ratio_tcp_over_ompi,omitempty"`
	WrongOurs int64              `json:"wrong"`
	// Runs: every round's time (µs) per backend; TimeUs and BusBW hold the best.
	Runs map[string][]float64 `json:"runs_time_us,omitempty"`
}

func appendRun(m map[string][]float64, name string, us float64) map[string][]float64 {
	if m == nil {
		m = map[string][]float64{}
	}
	m[name] = append(m[name], us)
	return m
}

type report struct {
	NRanks   int      `json:"nranks"`
	Rounds   int      `json:"rounds"`
	CPUs     int      `json:"cpus"`
	Command  string   `json:"command"`
	Backends []string `json:"backends"`
	MPI      string   `json:"mpi,omitempty"`
	Rows     []row    `json:"rows"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/cpu:", err)
		os.Exit(1)
	}
}

func run() error {
	// A child rank (started by ourselves): run the sweep and let rank 0 print JSON.
	if l, ok, err := perf.DetectLaunch(os.Getenv); ok {
		if err != nil {
			return err
		}
		return child(l)
	}
	np := flag.Int("np", 8, "ranks")
	b := flag.String("b", "8", "smallest size")
	e := flag.String("e", "64M", "largest size")
	iters := flag.Int("iters", 20, "timed iterations per size")
	rounds := flag.Int("rounds", 1, "measure every backend this many times, in turn, and keep each size's best time")
	out := flag.String("o", "bench/cpu/results.json", "JSON output file (\"\" = none)")
	backends := flag.String("backends", "shm,tcp", "simccl transports to measure")
	channels := flag.Int("channels", 0, "most channels per collective (0 = comm's default)")
	slot := flag.String("slot", "0", "bytes of one connection slot (0 = comm's default)")
	timeout := flag.Duration("timeout", 0, "longest wait without progress before a simccl rank fails (0 = comm's default, 10s)")
	ompi := flag.Bool("ompi", true, "also measure Open MPI's MPI_Allreduce")
	cpuprofile := flag.String("cpuprofile", "", "directory for a CPU profile of every simccl rank (<dir>/<transport>-rank<r>.prof)")
	flag.Parse()
	lo, err := units.ParseSize(*b)
	if err != nil {
		return err
	}
	hi, err := units.ParseSize(*e)
	if err != nil {
		return err
	}
	if _, err := units.Sweep(lo, hi, 2); err != nil {
		return err
	}
	if *rounds < 1 || *iters < 1 {
		return fmt.Errorf("-rounds %d, -iters %d: want at least 1 of each", *rounds, *iters)
	}
	slotBytes, err := units.ParseSize(*slot)
	if err != nil {
		return fmt.Errorf("-slot: %w", err)
	}
	os.Setenv("BENCH_SLOT", strconv.FormatInt(slotBytes, 10))
	os.Setenv("BENCH_TIMEOUT", timeout.String())
	rep := &report{NRanks: *np, CPUs: runtime.NumCPU(), Command: "go run ./bench/cpu " + strings.Join(os.Args[1:], " ")}
	bySize := map[int64]*row{}
	get := func(bytes int64) *row {
		r, ok := bySize[bytes]
		if !ok {
			r = &row{Bytes: bytes, BusBW: map[string]float64{}, TimeUs: map[string]float64{}}
			bySize[bytes] = r
		}
		return r
	}
	// Each round measures every backend once, in turn; a size's figure is its best (least) time
	// over the rounds, so that on a shared host a round disturbed by other work does not count.
	f := 2 * float64(*np-1) / float64(*np)
	record := func(name string, bytes int64, us float64) {
		x := get(bytes)
		x.Runs = appendRun(x.Runs, name, us)
		if t, ok := x.TimeUs[name]; !ok || us < t {
			x.TimeUs[name] = us
			x.BusBW[name] = float64(bytes) / (us * 1e-6) / 1e9 * f
		}
	}
	rep.Rounds = *rounds
	for round := 0; round < *rounds; round++ {
		for _, be := range strings.Split(*backends, ",") {
			fmt.Fprintf(os.Stderr, "bench/cpu: round %d: simccl over %s, %d processes\n", round+1, be, *np)
			res, err := spawn(*np, be, lo, hi, *iters, *channels, *cpuprofile)
			if err != nil {
				return fmt.Errorf("simccl over %s: %w", be, err)
			}
			if round == 0 {
				rep.Backends = append(rep.Backends, "simccl-"+be)
			}
			for _, r := range res.Rows {
				if r.InPlace {
					continue
				}
				record("simccl-"+be, r.Bytes, r.TimeUs)
				get(r.Bytes).WrongOurs += max(r.Wrong, 0)
			}
		}
		if !*ompi {
			if round == 0 {
				fmt.Fprintln(os.Stderr, "bench/cpu: Open MPI not measured (-ompi=false)")
			}
		} else if mpiRows, ver, err := runMPI(*np, lo, hi, *iters); err != nil {
			fmt.Fprintln(os.Stderr, "bench/cpu: Open MPI not measured:", err)
		} else {
			if rep.MPI == "" {
				rep.MPI = ver
				rep.Backends = append(rep.Backends, "openmpi")
			}
			for _, m := range mpiRows {
				record("openmpi", m.Bytes, m.TimeUs)
			}
		}
	}
	for s := lo; s <= hi; s *= 2 {
		if r, ok := bySize[s]; ok {
			if o := r.BusBW["openmpi"]; o > 0 {
				r.RatioShm = r.BusBW["simccl-shm"] / o
				r.RatioTCP = r.BusBW["simccl-tcp"] / o
			}
			rep.Rows = append(rep.Rows, *r)
		}
	}
	writeTable(os.Stdout, rep)
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		enc := json.NewEncoder(f)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return nil
}

func writeTable(w io.Writer, rep *report) {
	fmt.Fprintf(w, "# all-reduce, float sum, out-of-place, %d ranks (one process each) on %d CPUs; busbw in GB/s = bytes/time x 2(n-1)/n\n", rep.NRanks, rep.CPUs)
	if rep.Rounds > 1 {
		fmt.Fprintf(w, "# best time of %d rounds per size and backend\n", rep.Rounds)
	}
	if rep.MPI != "" {
		fmt.Fprintf(w, "# Open MPI: %s\n", rep.MPI)
	}
	fmt.Fprintf(w, "# %10s", "size (B)")
	for _, b := range rep.Backends {
		fmt.Fprintf(w, "  %14s", b)
	}
	fmt.Fprintf(w, "  %10s  %10s\n", "shm/ompi", "tcp/ompi")
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "  %10d", r.Bytes)
		for _, b := range rep.Backends {
			fmt.Fprintf(w, "  %14.3f", r.BusBW[b])
		}
		fmt.Fprintf(w, "  %10.2f  %10.2f\n", r.RatioShm, r.RatioTCP)
	}
}

func child(l perf.Launch) error {
	b, err := hex.DecodeString(l.ID)
	if err != nil {
		return err
	}
	var id comm.UniqueID
	copy(id[:], b)
	nch, _ := strconv.Atoi(os.Getenv("BENCH_CHANNELS"))
	slot, _ := strconv.Atoi(os.Getenv("BENCH_SLOT"))
	timeout, _ := time.ParseDuration(os.Getenv("BENCH_TIMEOUT"))
	// NCCL's plan for the engine's machine, at most nch channels (NCCL_MAX_NCHANNELS) and with
	// NCCL_BUFFSIZE of the slots.
	var st planner.Settings
	st.Tuning.MaxNChannels = nch
	if slot > 0 {
		st.Tuning.BuffSize = int64(slot) * int64(realnet.Steps)
	}
	c, err := comm.InitRank(l.Size, id, l.Rank, &comm.Config{Transport: os.Getenv("BENCH_TRANSPORT"), Planners: planner.CPU{Settings: st}, SlotBytes: slot, Timeout: timeout})
	if err != nil {
		return err
	}
	defer c.Destroy()
	if dir := os.Getenv("BENCH_CPUPROFILE"); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-rank%d.prof", os.Getenv("BENCH_TRANSPORT"), l.Rank)))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	lo, _ := strconv.ParseInt(os.Getenv("BENCH_MIN"), 10, 64)
	hi, _ := strconv.ParseInt(os.Getenv("BENCH_MAX"), 10, 64)
	iters, _ := strconv.Atoi(os.Getenv("BENCH_ITERS"))
	sizes, err := units.Sweep(lo, hi, 2)
	if err != nil {
		return err
	}
	res, err := perf.Run([]*comm.Comm{c}, perf.Options{Colls: []string{"allreduce"}, Sizes: sizes, DataType: coll.Float32, Op: coll.Sum, Iters: iters, Warmup: 1, Check: true})
	if err != nil {
		return err
	}
	if res != nil {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	return nil
}

func spawn(np int, transport string, lo, hi int64, iters, channels int, profDir string) (*perf.Result, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	id, err := comm.GetUniqueID("")
	if err != nil {
		return nil, err
	}
	cmds := make([]*exec.Cmd, np)
	var stdout strings.Builder
	for r := range cmds {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), "RUNCCL_RANK="+strconv.Itoa(r), "RUNCCL_NRANKS="+strconv.Itoa(np), "RUNCCL_ID="+hex.EncodeToString(id[:]),
			"BENCH_TRANSPORT="+transport, "BENCH_MIN="+strconv.FormatInt(lo, 10), "BENCH_MAX="+strconv.FormatInt(hi, 10), "BENCH_ITERS="+strconv.Itoa(iters), "BENCH_CHANNELS="+strconv.Itoa(channels), "BENCH_CPUPROFILE="+profDir)
		if r == 0 {
			cmd.Stdout = &stdout
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		cmds[r] = cmd
	}
	var errs []error
	for r, c := range cmds {
		if err := c.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("rank %d: %w", r, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var res perf.Result
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		return nil, fmt.Errorf("rank 0 output: %v", err)
	}
	return &res, nil
}

type mpiRow struct {
	Bytes  int64   `json:"bytes"`
	TimeUs float64 `json:"time_us"`
	Wrong  int64   `json:"wrong"`
}

// runMPI builds mpi_allreduce.c and runs it under mpirun over shared memory.
func runMPI(np int, lo, hi int64, iters int) ([]mpiRow, string, error) {
	mpicc, err := exec.LookPath("mpicc")
	if err != nil {
		return nil, "", fmt.Errorf("mpicc not found (apt-get install -y openmpi-bin libopenmpi-dev)")
	}
	src := filepath.Join("bench", "cpu", "mpi", "mpi_allreduce.c")
	if _, err := os.Stat(src); err != nil {
		return nil, "", fmt.Errorf("%s: %v (run from the repository root)", src, err)
	}
	bin := filepath.Join(os.TempDir(), "simccl-mpi-allreduce")
	if out, err := exec.Command(mpicc, "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("mpicc: %v: %s", err, out)
	}
	ver, _ := exec.Command("mpirun", "--version").Output()
	args := []string{"--allow-run-as-root", "--oversubscribe", "-np", strconv.Itoa(np), bin,
		strconv.FormatInt(max(lo, 4), 10), strconv.FormatInt(hi, 10), strconv.Itoa(iters)}
	cmd := exec.Command("mpirun", args...)
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, "", fmt.Errorf("mpirun: %v", err)
	}
	var rows []mpiRow
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var r mpiRow
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			if r.Wrong != 0 {
				return nil, "", fmt.Errorf("open MPI gave %d wrong elements at %d bytes", r.Wrong, r.Bytes)
			}
			rows = append(rows, r)
		}
	}
	return rows, strings.SplitN(strings.TrimSpace(string(ver)), "\n", 2)[0], nil
}
