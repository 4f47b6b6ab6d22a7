package report

import (
	"errors"
	"fmt"
	"sort"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/simnet"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/topo/ncclxml"
	"github.com/simccl/simccl/tuning"
)

// ErrInput is wrapped by errors about the report's inputs.
var ErrInput = errors.New("report: bad input")

// Options are the inputs of a report. The zero value reports all-reduce from 8 B to 1 GiB on the
// embedded default topology.
type Options struct {
	// TopoName and TopoXML are the node topology (NCCL topo.xml); empty: the embedded default.
	TopoName string
	TopoXML  []byte
	// Nodes is the number of nodes (copies of the topology), 0 meaning 1.
	Nodes int
	// Fabric joins the nodes (nil: simnet.DefaultFabric).
	Fabric *simnet.Fabric
	// Config selects the NCCL release and tuning overrides.
	Config *tuning.Config
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
	// FocusColl and FocusSize are the collective and size of the "where time goes" section (empty:
	// the first swept collective; 0: the swept size nearest 1 MiB). FocusMaxSteps bounds the
	// recorded schedule (default 300,000 steps): a larger one is replaced by a smaller size, noted.
	FocusColl     string
	FocusSize     int64
	FocusMaxSteps int
	// TimelineOps bounds the ops drawn in the timeline (default 3000) and TraceOps those embedded
	// for Perfetto (default 20,000).
	TimelineOps, TraceOps int
	// CollNet says a CollNet (SHARP) plugin is present (NCCL_COLLNET_ENABLE=1): the memory
	// section counts CollNet buffers where the topology's NICs have coll="1".
	CollNet bool
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
	if opt.Nodes == 0 {
		opt.Nodes = 1
	}
	if opt.Nodes < 1 {
		return nil, fmt.Errorf("%w: %d nodes (want >= 1)", ErrInput, opt.Nodes)
	}
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
	if opt.Config == nil {
		opt.Config = &tuning.Config{}
	}
	if opt.TopoXML == nil {
		opt.TopoName, opt.TopoXML = topos.Default()
	}
	sys, m, err := machine(opt)
	if err != nil {
		return nil, err
	}
	r := &Report{
		Machine: MachineSum{Name: sys.Name, Nodes: m.Nodes, GPUsNode: m.Node.NumGPUs, Ranks: m.NRanks(), NChannels: m.Table.NChannels, Release: m.Release},
	}
	r.Title = fmt.Sprintf("simccl report: %s, %d node(s) × %d GPUs", sys.Name, m.Nodes, m.Node.NumGPUs)
	r.Notes = append(r.Notes, m.Notes...)
	r.Topology = buildTopology(sys)
	if m.Nodes > 1 {
		fs, err := summariseFabric(m)
		if err != nil {
			return nil, err
		}
		r.Fabric = fs
	}
	if err := r.sweep(m, opt); err != nil {
		return nil, err
	}
	if err := r.focus(m, opt); err != nil {
		return nil, err
	}
	if r.Memory, err = buildMemory(m, opt); err != nil {
		return nil, err
	}
	return r, nil
}

// machine builds the system graph and the simulated machine the way simnet.MachineFromXML does,
// keeping the graph for the topology drawing.
func machine(opt Options) (*graph.System, *simnet.Machine, error) {
	doc, err := ncclxml.ParseBytes(opt.TopoXML, opt.TopoName)
	if err != nil {
		return nil, nil, err
	}
	gopt := graph.Options{}
	if opt.Config.Version != "" {
		v, err := graph.ParseVersion(opt.Config.Version)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrInput, err)
		}
		gopt.Version = v
	}
	sys, err := topo.FromXML(doc, gopt)
	if err != nil {
		return nil, nil, err
	}
	if sys.Name == "" {
		sys.Name = opt.TopoName
	}
	m, err := simnet.MachineFromXML(opt.TopoXML, opt.TopoName, opt.Nodes, opt.Fabric, opt.Config)
	if err != nil {
		return nil, nil, err
	}
	return sys, m, nil
}

// sweep simulates every collective at every size and tunes it, and lines up the measurements.
func (r *Report) sweep(m *simnet.Machine, opt Options) error {
	n := m.NRanks()
	elt := opt.DataType.Size()
	total := len(opt.Funcs) * len(opt.Sizes)
	done := 0
	type key struct {
		f    coll.Func
		size int64
	}
	simmed := map[key]simnet.Row{}
	run := func(f coll.Func, size int64) (simnet.Row, error) {
		if row, ok := simmed[key{f, size}]; ok {
			return row, nil
		}
		row, _, err := m.Run(f, size, opt.DataType, opt.Op, simnet.RunOptions{})
		if err != nil {
			return row, fmt.Errorf("%s %d bytes: %w", simnet.TestName(f), size, err)
		}
		simmed[key{f, size}] = row
		return row, nil
	}
	noteSeen := map[string]bool{}
	for _, nt := range r.Notes {
		noteSeen[nt] = true
	}
	for _, f := range opt.Funcs {
		tr := TunerRow{Coll: simnet.TestName(f)}
		s := Series{Name: "sim " + simnet.TestName(f), Coll: simnet.TestName(f)}
		for _, size := range opt.Sizes {
			if opt.Progress != nil {
				opt.Progress(done, total, fmt.Sprintf("%s %d", simnet.TestName(f), size))
			}
			done++
			row, err := run(f, size)
			if err != nil {
				return err
			}
			if row.TimeUs <= 0 {
				continue // rounds to no element
			}
			s.Points = append(s.Points, BWPoint{Bytes: row.Bytes, TimeUs: row.TimeUs, BusBw: row.BusBw,
				Label: fmt.Sprintf("%s/%s/%d ch", row.Algo, row.Proto, row.NChannels)})
			tp, note, err := tunePoint(m, f, size, elt, n, opt, row)
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
	if opt.Progress != nil {
		opt.Progress(done, total, "done")
	}
	if len(opt.Measured) == 0 {
		return nil
	}
	r.Measured = opt.MeasuredName
	swept := map[string]bool{}
	for _, f := range opt.Funcs {
		swept[simnet.TestName(f)] = true
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
		f, err := simnet.FuncOfTest(mr.Coll)
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
		row, err := run(f, mr.Bytes)
		if err != nil {
			return err
		}
		if row.TimeUs <= 0 {
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
