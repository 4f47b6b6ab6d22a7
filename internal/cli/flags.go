package cli

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/simnet"
	"github.com/simccl/simccl/topo/ncclxml"
	"github.com/simccl/simccl/topo/partial"
	"github.com/simccl/simccl/tuning"
)

// The flags simccl and runccl share. Each is defined by one function here, with one help text;
// a command chooses the default where nccl-tests' binaries and simccl's differ (runccl's -b is
// all_reduce_perf's 32M, simccl run's 8). Shared lists them for the tests that hold every
// command to these definitions.

// Shared maps a shared flag's long name to its shorthand ("" for none) and help text. A command
// that has a flag of this name has it with this help and this shorthand, except runccl's
// --collective: there -c is nccl-tests' --check, so --collective has no shorthand.
var Shared = map[string]struct{ Short, Usage string }{}

func share(name, short, usage string) string {
	Shared[name] = struct{ Short, Usage string }{short, usage}
	return usage
}

var (
	collUsage = share("collective", "c", "collectives: a name (allreduce, all_reduce or all_reduce_perf: allgather, reducescatter, broadcast, reduce, alltoall, sendrecv), a comma-separated list, or all (--coll is the same flag)")
	minUsage  = share("minbytes", "b", "smallest size: nccl-tests' size (the total buffer), in bytes or with a K, M, G or T suffix (powers of 1024; 1.5M)")
	maxUsage  = share("maxbytes", "e", "largest size of the sweep (nccl-tests' size)")
	facUsage  = share("stepfactor", "f", "multiply the size by this factor between sizes")
	dtUsage   = share("datatype", "d", "data type: int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2")
	opUsage   = share("op", "o", "reduction: sum, prod, max, min, avg")
	topoUsage = share("topo", "", "NCCL topology XML or an embedded name ("+strings.Join(topos.Names(), ", ")+"); default: $NCCL_TOPO_FILE, else "+topos.DefaultName)
	gpuUsage  = share("gpu-model", "", "complete a partial topology (GPUs left to NCCL's detection, as in cloud VM files) as NCCL would on these GPUs: "+
		strings.Join(partial.ModelNames(), ", ")+"; default: take the file as it is")
	nicUsage  = share("nic-speed", "", "complete the NIC devices a partial topology lists without <nic><net> (as cloud VM files do) as NCCL's network plugin would report them: one port each at this speed (400Gbps, 50GB/s); needed to run such a file on several nodes; default: take the file as it is")
	nicGDR    = share("nic-gdr", "", "with --nic-speed: GPUDirect RDMA on those NICs (NCCL's gdrSupport; false stages their traffic through host memory)")
	nodeUsage = share("nodes", "", "number of nodes of the communicator, each with this topology (--nnodes is the same flag)")
	fabUsage  = share("fabric", "", "fabric description between the nodes (key = value file, see docs/cluster.md); default: a non-blocking two-tier rail-optimized leaf/spine, 32 nodes a leaf, ECMP; under ECMP each of a connection's $NCCL_IB_QPS_PER_CONNECTION queue pairs is hashed apart; --fabric-set routing=adaptive models InfiniBand's adaptive routing (every flow spread over all equal-cost links), routing=rail destination-mod-k")
	fsetUsage = share("fabric-set", "", "override one fabric key (key=value; repeatable), e.g. --fabric-set oversubscription=2")
	jsonUsage = share("json", "", "print one JSON document instead of the text output")
	progUsage = share("progress", "", "progress bar on stderr: auto (when stderr is a terminal), on, off")
	algoUsage = share("algo", "", "NCCL_ALGO in NCCL's syntax (ring,tree; ^nvls; allreduce:tree;allgather:^pat); default $NCCL_ALGO")
	protUsage = share("proto", "", "NCCL_PROTO in NCCL's syntax (simple; ^LL128); default $NCCL_PROTO")
	verUsage  = share("nccl-version", "", "NCCL release whose rules plan the calls ("+strings.Join(planner.Releases(), ", ")+"; default "+tuning.DefaultRelease+")")
	minChUse  = share("min-nchannels", "", "NCCL_MIN_NCHANNELS (0: $NCCL_MIN_NCHANNELS or unset)")
	maxChUse  = share("max-nchannels", "", "NCCL_MAX_NCHANNELS (0: $NCCL_MAX_NCHANNELS or unset)")
)

