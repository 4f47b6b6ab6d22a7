// Command badinput measures how the topology loader handles the bad inputs of issue 2: empty file,
// not XML, wrong root, unknown version, missing busid, negative link counts, duplicate ranks,
// 200,000 GPUs, PCI nesting 20,000 deep, a 100 kB attribute, XML entity expansion (billion
// laughs). Each input is built in memory and goes through the load path of `simccl topo`
// (topo/ncclxml.ParseBytes, then topo.NewCluster with one node and the default options, which calls
// topo.FromXML). Every case must end with a clear one-line error or a correct load: a panic, a
// hang, an outcome other than the expected one or a multi-line error is a failure (exit status 1).
// It prints a table, then JSON (-json FILE also writes it), then the cases over the time target.
//
//	go run ./bench/badinput                       # 3 repetitions, 2 s target
//	go run ./bench/badinput -reps 5 -json badinput.json -run 'laughs|200,000'
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/simccl/simccl/internal/stats"

	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/internal/topogen"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/topo/ncclxml"
)

// A case is one input and the outcome it must have.
type badCase struct {
	name    string
	gen     func() []byte
	loads   bool   // true: must load; false: must fail with an error
	comment string // shown in the README/JSON, not checked
}

// The large inputs and the GPU snippets come from internal/topogen, which topo/ncclxml's and topo's
// tests (TestBadInput, TestManyGPUs, TestErrors, TestLongAttribute, TestTooManyNodes) also use.

const (
	cpuOpen = topogen.CPUOpen
	nvs     = `<nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>`
)

var gpuPCI = topogen.GPUPCI

func str(s string) func() []byte { return func() []byte { return []byte(s) } }

const laughs = `<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<system version="1">&lol9;</system>`

func cases() []badCase {
	long := strings.Repeat("f", 100<<10)
	return []badCase{
		{name: "control: DGX H100", gen: func() []byte { _, d := topos.Default(); return bytes.Clone(d) }, loads: true,
			comment: "the embedded default topology, for comparison"},
		{name: "empty file", gen: str(""), comment: "zero bytes"},
		{name: "not XML", gen: str(`{"system": 1}`), comment: "JSON"},
		{name: "wrong root", gen: str("\n<topology version=\"1\"/>")},
		{name: "unknown version", gen: str(`<system version="2"></system>`)},
		{name: "missing busid", gen: str(cpuOpen + `<pci class="0x060400"/></cpu></system>`)},
		{name: "negative nvlink count", gen: str(cpuOpen + gpuPCI("0000:01:00.0", 0, `<nvlink target="fffffff:ff:ff.0" count="-2" tclass="0x068000"/>`) + `</cpu></system>`)},
		{name: "negative link width", gen: str(cpuOpen + `<pci busid="0000:01:00.0" class="0x030200" link_width="-4"><gpu dev="0" sm="90" rank="0"/></pci></cpu></system>`)},
		{name: "duplicate ranks", gen: str(cpuOpen + gpuPCI("0000:01:00.0", 0, nvs) + gpuPCI("0000:02:00.0", 0, nvs) + `</cpu></system>`)},
		{name: "PCI nesting 20,000 deep", gen: str(`<system version="1">` + strings.Repeat("<pci>", 20000) + strings.Repeat("</pci>", 20000) + `</system>`)},
		{name: "100 kB busid", gen: str(cpuOpen + gpuPCI("0000:01:00.0"+long, 0, "") + `</cpu></system>`)},
		{name: "100 kB nvlink count", gen: str(cpuOpen + gpuPCI("0000:01:00.0", 0, `<nvlink target="fffffff:ff:ff.0" count="`+long+`" tclass="0x068000"/>`) + `</cpu></system>`)},
		{name: "100 kB host_hash", gen: str(strings.Replace(cpuOpen, `host_hash="0x1"`, `host_hash="z`+long+`"`, 1) + gpuPCI("0000:01:00.0", 0, "") + `</cpu></system>`),
			loads: true, comment: "NCCL accepts it: loads with one short warning"},
		{name: "billion laughs", gen: str(laughs), comment: "10^9 'lol' if entities were expanded"},
		{name: "external entity", gen: str("<!DOCTYPE system [<!ENTITY xxe SYSTEM \"file:///etc/passwd\">]>\n<system version=\"1\">&xxe;</system>")},
		// The large cases last, so that the heap they leave does not weigh on the small ones.
		{name: "200,000 GPUs", gen: func() []byte { return topogen.GPUsBySwitch(200000) }, comment: "distinct bus ids and ranks, 64 per switch"},
		{name: "200,000 GPUs, one switch", gen: func() []byte { return topogen.GPUsOneSwitch(200000) }, comment: "identical bus ids and ranks (topo/ncclxml's TestManyGPUs)"},
	}
}

