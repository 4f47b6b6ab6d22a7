// Command sim benchmarks the network simulator: a ring all-reduce on rail-optimized clusters of
// 8-GPU H100 nodes, from 8 to 2,048 nodes, and how the cost grows with the message size. It prints
// a table and then the same figures as JSON (see BENCHMARKS.md).
//
//	go run ./bench/sim [-nodes 8,64,128,1024,2048] [-bytes 1G] [-sizes 1M,16M,256M,1G] [-json out.json]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/simnet"
)

type result struct {
	Algo       string  `json:"algo"`
	Nodes      int     `json:"nodes"`
	GPUs       int     `json:"gpus"`
	Bytes      int64   `json:"bytes"`
	Model      string  `json:"model"`
	Channels   int     `json:"channels"`
	Groups     int     `json:"channel_groups"`
	Merge      int     `json:"merge"`
	Messages   int64   `json:"messages"`
	Events     uint64  `json:"events"`
	BuildS     float64 `json:"build_s"`
	SimS       float64 `json:"sim_s"`
	CPUS       float64 `json:"cpu_s"` // user+system CPU time of build and simulation
	WallS      float64 `json:"wall_s"`
	EventsPerS float64 `json:"events_per_s"`
	SimTimeUs  float64 `json:"sim_time_us"`
	BusBw      float64 `json:"busbw"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
}

func cpuTime() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func peakRSS() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024 // KiB on Linux
}

var routing = "rail"
var algo = "ring"
var rateIntervalUs float64

func machine(nodes int) (*simnet.Machine, *planner.Planner, error) {
	// Rail-optimized 2-tier leaf/spine, 32 nodes per leaf, non-blocking, rail (d-mod-k) routing.
	fab := simnet.DefaultFabric()
	fab.Routing = routing
	s := planner.Settings{}
	s.Tuning.Algo, s.Tuning.Proto = algo, "simple"
	name, doc, err := planner.LoadTopology("", s)
	if err != nil {
		return nil, nil, err
	}
	p, err := planner.New(planner.Machine{Name: name, Doc: doc, Nodes: nodes, Settings: s})
	if err != nil {
		return nil, nil, err
	}
	m, err := simnet.NewMachine(p.System, nodes, fab, p, p.Settings.Release)
	return m, p, err
}

func run(nodes int, bytes int64, maxMsg int64, merge int) (result, error) {
	runtime.GC()
	c0 := cpuTime()
	t0 := time.Now()
	m, p, err := machine(nodes)
	if err != nil {
		return result{}, err
	}
	n := m.NRanks()
	d, err := p.Decide(coll.Call{Func: coll.AllReduce, Count: bytes / 4, DataType: coll.Float32})
	if err != nil {
		return result{}, err
	}
	ch := d.Choice
	e := simnet.NewEngine(nil)
	e.RateInterval = simnet.FromMicros(rateIntervalUs)
	cl, err := simnet.NewCluster(e, m.Node, m.Nodes, m.Fabric)
	if err != nil {
		return result{}, err
	}
	tm, err := simnet.TimingFor("", ch.Algo, ch.Proto)
	if err != nil {
		return result{}, err
	}
	build := time.Since(t0)
	t1 := time.Now()
	var res *simnet.RingResult
	if ch.Algo == coll.Tree {
		res, err = simnet.SimulateTree(e, cl, simnet.TreeSpec{Bytes: bytes, Proto: ch.Proto,
			Trees: p.Trees[:ch.NChannels], Chunk: ch.ChunkSize, MaxMessages: maxMsg, Merge: merge}, tm)
	} else {
		res, err = simnet.SimulateRing(e, cl, simnet.RingSpec{Func: coll.AllReduce, Bytes: bytes, Proto: ch.Proto,
			Rings: p.Rings[:ch.NChannels], Chunk: ch.ChunkSize, MaxMessages: maxMsg, Merge: merge}, tm)
	}
	if err != nil {
		return result{}, err
	}
	sim := time.Since(t1)
	wall := time.Since(t0)
	busbw := float64(bytes) / res.Time.Seconds() / 1e9 * 2 * float64(n-1) / float64(n)
	return result{Algo: ch.Algo.String(), Nodes: nodes, GPUs: n, Bytes: bytes, Model: m.Node.Name, Channels: ch.NChannels, Groups: res.Groups, Merge: res.Merge,
		Messages: res.Messages, Events: res.Events, BuildS: build.Seconds(), SimS: sim.Seconds(), WallS: wall.Seconds(), CPUS: cpuTime() - c0,
		EventsPerS: float64(res.Events) / sim.Seconds(), SimTimeUs: res.Time.Micros(), BusBw: busbw, PeakRSSMiB: peakRSS()}, nil
}

func parseList(s string, size bool) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		var v int64
		var err error
		if size {
			v, err = units.ParseSize(f)
		} else {
			v, err = strconv.ParseInt(f, 10, 64)
		}
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad list element %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func main() {
	nodesFlag := flag.String("nodes", "8,64,128,1024,2048", "cluster sizes (nodes of 8 GPUs)")
	bytesFlag := flag.String("bytes", "1G", "all-reduce size for the node sweep")
	sizesFlag := flag.String("sizes", "1M,16M,256M,1G", "sizes for the message-size sweep (at -size-nodes)")
	sizeNodes := flag.Int("size-nodes", 128, "nodes for the message-size sweep")
	exactNodes := flag.Int("exact-nodes", 16, "nodes for the exact (merge 1) message-size sweep")
	maxMsg := flag.Int64("max-messages", 2_000_000, "coarse mode: merge ring steps to stay under this many messages")
	jsonOut := flag.String("json", "", "also write the JSON to this file")
	flag.StringVar(&routing, "routing", "rail", "fabric routing: rail (d-mod-k) or ecmp")
	flag.StringVar(&algo, "algo", "ring", "all-reduce algorithm: ring or tree (Simple protocol)")
	flag.Float64Var(&rateIntervalUs, "rate-interval", 0, "Engine.RateInterval in µs (0: exact max-min at every change)")
	cpuProf := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	// os.Exit skips deferred calls: stop the profile first, so that a failing run still leaves one
	// (StopCPUProfile does nothing when none runs).
	exit := func(code int) { pprof.StopCPUProfile(); os.Exit(code) }
	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	nodes, err := parseList(*nodesFlag, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		exit(2)
	}
	sizes, err := parseList(*sizesFlag, true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		exit(2)
	}
	bytes, err := units.ParseSize(*bytesFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		exit(2)
	}
	var all []result
	fmt.Printf("# simnet %s all-reduce (Simple), rail-optimized 2-tier fat tree, GOMAXPROCS=%d, %s\n", algo, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Printf("%6s %6s %8s %4s %4s %5s %10s %10s %8s %8s %8s %8s %12s %10s %8s %8s\n", "nodes", "GPUs", "bytes", "nch", "grp", "merge", "messages", "events", "build_s", "sim_s", "wall_s", "cpu_s", "events/s", "sim_us", "busbw", "rss_MiB")
	pr := func(r result) {
		fmt.Printf("%6d %6d %8s %4d %4d %5d %10d %10d %8.3f %8.3f %8.3f %8.3f %12.0f %10.1f %8.1f %8.0f\n", r.Nodes, r.GPUs, units.FormatSize(r.Bytes), r.Channels, r.Groups, r.Merge,
			r.Messages, r.Events, r.BuildS, r.SimS, r.WallS, r.CPUS, r.EventsPerS, r.SimTimeUs, r.BusBw, r.PeakRSSMiB)
	}
	for _, n := range nodes {
		r, err := run(int(n), bytes, *maxMsg, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			exit(1)
		}
		pr(r)
		all = append(all, r)
	}
	if *sizeNodes <= 0 {
		sizes = nil // -size-nodes 0 skips the message-size sweep
	} else {
		fmt.Printf("# message-size sweep at %d nodes\n", *sizeNodes)
	}
	for _, s := range sizes {
		r, err := run(*sizeNodes, s, *maxMsg, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			exit(1)
		}
		pr(r)
		all = append(all, r)
	}
	exactSizes := sizes
	if *exactNodes <= 0 {
		exactSizes = nil // -exact-nodes 0 skips the exact-replay sweep
	} else {
		fmt.Printf("# exact replay (merge 1) at %d nodes: cost against message size\n", *exactNodes)
	}
	for _, s := range exactSizes {
		r, err := run(*exactNodes, s, *maxMsg, 1)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			exit(1)
		}
		pr(r)
		all = append(all, r)
	}
	b, _ := json.MarshalIndent(map[string]any{"results": all, "gomaxprocs": runtime.GOMAXPROCS(0), "go": runtime.Version()}, "", "  ")
	fmt.Println(string(b))
	if *jsonOut != "" {
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			exit(1)
		}
	}
}