// AddCollective defines --collective with the shorthand short ("" for none) and the default def.
func AddCollective(fs *pflag.FlagSet, short, def string) *string {
	return fs.StringP("collective", short, def, collUsage)
}

// ParseColls reads a --collective value: a collective (allreduce, all_reduce, all_reduce_perf,
// AllReduce), a comma-separated list, or all (every collective of all, in its order).
func ParseColls(s string, all []coll.Func) ([]coll.Func, error) {
	var out []coll.Func
	seen := map[coll.Func]bool{}
	add := func(f coll.Func) { // each collective once, where it is first named ("all,all" ran every row twice)
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if strings.EqualFold(name, "all") {
			for _, f := range all {
				add(f)
			}
			continue
		}
		f, err := coll.ParseFunc(strings.TrimSuffix(strings.ToLower(name), "_perf"))
		if err != nil {
			return nil, fmt.Errorf("%w: --collective: %v (or all)", ErrUsage, err)
		}
		add(f)
	}
	return out, nil
}

// Sizes are nccl-tests' -b, -e and -f.
type Sizes struct {
	Min, Max *string
	Factor   *int64
}

// AddSizes defines -b, -e and -f with the defaults given.
func AddSizes(fs *pflag.FlagSet, minDef, maxDef string, factorDef int64) *Sizes {
	return &Sizes{
		Min:    fs.StringP("minbytes", "b", minDef, minUsage),
		Max:    fs.StringP("maxbytes", "e", maxDef, maxUsage),
		Factor: fs.Int64P("stepfactor", "f", factorDef, facUsage),
	}
}

// Bounds reads -b and -e (-e empty: -b alone), each within units.MaxSize.
func (s *Sizes) Bounds() (lo, hi int64, err error) {
	if lo, err = ParseSize("-b", *s.Min); err != nil {
		return 0, 0, err
	}
	hi = lo
	if *s.Max != "" {
		if hi, err = ParseSize("-e", *s.Max); err != nil {
			return 0, 0, err
		}
	}
	for _, f := range []struct {
		flag string
		v    int64
	}{{"-b", lo}, {"-e", hi}} {
		if err := units.CheckSize(f.flag, f.v); err != nil {
			return 0, 0, fmt.Errorf("%w: %v", ErrUsage, err)
		}
	}
	if lo == 0 {
		return 0, 0, Usagef("-b %s: want at least 1 byte", *s.Min)
	}
	if lo > hi {
		// nccl-tests' own words for it (src/common.cu, main).
		return 0, 0, Usagef("-b %s -e %s: invalid sizes for 'minbytes' and 'maxbytes': %d > %d", *s.Min, *s.Max, lo, hi)
	}
	return lo, hi, nil
}

// Sweep is the sizes of -b, -e and -f: from -b, multiplied by -f (above 1) or stepped by step
// bytes (-f 1, nccl-tests' -i; 0 where the command has no -i), up to -e.
func (s *Sizes) Sweep(step int64) ([]int64, error) {
	lo, hi, err := s.Bounds()
	if err != nil {
		return nil, err
	}
	return Sweep(lo, hi, *s.Factor, step)
}

// MaxSizes bounds the sizes of one sweep (comm/perf's bound).
const MaxSizes = 100_000

// Sweep is nccl-tests' sweep from lo to hi: multiplied by factor (above 1), else stepped by step.
func Sweep(lo, hi, factor, step int64) ([]int64, error) {
	switch {
	case factor < 1:
		return nil, Usagef("-f %d: want a factor of 2 or more (or 1 with a step, -i)", factor)
	case lo < hi && factor == 1 && step <= 0:
		return nil, Usagef("-f 1: want a factor of 2 or more (or a positive step, -i, where the command has one)")
	}
	var out []int64
	for v := lo; v <= hi; {
		if len(out) == MaxSizes {
			return nil, Usagef("more than %d sizes from %d to %d: use a larger step", MaxSizes, lo, hi)
		}
		out = append(out, v)
		if factor > 1 {
			if v > hi/factor {
				break
			}
			v *= factor
		} else {
			if step <= 0 || v > hi-step {
				break
			}
			v += step
		}
	}
	return out, nil
}