// result is one case's figures over its repetitions.
type result struct {
	Case       string  `json:"case"`
	InputBytes int     `json:"input_bytes"`
	Expected   string  `json:"expected"` // "loaded" or "error"
	Outcome    string  `json:"outcome"`  // "loaded", "error", "panic" or "timeout"
	Stage      string  `json:"stage,omitempty"`
	Error      string  `json:"error,omitempty"` // first line, at most 100 characters
	ErrorBytes int     `json:"error_bytes,omitempty"`
	GPUs       int     `json:"gpus,omitempty"`
	Warnings   int     `json:"warnings,omitempty"`
	Reps       int     `json:"reps"`
	MedianMs   float64 `json:"median_ms"`
	MaxMs      float64 `json:"max_ms"`
	CPUMs      float64 `json:"cpu_ms"`            // median over repetitions, user+system, RUSAGE_SELF
	AllocBytes uint64  `json:"alloc_bytes"`       // median TotalAlloc delta
	PeakHeap   uint64  `json:"peak_heap_bytes"`   // max HeapInuse seen during any repetition (sampled every ms and at the end), less the heap before it
	OverTarget bool    `json:"over_target"`       // median wall time over -target
	Fail       string  `json:"failure,omitempty"` // why the case failed, if it did
	Note       string  `json:"note,omitempty"`
}

// one is the outcome of one repetition.
type one struct {
	outcome, stage string
	err            error
	gpus, warnings int
	panicked       any
	stack          []byte
}

// load runs the path of `simccl topo` (readTopology then topo.NewCluster with one node).
func load(data []byte, opt graph.Options) (o one) {
	defer func() {
		if r := recover(); r != nil {
			o = one{outcome: "panic", panicked: r, stack: debug.Stack()}
		}
	}()
	doc, err := ncclxml.ParseBytes(data, "bad.xml")
	if err != nil {
		return one{outcome: "error", stage: "xml", err: err}
	}
	c, err := topo.NewCluster(doc, 1, opt)
	if err != nil {
		return one{outcome: "error", stage: "graph", err: err}
	}
	return one{outcome: "loaded", gpus: len(c.Node.GPUs()), warnings: len(c.Node.Warnings)}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func maxRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024 // KiB on Linux
}

// heapInuse is MemStats.HeapInuse read through runtime/metrics, which does not stop the world.
var heapSamples = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}

func heapInuse() uint64 {
	metrics.Read(heapSamples)
	var n uint64
	for _, s := range heapSamples {
		if s.Value.Kind() == metrics.KindUint64 {
			n += s.Value.Uint64()
		}
	}
	return n
}

// measure runs one repetition with a heap sampler beside it (every millisecond and at the end).
func measure(data []byte, opt graph.Options, timeout time.Duration) (o one, wall, cpu time.Duration, alloc, peak uint64, timedOut bool) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	base := heapInuse()
	stop, peakc := make(chan struct{}), make(chan uint64)
	go func() {
		p := base
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				peakc <- max(p, heapInuse())
				return
			case <-tick.C:
				p = max(p, heapInuse())
			}
		}
	}()
	done := make(chan one, 1)
	c0, t0 := cpuTime(), time.Now()
	go func() { done <- load(data, opt) }()
	select {
	case o = <-done:
	case <-time.After(timeout):
		timedOut = true
	}
	wall, cpu = time.Since(t0), cpuTime()-c0
	close(stop)
	peak = <-peakc - base
	runtime.ReadMemStats(&after)
	return o, wall, cpu, after.TotalAlloc - before.TotalAlloc, peak, timedOut
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 100 {
		s = s[:97] + "..."
	}
	return s
}

func run(c badCase, reps int, opt graph.Options, target, timeout time.Duration) result {
	// Return the previous case's heap to the OS now rather than let the background scavenger do
	// it during this case's repetitions (seconds for a 200 MB heap where page faults are slow).
	debug.FreeOSMemory()
	data := c.gen()
	r := result{Case: c.name, InputBytes: len(data), Expected: "error", Note: c.comment}
	if c.loads {
		r.Expected = "loaded"
	}
	var walls, cpus, allocs []float64
	for i := 0; i < reps; i++ {
		o, wall, cpu, alloc, peak, timedOut := measure(data, opt, timeout)
		r.Reps++
		walls = append(walls, float64(wall)/1e6)
		cpus = append(cpus, float64(cpu)/1e6)
		allocs = append(allocs, float64(alloc))
		r.PeakHeap = max(r.PeakHeap, peak)
		if timedOut {
			r.Outcome, r.Fail = "timeout", fmt.Sprintf("no result after %v", timeout)
			break
		}
		r.Outcome, r.Stage, r.GPUs, r.Warnings = o.outcome, o.stage, o.gpus, o.warnings
		if o.err != nil {
			msg := o.err.Error()
			r.Error, r.ErrorBytes = firstLine(msg), len(msg)
		}
		switch {
		case o.outcome == "panic":
			r.Error = firstLine(fmt.Sprint(o.panicked))
			r.Fail = "panic: " + r.Error
			fmt.Fprintf(os.Stderr, "bench/badinput: %s: panic: %v\n%s\n", c.name, o.panicked, o.stack)
		case o.outcome != r.Expected:
			r.Fail = fmt.Sprintf("%s, want %s", o.outcome, r.Expected)
		case o.err != nil && strings.Contains(o.err.Error(), "\n"):
			r.Fail = "multi-line error"
		case o.err != nil && !errors.Is(o.err, ncclxml.ErrSyntax) && !errors.Is(o.err, graph.ErrTopology):
			r.Fail = fmt.Sprintf("error %T wraps neither xml.ErrSyntax nor graph.ErrTopology", o.err)
		}
		if r.Fail != "" {
			break
		}
	}
	r.MedianMs, r.MaxMs = stats.Median(walls), slices.Max(walls)
	r.CPUMs, r.AllocBytes = stats.Median(cpus), uint64(stats.Median(allocs))
	// The median, not the max: on a shared machine one repetition can be descheduled for seconds.
	r.OverTarget = r.MedianMs > float64(target)/1e6
	return r
}

