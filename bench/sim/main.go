// Command sim benchmarks the simulator along the path its users take: it runs `simccl run` (built
// from this repository, or the binary given with -simccl) on the embedded DGX H100 topology, with
// the default fabric (ECMP routing) and with rail routing, for the scenarios BENCHMARKS.md
// reports. For each it gives the median wall time of -reps runs, their CPU time, the run's peak
// RSS, the modes of its rows (how each was simulated) and the simulated time of its largest row,
// and the machine's load average while it ran. It prints a table, then the same as JSON.
//
//	go run ./bench/sim                                    # every scenario, ECMP and rail, 3 runs each
//	go run ./bench/sim -scenarios 128,sweep -reps 5       # some of them
//	go run ./bench/sim -accuracy -scenarios 128,sweep     # also against simccl run --exact
//	go run ./bench/sim -json bench/sim/results-DATE.json  # also write the JSON
//
// With -accuracy every scenario is run once more with --exact (no approximation stands for the
// exact replay) and each row's simulated time is compared with it: the error of the modes that
// are not exact (latency-mean, ecmp-mean, tree-steady-C, ring-coarse-K, …). A row whose --exact
// run simulated another algorithm (an NVLS or NVLSTree call past what the exact replay holds runs
// NCCL's choice among Ring and Tree there) is counted as not comparable, not as an error. The
// named-only scenarios fold32 … loop64 put each approximate mode where --exact still runs:
//
//	go run ./bench/sim -accuracy -reps 1 -routing ecmp -scenarios fold32,fold64,coarse64,a2a-leaf4,steady-leaf4,loop64
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// scenario is one `simccl run` command line.
type scenario struct {
	name  string
	args  []string
	rail  bool // also with --fabric-set routing=rail (and routing=adaptive)
	extra bool // not among the default scenarios: run when named
}

