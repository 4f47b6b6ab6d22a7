// Command alternatives checks `simccl run --alternatives` against NCCL run with its algorithm and
// protocol forced: testdata/nccl/h200x2/nccl_perf.csv has all_reduce, all_gather and
// reduce_scatter measured on 2 H200 with NCCL's own choices (tag default) and with NCCL_ALGO and
// NCCL_PROTO forced (ring_LL, ring_LL128, ring_Simple, and tree_simple for all_reduce), one
// process driving both GPUs (--launch per-node).
//
// For every collective it runs, as a user would, `simccl run --topo T --launch per-node -c C -b 8
// -e 1G --alternatives --json` and prints, per forced cell, the median |time error| of the
// simulated alternative against its measurement (≥ 1 MiB and below), and per size which measured
// cell a tuner would have picked: the fastest simulated (the simulator as a tuner), the lowest
// time of NCCL's cost model (nccl_model_us, NCCL's own ranking of the same cells), and the fastest
// measured. A pick counts as right where its measured time is within -tol of the fastest measured
// cell; the regret is its measured time over the fastest's. The simulator's cells are ranked by
// the GPUs' time (device_us where the host's floor set the call's time), as --alternatives ranks
// them. Only cells that were measured are
// ranked. Nothing here is fitted: it reads the measurement and the simulator's output.
//
//	go run ./bench/alternatives [-simccl bin/simccl] [-csv testdata/nccl/h200x2/nccl_perf.csv] [-topo testdata/nccl/h200x2/real_topo.xml] [-launch per-node] [-tol 0.02] [-json FILE]
package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
)

// cellOf maps nccl_perf.csv's forced tags to the alternative's algorithm and protocol.
var cellOf = map[string]string{
	"ring_LL":     "Ring/LL",
	"ring_LL128":  "Ring/LL128",
	"ring_Simple": "Ring/Simple",
	"tree_simple": "Tree/Simple",
}

type alt struct {
	Algo, Proto string
	TimeUs      float64 `json:"time_us"`
	DeviceUs    float64 `json:"device_us"`
	NCCLModelUs float64 `json:"nccl_model_us"`
	Pick        bool
	Error       string
}

type row struct {
	Coll         string
	Bytes        int64
	TimeUs       float64 `json:"time_us"`
	Alternatives []alt
}

// cellResult is one forced cell of one collective against its measurements.
type cellResult struct {
	Coll      string  `json:"coll"`
	Cell      string  `json:"cell"`
	Big       int     `json:"points_ge_1mib"`
	Small     int     `json:"points_lt_1mib"`
	MedianBig float64 `json:"median_abs_err_ge_1mib"`
	MedianLow float64 `json:"median_abs_err_lt_1mib"`
}

// rankResult is, for one collective, how often each way of picking among the measured cells
// picked the fastest (within tol), and its mean and largest measured regret.
type rankResult struct {
	Coll      string  `json:"coll"`
	Sizes     int     `json:"sizes"`
	SimRight  int     `json:"simulator_right"`
	NCCLRight int     `json:"nccl_model_right"`
	SimMean   float64 `json:"simulator_mean_regret"`
	NCCLMean  float64 `json:"nccl_model_mean_regret"`
	SimMax    float64 `json:"simulator_max_regret"`
	NCCLMax   float64 `json:"nccl_model_max_regret"`
}