// ParseSize reads a size as nccl-tests' parsesize does (a number, possibly with a fraction, then
// K, M or G: powers of 1024) and in the forms units.ParseSize takes (1GiB, 4T); flag names it in
// the error.
func ParseSize(flag, s string) (int64, error) {
	if v, err := units.ParseSize(s); err == nil {
		return v, nil
	}
	t := strings.TrimSpace(s)
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K', 'k':
			mult, t = 1<<10, t[:n-1]
		case 'M', 'm':
			mult, t = 1<<20, t[:n-1]
		case 'G', 'g':
			mult, t = 1<<30, t[:n-1]
		case 'T', 't':
			mult, t = 1<<40, t[:n-1]
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f*mult > 1<<62 {
		return 0, Usagef("%s %q: want bytes or a K, M, G or T suffix (8, 64K, 1.5M, 1G)", flag, s)
	}
	return int64(f * mult), nil
}

// AddDataType defines -d/--datatype with the default def.
func AddDataType(fs *pflag.FlagSet, def string) *string {
	return fs.StringP("datatype", "d", def, dtUsage)
}

// ParseDataTypes reads -d: a type, or, where allowAll, all (every type).
func ParseDataTypes(s string, allowAll bool) ([]coll.DataType, error) {
	d := strings.ToLower(strings.TrimSpace(s))
	if d == "all" {
		if !allowAll {
			return nil, Usagef("-d all: this command takes one type")
		}
		var out []coll.DataType
		for t := coll.DataType(0); t < coll.NumDataTypes; t++ {
			out = append(out, t)
		}
		return out, nil
	}
	t, err := coll.ParseDataType(d)
	if err != nil {
		if allowAll {
			return nil, Usagef("-d: %v (or all)", err)
		}
		return nil, Usagef("-d: %v", err)
	}
	return []coll.DataType{t}, nil
}

// AddOp defines --op with the shorthand short (-o, or "" where -o is an output file).
func AddOp(fs *pflag.FlagSet, short string) *string {
	return fs.StringP("op", short, "sum", opUsage)
}

// AllOps is nccl-tests' -o all (test_opnames: sum, prod, max, min, avg, mulsum).
var AllOps = []coll.RedOp{coll.Sum, coll.Prod, coll.Max, coll.Min, coll.Avg, coll.PreMulSum}

// ParseOps reads --op: a reduction, or, where allowAll, all or mulsum (PreMulSum) as nccl-tests
// names them.
func ParseOps(s string, allowAll bool) ([]coll.RedOp, error) {
	op := strings.ToLower(strings.TrimSpace(s))
	switch {
	case allowAll && op == "all":
		return AllOps, nil
	case allowAll && op == "mulsum":
		return []coll.RedOp{coll.PreMulSum}, nil
	}
	r, err := coll.ParseRedOp(op)
	if err != nil {
		more := ""
		if allowAll {
			more = ", mulsum or all"
		}
		return nil, Usagef("--op %q: want sum, prod, max, min, avg%s", s, more)
	}
	return []coll.RedOp{r}, nil
}

// AddTopo defines --topo.
func AddTopo(fs *pflag.FlagSet) *string { return fs.String("topo", "", topoUsage) }

// AddGPUModel defines --gpu-model.
func AddGPUModel(fs *pflag.FlagSet) *string { return fs.String("gpu-model", "", gpuUsage) }

// NICFlags is --nic-speed and --nic-gdr.
type NICFlags struct {
	Speed *string
	GDR   *bool
}

// AddNIC defines --nic-speed and --nic-gdr.
func AddNIC(fs *pflag.FlagSet) *NICFlags {
	return &NICFlags{Speed: fs.String("nic-speed", "", nicUsage), GDR: fs.Bool("nic-gdr", true, nicGDR)}
}

// Apply sets s.NICs from the flags: nothing without --nic-speed (--nic-gdr alone is a usage
// error: it says something of NICs that are not being completed).
func (n *NICFlags) Apply(fs *pflag.FlagSet, s *planner.Settings) error {
	if strings.TrimSpace(*n.Speed) == "" {
		if fs.Changed("nic-gdr") {
			return Usagef("--nic-gdr applies to the NICs --nic-speed completes; give --nic-speed too")
		}
		return nil
	}
	gbps, err := simnet.ParseSpeed(*n.Speed)
	if err != nil {
		return Usagef("--nic-speed: %v", err)
	}
	mbps := gbps * 8000
	if mbps > partial.MaxNICSpeed {
		return Usagef("--nic-speed %s: at most %g Gb/s", *n.Speed, partial.MaxNICSpeed/1000)
	}
	s.NICs = partial.NIC{Speed: mbps, GDR: *n.GDR}
	return nil
}

