// Command compare simulates the collectives measured with NCCL on the 2×H200 machine
// (testdata/nccl/h200x2/nccl_perf.csv, tag "default": NCCL's own choices) on that machine's NCCL
// topology dump, and prints simulated against measured time per size with the median |error| per
// collective, for sizes >= 1 MiB and below. Nothing is fitted: the simulation uses the topology,
// NCCL's search and cost model (for the plan) and NCCL's latency constants (for the steps).
//
//	go run ./bench/sim/compare [-csv testdata/nccl/h200x2/nccl_perf.csv] [-topo testdata/nccl/h200x2/real_topo.xml] [-tag default] [-plot cmp.svg] [-json]
package main

import (
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/simnet"
	"github.com/simccl/simccl/tuning"
)

type point struct {
	Coll     string  `json:"coll"`
	Bytes    int64   `json:"bytes"`
	MeasUs   float64 `json:"measured_us"`
	SimUs    float64 `json:"simulated_us"`
	MeasBus  float64 `json:"measured_busbw"`
	SimBus   float64 `json:"simulated_busbw"`
	ErrPct   float64 `json:"error_pct"` // (sim - measured) / measured
	SimAlgo  string  `json:"sim_algo"`
	SimProto string  `json:"sim_proto"`
	SimNch   int     `json:"sim_nchannels"`
}

type summary struct {
	Coll        string  `json:"coll"`
	MedianLarge float64 `json:"median_abs_err_pct_ge_1MiB"`
	MedianSmall float64 `json:"median_abs_err_pct_lt_1MiB"`
	NLarge      int     `json:"n_ge_1MiB"`
	NSmall      int     `json:"n_lt_1MiB"`
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

var funcs = map[string]tuning.Func{"all_reduce": tuning.AllReduce, "all_gather": tuning.AllGather, "reduce_scatter": tuning.ReduceScatter,
	"broadcast": tuning.Broadcast, "reduce": tuning.Reduce, "alltoall": tuning.AllToAll, "sendrecv": tuning.SendRecv}

func main() {
	csvPath := flag.String("csv", "testdata/nccl/h200x2/nccl_perf.csv", "measured timings (tag,coll,world,bytes,us,algbw,busbw)")
	topo := flag.String("topo", "testdata/nccl/h200x2/real_topo.xml", "the measured machine's NCCL topology")
	tag := flag.String("tag", "default", "which measured rows to compare (default = NCCL's own choices)")
	plotPath := flag.String("plot", "", "write simulated and measured busbw (.png or .svg)")
	asJSON := flag.Bool("json", false, "print JSON instead of the table")
	flag.Parse()
	if err := run(*csvPath, *topo, *tag, *plotPath, *asJSON); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(csvPath, topo, tag, plotPath string, asJSON bool) error {
	f, err := os.Open(csvPath)
	if err != nil {
		return err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return fmt.Errorf("%s: %v", csvPath, err)
	}
	data, err := os.ReadFile(topo)
	if err != nil {
		return err
	}
	machines := map[int]*simnet.Machine{}
	var pts []point
	for i, r := range recs {
		if i == 0 || len(r) < 7 || r[0] != tag {
			continue
		}
		fn, ok := funcs[r[1]]
		if !ok {
			return fmt.Errorf("%s:%d: unknown collective %q", csvPath, i+1, r[1])
		}
		world, err1 := strconv.Atoi(r[2])
		size, err2 := strconv.ParseInt(r[3], 10, 64)
		us, err3 := strconv.ParseFloat(r[4], 64)
		bus, err4 := strconv.ParseFloat(r[6], 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			return fmt.Errorf("%s:%d: bad number in %v", csvPath, i+1, r)
		}
		m := machines[world]
		if m == nil {
			m, err = simnet.MachineFromXML(data, topo, 1, nil, nil)
			if err != nil {
				return err
			}
			if m.NRanks() != world {
				return fmt.Errorf("%s has %d GPUs, the measurement %d ranks", topo, m.NRanks(), world)
			}
			machines[world] = m
		}
		row, _, err := m.Run(fn, size, coll.Float32, coll.Sum, simnet.RunOptions{})
		if err != nil {
			return fmt.Errorf("%s %d: %v", r[1], size, err)
		}
		if row.TimeUs == 0 {
			continue // nothing to move (count 0 after nccl-tests' rounding)
		}
		pts = append(pts, point{Coll: r[1], Bytes: size, MeasUs: us, SimUs: row.TimeUs, MeasBus: bus, SimBus: row.BusBw,
			ErrPct: 100 * (row.TimeUs - us) / us, SimAlgo: row.Algo, SimProto: row.Proto, SimNch: row.NChannels})
	}
	var sums []summary
	order := []string{"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv"}
	for _, c := range order {
		var lg, sm []float64
		for _, p := range pts {
			if p.Coll != c {
				continue
			}
			if p.Bytes >= 1<<20 {
				lg = append(lg, math.Abs(p.ErrPct))
			} else {
				sm = append(sm, math.Abs(p.ErrPct))
			}
		}
		if len(lg)+len(sm) > 0 {
			sums = append(sums, summary{Coll: c, MedianLarge: median(lg), MedianSmall: median(sm), NLarge: len(lg), NSmall: len(sm)})
		}
	}
	if plotPath != "" {
		var series []simnet.Series
		idx := map[string]int{}
		for _, p := range pts {
			for k, name := range []string{"sim " + p.Coll, "measured " + p.Coll} {
				j, ok := idx[name]
				if !ok {
					j = len(series)
					idx[name] = j
					series = append(series, simnet.Series{Name: name})
				}
				v := p.SimBus
				if k == 1 {
					v = p.MeasBus
				}
				series[j].Points = append(series[j].Points, [2]float64{float64(p.Bytes), v})
			}
		}
		out, err := os.Create(plotPath)
		if err != nil {
			return err
		}
		format := strings.TrimPrefix(filepath.Ext(plotPath), ".")
		if err := simnet.WritePlot(out, "2xH200: simulated vs measured NCCL 2.28.9 busbw", series, format); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
	if asJSON {
		b, _ := json.MarshalIndent(map[string]any{"points": pts, "summary": sums}, "", "  ")
		fmt.Println(string(b))
		return nil
	}
	fmt.Printf("# simulated (%s) vs measured (%s, tag %s)\n", topo, csvPath, tag)
	fmt.Printf("%-15s %12s %11s %11s %8s %9s %9s  %-5s %-6s %3s\n", "coll", "bytes", "meas_us", "sim_us", "err%", "meas_bus", "sim_bus", "algo", "proto", "nch")
	for _, p := range pts {
		fmt.Printf("%-15s %12d %11.2f %11.2f %+8.1f %9.2f %9.2f  %-5s %-6s %3d\n", p.Coll, p.Bytes, p.MeasUs, p.SimUs, p.ErrPct, p.MeasBus, p.SimBus, p.SimAlgo, p.SimProto, p.SimNch)
	}
	fmt.Printf("\n%-15s %22s %22s\n", "coll", "median|err| >=1MiB", "median|err| <1MiB")
	for _, s := range sums {
		fmt.Printf("%-15s %17.1f%% (%2d) %17.1f%% (%2d)\n", s.Coll, s.MedianLarge, s.NLarge, s.MedianSmall, s.NSmall)
	}
	return nil
}
