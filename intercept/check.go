package intercept

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/intercept/trace"
	"github.com/simccl/simccl/internal/input"
	"github.com/simccl/simccl/internal/units"
)

// MaxRecords bounds the records of a trace, all its files together: a replay keeps each record
// several times over (its file's, its rank's, its launch's) and simulates each launch. 262,144
// records are 1,000 iterations of 32 calls on 8 ranks; 512,000 (64 MiB of them) took 11 s and
// 917 MB to replay on this machine.
const MaxRecords = 1 << 18

// TraceFile is what one process recorded: one shim trace file or one NCCL log, by name for
// errors.
type TraceFile struct {
	Name    string
	Records []Record
	// NCCLVersion is the release an NCCL log names (LogStats.Version); "" for a shim trace or a
	// log without the version line.
	NCCLVersion string
}

// ReadTraceOrLog reads one file of a trace with internal/input's bounds (64 MiB, 1 MiB a line):
// a shim trace (JSON lines, ReadTrace) when its first character that is not a blank is '{' or
// '#', else an NCCL INFO log with COLL lines (ParseLog); a log without any COLL line is an error.
func ReadTraceOrLog(path string) (TraceFile, error) {
	data, err := input.ReadFile(path)
	if err != nil {
		if errors.Is(err, input.ErrTooLarge) {
			err = fmt.Errorf("%w: %w", ErrTrace, err)
		}
		return TraceFile{Name: path}, err
	}
	t := TraceFile{Name: path}
	if s := bytes.TrimLeft(data, " \t\r\n"); len(s) > 0 && (s[0] == '{' || s[0] == '#') {
		n, over := countRecords(data)
		if over > 0 {
			return t, fmt.Errorf("%w: %s:%d: more than %d records", ErrTrace, path, over, MaxRecords)
		}
		t.Records, err = readTrace(bytes.NewReader(data), path, n)
		return t, err
	}
	var st LogStats
	t.Records, st, err = ParseLog(bytes.NewReader(data), path)
	t.NCCLVersion = st.Version
	if err == nil && st.Calls == 0 {
		err = fmt.Errorf("%w: %s: neither a trace (JSON lines) nor an NCCL log with COLL lines (%d lines read)", ErrTrace, path, st.Lines)
	}
	return t, err
}

// countRecords counts the lines of a JSON-lines trace that hold a record (neither blank nor a
// '#' comment), and returns the line of the record over MaxRecords, if any: a scan, where
// decoding the records up to the bound took seconds.
func countRecords(data []byte) (n, over int) {
	for line := 1; len(data) > 0; line++ {
		l := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		l = bytes.TrimLeft(l, " \t\r")
		if len(l) == 0 || l[0] == '#' {
			continue
		}
		if n++; n > MaxRecords {
			return n, line
		}
	}
	return n, 0
}

// Where names a record for errors: "file: seq 12 (AllReduce 1024 float sum, comm c rank 0 of 2)".
func Where(file string, r *Record) string {
	s := fmt.Sprintf("%s: seq %d (%s", file, r.Seq, r.Op)
	if IsCollective(r.Op) {
		s += fmt.Sprintf(" %d %s", r.Count, r.Dtype)
		if r.RedOp != "" {
			s += " " + r.RedOp
		}
		switch r.Op {
		case OpBroadcast, OpReduce:
			s += fmt.Sprintf(" root %d", r.Root)
		case OpSend:
			s += fmt.Sprintf(" to %d", r.Root)
		case OpRecv:
			s += fmt.Sprintf(" from %d", r.Root)
		}
	}
	return s + fmt.Sprintf(", comm %s rank %d of %d)", r.Comm, r.Rank, r.NRanks)
}

// checkSize refuses a call whose buffer (count × element size) is over units.MaxSize: counts of
// 2^61 and more overflowed int64 in Record.Bytes, and no replay can allocate or simulate them.
func checkSize(file string, r *Record) error {
	elt := int64(trace.ElemSize(r.Dtype))
	if elt > 0 && r.Count > units.MaxSize/elt {
		return fmt.Errorf("%w: %s: %.3g bytes cannot be allocated or simulated (more than 1 TiB)", ErrTrace, Where(file, r), float64(r.Count)*float64(elt))
	}
	return nil
}

// CheckOptions relax CheckTraces.
type CheckOptions struct {
	// Virtual accepts communicators created in the shim's virtual mode (a CommInit or CommSplit
	// record of mode "virtual") with files for only some of their ranks: a virtual run is one
	// process standing for every rank, which simccl replay simulates as copies of it. The ranks
	// present must still agree, and messages between two present ranks must match.
	Virtual bool
}

