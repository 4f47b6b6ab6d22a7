// Command compare simulates the collectives measured with NCCL on the 2×H200 machine
// (testdata/nccl/h200x2/nccl_perf.csv, tag "default": NCCL's own choices) on that machine's NCCL
// topology dump, and prints simulated against measured time per size with the median |error| per
// collective, for sizes >= 1 MiB and below. Tags other than "default" (ring_LL, ring_LL128,
// ring_Simple, tree_simple) were measured with NCCL_ALGO/NCCL_PROTO forced; the simulation is
// forced the same way. Nothing is fitted: the simulation uses the topology,
// NCCL's search and cost model (for the plan) and NCCL's latency constants (for the steps).
//
// The GPU model's per-CTA data rate (simnet.GPUModel, NCCL's per-channel ceiling of the SM
// generation) can be overridden with -cta-rate (GB/s; 0 keeps the model's, a negative value turns
// the CTA model off); -sensitivity prints the medians at the model's rate ×0.75, ×1, ×1.25 and off.
//
// The GPU model also charges each step its CTA's memory traffic at a per-protocol rate and Simple's
// fence (simnet.GPUModel.Mem, Fence; measured, see simnet/cta.go); -flat-cta turns that off for
// comparison.
//
// -launch is how the measurement launched its calls, which the simulation then models: nccl_perf.cu
// drives every GPU from one process unless NPROCS is set (per-node); its NPROCS rows (one row per
// rank, with a rank column; the slowest kept) ran one process per GPU (per-gpu); GRAPH=1 rows
// (tags with "graph") were replayed from CUDA graphs (graph with a rank column, else graph-per-node:
// one process replayed both GPUs' graphs). Left out, it is read from the tag's
// rows so (launchFromRows).
//
//	go run ./bench/sim/compare [-csv testdata/nccl/h200x2/nccl_perf.csv] [-topo testdata/nccl/h200x2/real_topo.xml] [-tag default] [-launch per-node] [-cta-rate 0] [-flat-cta] [-line-stream] [-sensitivity] [-plot cmp.svg] [-json]
//	go run ./bench/sim/compare -csv testdata/nccl/h200x2/p2pscan-2026-11-28.csv -tag p2p_maxch1 -launch per-gpu -env NCCL_MAX_P2P_NCHANNELS=1
//	go run ./bench/sim/compare -csv testdata/nccl/h200x4/smallmsg.csv -topo testdata/nccl/h200x4/real_topo.xml -tag mp_default -launch per-gpu
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/report"
	"github.com/simccl/simccl/simnet"
	"github.com/simccl/simccl/tuning"
)

