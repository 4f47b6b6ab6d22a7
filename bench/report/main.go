// Command report measures the HTML report at cluster scale (issue 9's budget: the page for
// 128 nodes × 8 GPUs under 5 MB, rendered in under 2 s in a real browser). For each node count it
// builds the report (all-reduce, 8 B to 1 GiB by ×4, as report's browser tests), writes the page,
// opens it in headless Chromium with the page's own self-check (#selfcheck, which times the
// render in the page) and prints a table and JSON.
//
//	go run ./bench/report                        # 128 nodes, 3 browser runs
//	go run ./bench/report -nodes 1,16,128 -reps 5 -json report-bench.json
//
// Needs Chromium (apt-get install -y chromium, or `make test-browser`); SIMCCL_CHROMIUM names the
// binary. Exit status 1 when a page fails its self-check or logs a console error; being over a
// target is reported, not failed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/internal/stats"
	"github.com/simccl/simccl/planner"

	"github.com/simccl/simccl/internal/chromium"
	"github.com/simccl/simccl/report"
)

// Targets of issue 9.
const (
	targetBytes    = 5e6
	targetRenderMs = 2000
)

type row struct {
	Nodes          int       `json:"nodes"`
	GPUs           int       `json:"gpus"`
	Sizes          int       `json:"sizes"`
	BuildMs        float64   `json:"build_ms"`
	PageBytes      int64     `json:"page_bytes"`
	RenderMs       []float64 `json:"render_ms"`        // the page's own timing, one per browser run
	RenderMedianMs float64   `json:"render_median_ms"` // median of RenderMs
	BrowserMs      float64   `json:"browser_ms"`       // median wall time of a whole Chromium run
	Downsized      bool      `json:"where_time_goes_downsized"`
	OverBytes      bool      `json:"over_size_target"`
	OverRender     bool      `json:"over_render_target"`
}