// LoadTopology resolves --topo as every command does: a file, else an embedded name, else (empty)
// $NCCL_TOPO_FILE, else the default; a partial topology is completed for --gpu-model (a model
// name, "" for none). It returns the topology's name for messages.
func LoadTopology(topo, gpuModel string, s planner.Settings) (string, *ncclxml.Document, error) {
	if gpuModel != "" {
		m, err := partial.Lookup(gpuModel)
		if err != nil {
			return "", nil, Usagef("--gpu-model: %v", err)
		}
		s.GPUModel = m.Name
	}
	return planner.LoadTopology(topo, s)
}

// AddNodes defines --nodes.
func AddNodes(fs *pflag.FlagSet) *int { return fs.Int("nodes", 1, nodeUsage) }

// CheckNodes refuses a --nodes outside 1..planner.MaxNodes.
func CheckNodes(n int) error {
	if n < 1 || n > planner.MaxNodes {
		return Usagef("--nodes %d (want 1..%d)", n, planner.MaxNodes)
	}
	return nil
}

// Fabric is --fabric and --fabric-set.
type Fabric struct {
	File *string
	Set  *[]string
}

// AddFabric defines --fabric and --fabric-set.
func AddFabric(fs *pflag.FlagSet) *Fabric {
	return &Fabric{File: fs.String("fabric", "", fabUsage), Set: fs.StringArray("fabric-set", nil, fsetUsage)}
}

// Read reads --fabric (the default fabric without one) and applies --fabric-set.
func (f *Fabric) Read() (*simnet.Fabric, error) {
	fab := simnet.DefaultFabric()
	if *f.File != "" {
		r, err := os.Open(*f.File)
		if err != nil {
			return nil, err
		}
		fab, err = simnet.ParseFabric(r, *f.File)
		r.Close()
		if err != nil {
			return nil, err
		}
	}
	for _, kv := range *f.Set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, Usagef("--fabric-set %q: want key=value", kv)
		}
		if err := fab.Set(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			return nil, Usagef("--fabric-set: %v", err)
		}
	}
	if err := fab.Validate(); err != nil {
		return nil, Usagef("%v", err)
	}
	return fab, nil
}

// AddJSON defines --json; shape ("" for none) says what the document holds.
func AddJSON(fs *pflag.FlagSet, shape string) *bool {
	v := new(bool)
	AddJSONVar(fs, v, shape)
	return v
}

// AddJSONVar defines --json into v.
func AddJSONVar(fs *pflag.FlagSet, v *bool, shape string) {
	u := jsonUsage
	if shape != "" {
		u += ": " + shape
	}
	fs.BoolVar(v, "json", false, u)
}

// Explain appends a command's own words to a shared flag's help (a default of its own, say),
// after the shared text.
func Explain(fs *pflag.FlagSet, name, more string) {
	fs.Lookup(name).Usage += "; " + more
}

// AddProgress defines --progress (auto, on, off).
func AddProgress(fs *pflag.FlagSet) *string { return fs.String("progress", "auto", progUsage) }

// ShowProgress reads --progress: on, off, or auto (isTerminal decides).
func ShowProgress(mode string, isTerminal func() bool) (bool, error) {
	switch mode {
	case "on":
		return true, nil
	case "off":
		return false, nil
	case "auto":
		return isTerminal(), nil
	}
	return false, Usagef("--progress %q: want on, off or auto", mode)
}

// NCCL are the flags that stand for NCCL's tuning variables, each overriding its variable.
type NCCL struct {
	Algo, Proto, Version *string
	MinCh, MaxCh         *int
}

// AddNCCLVersion defines --nccl-version alone (AddNCCL defines it with the others).
func AddNCCLVersion(fs *pflag.FlagSet) *string { return fs.String("nccl-version", "", verUsage) }

// AddNCCL defines --algo, --proto, --nccl-version, --min-nchannels and --max-nchannels.
func AddNCCL(fs *pflag.FlagSet) *NCCL {
	return &NCCL{
		Algo:    fs.String("algo", "", algoUsage),
		Proto:   fs.String("proto", "", protUsage),
		Version: AddNCCLVersion(fs),
		MinCh:   fs.Int("min-nchannels", 0, minChUse),
		MaxCh:   fs.Int("max-nchannels", 0, maxChUse),
	}
}

