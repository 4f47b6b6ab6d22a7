// Command shape runs simccl run's size sweeps as a user would (the CLI's defaults, --json) and
// lists the rows whose time has the wrong shape in the size: under one plan (algorithm, protocol,
// channels) a pipelined call's time grows at most about linearly once it is past its latency, so
// a row taking more than -ratio times the row of half its size (from -min-bytes, rows not bound by
// the host) is suspect: the signature of a simulation mode changing at a budget (stop 57: 16
// GB200 NVL72 racks, send/recv, 128 → 256 MiB ×2.38, the ECMP mean model's upper estimate where
// the replay stood below). Rows whose time falls as the size doubles are listed too, as notes:
// NCCL's own channel counts do that (Ring/LL on 1 channel at 1 MiB, 3 at 2 MiB on GB200 racks).
// It prints one line per sweep and per finding, then JSON with -json; the exit status is 1 where
// a superlinear row was found or a sweep failed.
//
//	go run ./bench/shape -simccl bin/simccl
//	go run ./bench/shape -simccl bin/simccl -topos gb200-nvl72 -nodes 4,8,16 -colls sendrecv -json out.json
//	go run ./bench/shape -simccl bin/simccl -topos dgx-h100 -nodes 128 -colls alltoall -args "--gpus 1"
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// row is what shape reads of a `simccl run --json` row.
type row struct {
	Bytes     int64   `json:"bytes"`
	TimeUs    float64 `json:"time_us"`
	Algo      string  `json:"algo"`
	Proto     string  `json:"proto"`
	NChannels int     `json:"nchannels"`
	Mode      string  `json:"mode"`
	HostBound bool    `json:"host_bound"`
}

func (r row) plan() string { return fmt.Sprintf("%s/%s/%d", r.Algo, r.Proto, r.NChannels) }

// finding is one pair of consecutive rows of a sweep with the wrong shape.
type finding struct {
	Kind     string  `json:"kind"` // "superlinear" or "falls"
	Topo     string  `json:"topo"`
	Nodes    int     `json:"nodes"`
	Coll     string  `json:"coll"`
	From     int64   `json:"from_bytes"`
	To       int64   `json:"to_bytes"`
	FromUs   float64 `json:"from_us"`
	ToUs     float64 `json:"to_us"`
	Ratio    float64 `json:"ratio"`
	FromPlan string  `json:"from_plan"`
	ToPlan   string  `json:"to_plan"`
	FromMode string  `json:"from_mode"`
	ToMode   string  `json:"to_mode"`
}

// sweep is one simccl run of a topology, node count and collective.
type sweep struct {
	Topo  string  `json:"topo"`
	Nodes int     `json:"nodes"`
	Coll  string  `json:"coll"`
	Rows  int     `json:"rows"`
	WallS float64 `json:"wall_s"`
	Error string  `json:"error,omitempty"`
}

// check returns the findings of one sweep's rows (consecutive sizes a factor of two apart).
func check(rows []row, ratio float64, minBytes int64) []finding {
	var out []finding
	for i := 1; i < len(rows); i++ {
		a, b := rows[i-1], rows[i]
		if b.Bytes != 2*a.Bytes || a.TimeUs <= 0 {
			continue
		}
		f := finding{From: a.Bytes, To: b.Bytes, FromUs: a.TimeUs, ToUs: b.TimeUs, Ratio: b.TimeUs / a.TimeUs,
			FromPlan: a.plan(), ToPlan: b.plan(), FromMode: a.Mode, ToMode: b.Mode}
		switch {
		case a.plan() == b.plan() && a.Bytes >= minBytes && !a.HostBound && !b.HostBound && f.Ratio > ratio:
			f.Kind = "superlinear"
		case b.TimeUs < a.TimeUs*(1-1e-3):
			f.Kind = "falls"
		default:
			continue
		}
		out = append(out, f)
	}
	return out
}