// size prints a byte count as B, KiB or MiB.
func size(n uint64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func main() {
	reps := flag.Int("reps", 3, "repetitions per case (median and max reported)")
	jsonOut := flag.String("json", "", "also write the JSON to this file")
	target := flag.Duration("target", 2*time.Second, "time target per case (issue 2); a case over it is listed at the end")
	timeout := flag.Duration("timeout", 5*time.Minute, "a repetition with no result after this long is a hang (failure)")
	only := flag.String("run", "", "only the cases whose name matches this regular expression")
	version := flag.String("nccl-version", "2.28", "NCCL release whose rules apply (as simccl topo --nccl-version)")
	flag.Parse()
	if *reps < 1 {
		fail(errors.New("-reps must be at least 1"))
	}
	v, err := graph.ParseVersion(*version)
	if err != nil {
		fail(err)
	}
	var re *regexp.Regexp
	if *only != "" {
		if re, err = regexp.Compile(*only); err != nil {
			fail(err)
		}
	}
	// The options `simccl topo` builds from its default flags.
	opt := graph.Options{Version: v}

	var rows []result
	for _, c := range cases() {
		if re != nil && !re.MatchString(c.name) {
			continue
		}
		r := run(c, *reps, opt, *target, *timeout)
		fmt.Fprintf(os.Stderr, "bench/badinput: %s: %s, median %.3f ms\n", r.Case, r.Outcome, r.MedianMs)
		rows = append(rows, r)
		if rows[len(rows)-1].Outcome == "timeout" {
			break // the hung goroutine still runs: later figures would be wrong
		}
	}

	fmt.Printf("# bench/badinput: topo/ncclxml.ParseBytes -> topo.NewCluster(1 node, NCCL %s), %d reps (GOMAXPROCS %d, %s)\n",
		*version, *reps, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Printf("%-26s %10s %-7s %-5s %9s %9s %9s %9s %9s  %s\n", "case", "bytes", "outcome", "stage", "median ms", "max ms", "cpu ms", "alloc", "peak heap", "error (first line) / result")
	for _, r := range rows {
		note := r.Error
		if r.Outcome == "loaded" {
			note = fmt.Sprintf("%d GPUs, %d warnings", r.GPUs, r.Warnings)
		}
		if r.Fail != "" {
			note = "FAIL (" + r.Fail + "): " + note
		}
		fmt.Printf("%-26s %10d %-7s %-5s %9.3f %9.3f %9.3f %9s %9s  %s\n", r.Case, r.InputBytes, r.Outcome, r.Stage,
			r.MedianMs, r.MaxMs, r.CPUMs, size(r.AllocBytes), size(r.PeakHeap), note)
	}
	rss := maxRSSMiB()
	fmt.Printf("# process peak RSS (getrusage Maxrss): %.0f MiB\n", rss)

	out, err := json.MarshalIndent(map[string]any{
		"reps": *reps, "target_ms": float64(*target) / 1e6, "nccl_version": *version,
		"gomaxprocs": runtime.GOMAXPROCS(0), "go": runtime.Version(), "max_rss_mib": rss, "cases": rows,
	}, "", "  ")
	if err != nil {
		fail(err)
	}
	fmt.Printf("%s\n", out)
	if *jsonOut != "" {
		if err := os.WriteFile(*jsonOut, append(out, '\n'), 0o644); err != nil {
			fail(err)
		}
	}

	var over, failed []string
	for _, r := range rows {
		if r.OverTarget {
			over = append(over, fmt.Sprintf("%s (median %.0f ms)", r.Case, r.MedianMs))
		}
		if r.Fail != "" {
			failed = append(failed, r.Case+": "+r.Fail)
		}
	}
	if len(over) == 0 {
		fmt.Printf("over the %v target (median wall time): none of %d cases\n", *target, len(rows))
	} else {
		fmt.Printf("over the %v target (median wall time): %d of %d cases: %s\n", *target, len(over), len(rows), strings.Join(over, "; "))
	}
	if len(failed) > 0 {
		fmt.Fprintf(os.Stderr, "bench/badinput: %d failed: %s\n", len(failed), strings.Join(failed, "; "))
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench/badinput:", err)
	os.Exit(1)
}
