// Command public compares `simccl run` — the path users take, with its defaults — and NCCL's own
// cost model (`simccl tune`) against public nccl-tests tables kept in testdata/public: per measured
// row the simulated out-of-place time, its error, the algorithm, protocol, channels and mode the
// simulator chose, and the same for NCCL's model; then the median |time error| per run and overall.
// The tables are validation data: nothing in the simulator is chosen from them.
//
//	go build -o bin/simccl ./cmd/simccl && go run ./bench/public [-json] [-env NCCL_ALGO=NVLSTree]
//
// The CSV's columns: source,topo,nodes,ranks,nccl,coll,bytes,time_oop_us,busbw_oop,time_ip_us,
// busbw_ip (testdata/public/*/README.md say where each table comes from). Where a source published
// no time, the row's time is its in-place bus bandwidth's (bytes × 2(n−1)/n over busbw_ip). Two
// optional columns give a run's set-up as its source states it, which the simulation then takes:
// launch (simccl run's --launch: per-node for nccl-tests -g 8) and env (NCCL_* settings,
// K=V;K=V, for the simulation and the model, beside -env's).
//
//	go run ./bench/public -csv testdata/public/azure-nd/allreduce.csv
//
// -nccl-version csv plans each run under the NCCL release its nccl column names, where simccl's
// tuning model has that release (2.26.2 → 2.26), else under simccl's default; a release
// (-nccl-version 2.26) plans every run under it. Each point says which release planned it.
package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/simccl/simccl/internal/stats"
	"github.com/simccl/simccl/tuning"
)

// row is one measured point.
type row struct {
	Source, Topo, NCCL, Coll string
	Nodes, Ranks             int
	Bytes                    int64
	TimeUs                   float64 // out-of-place, else from the in-place busbw
	Launch                   string  // simccl run's --launch ("": its default)
	Env                      []string
}

// point is a measured row beside the simulation and NCCL's model.
type point struct {
	Source    string  `json:"source"`
	Nodes     int     `json:"nodes"`
	Release   string  `json:"nccl_release"` // the release that planned the simulation and the model
	Bytes     int64   `json:"bytes"`
	Measured  float64 `json:"measured_us"`
	Sim       float64 `json:"sim_us"`
	SimErr    float64 `json:"sim_err"`
	SimAlgo   string  `json:"sim_algo"`
	SimProto  string  `json:"sim_proto"`
	SimNCh    int     `json:"sim_nchannels"`
	SimMode   string  `json:"sim_mode"`
	Tune      float64 `json:"tune_us"`
	TuneErr   float64 `json:"tune_err"`
	TuneAlgo  string  `json:"tune_algo"`
	TuneProto string  `json:"tune_proto"`
}

// summary is the median |time error| of one run (or of all, Source "all"): over its points, and
// over those of at least 1 MiB and those below (NaN where there are none), as the public set's
// comparison splits them.
type summary struct {
	Source       string `json:"source"`
	Points       int    `json:"points"`
	SimMed       median `json:"sim_median_abs_err"`
	TuneMed      median `json:"tune_median_abs_err"`
	SimMedLarge  median `json:"sim_median_abs_err_1mib_up"`
	SimMedSmall  median `json:"sim_median_abs_err_below_1mib"`
	TuneMedLarge median `json:"tune_median_abs_err_1mib_up"`
	TuneMedSmall median `json:"tune_median_abs_err_below_1mib"`
}

// median is a median |error|, NaN where there are no points (JSON null: encoding/json has no NaN,
// and a run of sizes all ≥ 1 MiB has none below).
type median float64

// MarshalJSON writes null for NaN.
func (m median) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(m)) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(m))
}

