package tuning

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/internal/input"
	"github.com/simccl/simccl/internal/units"
)

// Override is one rule of a tuner file (see the package documentation and ParseOverrides).
type Override struct {
	Line int // 1-based line in the file
	// Func is the collective, or -1 for any.
	Func coll.Func
	// MinBytes..MaxBytes is the inclusive range of the tuning size (MaxBytes < 0: unbounded).
	MinBytes, MaxBytes int64
	// Algo and Proto restrict the choice (-1: any).
	Algo  coll.Algo
	Proto coll.Proto
	// Channels overrides the channel count (0: the model's).
	Channels int
}

// OverrideHelp documents the tuner-file format (printed by `simccl tune --help`).
const OverrideHelp = `Tuner file (--tuner-file): CSV, one rule per line, '#' starts a comment:
  collective,minBytes,maxBytes,algorithm,protocol,channels
  collective  allreduce, allgather, reducescatter, broadcast, reduce, or * for any
  minBytes    inclusive lower bound of the size the cost model uses (the total output for
  maxBytes    allgather, total input for reducescatter); plain bytes or K/M/G; * or empty = no bound
  algorithm   Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT, or * for any
  protocol    LL, LL128, Simple, or * for any
  channels    channels to use (1..64), or * / empty / 0 for the model's count
The first rule matching a call's collective and size applies, like a tuner plugin that edits the
cost table: combinations outside (algorithm, protocol) are forbidden and NCCL's selection picks the
fastest remaining one. A rule whose combinations are all unusable for that call is ignored.
Example:
  # collective,minBytes,maxBytes,algorithm,protocol,channels
  allreduce,0,64K,ring,ll,4
  allreduce,64K,*,tree,simple,*
  *,1G,*,*,simple,`

// MaxOverrides bounds the rules of a tuner file: each call's selection walks them in order, and a
// real tuner file has a few dozen.
const MaxOverrides = 1000

// ParseOverrides reads a tuner file, with internal/input's bounds (64 MiB, 1 MiB a line) and at
// most MaxOverrides rules; name is used in error messages ("file:line: …").
func ParseOverrides(name string, r io.Reader) ([]Override, error) {
	var out []Override
	sc := input.NewScanner(r, name)
	for sc.Scan() {
		ln := sc.Line()
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 6 {
			return nil, fmt.Errorf("%s:%d: want 6 fields (collective,minBytes,maxBytes,algorithm,protocol,channels), got %d", name, ln, len(f))
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if len(out) == 0 && strings.EqualFold(f[0], "collective") {
			continue // header
		}
		if len(out) == MaxOverrides {
			return nil, fmt.Errorf("%s:%d: more than %d rules", name, ln, MaxOverrides)
		}
		o := Override{Line: ln, Func: -1, MaxBytes: -1, Algo: -1, Proto: -1}
		any := func(s string) bool { return s == "" || s == "*" }
		if !any(f[0]) {
			fn, err := coll.ParseFunc(f[0])
			if err != nil || fn >= coll.NumTunedFuncs {
				return nil, fmt.Errorf("%s:%d: collective %q: want allreduce, allgather, reducescatter, broadcast, reduce or *", name, ln, f[0])
			}
			o.Func = fn
		}
		if !any(f[1]) {
			v, err := units.ParseSize(f[1])
			if err != nil {
				return nil, fmt.Errorf("%s:%d: minBytes: %v", name, ln, err)
			}
			o.MinBytes = v
		}
		if !any(f[2]) {
			v, err := units.ParseSize(f[2])
			if err != nil {
				return nil, fmt.Errorf("%s:%d: maxBytes: %v", name, ln, err)
			}
			o.MaxBytes = v
			if v < o.MinBytes {
				return nil, fmt.Errorf("%s:%d: maxBytes %d is below minBytes %d", name, ln, v, o.MinBytes)
			}
		}
		if !any(f[3]) {
			a, err := coll.ParseAlgo(f[3])
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", name, ln, err)
			}
			o.Algo = a
		}
		if !any(f[4]) {
			p, err := coll.ParseProto(f[4])
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", name, ln, err)
			}
			o.Proto = p
		}
		if !any(f[5]) {
			n, err := strconv.Atoi(f[5])
			if err != nil || n < 0 || n > MaxChannels {
				return nil, fmt.Errorf("%s:%d: channels %q: want an integer in 0..%d or *", name, ln, f[5], MaxChannels)
			}
			o.Channels = n
		}
		out = append(out, o)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func (o *Override) matches(f coll.Func, nBytes int64) bool {
	if o.Func >= 0 && o.Func != f {
		return false
	}
	if nBytes < o.MinBytes {
		return false
	}
	return o.MaxBytes < 0 || nBytes <= o.MaxBytes
}

// applyOverrides applies the first matching rule to the cost table; it returns the rule's line
// (0 if none applied) and its channel count.
func (t *Table) applyOverrides(f coll.Func, nBytes int64, ct *CostTable) (line, channels int) {
	for i := range t.Config.Overrides {
		o := &t.Config.Overrides[i]
		if !o.matches(f, nBytes) {
			continue
		}
		in := func(a coll.Algo, p coll.Proto) bool {
			return (o.Algo < 0 || o.Algo == a) && (o.Proto < 0 || o.Proto == p)
		}
		usable := false
		for a := range ct {
			for p := range ct[a] {
				if ct[a][p] >= 0 && in(coll.Algo(a), coll.Proto(p)) {
					usable = true
				}
			}
		}
		if !usable {
			return 0, 0
		}
		for a := range ct {
			for p := range ct[a] {
				if !in(coll.Algo(a), coll.Proto(p)) {
					ct[a][p] = -1
				}
			}
		}
		return o.Line, o.Channels
	}
	return 0, 0
}
