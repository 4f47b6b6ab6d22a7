package report

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/simnet"
)

// ErrInput is wrapped by errors about the report's inputs.
var ErrInput = errors.New("report: bad input")

// Options are the inputs of a report. The zero value reports all-reduce from 8 B to 1 GiB on the
// embedded default topology.
type Options struct {
	// Planner is the communicator reported on (its topology, nodes and NCCL settings); nil: one
	// node of the embedded default topology with NCCL's defaults.
	Planner *planner.Planner
	// Fabric joins the nodes (nil: simnet.DefaultFabric).
	Fabric *simnet.Fabric
	// Funcs are the swept collectives (nil: all-reduce); Sizes the nccl-tests sizes (nil: 8 B..1 GiB ×2).
	Funcs []coll.Func
	Sizes []int64
	// DataType and Op of the sweep (zero: float, sum).
	DataType coll.DataType
	Op       coll.RedOp
	// Measured rows to plot beside the simulation, and their source (for labels). MeasuredTag picks
	// the rows of one tag (default "default", NCCL's own choice; "*" keeps rows with any tag).
	Measured     []simnet.Measured
	MeasuredName string
	MeasuredTag  string
	// Launch is how the host launches each simulated call (simnet.Machine.Launch): the measured
	// run's mode where it is known, so that both pay the same host floor. LaunchNote, if set, is
	// the page's note on how it was chosen.
	Launch     simnet.LaunchMode
	LaunchNote string
	// HostEnqueue is the host's enqueue of a one-channel collective call (simnet.Machine.HostEnqueue;
	// 0: the measured simnet.HostEnqueue).
	HostEnqueue simnet.Time
	// FocusColl and FocusSize are the collective and size of the "where time goes" section (empty:
	// the first swept collective; 0: the swept size nearest 1 MiB). FocusMaxSteps bounds the
	// recorded schedule (default 300,000 steps): a larger one is replaced by a smaller size, noted.
	FocusColl     string
	FocusSize     int64
	FocusMaxSteps int
	// TimelineOps bounds the ops drawn in the timeline (default 3000) and TraceOps those embedded
	// for Perfetto (default 20,000).
	TimelineOps, TraceOps int
	// PlannerAt, when set, builds the same communicator on another number of nodes: the sweep's
	// simulator times a broadcast or reduce past coll's limit from the same call on fewer nodes
	// (simnet.Machine.PlannerAt), and the focus section says up to how many nodes its schedule can
	// be recorded when it cannot be at Planner's. It may be called concurrently.
	PlannerAt func(nodes int) (*planner.Planner, error)
	// Sections are the sections to build, of SectionNames (nil: all); the others are replaced
	// by a line saying so. FocusColl "none" leaves out "time" as well.
	Sections []string
	// SizeBudget bounds the time of one simulated size of the sweep (0: 10 s; negative: no
	// bound). The larger sizes of a collective are not simulated once the last one's time, scaled
	// by the size ratio, passes it (the replays grow with the size): a line says which.
	SizeBudget time.Duration
	// Alternatives simulates every algorithm and protocol NCCL's tuner could pick at each size
	// (simnet.Machine.Alternatives; simccl report --alternatives): the tuner map's tips list them
	// beside NCCL's estimates, and a note says how often NCCL's pick was the fastest simulated.
	Alternatives bool
	// Progress, when set, is called before each simulated size.
	Progress func(done, total int, what string)
}

// Report is everything the page shows, as plain values (also written as JSON by --json).
type Report struct {
	Title    string       `json:"title"`
	Machine  MachineSum   `json:"machine"`
	Topology Topology     `json:"topology"`
	Fabric   *FabricSum   `json:"fabric,omitempty"`
	Tuner    []TunerRow   `json:"tuner"`
	BusBW    []Series     `json:"busbw"`
	Compare  []CompareRow `json:"compare,omitempty"`
	Measured string       `json:"measured,omitempty"`
	Focus    *Focus       `json:"focus,omitempty"`
	Memory   Memory       `json:"memory"`
	Notes    []string     `json:"notes,omitempty"`
	// Cut says, per collective, which sizes of the sweep were not simulated and why (SizeBudget).
	Cut []string `json:"sizes_not_simulated,omitempty"`
	// Skipped are the sections not built, each with why.
	Skipped []Skip `json:"skipped,omitempty"`

	cutSizes map[coll.Func]int64 // per collective, the smallest size not simulated (Cut)
}

// SectionNames are the page's sections, in order: the values of Options.Sections.
var SectionNames = []string{"topology", "tuner", "busbw", "time", "memory"}

// Skip is a section left out of the page and why.
type Skip struct {
	Section string `json:"section"`
	Why     string `json:"why"`
}