func main() {
	simccl := flag.String("simccl", "bin/simccl", "the simccl binary (go build -o bin/simccl ./cmd/simccl)")
	csvPath := flag.String("csv", "testdata/public/gb200-coreweave/allreduce.csv", "public measurements (see the package comment for the columns)")
	asJSON := flag.Bool("json", false, "print JSON instead of the table")
	env := flag.String("env", "", "NCCL settings for the simulation and the model, K=V[,K=V…] (a what-if: the measured rows ran NCCL's defaults unless their README says otherwise)")
	sources := flag.String("sources", "", "compare only these runs (the CSV's source column), comma-separated; empty: all")
	version := flag.String("nccl-version", "", "NCCL release that plans the simulation and the model: empty for simccl's default ("+tuning.DefaultRelease+"), csv for each run's own (its nccl column) where simccl has it, or a release ("+strings.Join(tuning.Releases(), ", ")+")")
	flag.Parse()
	if err := run(*simccl, *csvPath, *env, *sources, *version, *asJSON, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "public:", err)
		os.Exit(1)
	}
}

func run(simccl, csvPath, env, sources, version string, asJSON bool, w io.Writer) error {
	if version != "" && version != "csv" {
		if _, err := tuning.ConstantsFor(version); err != nil {
			return fmt.Errorf("-nccl-version %q: want csv or one of %s", version, strings.Join(tuning.Releases(), ", "))
		}
	}
	rows, err := readRows(csvPath)
	if err != nil {
		return err
	}
	if sources != "" {
		keep := map[string]bool{}
		for _, s := range strings.Split(sources, ",") {
			keep[s] = true
		}
		var kept []row
		for _, r := range rows {
			if keep[r.Source] {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			return fmt.Errorf("-sources %q: no such run in %s", sources, csvPath)
		}
		rows = kept
	}
	extra, err := envOf(env)
	if err != nil {
		return err
	}
	var pts []point
	for _, g := range groups(rows) {
		p, err := compare(simccl, g, extra, releaseOf(version, g[0].NCCL))
		if err != nil {
			return err
		}
		pts = append(pts, p...)
	}
	sums := summarize(pts)
	if asJSON {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(struct {
			CSV     string    `json:"csv"`
			Env     string    `json:"env,omitempty"`
			Version string    `json:"nccl_version,omitempty"`
			Points  []point   `json:"points"`
			Summary []summary `json:"summary"`
		}{csvPath, env, version, pts, sums})
	}
	fmt.Fprintf(w, "%-24s %5s %5s %12s %10s %10s %7s  %-28s %-32s %10s %7s  %s\n", "source", "nodes", "nccl", "bytes", "measured", "simulated", "err", "sim algo/proto/nch", "sim mode", "tune", "err", "tune algo/proto")
	for _, p := range pts {
		fmt.Fprintf(w, "%-24s %5d %5s %12d %10.1f %10.1f %+6.1f%%  %-28s %-32s %10.1f %+6.1f%%  %s/%s\n", p.Source, p.Nodes, p.Release, p.Bytes, p.Measured, p.Sim, 100*p.SimErr,
			fmt.Sprintf("%s/%s/%d", p.SimAlgo, p.SimProto, p.SimNCh), clip(p.SimMode, 32), p.Tune, 100*p.TuneErr, p.TuneAlgo, p.TuneProto)
	}
	fmt.Fprintf(w, "\n%-24s %6s %14s %14s %14s %14s\n", "run", "points", "median |err|", ">=1MiB / below", "tune |err|", ">=1MiB / below")
	pct := func(m median) string {
		x := float64(m)
		if math.IsNaN(x) {
			return "n/a"
		}
		return fmt.Sprintf("%.1f%%", 100*x)
	}
	for _, s := range sums {
		fmt.Fprintf(w, "%-24s %6d %14s %14s %14s %14s\n", s.Source, s.Points, pct(s.SimMed), pct(s.SimMedLarge)+" / "+pct(s.SimMedSmall),
			pct(s.TuneMed), pct(s.TuneMedLarge)+" / "+pct(s.TuneMedSmall))
	}
	return nil
}

// readRows reads the measurements.
func readRows(path string) ([]row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(recs) < 2 {
		return nil, fmt.Errorf("%s: no rows", path)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, h := range []string{"source", "topo", "nodes", "ranks", "nccl", "coll", "bytes", "time_oop_us"} {
		if _, ok := col[h]; !ok {
			return nil, fmt.Errorf("%s: no column %q", path, h)
		}
	}
	opt := func(r []string, name string) string {
		if i, ok := col[name]; ok && i < len(r) {
			return strings.TrimSpace(r[i])
		}
		return ""
	}
	var rows []row
	for i, r := range recs[1:] {
		nodes, e1 := strconv.Atoi(r[col["nodes"]])
		ranks, e2 := strconv.Atoi(r[col["ranks"]])
		bytes, e3 := strconv.ParseInt(r[col["bytes"]], 10, 64)
		var t float64
		var e4 error
		if v := r[col["time_oop_us"]]; v != "" {
			t, e4 = strconv.ParseFloat(v, 64)
		} else if bw := opt(r, "busbw_ip"); bw != "" && ranks > 1 {
			// No time published: the in-place time its bus bandwidth stands for (nccl-tests:
			// busbw = bytes/time × 2(n−1)/n for all-reduce).
			var b float64
			if b, e4 = strconv.ParseFloat(bw, 64); e4 == nil && b > 0 {
				t = float64(bytes) * 2 * float64(ranks-1) / float64(ranks) / (b * 1e3)
			}
		}
		if err := errors.Join(e1, e2, e3, e4); err != nil || nodes < 1 || bytes < 1 || !(t > 0) {
			return nil, fmt.Errorf("%s: row %d: bad value (%v)", path, i+2, err)
		}
		if r[col["coll"]] != "all_reduce" {
			return nil, fmt.Errorf("%s: row %d: collective %q (only all_reduce)", path, i+2, r[col["coll"]])
		}
		var env []string
		if e := opt(r, "env"); e != "" {
			if env, err = envOf(strings.ReplaceAll(e, ";", ",")); err != nil {
				return nil, fmt.Errorf("%s: row %d: %w", path, i+2, err)
			}
		}
		rows = append(rows, row{Source: r[col["source"]], Topo: r[col["topo"]], NCCL: r[col["nccl"]], Coll: r[col["coll"]], Nodes: nodes, Ranks: ranks, Bytes: bytes, TimeUs: t,
			Launch: opt(r, "launch"), Env: env})
	}
	return rows, nil
}

// groups splits rows by run (source), in file order.
func groups(rows []row) [][]row {
	var out [][]row
	idx := map[string]int{}
	for _, r := range rows {
		i, ok := idx[r.Source]
		if !ok {
			i = len(out)
			idx[r.Source] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

// envOf parses K=V[,K=V…] into environment entries.
func envOf(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	for _, kv := range strings.Split(s, ",") {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "NCCL_") {
			return nil, fmt.Errorf("-env %q: want NCCL_NAME=value pairs", kv)
		}
		out = append(out, kv)
	}
	return out, nil
}

// releaseOf is the NCCL release that plans a run measured under measured (its nccl column): the
// flag's release, or with "csv" the measured release's major.minor where simccl's tuning model has
// it; else simccl's default.
func releaseOf(flagValue, measured string) string {
	switch flagValue {
	case "":
		return tuning.DefaultRelease
	case "csv":
		parts := strings.Split(strings.TrimSpace(measured), ".")
		if len(parts) >= 2 {
			if k, err := tuning.ConstantsFor(parts[0] + "." + parts[1]); err == nil {
				return k.Release
			}
		}
		return tuning.DefaultRelease
	}
	return flagValue
}

// compare simulates one run's sizes with `simccl run` and `simccl tune` on its topology and nodes,
// under NCCL release rel.
func compare(simccl string, g []row, extra []string, rel string) ([]point, error) {
	r0 := g[0]
	lo, hi := g[0].Bytes, g[0].Bytes
	for _, r := range g {
		lo, hi = min(lo, r.Bytes), max(hi, r.Bytes)
	}
	base := []string{"--topo", r0.Topo, "--nodes", strconv.Itoa(r0.Nodes), "--nccl-version", rel, "-c", "allreduce", "-d", "float", "-b", strconv.FormatInt(lo, 10), "-e", strconv.FormatInt(hi, 10), "-f", "2", "--json"}
	extra = append(append([]string(nil), r0.Env...), extra...) // the run's set-up, then -env's
	runArgs := append([]string{"run"}, append(base, "--progress", "off")...)
	if r0.Launch != "" {
		runArgs = append(runArgs, "--launch", r0.Launch)
	}
	var sim struct {
		Rows []struct {
			Bytes     int64   `json:"bytes"`
			Time      float64 `json:"time_us"`
			Algo      string  `json:"algo"`
			Proto     string  `json:"proto"`
			NChannels int     `json:"nchannels"`
			Mode      string  `json:"mode"`
		} `json:"rows"`
	}
	if err := simcclJSON(simccl, runArgs, extra, &sim); err != nil {
		return nil, err
	}
	var tune struct {
		Choices []struct {
			Bytes int64   `json:"bytes"`
			Algo  string  `json:"algo"`
			Proto string  `json:"proto"`
			Time  float64 `json:"time_us"`
		} `json:"choices"`
	}
	if err := simcclJSON(simccl, append([]string{"tune"}, append(base, "--no-table")...), extra, &tune); err != nil {
		return nil, err
	}
	var pts []point
	for _, r := range g {
		p := point{Source: r.Source, Nodes: r.Nodes, Release: rel, Bytes: r.Bytes, Measured: r.TimeUs, SimErr: math.NaN(), TuneErr: math.NaN()}
		for _, s := range sim.Rows {
			if s.Bytes == r.Bytes {
				p.Sim, p.SimErr, p.SimAlgo, p.SimProto, p.SimNCh, p.SimMode = s.Time, s.Time/r.TimeUs-1, s.Algo, s.Proto, s.NChannels, s.Mode
			}
		}
		for _, c := range tune.Choices {
			if c.Bytes == r.Bytes {
				p.Tune, p.TuneErr, p.TuneAlgo, p.TuneProto = c.Time, c.Time/r.TimeUs-1, c.Algo, c.Proto
			}
		}
		if math.IsNaN(p.SimErr) || math.IsNaN(p.TuneErr) {
			return nil, fmt.Errorf("%s: %d bytes: no simulated row", r.Source, r.Bytes)
		}
		pts = append(pts, p)
	}
	return pts, nil
}

// simcclJSON runs simccl with args (extra added to its environment, NCCL_* of this process's
// environment dropped, as the measured rows ran NCCL's defaults) and decodes its JSON into v.
func simcclJSON(simccl string, args, extra []string, v any) error {
	cmd := exec.Command(simccl, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NCCL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, extra...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", simccl, strings.Join(args, " "), err, clip(strings.TrimSpace(stderr.String()), 400))
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("%s %s: %w", simccl, strings.Join(args, " "), err)
	}
	return nil
}

// summarize gives the median |time error| per run, then over all points.
func summarize(pts []point) []summary {
	by := map[string][]point{}
	var order []string
	for _, p := range pts {
		if _, ok := by[p.Source]; !ok {
			order = append(order, p.Source)
		}
		by[p.Source] = append(by[p.Source], p)
	}
	var out []summary
	for _, s := range order {
		out = append(out, summaryOf(s, by[s]))
	}
	return append(out, summaryOf("all", pts))
}

func summaryOf(name string, pts []point) summary {
	var s, t, sl, ss, tl, ts []float64
	for _, p := range pts {
		s = append(s, math.Abs(p.SimErr))
		t = append(t, math.Abs(p.TuneErr))
		if p.Bytes >= 1<<20 {
			sl, tl = append(sl, math.Abs(p.SimErr)), append(tl, math.Abs(p.TuneErr))
		} else {
			ss, ts = append(ss, math.Abs(p.SimErr)), append(ts, math.Abs(p.TuneErr))
		}
	}
	med := func(xs []float64) median {
		if len(xs) == 0 {
			return median(math.NaN())
		}
		return median(stats.Median(xs))
	}
	return summary{Source: name, Points: len(pts), SimMed: med(s), TuneMed: med(t),
		SimMedLarge: med(sl), SimMedSmall: med(ss), TuneMedLarge: med(tl), TuneMedSmall: med(ts)}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
