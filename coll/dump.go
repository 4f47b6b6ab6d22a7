package coll

import (
	"fmt"
	"io"
	"strings"
)

// RankTotals counts what one rank's programs move, read off the schedule (no execution).
type RankTotals struct {
	Rank      int   `json:"rank"`
	Steps     int   `json:"steps"`
	SendMsgs  int   `json:"send_msgs"`
	RecvMsgs  int   `json:"recv_msgs"`
	SentBytes int64 `json:"sent_bytes"` // payload
	RecvBytes int64 `json:"recv_bytes"`
	SentWire  int64 `json:"sent_wire"` // with protocol overhead
	RecvWire  int64 `json:"recv_wire"`
}

// Summary is the per-rank accounting of a schedule, plus totals.
type Summary struct {
	Ranks []RankTotals `json:"ranks"` // ranks, then switch endpoints (NVLS, CollNet)
	Total RankTotals   `json:"total"` // over ranks only; Rank is −1
	Conns int          `json:"conns"`
}

// Summarize counts steps, messages and bytes per rank.
func Summarize(s *Schedule) Summary {
	sum := Summary{Ranks: make([]RankTotals, s.Endpoints()), Conns: len(s.Conns)}
	for r := range sum.Ranks {
		sum.Ranks[r].Rank = r
	}
	for _, p := range s.Programs {
		t := &sum.Ranks[p.Rank]
		for _, st := range p.Steps {
			t.Steps++
			t.SendMsgs += len(st.Send)
			t.RecvMsgs += len(st.Recv)
			t.SentBytes += int64(len(st.Send)) * st.Bytes
			t.RecvBytes += int64(len(st.Recv)) * st.Bytes
			t.SentWire += int64(len(st.Send)) * st.Wire
			t.RecvWire += int64(len(st.Recv)) * st.Wire
		}
	}
	sum.Total.Rank = -1
	for _, t := range sum.Ranks[:s.NRanks] {
		sum.Total.Steps += t.Steps
		sum.Total.SendMsgs += t.SendMsgs
		sum.Total.RecvMsgs += t.RecvMsgs
		sum.Total.SentBytes += t.SentBytes
		sum.Total.RecvBytes += t.RecvBytes
		sum.Total.SentWire += t.SentWire
		sum.Total.RecvWire += t.RecvWire
	}
	return sum
}

// DumpOptions select what WriteText prints.
type DumpOptions struct {
	Steps bool // every step (otherwise only the header and totals)
	Ranks []int
}

// WriteText writes a compact, line-oriented dump: the operations, then per rank and channel the
// steps, then per-rank totals. A step reads
//
//	#idx Prim Lane chunk.slice [deps] <peer:conn#seq (from) >peer:conn#seq@slot/steps^credit (to) src=buf+off dst=buf+off bytes/wire
func WriteText(w io.Writer, s *Schedule, opt DumpOptions) error {
	bw := &errWriter{w: w}
	for i, op := range s.Ops {
		bw.printf("op %d: %s %s %s count=%d type=%s redop=%s root=%d nchannels=%d chunk=%dB send=%dB recv=%dB\n",
			i, op.FuncName, op.AlgoName, op.ProtoName, op.Count, op.TypeName, op.OpName, op.Root, op.NChannels, op.ChunkSize, op.SendBytes, op.RecvBytes)
	}
	bw.printf("%d ranks, %d channels, %d connections\n", s.NRanks, s.NChannels, len(s.Conns))
	for _, sw := range s.Switches {
		bw.printf("switch %d: %s (node %d)\n", sw.ID, sw.Kind, sw.Node)
	}
	sum := Summarize(s)
	want := map[int]bool{}
	for _, r := range opt.Ranks {
		want[r] = true
	}
	if opt.Steps {
		for _, p := range s.Programs {
			if len(want) > 0 && !want[p.Rank] {
				continue
			}
			if len(p.Steps) == 0 {
				continue
			}
			bw.printf("rank %d channel %d: %d steps\n", p.Rank, p.Channel, len(p.Steps))
			for _, st := range p.Steps {
				bw.printf("  %s\n", stepText(&st))
			}
		}
	}
	bw.printf("%-6s %8s %8s %8s %14s %14s %14s %14s\n", "rank", "steps", "sends", "recvs", "sent B", "recv B", "sent wire B", "recv wire B")
	rows := append([]RankTotals(nil), sum.Ranks...)
	for _, t := range rows {
		if len(want) > 0 && !want[t.Rank] {
			continue
		}
		bw.printf("%-6d %8d %8d %8d %14d %14d %14d %14d\n", t.Rank, t.Steps, t.SendMsgs, t.RecvMsgs, t.SentBytes, t.RecvBytes, t.SentWire, t.RecvWire)
	}
	t := sum.Total
	bw.printf("%-6s %8d %8d %8d %14d %14d %14d %14d\n", "total", t.Steps, t.SendMsgs, t.RecvMsgs, t.SentBytes, t.RecvBytes, t.SentWire, t.RecvWire)
	return bw.err
}

func stepText(st *Step) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%-4d %-18s L%d %d.%d", st.Index, st.Prim, st.Lane, st.Chunk, st.Slice)
	if len(st.Deps) > 0 {
		fmt.Fprintf(&b, " deps%v", st.Deps)
	}
	for _, x := range st.Recv {
		fmt.Fprintf(&b, " <%d:c%d#%d", x.Peer, x.Conn, x.Seq)
	}
	for _, x := range st.Send {
		fmt.Fprintf(&b, " >%d:c%d#%d@%d/%d", x.Peer, x.Conn, x.Seq, x.Slot, x.Steps)
		if x.CreditSeq >= 0 {
			fmt.Fprintf(&b, "^%d", x.CreditSeq)
		}
	}
	if st.Src != nil {
		fmt.Fprintf(&b, " src=%s+%d", st.Src.Buf, st.Src.Offset)
	}
	if st.Dst != nil {
		fmt.Fprintf(&b, " dst=%s+%d", st.Dst.Buf, st.Dst.Offset)
	}
	fmt.Fprintf(&b, " %dB", st.Bytes)
	if st.Wire != st.Bytes {
		fmt.Fprintf(&b, "/%dw", st.Wire)
	}
	if st.PostOp {
		b.WriteString(" postop")
	}
	return b.String()
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