type result struct {
	Command        string  `json:"command"`
	Chromium       string  `json:"chromium"`
	CPUs           int     `json:"cpus"`
	TargetBytes    float64 `json:"target_bytes"`
	TargetRenderMs float64 `json:"target_render_ms"`
	Rows           []row   `json:"rows"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/report:", err)
		os.Exit(1)
	}
}

func run() error {
	nodesFlag := flag.String("nodes", "128", "comma-separated node counts (8 GPUs each: the embedded DGX H100)")
	reps := flag.Int("reps", 3, "browser runs per page (the median render is reported)")
	jsonOut := flag.String("json", "", "also write the JSON to this file")
	flag.Parse()
	if *reps < 1 {
		return fmt.Errorf("-reps %d: want >= 1", *reps)
	}
	var nodes []int
	for _, f := range strings.Split(*nodesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-nodes: %q is not a node count >= 1", f)
		}
		nodes = append(nodes, n)
	}
	bin, err := chromium.Find()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "simccl-bench-report")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	var sizes []int64
	for s := int64(8); s <= 1<<30; s *= 4 {
		sizes = append(sizes, s)
	}
	res := result{Command: "go run ./bench/report " + strings.Join(os.Args[1:], " "), Chromium: bin, CPUs: runtime.NumCPU(),
		TargetBytes: targetBytes, TargetRenderMs: targetRenderMs}
	var failed []string
	for _, n := range nodes {
		fmt.Fprintf(os.Stderr, "bench/report: %d nodes: building...\n", n)
		start := time.Now()
		name, doc, err := planner.LoadTopology("", planner.Settings{})
		if err != nil {
			return err
		}
		p, err := planner.New(planner.Machine{Name: name, Doc: doc, Nodes: n})
		if err != nil {
			return err
		}
		r, err := report.Build(report.Options{Planner: p, Funcs: []coll.Func{coll.AllReduce}, Sizes: sizes})
		if err != nil {
			return fmt.Errorf("%d nodes: %w", n, err)
		}
		build := time.Since(start)
		page := filepath.Join(dir, fmt.Sprintf("report-%d.html", n))
		f, err := os.Create(page)
		if err != nil {
			return err
		}
		if err := r.WriteHTML(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		st, err := os.Stat(page)
		if err != nil {
			return err
		}
		rw := row{Nodes: n, GPUs: 8 * n, Sizes: len(sizes), BuildMs: ms(build), PageBytes: st.Size(),
			Downsized: r.Focus != nil && r.Focus.Asked != 0}
		var walls []float64
		for i := 0; i < *reps; i++ {
			sc, wall, err := openInChromium(bin, dir, page)
			if err != nil {
				return fmt.Errorf("%d nodes: %w", n, err)
			}
			if len(sc.Errors) > 0 || sc.Console != "" {
				failed = append(failed, fmt.Sprintf("%d nodes: console errors %q %s", n, sc.Errors, sc.Console))
			}
			if sc.GPUs != 8 || sc.Series["sim all_reduce"] != len(sizes) {
				failed = append(failed, fmt.Sprintf("%d nodes: self-check: %d GPUs drawn, %d all_reduce points", n, sc.GPUs, sc.Series["sim all_reduce"]))
			}
			rw.RenderMs = append(rw.RenderMs, sc.RenderMs)
			walls = append(walls, ms(wall))
			fmt.Fprintf(os.Stderr, "bench/report: %d nodes: browser run %d: render %.0f ms, chromium %.0f ms\n", n, i+1, sc.RenderMs, ms(wall))
		}
		rw.RenderMedianMs = stats.Median(rw.RenderMs)
		rw.BrowserMs = stats.Median(walls)
		rw.OverBytes = float64(rw.PageBytes) >= targetBytes
		rw.OverRender = rw.RenderMedianMs >= targetRenderMs
		res.Rows = append(res.Rows, rw)
	}

	fmt.Printf("%6s %6s %5s %10s %12s %10s %10s %10s  %s\n", "nodes", "GPUs", "sizes", "build ms", "page bytes", "render ms", "(max)", "chromium", "where time goes")
	for _, r := range res.Rows {
		focus := "at the asked size"
		if r.Downsized {
			focus = "downsized (page says so)"
		}
		fmt.Printf("%6d %6d %5d %10.0f %12d %10.0f %10.0f %10.0f  %s\n", r.Nodes, r.GPUs, r.Sizes, r.BuildMs, r.PageBytes,
			r.RenderMedianMs, slices.Max(r.RenderMs), r.BrowserMs, focus)
	}
	js, _ := json.MarshalIndent(res, "", "  ")
	fmt.Println(string(js))
	if *jsonOut != "" {
		if err := os.WriteFile(*jsonOut, append(js, '\n'), 0o644); err != nil {
			return err
		}
	}
	var over []string
	for _, r := range res.Rows {
		if r.OverBytes {
			over = append(over, fmt.Sprintf("%d nodes: page %d bytes (target < 5 MB)", r.Nodes, r.PageBytes))
		}
		if r.OverRender {
			over = append(over, fmt.Sprintf("%d nodes: render %.0f ms (target < 2 s)", r.Nodes, r.RenderMedianMs))
		}
	}
	if len(over) > 0 {
		fmt.Println("over target: " + strings.Join(over, "; "))
	} else {
		fmt.Println("every page within the targets (< 5 MB, median render < 2 s)")
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

// selfCheck is the part of what the page's self-check writes into <pre id="selfcheck"> that this
// benchmark reads (report/browser_test.go reads all of it).
type selfCheck struct {
	GPUs     int            `json:"gpus"`
	Series   map[string]int `json:"series"`
	RenderMs float64        `json:"renderMs"`
	Errors   []string       `json:"errors"`
	Console  string         `json:"-"`
}

// openInChromium loads the page once in a fresh headless profile with --dump-dom and returns the
// page's self-check and the wall time of the whole browser run.
func openInChromium(bin, dir, page string) (selfCheck, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := chromium.DumpDOM(ctx, bin, dir, "file://"+page+"#selfcheck")
	if err != nil {
		return selfCheck{}, run.Wall, err
	}
	text, ok := chromium.Pre(run.DOM, "selfcheck")
	if !ok {
		return selfCheck{}, run.Wall, fmt.Errorf("no self-check result in the DOM (did the page's script run?)\n%s", chromium.Tail(run.Stderr, 2000))
	}
	var sc selfCheck
	if err := json.Unmarshal([]byte(text), &sc); err != nil {
		return selfCheck{}, run.Wall, fmt.Errorf("self-check: %v", err)
	}
	sc.Console = strings.Join(chromium.ConsoleErrors(run.Stderr), " | ")
	return sc, run.Wall, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