// Settings reads NCCL's variables through getenv (planner.SettingsFromEnv); a bad value is a
// usage error, as a bad flag is.
func Settings(getenv func(string) string) (planner.Settings, error) {
	s, err := planner.SettingsFromEnv(getenv)
	if err != nil {
		return s, Usagef("%v", err)
	}
	return s, nil
}

// Apply applies the flags given over s (NCCL's variables, planner.SettingsFromEnv). searchOnly:
// the command runs the channel search only, which knows more releases than the tuning model. Every
// refusal is a usage error naming the flag.
func (n *NCCL) Apply(fs *pflag.FlagSet, s *planner.Settings, searchOnly bool) error {
	if *n.Version != "" {
		if err := s.SetRelease(*n.Version); err != nil {
			return Usagef("--nccl-version: %v", err)
		}
		if _, err := tuning.ConstantsFor(s.Release); err != nil && !searchOnly {
			return Usagef("--nccl-version %s: the tuning model has %s (simccl search also takes %s)", s.Release,
				strings.Join(planner.Releases(), ", "), strings.Join(planner.SearchReleases(), ", "))
		}
	}
	if fs.Changed("algo") {
		s.Tuning.Algo = *n.Algo
	}
	if fs.Changed("proto") {
		s.Tuning.Proto = *n.Proto
	}
	for _, c := range []struct {
		flag string
		v    int
		dst  *int
	}{{"min-nchannels", *n.MinCh, &s.Tuning.MinNChannels}, {"max-nchannels", *n.MaxCh, &s.Tuning.MaxNChannels}} {
		if !fs.Changed(c.flag) {
			continue
		}
		if c.v < 1 || c.v > tuning.MaxChannels {
			return Usagef("--%s %d (want 1..%d)", c.flag, c.v, tuning.MaxChannels)
		}
		*c.dst = c.v
	}
	if !searchOnly {
		// NCCL_ALGO / NCCL_PROTO syntax, from the flags or the environment, is checked now.
		cfg := s.Tuning
		cfg.Version = s.Release
		if err := cfg.Check(); err != nil {
			return Usagef("%v", err)
		}
	}
	return nil
}

// RegisterCompletions completes the values of the shared flags cmd has: embedded topology names
// (and files) for --topo, collective names for --collective, types, reductions, progress modes,
// NCCL releases, and fabric files.
func RegisterCompletions(cmd *cobra.Command) {
	fs := cmd.Flags()
	fixed := func(flag string, vals ...string) {
		if fs.Lookup(flag) != nil {
			_ = cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(vals, cobra.ShellCompDirectiveNoFileComp))
		}
	}
	colls := []string{"all"}
	for _, f := range allFuncs {
		colls = append(colls, strings.ToLower(f.String()))
	}
	if fs.Lookup("collective") != nil {
		_ = cmd.RegisterFlagCompletionFunc("collective", func(_ *cobra.Command, _ []string, typed string) ([]string, cobra.ShellCompDirective) {
			// After a comma, complete the next name of the list.
			head := ""
			if i := strings.LastIndex(typed, ","); i >= 0 {
				head = typed[:i+1]
			}
			out := make([]string, 0, len(colls))
			for _, c := range colls {
				out = append(out, head+c)
			}
			return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
		})
	}
	var types []string
	for t := coll.DataType(0); t < coll.NumDataTypes; t++ {
		types = append(types, t.String())
	}
	fixed("datatype", append(types, "all")...)
	fixed("op", "sum", "prod", "max", "min", "avg", "mulsum", "all")
	fixed("progress", "auto", "on", "off")
	fixed("nccl-version", planner.SearchReleases()...)
	if fs.Lookup("topo") != nil {
		_ = cmd.RegisterFlagCompletionFunc("topo", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			// The embedded names, and files (the shell adds them: no NoFileComp).
			return topos.Names(), cobra.ShellCompDirectiveDefault
		})
	}
	if fs.Lookup("fabric") != nil {
		_ = cmd.RegisterFlagCompletionFunc("fabric", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"fabric"}, cobra.ShellCompDirectiveFilterFileExt
		})
	}
}

// allFuncs are the collectives, in coll's order.
var allFuncs = []coll.Func{coll.Broadcast, coll.Reduce, coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.SendRecv, coll.AllToAll}