// skipped says why a section was left out ("" when it was built).
func (r *Report) skipped(section string) string {
	for _, s := range r.Skipped {
		if s.Section == section {
			return s.Why
		}
	}
	return ""
}

// CheckSections checks section names against SectionNames.
func CheckSections(names []string) error {
	for _, n := range names {
		found := false
		for _, s := range SectionNames {
			found = found || n == s
		}
		if !found {
			return fmt.Errorf("%w: section %q (sections: %s)", ErrInput, n, strings.Join(SectionNames, ", "))
		}
	}
	return nil
}

// MachineSum summarises the simulated communicator.
type MachineSum struct {
	Name      string `json:"name"`
	Nodes     int    `json:"nodes"`
	GPUsNode  int    `json:"gpus_per_node"`
	Ranks     int    `json:"ranks"`
	NChannels int    `json:"nchannels"`
	Release   string `json:"release"`
}

// Series is one line of the busbw plot.
type Series struct {
	Name     string    `json:"name"`
	Coll     string    `json:"coll"`
	Measured bool      `json:"measured"`
	Points   []BWPoint `json:"points"`
}

// BWPoint is one size of a series.
type BWPoint struct {
	Bytes  int64   `json:"bytes"`
	TimeUs float64 `json:"time_us"`
	BusBw  float64 `json:"busbw"`
	Label  string  `json:"label,omitempty"` // algo/proto/channels for simulated points
}

// CompareRow is one measured size beside its simulation.
type CompareRow struct {
	Coll    string  `json:"coll"`
	Bytes   int64   `json:"bytes"`
	MeasUs  float64 `json:"measured_us"`
	SimUs   float64 `json:"simulated_us"`
	MeasBus float64 `json:"measured_busbw"`
	SimBus  float64 `json:"simulated_busbw"`
	ErrPct  float64 `json:"error_pct"` // 100 × (simulated − measured) / measured time
	Sim     string  `json:"sim"`       // algo/proto/channels simulated
}