// scenarios are the cases of the issue this benchmark tracks (BENCHMARKS.md, "Simulator speed").
func scenarios(root string) []scenario {
	ft := filepath.Join(root, "examples", "fabrics", "fattree-3tier-2to1.fabric")
	return []scenario{
		{"128", []string{"--nodes", "128", "-c", "allreduce", "-b", "1G", "-e", "1G"}, true, false},
		{"sweep", []string{"--nodes", "128", "-c", "allreduce", "-b", "8", "-e", "1G"}, true, false},
		{"2048", []string{"--nodes", "2048", "-c", "allreduce", "-b", "1G", "-e", "1G"}, true, false},
		{"16384", []string{"--nodes", "16384", "-c", "allreduce", "-b", "1G", "-e", "1G"}, true, false},
		{"a2a", []string{"--nodes", "128", "-c", "alltoall", "-b", "1G", "-e", "1G"}, true, false},
		// Ring all-gather and reduce-scatter (NCCL runs Ring for them on DGX H100 clusters, not
		// Tree or NVLSTree) on 16,384 and 131,072 GPUs: until 2026-12-01 the symmetric ring
		// replay did not take NCCL's crossNic-2 rings and replayed every rank (2,048 nodes: more
		// than 5 minutes).
		{"ring2048", []string{"--nodes", "2048", "-c", "allgather,reducescatter", "-b", "1G", "-e", "1G"}, true, false},
		{"ring16384", []string{"--nodes", "16384", "-c", "allgather,reducescatter", "-b", "1G", "-e", "1G"}, true, false},
		// All-to-all on 8,192 GPUs: every pair of ranks a connection (67 M); not among the
		// default scenarios (about a minute with both routings).
		{"a2a1024", []string{"--nodes", "1024", "-c", "alltoall", "-b", "1G", "-e", "1G"}, true, true},
		// All-to-all on 16 GB200 NVL72 racks (1,152 GPUs, 72 a node): the replay of one node's
		// ranks shares every flow in one rate computation; past symWork it goes on with a rate
		// interval (since stop 58; 44 s before).
		{"a2a-gb200", []string{"--topo", "gb200-nvl72", "--nodes", "16", "-c", "alltoall", "-b", "64M", "-e", "1G", "-f", "4"}, false, true},
		// Tree all-reduce under ECMP on 131,072 A100 GPUs and 32,768 GPUs of 16-NIC HGX H100
		// nodes, where the ECMP mean model is judged too far by its backlog: the replay of every
		// rank took hours and 400 s; since stop 59 it is not tried past farMessages (not among
		// the defaults).
		{"a100-16384", []string{"--topo", "dgx-a100", "--nodes", "16384", "-c", "allreduce", "-b", "1G", "-e", "1G"}, false, true},
		{"16nic-4096", []string{"--topo", "hgx-h100-16nic", "--nodes", "4096", "-c", "allreduce", "-b", "1G", "-e", "1G"}, false, true},
		// Send/recv of 1 GiB on 1,389 GB200 NVL72 racks (100,008 GPUs), whose replay of every
		// rank ran past 300 s: since stop 59 past farMessages, from 16 and 32 MiB.
		{"sr-gb200-1389", []string{"--topo", "gb200-nvl72", "--nodes", "1389", "-c", "sendrecv", "-b", "1G", "-e", "1G"}, false, true},
		{"fattree", []string{"--nodes", "64", "--fabric", ft, "-c", "allreduce", "-b", "1G", "-e", "1G"}, true, false},
		// All-to-all on a 2:1 oversubscribed fabric (8 nodes a leaf: 4 leaves), whose uplinks
		// ECMP's collisions put over their capacity: the replay of every rank (since stop 40
		// with a rate interval).
		{"a2a-os", []string{"--nodes", "32", "--fabric-set", "hosts_per_leaf=8", "--fabric-set", "oversubscription=2", "-c", "alltoall", "-b", "4M", "-e", "4M"}, true, false},
		// PAT: one GPU a node (NCCL picks PAT there), folded by the ranks' rotation (pat-fold).
		{"pat", []string{"--gpus", "1", "--nodes", "16384", "-c", "allgather", "-b", "64M", "-e", "64M"}, true, false},
		// The approximate modes at sizes where --exact still runs, for -accuracy (not among
		// the defaults): NVLSTree's node fold and its steady form on 32 and 64 nodes, the coarse
		// ring on 64, an all-to-all with 4 nodes a leaf (rate-interval-N, the ECMP mean model's
		// latency-mean), NVLSTree's schedule-steady form with 4 a leaf, and a broadcast's and
		// reduce's back-to-back loop past LoopBudget (its saving from a smaller size).
		{"fold32", []string{"--nodes", "32", "-c", "allreduce", "-b", "256M", "-e", "1G"}, false, true},
		{"fold64", []string{"--nodes", "64", "-c", "allreduce", "-b", "256M", "-e", "1G"}, false, true},
		// coarse64 merged ring steps until stop 56, when the replay of every rank stood for the
		// ring there; the symmetric ring merges them on 2,048 nodes (ring2048 under -accuracy).
		{"coarse64", []string{"--nodes", "64", "-c", "allgather,reducescatter", "-b", "256M", "-e", "1G", "-f", "4"}, false, true},

		{"a2a-leaf4", []string{"--nodes", "32", "--fabric-set", "hosts_per_leaf=4", "-c", "alltoall", "-b", "1M", "-e", "16M", "-f", "16"}, false, true},
		{"steady-leaf4", []string{"--nodes", "16", "--fabric-set", "hosts_per_leaf=4", "-c", "allreduce", "-b", "512M", "-e", "512M"}, false, true},
		{"loop64", []string{"--nodes", "64", "-c", "broadcast,reduce", "-b", "1G", "-e", "1G"}, false, true},
		// A send/recv whose hashed uplinks collide for the whole call on 16 GB200 racks: from 256
		// MiB the ECMP mean model stood backlogged past the budgets (19.3% slow); since stop 57
		// the line through two replays at smaller sizes (sizes-steady, p2pSizesSteady).
		{"sr-gb200", []string{"--topo", "gb200-nvl72", "--nodes", "16", "-c", "sendrecv", "-b", "256M", "-e", "1G", "-f", "4"}, false, true},
		// All-to-all on 2:1 fabrics with 4 nodes a leaf (stop 66): on 12 GB200 racks at 4 MiB a
		// host-bound row whose every rank was replayed (135 s) until the mean model over the
		// kept stand-ins stood for it; on 12 DGX H200 nodes at 2 GiB a replay of every rank of
		// 216 M flow visits (37 s) until P2PDeferWork gave it to two smaller sizes.
		{"a2a-os-gb200", []string{"--topo", "gb200-nvl72", "--nodes", "12", "--fabric-set", "hosts_per_leaf=4", "--fabric-set", "oversubscription=2", "-c", "alltoall", "-b", "4M", "-e", "4M"}, false, true},
		{"a2a-os-2g", []string{"--topo", "dgx-h200", "--nodes", "12", "--fabric-set", "hosts_per_leaf=4", "--fabric-set", "oversubscription=2", "-c", "alltoall", "-b", "2G", "-e", "2G"}, false, true},
	}
}

