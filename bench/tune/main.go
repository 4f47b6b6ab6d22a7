// Command tune measures how long simccl takes to tune a cluster: topology XML → system and paths →
// channel search → NCCL's cost model → one choice per collective and size (5 collectives, 8 B to
// 1 GiB by ×2), as `simccl tune` does. It prints a table and writes JSON (-json FILE).
//
//	go run ./bench/tune                 # default node (8x H100 DGX), 8 and 1,024 nodes
//	go run ./bench/tune -nodes 1,8,64,1024 -reps 5 -json bench-tune.json
//
// Targets (issue 3): an 8-node x 8-GPU cluster in < 50 ms, a 1,024-node cluster in < 2 s.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/topo/ncclxml"
	"github.com/simccl/simccl/tuning"
)

type row struct {
	Topo     string  `json:"topo"`
	Nodes    int     `json:"nodes"`
	GPUs     int     `json:"gpus"`
	Choices  int     `json:"choices"`
	MedianMs float64 `json:"median_ms"`
	MinMs    float64 `json:"min_ms"`
	TargetMs float64 `json:"target_ms,omitempty"`
	Pass     *bool   `json:"pass,omitempty"`
}

func main() {
	nodesFlag := flag.String("nodes", "8,1024", "comma-separated node counts")
	topoFlag := flag.String("topo", "", "topology XML (default: the embedded 8x H100 DGX)")
	reps := flag.Int("reps", 5, "repetitions per node count (median reported)")
	jsonOut := flag.String("json", "", "write JSON results to this file")
	cpuprof := flag.String("cpuprofile", "", "write a CPU profile")
	flag.Parse()
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			fail(err)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}

	name, data := topos.Default()
	if *topoFlag != "" {
		b, err := os.ReadFile(*topoFlag)
		if err != nil {
			fail(err)
		}
		name, data = *topoFlag, b
	}
	var rows []row
	for _, f := range strings.Split(*nodesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fail(fmt.Errorf("bad node count %q", f))
		}
		var times []float64
		var gpus, choices int
		for r := 0; r < *reps; r++ {
			runtime.GC()
			t0 := time.Now()
			g, c, err := tuneOnce(name, data, n)
			if err != nil {
				fail(err)
			}
			times = append(times, float64(time.Since(t0).Microseconds())/1000)
			gpus, choices = g, c
		}
		sort.Float64s(times)
		rw := row{Topo: name, Nodes: n, GPUs: gpus, Choices: choices, MedianMs: times[len(times)/2], MinMs: times[0]}
		switch n {
		case 8:
			rw.TargetMs = 50
		case 1024:
			rw.TargetMs = 2000
		}
		if rw.TargetMs > 0 {
			ok := rw.MedianMs < rw.TargetMs
			rw.Pass = &ok
		}
		rows = append(rows, rw)
	}
	fmt.Printf("# bench/tune: topology -> graph -> search -> tuning -> %s (GOMAXPROCS %d)\n", "choices for 5 collectives x 28 sizes", runtime.GOMAXPROCS(0))
	fmt.Printf("%-12s %6s %7s %8s %10s %10s %10s  %s\n", "topo", "nodes", "gpus", "choices", "median ms", "min ms", "target ms", "pass")
	for _, r := range rows {
		pass := ""
		if r.Pass != nil {
			pass = strconv.FormatBool(*r.Pass)
		}
		fmt.Printf("%-12s %6d %7d %8d %10.2f %10.2f %10.0f  %s\n", r.Topo, r.Nodes, r.GPUs, r.Choices, r.MedianMs, r.MinMs, r.TargetMs, pass)
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(map[string]any{"rows": rows}, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fail(err)
		}
	}
}

// tuneOnce runs the whole pipeline once, as `simccl tune` does, and returns the GPU count and the
// number of choices made.
func tuneOnce(name string, data []byte, nodes int) (int, int, error) {
	doc, err := ncclxml.ParseBytes(data, name)
	if err != nil {
		return 0, 0, err
	}
	s, err := planner.SettingsFromEnv(func(string) string { return "" })
	if err != nil {
		return 0, 0, err
	}
	p, err := planner.New(planner.Machine{Name: name, Doc: doc, Nodes: nodes, Settings: s})
	if err != nil {
		return 0, 0, err
	}
	table, comm := p.Table, &p.Table.Comm
	n := 0
	for _, f := range []coll.Func{coll.AllReduce, coll.AllGather, coll.ReduceScatter, coll.Broadcast, coll.Reduce} {
		for b := int64(8); b <= 1<<30; b *= 2 {
			count := b / 4
			if f == coll.AllGather || f == coll.ReduceScatter {
				count /= int64(comm.NRanks)
			}
			if count < 1 {
				continue
			}
			if _, err := table.Select(tuning.Call{Func: f, Count: count, ElemSize: 4, DataType: 7}); err != nil {
				return 0, 0, err
			}
			n++
		}
	}
	return comm.NRanks, n, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench/tune:", err)
	os.Exit(1)
}