// Build simulates what the report shows.
func Build(opt Options) (*Report, error) {
	if len(opt.Funcs) == 0 {
		opt.Funcs = []coll.Func{coll.AllReduce}
	}
	if len(opt.Sizes) == 0 {
		for s := int64(8); s <= 1<<30; s *= 2 {
			opt.Sizes = append(opt.Sizes, s)
		}
	}
	for _, s := range opt.Sizes {
		if s < 0 {
			return nil, fmt.Errorf("%w: size %d", ErrInput, s)
		}
	}
	if err := CheckSections(opt.Sections); err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range SectionNames {
		want[n] = opt.Sections == nil
	}
	for _, n := range opt.Sections {
		want[n] = true
	}
	var skipped []Skip
	for _, n := range SectionNames {
		if !want[n] {
			skipped = append(skipped, Skip{n, "left out (not among the sections asked for)"})
		}
	}
	if want["time"] && opt.FocusColl == "none" {
		want["time"] = false
		skipped = append(skipped, Skip{"time", "left out (no focus collective asked for)"})
	}
	if want["time"] && opt.FocusColl != "" {
		if _, err := coll.ParseFunc(opt.FocusColl); err != nil {
			return nil, fmt.Errorf("%w: focus collective: %v", ErrInput, err)
		}
	}
	if opt.FocusSize < 0 {
		return nil, fmt.Errorf("%w: focus size %d", ErrInput, opt.FocusSize)
	}
	if opt.DataType == 0 && opt.Op == 0 {
		opt.DataType = coll.Float32
	}
	if opt.DataType.Size() == 0 {
		return nil, fmt.Errorf("%w: unknown data type %v", ErrInput, opt.DataType)
	}
	if opt.MeasuredTag == "" {
		opt.MeasuredTag = "default"
	}
	if opt.Fabric == nil {
		opt.Fabric = simnet.DefaultFabric()
	}
	if opt.Planner == nil {
		name, doc, err := planner.LoadTopology("", planner.Settings{})
		if err != nil {
			return nil, err
		}
		if opt.Planner, err = planner.New(planner.Machine{Name: name, Doc: doc, Nodes: 1}); err != nil {
			return nil, err
		}
	}
	p := opt.Planner
	sys := p.System
	m, err := simnet.NewMachine(sys, p.Nodes, opt.Fabric, p, p.Settings.Release)
	if err != nil {
		return nil, err
	}
	m.Launch, m.HostEnqueue = opt.Launch, opt.HostEnqueue
	if opt.PlannerAt != nil {
		// The sweep times what simccl run times: a broadcast or reduce past coll's limit from the
		// same call on fewer nodes (nodes-steady) needs the smaller communicators.
		m.PlannerAt = func(nodes int) (coll.Planner, error) {
			p, err := opt.PlannerAt(nodes)
			if err != nil {
				return nil, err
			}
			return p, nil
		}
	}
	if err := checkMeasuredRanks(opt, m.NRanks()); err != nil {
		return nil, err
	}
	r := &Report{
		Skipped: skipped,
		Machine: MachineSum{Name: sys.Name, Nodes: m.Nodes, GPUsNode: m.Node.NumGPUs, Ranks: m.NRanks(), NChannels: p.Table.NChannels, Release: p.Table.K.Release},
	}
	r.Title = fmt.Sprintf("simccl report: %s, %d node(s) × %d GPUs", sys.Name, m.Nodes, m.Node.NumGPUs)
	r.Notes = append(r.Notes, m.Notes...)
	if opt.LaunchNote != "" {
		r.Notes = append(r.Notes, opt.LaunchNote)
	}
	if want["topology"] {
		r.Topology = buildTopology(sys)
	}
	if want["topology"] && m.Nodes > 1 {
		fs, err := summariseFabric(m)
		if err != nil {
			return nil, err
		}
		r.Fabric = fs
	}
	if want["tuner"] || want["busbw"] {
		if err := r.sweep(m, opt); err != nil {
			return nil, err
		}
	}
	if want["time"] {
		if err := r.focus(m, opt); err != nil {
			return nil, err
		}
	}
	if want["memory"] {
		if r.Memory, err = buildMemory(p, opt); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// checkMeasuredRanks refuses, before any simulation, measured rows of the plotted collectives
// and sizes taken on another number of ranks than n.
func checkMeasuredRanks(opt Options, n int) error {
	swept := map[string]bool{}
	for _, f := range opt.Funcs {
		swept[coll.TestName(f)] = true
	}
	lo, hi := opt.Sizes[0], opt.Sizes[0]
	for _, s := range opt.Sizes {
		lo, hi = min(lo, s), max(hi, s)
	}
	for _, mr := range opt.Measured {
		if opt.MeasuredTag != "*" && mr.Tag != opt.MeasuredTag {
			continue
		}
		if _, err := coll.ParseFunc(mr.Coll); err != nil {
			// Else the row would be dropped without a word, and the page's note would say the
			// tag has no row.
			return fmt.Errorf("%w: %s: a row of tag %q: %v", ErrInput, opt.MeasuredName, mr.Tag, err)
		}
		if !swept[mr.Coll] || mr.Bytes < lo || mr.Bytes > hi {
			continue
		}
		if mr.World != n {
			return fmt.Errorf("%w: %s: %s measured on %d ranks, the simulated machine has %d (use --nodes)", ErrInput, opt.MeasuredName, mr.Coll, mr.World, n)
		}
	}
	return nil
}

// sweep simulates every collective at every size and tunes it, and lines up the measurements.
func (r *Report) sweep(m *simnet.Machine, opt Options) error {
	n := m.NRanks()
	total := len(opt.Funcs) * len(opt.Sizes)
	done := 0
	type key struct {
		f    coll.Func
		size int64
	}
	simmed := map[key]simnet.Row{}
	budget := opt.SizeBudget
	if budget == 0 {
		budget = 10 * time.Second
	}
	// last and prev are, per collective, the two largest sizes simulated and how long they
	// took; cut the smallest size refused.
	type took struct {
		size int64
		d    time.Duration
		mode string
	}
	last, prev := map[coll.Func]took{}, map[coll.Func]took{}
	cut := map[coll.Func]int64{}
	var cutOrder []coll.Func
	afford := func(f coll.Func, size int64) bool {
		l, ok := last[f]
		p, okp := prev[f]
		if budget < 0 || !ok || !okp || size <= l.size || l.size <= p.size {
			return true
		}
		// A replay's time is about linear in the size past the smallest (latency-bound) sizes:
		// extrapolate the last two.
		slope := max(float64(l.d-p.d), 0) / float64(l.size-p.size)
		if float64(l.d)+slope*float64(size-l.size) <= float64(budget) {
			return true
		}
		if c, ok := cut[f]; !ok || size < c {
			if !ok {
				cutOrder = append(cutOrder, f)
			}
			cut[f] = size
		}
		return false
	}
	run := func(f coll.Func, size int64) (simnet.Row, bool, error) {
		if row, ok := simmed[key{f, size}]; ok {
			return row, true, nil
		}
		if !afford(f, size) {
			return simnet.Row{}, false, nil
		}
		start := time.Now()
		row, _, err := m.Run(f, size, opt.DataType, opt.Op, simnet.RunOptions{})
		if err != nil {
			return row, false, fmt.Errorf("%s %d bytes: %w", coll.TestName(f), size, err)
		}
		if opt.Alternatives {
			row.Alternatives = m.Alternatives(f, size, opt.DataType, opt.Op, simnet.RunOptions{}, row)
		}
		if l, ok := last[f]; !ok || size > l.size {
			if ok {
				prev[f] = l
			}
			last[f] = took{size, time.Since(start), row.Mode}
		}
		simmed[key{f, size}] = row
		return row, true, nil
	}
	defer func() {
		for _, f := range cutOrder {
			l := last[f]
			r.Cut = append(r.Cut, fmt.Sprintf("%s from %s up not simulated at %d node(s): %s took %.2g s (%s) and a replay grows with the size; the budget is %v a size (the extrapolation can let one size run past it)",
				coll.TestName(f), sizeText(cut[f]), m.Nodes, sizeText(l.size), l.d.Seconds(), l.mode, budget))
		}
		r.cutSizes = cut
	}()
	noteSeen := map[string]bool{}
	for _, nt := range r.Notes {
		noteSeen[nt] = true
	}
	var altRows []simnet.Row // the rows simulated, for the alternatives' note
	for _, f := range opt.Funcs {
		tr := TunerRow{Coll: coll.TestName(f)}
		s := Series{Name: "sim " + coll.TestName(f), Coll: coll.TestName(f)}
		for _, size := range opt.Sizes {
			if opt.Progress != nil {
				opt.Progress(done, total, fmt.Sprintf("%s %d", coll.TestName(f), size))
			}
			done++
			row, ok, err := run(f, size)
			if err != nil {
				return err
			}
			if !ok || row.TimeUs <= 0 {
				continue // not affordable (Cut), or rounds to no element
			}
			s.Points = append(s.Points, pointOfRow(row))
			altRows = append(altRows, row)
			tp, note, err := tunePoint(opt.Planner, f, size, n, opt, row)
			if err != nil {
				return err
			}
			if note != "" && !noteSeen[note] {
				noteSeen[note] = true
				r.Notes = append(r.Notes, note)
			}
			tr.Points = append(tr.Points, tp)
		}
		r.Tuner = append(r.Tuner, tr)
		r.BusBW = append(r.BusBW, s)
	}
	if n := simnet.AlternativesNote(altRows, m.Nodes); n != "" {
		r.Notes = append(r.Notes, n)
	}
	if opt.Progress != nil {
		opt.Progress(done, total, "done")
	}
	if len(opt.Measured) == 0 {
		return nil
	}
	r.Measured = opt.MeasuredName
	swept := map[string]bool{}
	for _, f := range opt.Funcs {
		swept[coll.TestName(f)] = true
	}
	lo, hi := opt.Sizes[0], opt.Sizes[0]
	for _, s := range opt.Sizes {
		lo, hi = min(lo, s), max(hi, s)
	}
	meas := map[string]*Series{}
	var order []string
	for _, mr := range opt.Measured {
		if opt.MeasuredTag != "*" && mr.Tag != opt.MeasuredTag {
			continue
		}
		if !swept[mr.Coll] || mr.Bytes < lo || mr.Bytes > hi {
			continue // the plot and the table cover the swept range
		}
		if mr.World != n {
			return fmt.Errorf("%w: %s: %s measured on %d ranks, the simulated machine has %d (use --nodes)", ErrInput, opt.MeasuredName, mr.Coll, mr.World, n)
		}
		f, err := coll.FuncOfTest(mr.Coll)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInput, opt.MeasuredName, err)
		}
		name := "measured " + mr.Coll
		if opt.MeasuredTag == "*" && mr.Tag != "" {
			name += " [" + mr.Tag + "]"
		}
		s := meas[name]
		if s == nil {
			s = &Series{Name: name, Coll: mr.Coll, Measured: true}
			meas[name] = s
			order = append(order, name)
		}
		s.Points = append(s.Points, BWPoint{Bytes: mr.Bytes, TimeUs: mr.Us, BusBw: mr.BusBw})
		row, ok, err := run(f, mr.Bytes)
		if err != nil {
			return err
		}
		if !ok || row.TimeUs <= 0 {
			continue
		}
		r.Compare = append(r.Compare, CompareRow{Coll: mr.Coll, Bytes: mr.Bytes, MeasUs: mr.Us, SimUs: row.TimeUs, MeasBus: mr.BusBw, SimBus: row.BusBw,
			ErrPct: 100 * (row.TimeUs - mr.Us) / mr.Us, Sim: fmt.Sprintf("%s/%s/%d ch", row.Algo, row.Proto, row.NChannels)})
	}
	if len(order) == 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%s: no measured row with tag %q for the swept collectives", opt.MeasuredName, opt.MeasuredTag))
	}
	for _, name := range order {
		s := meas[name]
		sort.Slice(s.Points, func(i, j int) bool { return s.Points[i].Bytes < s.Points[j].Bytes })
		r.BusBW = append(r.BusBW, *s)
	}
	return nil
}