// row is what the benchmark reads of a `simccl run --json` row.
type row struct {
	Coll   string  `json:"coll"`
	Bytes  int64   `json:"bytes"`
	TimeUs float64 `json:"time_us"`
	Algo   string  `json:"algo"`
	Proto  string  `json:"proto"`
	Mode   string  `json:"mode"`
	NCCL   string  `json:"nccl"` // NCCL's choice where the row simulates another (substituted)
	Events uint64  `json:"events"`
}

// result is one scenario with one routing.
type result struct {
	Scenario string         `json:"scenario"`
	Routing  string         `json:"routing"`
	Command  string         `json:"command"`
	Reps     int            `json:"reps"`
	WallS    []float64      `json:"wall_s"` // every run
	MedianS  float64        `json:"median_wall_s"`
	CPUS     float64        `json:"cpu_s"`         // user+system of the median run
	PeakMiB  float64        `json:"peak_rss_mib"`  // largest over the runs
	Load     [2]float64     `json:"load_avg_1min"` // at the start and the end
	Rows     int            `json:"rows"`
	Modes    map[string]int `json:"modes"`
	SimUs    float64        `json:"sim_time_us"` // the largest row's simulated time
	Events   uint64         `json:"events"`      // summed over the rows
	Error    string         `json:"error,omitempty"`
	// Accuracy (with -accuracy): the same command with --exact.
	ExactS float64   `json:"exact_wall_s,omitempty"`
	ErrPct []float64 `json:"error_pct,omitempty"` // per row: (time - exact) / exact, % (0 where not comparable)
	MaxErr float64   `json:"max_abs_error_pct,omitempty"`
	// Rows whose --exact run simulated another algorithm than the row (an NVLS or NVLSTree call
	// that only an approximation times: --exact runs NCCL's choice among Ring and Tree and says
	// so), by index: no error is computed for them.
	NotComparable []int  `json:"not_comparable,omitempty"`
	ExactErr      string `json:"exact_error,omitempty"`
}

