// Command corpus runs `simccl run` on every topology file of a directory (testdata/topos: the
// public topology files of the corpus) at the given node counts, as a user would, each under a
// time limit, and prints one row per (file, nodes): whether simccl ran it, refused it (its
// one-line reason) or was stopped at the limit, its wall time and peak RSS (getrusage of the
// child), and the rows it printed; then the totals, and the same as JSON. It finds the files on
// which a whole sweep takes minutes (BENCHMARKS.md, stop 38).
//
//	go build -o bin/simccl ./cmd/simccl
//	go run ./bench/corpus -nodes 24,100 -json /tmp/corpus.json
//	go run ./bench/corpus -run 'p5|rtx3090' -nodes 24 -args '-c alltoall'
//	go run ./bench/corpus -complete -run partial -nodes 2,24
//
// -complete runs the cloud VMs' partial files (GPUs and NICs left to NCCL's detection) completed
// with the GPU model and NIC speed of the machine each one describes (completions below), as a user
// of those VMs would name them; without it they are refused with what they lack.
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
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// completions are the --gpu-model and --nic-speed of the VM each partial file of the corpus
// describes, from the vendors' own descriptions of those VMs (testdata/topos/SOURCES.md names the
// files): Azure ND H100 v5 — 8 H100 SXM, 8 × 400 Gb/s InfiniBand (NDR); ND A100 v4 — 8 A100 SXM,
// 8 × 200 Gb/s InfiniBand (HDR); AWS p4d.24xlarge — 8 A100 SXM, 4 × 100 Gb/s EFA.
var completions = map[string][]string{
	"azure-ndv5-h100-partial.xml":          {"--gpu-model", "h100", "--nic-speed", "400Gbps"},
	"azure-ndv4-a100-partial.xml":          {"--gpu-model", "a100", "--nic-speed", "200Gbps"},
	"azure-ndv4-a100-partial-orig2023.xml": {"--gpu-model", "a100", "--nic-speed", "200Gbps"},
	"aws-p4d-24xl-a100-partial.xml":        {"--gpu-model", "a100", "--nic-speed", "100Gbps"},
}

// result is one run of simccl on one file at one node count.
type result struct {
	File   string  `json:"file"`
	Nodes  int     `json:"nodes"`
	Status string  `json:"status"` // ran, refused, stopped
	WallS  float64 `json:"wall_s"`
	PeakMB float64 `json:"peak_rss_mib"`
	Rows   int     `json:"rows"`
	Reason string  `json:"reason,omitempty"` // refused: simccl's first line on stderr
	// Completed is what -complete added to the command line ("" for none).
	Completed string `json:"completed,omitempty"`
}

func main() {
	simccl := flag.String("simccl", "bin/simccl", "the simccl binary")
	dir := flag.String("dir", "testdata/topos", "directory of topology files (*.xml)")
	nodesFlag := flag.String("nodes", "24", "node counts, comma-separated")
	limit := flag.Duration("timeout", 180*time.Second, "time limit of one run")
	args := flag.String("args", "-c all -b 8 -e 1G -f 8", "simccl run's arguments besides --topo, --nodes, --json and --progress")
	match := flag.String("run", "", "only the files whose name matches this regular expression")
	jsonPath := flag.String("json", "", "also write the JSON to this file")
	complete := flag.Bool("complete", false, "complete the partial cloud VM files with their VM's GPU model and NIC speed (--gpu-model, --nic-speed)")
	flag.Parse()
	if err := run(*simccl, *dir, *nodesFlag, *limit, strings.Fields(*args), *match, *jsonPath, *complete); err != nil {
		fmt.Fprintln(os.Stderr, "corpus:", err)
		os.Exit(1)
	}
}

func run(simccl, dir, nodesFlag string, limit time.Duration, args []string, match, jsonPath string, complete bool) error {
	var nodes []int
	for _, f := range strings.Split(nodesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-nodes: %q is not a node count", f)
		}
		nodes = append(nodes, n)
	}
	re, err := regexp.Compile(match)
	if err != nil {
		return fmt.Errorf("-run: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.xml"))
	if err != nil {
		return err
	}
	slices.Sort(files)
	files = slices.DeleteFunc(files, func(f string) bool { return !re.MatchString(filepath.Base(f)) })
	if len(files) == 0 {
		return fmt.Errorf("no *.xml file in %s matches %q", dir, match)
	}
	var out []result
	fmt.Printf("%-52s %5s %-8s %8s %8s %5s  %s\n", "file", "nodes", "status", "wall s", "MiB", "rows", "reason")
	for _, f := range files {
		for _, n := range nodes {
			a := args
			var extra []string
			if complete {
				extra = completions[filepath.Base(f)]
				a = append(slices.Clone(args), extra...)
			}
			r := runOne(simccl, f, n, limit, a)
			r.Completed = strings.Join(extra, " ")
			out = append(out, r)
			fmt.Printf("%-52s %5d %-8s %8.2f %8.0f %5d  %s\n", r.File, r.Nodes, r.Status, r.WallS, r.PeakMB, r.Rows, r.Reason)
		}
	}
	count := map[string]int{}
	most := result{}
	for _, r := range out {
		count[r.Status]++
		if r.Status == "ran" && r.WallS > most.WallS {
			most = r
		}
	}
	fmt.Printf("\n%d runs: %d ran, %d refused, %d stopped at %v", len(out), count["ran"], count["refused"], count["stopped"], limit)
	if most.File != "" {
		fmt.Printf("; longest that ran: %s at %d nodes, %.1f s", most.File, most.Nodes, most.WallS)
	}
	fmt.Println()
	doc := map[string]any{"args": args, "complete": complete, "timeout_s": limit.Seconds(), "results": out}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	if jsonPath != "" {
		return os.WriteFile(jsonPath, append(b, '\n'), 0o644)
	}
	return nil
}

// runOne runs simccl on file at nodes nodes within limit.
func runOne(simccl, file string, nodes int, limit time.Duration, args []string) result {
	r := result{File: filepath.Base(file), Nodes: nodes}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	full := append([]string{"run", "--topo", file, "--nodes", strconv.Itoa(nodes)}, args...)
	full = append(full, "--json", "--progress", "off")
	cmd := exec.CommandContext(ctx, simccl, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r.WallS = time.Since(start).Seconds()
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			r.PeakMB = float64(ru.Maxrss) / 1024 // KiB on Linux
		}
	}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.Status = "stopped"
	case err == nil:
		r.Status = "ran"
		var doc struct {
			Rows []json.RawMessage `json:"rows"`
		}
		if json.Unmarshal(stdout.Bytes(), &doc) == nil {
			r.Rows = len(doc.Rows)
		}
	case errors.As(err, &exit):
		r.Status = "refused"
		line, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
		r.Reason = line
	default:
		r.Status = "refused"
		r.Reason = err.Error()
	}
	return r
}