// CheckTraces checks that the files of a trace describe a program whose ranks can all run it,
// as both replays need (simccl replay simulates it, runccl replay runs it). It fails, naming the
// file and the record, on: more than MaxRecords records; an unknown op; a call's buffer over
// units.MaxSize; a call inside a group without its group number or the reverse, or an outermost
// group whose calls are not consecutive in its file (a group left open across other calls); a
// communicator recorded with two sizes; a rank of a communicator held by two files or by none (a
// missing rank file); the ranks of a communicator disagreeing on its k-th collective (op, count,
// type, reduction, root) or on their number; a Send without its matching Recv (same count and
// type, in order per pair of ranks), or the reverse. The records of each file are taken in Seq
// order.
func CheckTraces(files []TraceFile, opt CheckOptions) error {
	total := 0
	for _, f := range files {
		total += len(f.Records)
	}
	if total > MaxRecords {
		return fmt.Errorf("%w: %d records in %d files, more than %d", ErrTrace, total, len(files), MaxRecords)
	}
	type place struct {
		file string
		rec  *Record
	}
	type ck struct {
		comm string
		rank int
	}
	sizeOf := map[string]place{}
	holder := map[ck]int{} // (comm, rank) → file
	holderAt := map[ck]place{}
	dataCalls := map[string]int{}
	virtual := map[string]bool{} // communicators of a virtual run (CheckOptions.Virtual)
	sorted := make([][]*Record, len(files))
	for a, f := range files {
		recs := make([]*Record, len(f.Records))
		for i := range f.Records {
			recs[i] = &f.Records[i]
		}
		sort.SliceStable(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
		sorted[a] = recs
		closed := map[int64]bool{} // outermost groups that ended
		for i, r := range recs {
			switch {
			case IsCollective(r.Op):
				if err := checkSize(f.Name, r); err != nil {
					return err
				}
			case r.Op == OpCommInit || r.Op == OpCommSplit || r.Op == OpCommFinalize || r.Op == OpCommDestroy:
			default:
				return fmt.Errorf("%w: %s: unknown op %q", ErrTrace, Where(f.Name, r), r.Op)
			}
			if (r.Group > 0) != (r.GID > 0) {
				return fmt.Errorf("%w: %s: group depth %d with group number %d (a call inside a group has its outermost group's number, one outside has none)", ErrTrace, Where(f.Name, r), r.Group, r.GID)
			}
			if i > 0 {
				if prev := recs[i-1].GID; prev != 0 && prev != r.GID {
					closed[prev] = true
				}
			}
			if r.GID != 0 && closed[r.GID] {
				return fmt.Errorf("%w: %s: group %d continues after other calls (its group was not closed where it ended)", ErrTrace, Where(f.Name, r), r.GID)
			}
			if p, ok := sizeOf[r.Comm]; !ok {
				sizeOf[r.Comm] = place{f.Name, r}
			} else if p.rec.NRanks != r.NRanks {
				return fmt.Errorf("%w: communicator %s has %d ranks at %s but %d at %s", ErrTrace, r.Comm, p.rec.NRanks, Where(p.file, p.rec), r.NRanks, Where(f.Name, r))
			}
			k := ck{r.Comm, r.Rank}
			if h, ok := holder[k]; ok && h != a {
				p := holderAt[k]
				return fmt.Errorf("%w: rank %d of communicator %s is in two traces: %s and %s", ErrTrace, r.Rank, r.Comm, Where(p.file, p.rec), Where(f.Name, r))
			}
			if _, ok := holder[k]; !ok {
				holder[k] = a
				holderAt[k] = place{f.Name, r}
			}
			if IsCollective(r.Op) {
				dataCalls[r.Comm]++
			} else if r.Mode == "virtual" && opt.Virtual {
				virtual[r.Comm] = true
			}
		}
	}
	var ids []string
	for id := range dataCalls {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	// present: communicator → the ranks that have a file, in order (gathered from the holders, not
	// by walking every rank: a record may claim 2^24 of them).
	present := map[string][]int{}
	for k := range holder {
		if dataCalls[k.comm] > 0 {
			present[k.comm] = append(present[k.comm], k.rank)
		}
	}
	for _, id := range ids {
		held := present[id]
		sort.Ints(held)
		if virtual[id] {
			continue
		}
		n := sizeOf[id].rec.NRanks
		missing := len(held) // ranks are 0..n-1 (checkRecord): the first gap is the first missing
		for i, r := range held {
			if r != i {
				missing = i
				break
			}
		}
		if missing == n {
			continue
		}
		var have []string
		for i, q := range held {
			if i == 8 {
				have = append(have, "…")
				break
			}
			have = append(have, fmt.Sprintf("rank %d in %s", q, files[holder[ck{id, q}]].Name))
		}
		return fmt.Errorf("%w: communicator %s has %d ranks but no trace holds rank %d (missing rank file?); found %s", ErrTrace, id, n, missing, strings.Join(have, ", "))
	}
	return matchCalls(files, sorted, ids, present)
}

// matchCalls checks that the ranks of every communicator that have a file (present) agree on its
// collectives and that every Send between two of them has its Recv.
func matchCalls(files []TraceFile, sorted [][]*Record, ids []string, present map[string][]int) error {
	type call struct {
		file string
		rec  *Record
		dt   coll.DataType
		op   coll.RedOp
	}
	type ck struct {
		comm string
		rank int
	}
	type pk struct {
		comm     string
		src, dst int
	}
	colls := map[ck][]call{}
	sends := map[pk][]call{}
	recvs := map[pk][]call{}
	// Types and reductions parsed once per spelling.
	dts := map[string]coll.DataType{}
	ops := map[string]coll.RedOp{"": coll.Sum}
	for a, recs := range sorted {
		for _, r := range recs {
			if !IsCollective(r.Op) {
				continue
			}
			dt, ok := dts[r.Dtype]
			if !ok {
				var err error
				if dt, err = coll.ParseDataType(r.Dtype); err != nil {
					return fmt.Errorf("%w: %s: %v", ErrTrace, Where(files[a].Name, r), err)
				}
				dts[r.Dtype] = dt
			}
			op, ok := ops[r.RedOp]
			if !ok {
				var err error
				if op, err = coll.ParseRedOp(r.RedOp); err != nil {
					return fmt.Errorf("%w: %s: %v", ErrTrace, Where(files[a].Name, r), err)
				}
				ops[r.RedOp] = op
			}
			c := call{files[a].Name, r, dt, op}
			switch r.Op {
			case OpSend:
				k := pk{r.Comm, r.Rank, r.Root}
				sends[k] = append(sends[k], c)
			case OpRecv:
				k := pk{r.Comm, r.Root, r.Rank}
				recvs[k] = append(recvs[k], c)
			default:
				k := ck{r.Comm, r.Rank}
				colls[k] = append(colls[k], c)
			}
		}
	}
	for _, id := range ids {
		ranks := present[id]
		if len(ranks) == 0 {
			continue
		}
		r0 := ranks[0]
		ref := colls[ck{id, r0}]
		for _, r := range ranks[1:] {
			mine := colls[ck{id, r}]
			for k := 0; k < min(len(ref), len(mine)); k++ {
				a, b := ref[k].rec, mine[k].rec
				if a.Op != b.Op || a.Count != b.Count || ref[k].dt != mine[k].dt || ref[k].op != mine[k].op || ((a.Op == OpBroadcast || a.Op == OpReduce) && a.Root != b.Root) {
					return fmt.Errorf("%w: collective %d of communicator %s differs between ranks: %s against %s", ErrTrace, k, id, Where(ref[k].file, a), Where(mine[k].file, b))
				}
			}
			if len(ref) != len(mine) {
				long, short := ref, mine
				if len(mine) > len(ref) {
					long, short = mine, ref
				}
				x := long[len(short)]
				return fmt.Errorf("%w: communicator %s: rank %d issues %d collectives, rank %d issues %d; first unmatched: %s", ErrTrace, id, r0, len(ref), r, len(mine), Where(x.file, x.rec))
			}
		}
	}
	has := map[ck]bool{}
	for id, ranks := range present {
		for _, r := range ranks {
			has[ck{id, r}] = true
		}
	}
	var keys []pk
	for k := range sends {
		keys = append(keys, k)
	}
	for k := range recvs {
		if _, ok := sends[k]; !ok {
			keys = append(keys, k)
		}
	}
	// A message to or from a rank without a file (a virtual run's other ranks) is not matched.
	keys = slices.DeleteFunc(keys, func(k pk) bool { return !has[ck{k.comm, k.src}] || !has[ck{k.comm, k.dst}] })
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.comm != b.comm {
			return a.comm < b.comm
		}
		if a.src != b.src {
			return a.src < b.src
		}
		return a.dst < b.dst
	})
	for _, k := range keys {
		s, r := sends[k], recvs[k]
		for j := 0; j < min(len(s), len(r)); j++ {
			if s[j].rec.Count != r[j].rec.Count || s[j].dt != r[j].dt {
				return fmt.Errorf("%w: message %d from rank %d to rank %d of communicator %s: %s does not match %s", ErrTrace, j, k.src, k.dst, k.comm, Where(s[j].file, s[j].rec), Where(r[j].file, r[j].rec))
			}
		}
		switch {
		case len(s) > len(r):
			x := s[len(r)]
			return fmt.Errorf("%w: %s has no matching Recv on rank %d (%d sends, %d receives from rank %d to rank %d)", ErrTrace, Where(x.file, x.rec), k.dst, len(s), len(r), k.src, k.dst)
		case len(r) > len(s):
			x := r[len(s)]
			return fmt.Errorf("%w: %s has no matching Send on rank %d (%d sends, %d receives from rank %d to rank %d)", ErrTrace, Where(x.file, x.rec), k.src, len(s), len(r), k.src, k.dst)
		}
	}
	return nil
}