func main() {
	csvPath := flag.String("csv", "testdata/nccl/h200x2/nccl_perf.csv", "measured timings (tag,coll,world,bytes,us,algbw,busbw)")
	topo := flag.String("topo", "testdata/nccl/h200x2/real_topo.xml", "the measured machine's NCCL topology")
	tag := flag.String("tag", "default", "which measured rows to compare (default = NCCL's own choices)")
	plotPath := flag.String("plot", "", "write simulated and measured busbw (.png or .svg)")
	asJSON := flag.Bool("json", false, "print JSON instead of the table")
	ctaRate := flag.Float64("cta-rate", 0, "per-CTA data rate in GB/s (0: the GPU model's; < 0: CTA not modelled)")
	sens := flag.Bool("sensitivity", false, "print the medians with the CTA rate x0.75, x1, x1.25 and off")
	launch := flag.String("launch", "", "how the measurement launched its calls: per-node (one process drives every GPU, nccl_perf.cu's default), per-gpu (a process per GPU, NPROCS), graph (a process per GPU), graph-per-node (one process replays every GPU's graph); default: from the tag (launchFromTag)")
	skewNs := flag.Float64("channel-skew", -1, "ns between the starts of consecutive ring channels on one node (simnet.GPUModel.ChannelSkew; < 0: the model's, 0: lockstep)")
	flat := flag.Bool("flat-cta", false, "the flat per-CTA model of before 2026-11-28 (every step's payload at the CTA rate, no fence) instead of the per-protocol memory-traffic model and Simple's fence (simnet.GPUModel.Mem, Fence)")
	netStage := flag.Bool("net-stage", true, "network messages in two stages, the CTA's write then the NIC's transfer (simnet.NetStaged; false: the single-stage message of before 2026-11-30)")
	stream := flag.Bool("line-stream", false, "every algorithm's LL and LL128 receives overlap the message they receive, with the measured LL rate of one Hopper CTA (simnet.LineStream; by default only ring broadcast and reduce stream)")
	env := flag.String("env", "", "NCCL settings the measured rows ran under, K=V[,K=V…] (e.g. NCCL_MAX_P2P_NCHANNELS=1, as testdata/nccl/p2pscan.sh's log names them per tag): the simulation plans with them too; a tag's own algorithm, protocol and channels win")
	gpus := flag.Int("gpus", 0, "keep the topology's first N GPUs (0: all), as simccl run --gpus: 1 for the one-GPU captures of testdata/nccl/h200x1")
	hostUs := flag.Float64("host-enqueue", 0, "the measured host's enqueue of a small call on one GPU, µs (simccl run --host-enqueue: every host floor scales with it); 0: the model's, simnet.HostEnqueue")
	b2b := flag.Int("b2b", 0, "calls of the back-to-back loop that times each size (simnet.Machine.BackToBack); 0: as simccl run (nccl-tests' loop of 3 for broadcast and reduce, one call otherwise); 1: one isolated call")
	flag.Parse()
	if *launch == "" {
		*launch = launchFromRows(*csvPath, *tag)
	}
	mode, err := simnet.ParseLaunchMode(*launch)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	if !(*hostUs >= 0 && *hostUs <= simnet.MaxHostEnqueue.Micros()) {
		fmt.Fprintf(os.Stderr, "compare: -host-enqueue %g: want 0 (the model's) or a time up to %g µs\n", *hostUs, simnet.MaxHostEnqueue.Micros())
		os.Exit(2)
	}
	if *flat {
		simnet.MemModel = false
	}
	simnet.LineStream = *stream
	simnet.NetStaged = *netStage
	cfg, err := settings(*tag, *env)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	if err := run(*csvPath, *topo, *tag, cfg, *plotPath, *asJSON, *ctaRate, *sens, *b2b, *gpus, mode, *skewNs, simnet.FromMicros(*hostUs)); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(csvPath, topo, tag string, cfg tuning.Config, plotPath string, asJSON bool, ctaRate float64, sens bool, b2b, gpus int, launch simnet.LaunchMode, skewNs float64, host simnet.Time) error {
	f, err := os.Open(csvPath)
	if err != nil {
		return err
	}
	meas, err := simnet.ReadMeasuredCSV(f, csvPath)
	f.Close()
	if err != nil {
		return err
	}
	s := planner.Settings{Tuning: cfg}
	name, doc, err := planner.LoadTopology(topo, s)
	if err != nil {
		return err
	}
	p, err := planner.New(planner.Machine{Name: name, Doc: doc, Nodes: 1, GPUs: gpus, Settings: s})
	if err != nil {
		return err
	}
	m, err := simnet.NewMachine(p.System, 1, nil, p, p.Settings.Release)
	if err != nil {
		return err
	}
	m.BackToBack = b2b
	m.Launch, m.HostEnqueue = launch, host
	if skewNs >= 0 {
		m.GPU.ChannelSkew = simnet.Time(skewNs * float64(simnet.Nanosecond))
	}
	if sens {
		return sensitivity(m, meas, tag, asJSON)
	}
	switch {
	case ctaRate < 0:
		m.GPU.CTARate, m.GPU.Mem, m.GPU.Fence, m.GPU.Slice = 0, [len(m.GPU.Mem)]simnet.Rate{}, 0, simnet.SliceCost{}
	case ctaRate > 0:
		m.GPU.CTARate = simnet.GBps(ctaRate)
	}
	pts, sums, err := simnet.Compare(m, meas, tag)
	if err != nil {
		return err
	}
	if plotPath != "" {
		var series []report.Series
		idx := map[string]int{}
		for _, p := range pts {
			for k, name := range []string{"sim " + p.Coll, "measured " + p.Coll} {
				j, ok := idx[name]
				if !ok {
					j = len(series)
					idx[name] = j
					series = append(series, report.Series{Name: name, Coll: p.Coll, Measured: k == 1})
				}
				pt := report.BWPoint{Bytes: p.Bytes, TimeUs: p.SimUs, BusBw: p.SimBus}
				if k == 1 {
					pt.TimeUs, pt.BusBw = p.MeasUs, p.MeasBus
				}
				series[j].Points = append(series[j].Points, pt)
			}
		}
		out, err := os.Create(plotPath)
		if err != nil {
			return err
		}
		format := strings.TrimPrefix(filepath.Ext(plotPath), ".")
		if err := report.WriteBusbwPlot(out, "simulated vs measured NCCL 2.28.9 busbw ("+filepath.Base(filepath.Dir(csvPath))+")", series, format); err != nil {
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
	fmt.Printf("# simulated (%s, CTA rate %.1f GB/s, %d back-to-back calls, launch %s) vs measured (%s, tag %s)\n", topo, m.GPU.CTARate.GBps(), b2b, launch, csvPath, tag)
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

// sensitivity prints the median |error| per collective with the GPU model's CTA rate scaled.
func sensitivity(m *simnet.Machine, meas []simnet.Measured, tag string, asJSON bool) error {
	base := m.GPU.CTARate
	type run struct {
		Label   string                  `json:"label"`
		CTAGBps float64                 `json:"cta_rate_gbps"`
		Summary []simnet.CompareSummary `json:"summary"`
	}
	var runs []run
	for _, k := range []struct {
		label string
		scale float64
	}{{"x0.75", 0.75}, {"x1", 1}, {"x1.25", 1.25}, {"off", 0}} {
		m.GPU.CTARate = base * simnet.Rate(k.scale)
		_, sums, err := simnet.Compare(m, meas, tag)
		if err != nil {
			return err
		}
		runs = append(runs, run{k.label, m.GPU.CTARate.GBps(), sums})
	}
	m.GPU.CTARate = base
	if asJSON {
		b, _ := json.MarshalIndent(runs, "", "  ")
		fmt.Println(string(b))
		return nil
	}
	fmt.Printf("# median |error| (>= 1 MiB / < 1 MiB) against the per-CTA rate (tag %s)\n%-15s", tag, "coll")
	for _, r := range runs {
		fmt.Printf(" %17s", fmt.Sprintf("%s %.1f GB/s", r.Label, r.CTAGBps))
	}
	fmt.Println()
	for i, s := range runs[0].Summary {
		fmt.Printf("%-15s", s.Coll)
		for _, r := range runs {
			fmt.Printf(" %8.1f%% / %5.1f%%", r.Summary[i].MedianLarge, r.Summary[i].MedianSmall)
		}
		fmt.Println()
	}
	return nil
}

// settings is the tuning configuration of the measured rows: NCCL's variables from env
// ("K=V,K=V", read as NCCL reads its environment) under what the tag itself forces (forced).
func settings(tag, env string) (tuning.Config, error) {
	if k := commsOf(tag); k > 1 {
		return tuning.Config{}, fmt.Errorf("tag %q: each timed call enqueued the collective on %d communicators (testdata/nccl/commscan.sh, COMMS=%d), not one call; only its comms1 rows compare", tag, k, k)
	}
	f := forced(tag)
	if env == "" {
		return f, nil
	}
	vars := map[string]string{}
	for _, kv := range strings.Split(env, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || !strings.HasPrefix(k, "NCCL_") {
			return tuning.Config{}, fmt.Errorf("-env %q: want NCCL_NAME=VALUE pairs separated by commas", kv)
		}
		vars[k] = v
	}
	c, err := tuning.ConfigFromEnv(func(k string) string { return vars[k] })
	if err != nil {
		return tuning.Config{}, err
	}
	if f.Algo != "" {
		c.Algo, c.Proto = f.Algo, f.Proto
	}
	if f.MinNChannels > 0 {
		c.MinNChannels, c.MaxNChannels = f.MinNChannels, f.MaxNChannels
	}
	return *c, nil
}

// forced gives the NCCL_ALGO/NCCL_PROTO the measured rows of a tag ran under ("ring_LL",
// "ring_Simple", "tree_simple"…), so that the simulation makes the same forced choice; nil for
// NCCL's own choices ("default").
func forced(tag string) tuning.Config {
	tag = strings.TrimPrefix(strings.TrimPrefix(tag, "mp_"), "sp_")
	var nch int
	if i := strings.Index(tag, "_ch"); i >= 0 {
		// A pinned channel count (mp_ring_LL_ch4: NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS = 4,
		// testdata/nccl/smallmsg.sh).
		// The count's leading digits: chscan.sh's ring_simple_ch24_to1g_r1 is 24 channels.
		d := tag[i+3:]
		if j := strings.IndexFunc(d, func(r rune) bool { return r < '0' || r > '9' }); j >= 0 {
			d = d[:j]
		}
		n, err := strconv.Atoi(d)
		if err == nil && n > 0 {
			nch = n
		}
		tag = tag[:i]
	}
	algo, proto, ok := strings.Cut(tag, "_")
	if commsOf(tag) > 0 {
		// commscan.sh's one-communicator rows (sp_comms1_spin_r1): NCCL's own choices.
		return tuning.Config{}
	}
	// p2pscan.sh's tags (p2p_maxch1, p2p_chunk131072, ag_default_np2) and bigscan.sh's
	// (default_to8g_r1) ran NCCL's own choices
	// under the settings its log names (-env).
	// The one-GPU captures' (testdata/nccl/h200x1: onerank_r1, self_maxp2p8) too.
	if !ok || tag == "default" || algo == "p2p" || algo == "default" || algo == "onerank" || algo == "self" || strings.HasPrefix(proto, "default") {
		return tuning.Config{MinNChannels: nch, MaxNChannels: nch}
	}
	if algo == "ag" { // smallmsg.sh's all_gather sweeps (mp_ag_LL_ch1) ran NCCL_ALGO=Ring
		algo = "ring"
	}
	return tuning.Config{Algo: algo, Proto: proto, MinNChannels: nch, MaxNChannels: nch}
}

// commsOf is K of a commscan.sh tag (sp_commsK_…: each timed call on K communicators), 0 for
// other tags.
func commsOf(tag string) int {
	for _, part := range strings.Split(tag, "_") {
		if d, ok := strings.CutPrefix(part, "comms"); ok {
			if k, err := strconv.Atoi(d); err == nil && k > 0 {
				return k
			}
		}
	}
	return 0
}

// launchFromRows is the launch mode of the tag's rows as tools/nccl_perf.cu writes them: "graph" in
// the tag (the capture scripts' name for GRAPH=1, CUDA graph replays), a process per GPU where the
// rows carry a rank column (NPROCS), else one process for every GPU (nccl_perf.cu's default).
func launchFromRows(csvPath, tag string) string {
	perGPU := false // rows with a rank column: a process per GPU (NPROCS)
	if data, err := os.ReadFile(csvPath); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Split(line, ","); f[0] == tag && len(f) >= 8 {
				perGPU = true
				break
			}
		}
	}
	switch graph := strings.Contains(tag, "graph"); {
	case graph && perGPU:
		return "graph"
	case graph:
		return "graph-per-node"
	case perGPU:
		return "per-gpu"
	}
	return "per-node"
}