func main() {
	simccl := flag.String("simccl", "bin/simccl", "the simccl binary")
	topos := flag.String("topos", "dgx-h100,dgx-a100,gb200-nvl72,hgx-h100-16nic", "embedded topologies (comma-separated)")
	nodes := flag.String("nodes", "2,16", "node counts (comma-separated)")
	colls := flag.String("colls", "allreduce,allgather,reducescatter,sendrecv", "collectives (simccl run -c names, comma-separated)")
	minSize := flag.String("b", "1M", "smallest size of each sweep")
	maxSize := flag.String("e", "8G", "largest size of each sweep")
	ratio := flag.Float64("ratio", 2.08, "a row taking more than this many times the row of half its size, under one plan, is superlinear")
	minBytes := flag.Int64("min-bytes", 16<<20, "the smallest size whose doubling is held to -ratio (below, latency and host floors dominate)")
	timeout := flag.Duration("timeout", 5*time.Minute, "the longest one sweep may take")
	extra := flag.String("args", "", "further simccl run arguments for every sweep, space-separated (e.g. \"--gpus 1\" or \"--fabric-set hosts_per_leaf=4\")")
	jsonOut := flag.String("json", "", "also write the sweeps and findings as JSON to this file")
	flag.Parse()

	var sweeps []sweep
	findings := []finding{}
	failed := false
	fmt.Printf("%-16s %5s %-14s %5s %8s  %s\n", "topology", "nodes", "collective", "rows", "wall_s", "findings")
	for _, t := range strings.Split(*topos, ",") {
		for _, n := range strings.Split(*nodes, ",") {
			for _, c := range strings.Split(*colls, ",") {
				var nn int
				if _, err := fmt.Sscan(n, &nn); err != nil || nn < 1 {
					fmt.Fprintf(os.Stderr, "shape: -nodes: %q is not a node count\n", n)
					os.Exit(2)
				}
				sw := sweep{Topo: t, Nodes: nn, Coll: c}
				ctx, cancel := context.WithTimeout(context.Background(), *timeout)
				args := append([]string{"run", "--topo", t, "--nodes", n, "-c", c, "-b", *minSize, "-e", *maxSize, "-f", "2", "--json", "--progress", "off"}, strings.Fields(*extra)...)
				cmd := exec.CommandContext(ctx, *simccl, args...)
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				start := time.Now()
				err := cmd.Run()
				sw.WallS = time.Since(start).Seconds()
				cancel()
				var doc struct {
					Rows []row `json:"rows"`
				}
				switch {
				case errors.Is(ctx.Err(), context.DeadlineExceeded):
					sw.Error = fmt.Sprintf("past -timeout %v", *timeout)
				case err != nil:
					sw.Error = strings.TrimSpace(errb.String())
				default:
					if jerr := json.Unmarshal(out.Bytes(), &doc); jerr != nil {
						sw.Error = "unreadable JSON: " + jerr.Error()
					}
				}
				sw.Rows = len(doc.Rows)
				fs := check(doc.Rows, *ratio, *minBytes)
				for i := range fs {
					fs[i].Topo, fs[i].Nodes, fs[i].Coll = t, nn, c
				}
				note := fmt.Sprintf("%d", len(fs))
				if sw.Error != "" {
					note, failed = "error: "+sw.Error, true
				}
				fmt.Printf("%-16s %5d %-14s %5d %8.2f  %s\n", t, nn, c, sw.Rows, sw.WallS, note)
				for _, f := range fs {
					if f.Kind == "superlinear" {
						failed = true
					}
					fmt.Printf("    %-11s %11d -> %11d B  %.1f -> %.1f µs (x%.3f)  %s %s -> %s %s\n", f.Kind, f.From, f.To, f.FromUs, f.ToUs, f.Ratio, f.FromPlan, f.FromMode, f.ToPlan, f.ToMode)
				}
				sweeps = append(sweeps, sw)
				findings = append(findings, fs...)
			}
		}
	}
	if *jsonOut != "" {
		doc := map[string]any{"date": time.Now().UTC().Format(time.RFC3339), "args": *extra, "ratio": *ratio, "min_bytes": *minBytes, "sweeps": sweeps, "findings": findings}
		b, _ := json.MarshalIndent(doc, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "shape:", err)
			os.Exit(1)
		}
	}
	if failed {
		os.Exit(1)
	}
}