func main() {
	bin := flag.String("simccl", "bin/simccl", "the simccl binary")
	csvPath := flag.String("csv", "testdata/nccl/h200x2/nccl_perf.csv", "measured timings (tag,coll,world,bytes,us,algbw,busbw)")
	topo := flag.String("topo", "testdata/nccl/h200x2/real_topo.xml", "the measured machine's NCCL topology")
	launch := flag.String("launch", "per-node", "how the measurement launched its calls (simccl run --launch)")
	tol := flag.Float64("tol", 0.02, "a pick is right where its measured time is within this fraction of the fastest measured cell")
	jsonPath := flag.String("json", "", "also write the results as JSON to this file")
	verbose := flag.Bool("v", false, "print every size's picks")
	flag.Parse()

	meas, err := readMeasured(*csvPath)
	if err != nil {
		fail(err)
	}
	var cells []cellResult
	var ranks []rankResult
	for _, c := range []string{"all_reduce", "all_gather", "reduce_scatter"} {
		rows, err := simulate(*bin, *topo, *launch, c)
		if err != nil {
			fail(err)
		}
		byCell := map[string][2][]float64{}
		rk := rankResult{Coll: c}
		for _, r := range rows {
			m := meas[c][r.Bytes]
			sim, model, gpu := map[string]float64{}, map[string]float64{}, map[string]float64{}
			for _, a := range r.Alternatives {
				if a.Error == "" && a.TimeUs > 0 {
					k := a.Algo + "/" + a.Proto
					sim[k], model[k] = a.TimeUs, a.NCCLModelUs
					gpu[k] = a.TimeUs
					if a.DeviceUs > 0 {
						gpu[k] = a.DeviceUs
					}
				}
			}
			var keys []string
			for k, us := range m {
				s, ok := sim[k]
				if !ok || us <= 0 {
					continue
				}
				keys = append(keys, k)
				e := math.Abs(s/us - 1)
				v := byCell[k]
				if r.Bytes >= 1<<20 {
					v[0] = append(v[0], e)
				} else {
					v[1] = append(v[1], e)
				}
				byCell[k] = v
			}
			if len(keys) < 2 {
				continue
			}
			slices.Sort(keys)
			best := slices.MinFunc(keys, func(a, b string) int { return cmpF(m[a], m[b]) })
			simPick := slices.MinFunc(keys, func(a, b string) int { return cmpF(gpu[a], gpu[b]) })
			ncclPick := slices.MinFunc(keys, func(a, b string) int { return cmpF(model[a], model[b]) })
			rs, rn := m[simPick]/m[best]-1, m[ncclPick]/m[best]-1
			if *verbose {
				fmt.Printf("%-15s %11d fastest measured %-12s simulator %-12s (%+.1f%%) nccl model %-12s (%+.1f%%)\n", c, r.Bytes, best, simPick, 100*rs, ncclPick, 100*rn)
			}
			rk.Sizes++
			if rs <= *tol {
				rk.SimRight++
			}
			if rn <= *tol {
				rk.NCCLRight++
			}
			rk.SimMean += rs
			rk.NCCLMean += rn
			rk.SimMax, rk.NCCLMax = max(rk.SimMax, rs), max(rk.NCCLMax, rn)
		}
		if rk.Sizes > 0 {
			rk.SimMean /= float64(rk.Sizes)
			rk.NCCLMean /= float64(rk.Sizes)
		}
		ranks = append(ranks, rk)
		var ks []string
		for k := range byCell {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		for _, k := range ks {
			v := byCell[k]
			cells = append(cells, cellResult{Coll: c, Cell: k, Big: len(v[0]), Small: len(v[1]), MedianBig: median(v[0]), MedianLow: median(v[1])})
		}
	}

	fmt.Printf("# simccl run --alternatives against NCCL with NCCL_ALGO/NCCL_PROTO forced (%s, --topo %s --launch %s)\n", *csvPath, *topo, *launch)
	fmt.Printf("%-15s %-12s %8s %14s %8s %14s\n", "coll", "cell", "pts>=1M", "|err| >=1MiB", "pts<1M", "|err| <1MiB")
	for _, c := range cells {
		fmt.Printf("%-15s %-12s %8d %13.1f%% %8d %13.1f%%\n", c.Coll, c.Cell, c.Big, 100*c.MedianBig, c.Small, 100*c.MedianLow)
	}
	fmt.Printf("\n# which measured cell a tuner picks: right = within %.0f%% of the fastest measured; regret = its measured time over the fastest's\n", 100**tol)
	fmt.Printf("%-15s %6s %12s %12s %14s %14s %13s %13s\n", "coll", "sizes", "sim right", "nccl right", "sim regret", "nccl regret", "sim worst", "nccl worst")
	for _, r := range ranks {
		fmt.Printf("%-15s %6d %12d %12d %13.1f%% %13.1f%% %12.1f%% %12.1f%%\n", r.Coll, r.Sizes, r.SimRight, r.NCCLRight, 100*r.SimMean, 100*r.NCCLMean, 100*r.SimMax, 100*r.NCCLMax)
	}
	if *jsonPath != "" {
		b, _ := json.MarshalIndent(struct {
			CSV    string       `json:"csv"`
			Topo   string       `json:"topo"`
			Launch string       `json:"launch"`
			Tol    float64      `json:"tol"`
			Cells  []cellResult `json:"cells"`
			Ranks  []rankResult `json:"ranks"`
		}{*csvPath, *topo, *launch, *tol, cells, ranks}, "", "  ")
		if err := os.WriteFile(*jsonPath, append(b, '\n'), 0o644); err != nil {
			fail(err)
		}
	}
}

// readMeasured reads the forced cells' times: coll → bytes → "Algo/Proto" → µs (tag default, NCCL's
// own choice, is left out: it is one of the forced cells).
func readMeasured(path string) (map[string]map[int64]map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	out := map[string]map[int64]map[string]float64{}
	for i, r := range recs {
		if i == 0 || len(r) < 5 {
			continue
		}
		cell, ok := cellOf[r[0]]
		if !ok {
			continue
		}
		b, err1 := strconv.ParseInt(r[3], 10, 64)
		us, err2 := strconv.ParseFloat(r[4], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s:%d: bad bytes or time", path, i+1)
		}
		if out[r[1]] == nil {
			out[r[1]] = map[int64]map[string]float64{}
		}
		if out[r[1]][b] == nil {
			out[r[1]][b] = map[string]float64{}
		}
		out[r[1]][b][cell] = us
	}
	return out, nil
}

// simulate runs simccl run --alternatives for one collective over nccl_perf's sweep.
func simulate(bin, topo, launch, c string) ([]row, error) {
	cmd := exec.Command(bin, "run", "--topo", topo, "--launch", launch, "-c", c, "-b", "8", "-e", "1G", "--alternatives", "--json", "--progress", "off")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%v: %v: %s", cmd.Args, err, errb.String())
	}
	var doc struct{ Rows []row }
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		return nil, fmt.Errorf("%v: %v", cmd.Args, err)
	}
	return doc.Rows, nil
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "alternatives:", err)
	os.Exit(1)
}