// loadAvg reads the 1-minute load average.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return math.NaN()
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// runOnce runs simccl with args and returns its rows, wall time, CPU time and peak RSS.
func runOnce(bin string, args []string, timeout time.Duration) ([]row, float64, float64, float64, error) {
	cmd := exec.Command(bin, append([]string{"run", "--json"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, 0, 0, 0, err
	}
	timer := time.AfterFunc(timeout, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	wall := time.Since(t0).Seconds()
	var cpu, rss float64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
		rss = float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	if err != nil {
		return nil, wall, cpu, rss, fmt.Errorf("%v: %s", err, strings.TrimSpace(errb.String()))
	}
	var v struct {
		Rows []row `json:"rows"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		return nil, wall, cpu, rss, fmt.Errorf("output: %v", err)
	}
	return v.Rows, wall, cpu, rss, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func main() {
	bin := flag.String("simccl", "", "simccl binary to run (default: build ./cmd/simccl into a temporary directory)")
	reps := flag.Int("reps", 3, "runs per scenario (the median wall time is reported)")
	only := flag.String("scenarios", "", "comma-separated scenarios (128, sweep, 2048, 16384, a2a, fattree, a2a-os, pat; named only: a2a1024 and the approximations' checks fold32, fold64, coarse64, a2a-leaf4, steady-leaf4, loop64; default all but the named-only)")
	routings := flag.String("routing", "ecmp,rail", "routings to run: ecmp (the default fabric's), rail (--fabric-set routing=rail), adaptive (--fabric-set routing=adaptive)")
	accuracy := flag.Bool("accuracy", false, "also run every scenario with --exact and report each row's error against it")
	timeout := flag.Duration("timeout", 20*time.Minute, "kill a run after this long")
	jsonOut := flag.String("json", "", "also write the JSON to this file")
	flag.Parse()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "bench/sim:", err)
		os.Exit(1)
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		fail(fmt.Errorf("go env GOMOD: %v", err))
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if *bin == "" {
		dir, err := os.MkdirTemp("", "bench-sim")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(dir)
		*bin = filepath.Join(dir, "simccl")
		build := exec.Command("go", "build", "-o", *bin, "./cmd/simccl")
		build.Dir, build.Stderr = root, os.Stderr
		if err := build.Run(); err != nil {
			fail(fmt.Errorf("go build ./cmd/simccl: %v", err))
		}
	}
	want := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	var all []result
	fmt.Printf("# bench/sim: simccl run --json, embedded DGX H100 (8 GPUs, 8 NICs per node), %d cores, %s\n", runtime.NumCPU(), runtime.Version())
	fmt.Printf("%-8s %-5s %6s %9s %8s %8s %9s %11s  %-44s %s\n", "scenario", "route", "reps", "median_s", "cpu_s", "rss_MiB", "load", "sim_us", "modes", "error_vs_exact")
	for _, sc := range scenarios(root) {
		if (len(want) > 0 && !want[sc.name]) || (len(want) == 0 && sc.extra) {
			continue
		}
		for _, routing := range strings.Split(*routings, ",") {
			routing = strings.TrimSpace(routing)
			args := slices.Clone(sc.args)
			switch routing {
			case "ecmp":
			case "rail", "adaptive":
				if !sc.rail {
					continue
				}
				args = append(args, "--fabric-set", "routing="+routing)
			default:
				fail(fmt.Errorf("-routing %q (want ecmp, rail or adaptive)", routing))
			}
			r := result{Scenario: sc.name, Routing: routing, Command: "simccl run --json " + strings.Join(args, " "), Modes: map[string]int{}}
			r.Load[0] = loadAvg()
			var cpus []float64
			var rows []row
			for range *reps {
				rs, wall, cpu, rss, err := runOnce(*bin, args, *timeout)
				r.WallS = append(r.WallS, wall)
				cpus = append(cpus, cpu)
				r.PeakMiB = max(r.PeakMiB, rss)
				if err != nil {
					r.Error = err.Error()
					break
				}
				rows = rs
			}
			r.Load[1] = loadAvg()
			r.Reps = len(r.WallS)
			r.MedianS = median(r.WallS)
			r.CPUS = median(cpus)
			r.Rows = len(rows)
			for _, rw := range rows {
				m := rw.Mode
				if rw.NCCL != "" {
					m += " [" + rw.Algo + " for " + rw.NCCL + "]" // not NCCL's choice: say so
				}
				r.Modes[m]++
				r.Events += rw.Events
			}
			if len(rows) > 0 {
				r.SimUs = rows[len(rows)-1].TimeUs
			}
			if *accuracy && r.Error == "" {
				exact, wall, _, _, err := runOnce(*bin, append(slices.Clone(args), "--exact"), *timeout)
				r.ExactS = wall
				if err != nil {
					r.ExactErr = err.Error()
				} else if len(exact) == len(rows) {
					for i := range rows {
						if exact[i].Algo != rows[i].Algo || exact[i].NCCL != rows[i].NCCL {
							r.NotComparable = append(r.NotComparable, i)
							r.ErrPct = append(r.ErrPct, 0)
							continue
						}
						e := 100 * (rows[i].TimeUs - exact[i].TimeUs) / exact[i].TimeUs
						r.ErrPct = append(r.ErrPct, e)
						r.MaxErr = max(r.MaxErr, math.Abs(e))
					}
				} else {
					r.ExactErr = fmt.Sprintf("--exact gave %d rows for %d", len(exact), len(rows))
				}
			}
			var modes []string
			for m, n := range r.Modes {
				modes = append(modes, fmt.Sprintf("%s×%d", m, n))
			}
			slices.Sort(modes)
			acc := ""
			switch {
			case r.Error != "":
				acc = "FAILED: " + r.Error
			case r.ExactErr != "":
				acc = "exact failed: " + r.ExactErr
			case r.ErrPct != nil:
				acc = fmt.Sprintf("max %.3f%% (exact run %.1f s)", r.MaxErr, r.ExactS)
				if n := len(r.NotComparable); n > 0 {
					acc += fmt.Sprintf("; %d row(s) not comparable: --exact ran another algorithm", n)
				}
			}
			fmt.Printf("%-8s %-5s %6d %9.2f %8.2f %8.0f %4.1f-%-4.1f %11.1f  %-44s %s\n", r.Scenario, r.Routing, r.Reps, r.MedianS, r.CPUS, r.PeakMiB,
				r.Load[0], r.Load[1], r.SimUs, strings.Join(modes, " "), acc)
			all = append(all, r)
		}
	}
	b, _ := json.MarshalIndent(map[string]any{"results": all, "cpus": runtime.NumCPU(), "go": runtime.Version(),
		"date": time.Now().UTC().Format(time.RFC3339)}, "", "  ")
	fmt.Println(string(b))
	if *jsonOut != "" {
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			fail(err)
		}
	}
}
