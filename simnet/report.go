package simnet

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Traced is one simulated run whose records go into a trace or op log.
type Traced struct {
	Label  string // e.g. "all_reduce 1048576"
	Ops    []OpRecord
	Offset Time // where the run starts on the trace's time line
	Names  func(LinkID) string
}

type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// WriteTrace writes Chrome trace-event JSON (the "JSON Object Format" Perfetto and chrome://tracing
// open): one process per rank, one thread per channel, one complete ("X") slice per message from
// its first byte leaving the sender to its arrival, with bytes, peer, protocol and route in args.
// Timestamps are microseconds.
func WriteTrace(w io.Writer, runs []Traced) error {
	bw := bufio.NewWriter(w)
	if _, err := bw.WriteString("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"); err != nil {
		return err
	}
	first := true
	emit := func(ev traceEvent) error {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		if !first {
			bw.WriteString(",\n")
		}
		first = false
		_, err = bw.Write(b)
		return err
	}
	seen := map[[2]int]bool{}
	for _, r := range runs {
		for _, op := range r.Ops {
			if !seen[[2]int{op.Rank, -1}] {
				seen[[2]int{op.Rank, -1}] = true
				if err := emit(traceEvent{Name: "process_name", Ph: "M", Pid: op.Rank, Args: map[string]any{"name": fmt.Sprintf("rank %d", op.Rank)}}); err != nil {
					return err
				}
				if err := emit(traceEvent{Name: "process_sort_index", Ph: "M", Pid: op.Rank, Args: map[string]any{"sort_index": op.Rank}}); err != nil {
					return err
				}
			}
			if !seen[[2]int{op.Rank, op.Channel}] {
				seen[[2]int{op.Rank, op.Channel}] = true
				if err := emit(traceEvent{Name: "thread_name", Ph: "M", Pid: op.Rank, Tid: op.Channel, Args: map[string]any{"name": fmt.Sprintf("channel %d", op.Channel)}}); err != nil {
					return err
				}
			}
			ts := (r.Offset + op.Start).Micros()
			dur := (op.End - op.Start).Micros()
			ev := traceEvent{Name: fmt.Sprintf("send %d->%d", op.Rank, op.Peer), Cat: r.Label, Ph: "X", Ts: ts, Dur: dur,
				Pid: op.Rank, Tid: op.Channel, Args: map[string]any{
					"run": r.Label, "peer": op.Peer, "bytes": op.Bytes, "wire_bytes": op.Wire, "proto": op.Proto.String(),
					"step": op.Step, "chunk": op.Chunk, "class": op.Class.String(), "route": routeString(op.Route, r.Names)}}
			if err := emit(ev); err != nil {
				return err
			}
		}
	}
	if _, err := bw.WriteString("\n]}\n"); err != nil {
		return err
	}
	return bw.Flush()
}

func routeString(r []LinkID, names func(LinkID) string) string {
	parts := make([]string, len(r))
	for i, l := range r {
		if names != nil {
			parts[i] = names(l)
		} else {
			parts[i] = fmt.Sprint(int(l))
		}
	}
	return strings.Join(parts, " > ")
}

// WriteOpsCSV writes the op log: one line per message with its route (link names joined by " > ").
func WriteOpsCSV(w io.Writer, runs []Traced) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "run,rank,peer,channel,step,chunk,bytes,wire_bytes,proto,start_us,end_us,class,route")
	for _, r := range runs {
		for _, op := range r.Ops {
			fmt.Fprintf(bw, "%s,%d,%d,%d,%d,%d,%d,%d,%s,%.6f,%.6f,%s,%q\n", r.Label, op.Rank, op.Peer, op.Channel, op.Step, op.Chunk,
				op.Bytes, op.Wire, op.Proto, op.Start.Micros(), op.End.Micros(), op.Class, routeString(op.Route, r.Names))
		}
	}
	return bw.Flush()
}

// WriteTable writes rows as nccl-tests prints them (one placement), with the algorithm, protocol
// and channel columns simccl adds.
func WriteTable(w io.Writer, rows []Row) error {
	bw := bufio.NewWriter(w)
	subst := false
	for _, r := range rows {
		subst = subst || r.NCCL != ""
	}
	ncclHead, ncclUnit := "", ""
	if subst {
		// NCCL's decision where the row is not it (an algorithm the simulator lacks).
		ncclHead, ncclUnit = fmt.Sprintf("  %-20s", "nccl runs"), fmt.Sprintf("  %-20s", "(if not simulated)")
	}
	// The mode column says how each row was simulated (Row.Mode; docs/cluster.md).
	head := fmt.Sprintf("#%14s %12s %8s %6s %10s %8s %8s  %-6s %-6s %3s  %-14s  %-28s%s", "size", "count", "type", "redop", "time", "algbw", "busbw", "algo", "proto", "nch", "coll", "mode", ncclHead)
	unit := fmt.Sprintf("#%14s %12s %8s %6s %10s %8s %8s  %-6s %-6s %3s  %-14s  %-28s%s", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "", "", "", "", "(how simulated)", ncclUnit)
	fmt.Fprintln(bw, strings.TrimRight(head, " "))
	fmt.Fprintln(bw, strings.TrimRight(unit, " "))
	var sum float64
	for _, r := range rows {
		nccl := ""
		if subst {
			nccl = fmt.Sprintf("  %-20s", r.NCCL)
		}
		line := fmt.Sprintf("%15d %12d %8s %6s %10.2f %8.2f %8.2f  %-6s %-6s %3d  %-14s  %-28s%s", r.Bytes, r.Count, r.Type, r.RedOp, r.TimeUs, r.AlgBw, r.BusBw, r.Algo, r.Proto, r.NChannels, r.Coll, r.Mode, nccl)
		fmt.Fprintln(bw, strings.TrimRight(line, " "))
		sum += r.BusBw
	}
	if len(rows) > 0 {
		// nccl-tests: PRINT("# Avg bus bandwidth    : %g %s\n", bw, "") — C's %g is Go's %.6g
		// (6 significant digits, trailing zeros dropped), and the empty %s leaves a trailing space.
		fmt.Fprintf(bw, "# Avg bus bandwidth    : %.6g \n", sum/float64(len(rows)))
	}
	return bw.Flush()
}

// WriteJSON writes {"rows":[…]} (plus the machine's notes).
func WriteJSON(w io.Writer, rows []Row, notes []string) error {
	if rows == nil {
		rows = []Row{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Rows  []Row    `json:"rows"`
		Notes []string `json:"notes,omitempty"`
	}{rows, notes})
}
