package tuning

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/simccl/simccl/coll"
)

// Lines returns the TUNING table as NCCL prints it at init (rank 0, after "NCCL INFO "): blocks of
// three algorithms, each with an "Algorithm" row, a "Protocol" row (always nine cells, as NCCL
// prints it even for the last, one-algorithm block), a "Max NThreads" row and one row per function
// of "latency/bandwidth" cells ("%8.1f/%6.1f |").
func (t *Table) Lines() []string {
	var out []string
	for block := 0; block < (int(coll.NumAlgos)+2)/3; block++ {
		var b strings.Builder
		b.WriteString("  Algorithm   |")
		for ba := 0; ba < 3; ba++ {
			a := coll.Algo(block*3 + ba)
			if a >= coll.NumAlgos {
				continue
			}
			fmt.Fprintf(&b, " %14s   %14s   %14s |", "", a.String(), "")
		}
		out = append(out, b.String())
		b.Reset()
		b.WriteString("  Protocol    |")
		for ba := 0; ba < 3; ba++ {
			for p := coll.Proto(0); p < coll.NumProtos; p++ {
				fmt.Fprintf(&b, " %14s |", p.String())
			}
		}
		out = append(out, b.String())
		b.Reset()
		b.WriteString(" Max NThreads |")
		for ba := 0; ba < 3; ba++ {
			a := coll.Algo(block*3 + ba)
			if a >= coll.NumAlgos {
				continue
			}
			for p := coll.Proto(0); p < coll.NumProtos; p++ {
				fmt.Fprintf(&b, " %14d |", t.MaxThreads[a][p])
			}
		}
		out = append(out, b.String())
		for f := coll.Func(0); f < coll.NumTunedFuncs; f++ {
			b.Reset()
			fmt.Fprintf(&b, "%13s |", f.String())
			for ba := 0; ba < 3; ba++ {
				a := coll.Algo(block*3 + ba)
				if a >= coll.NumAlgos {
					continue
				}
				for p := coll.Proto(0); p < coll.NumProtos; p++ {
					fmt.Fprintf(&b, "%8.1f/%6.1f |", t.Lat[f][a][p], t.Bw[f][a][p])
				}
			}
			out = append(out, b.String())
		}
	}
	return out
}

// ThresholdsLine is the line NCCL prints after the table: the thread thresholds (bytes per
// thread below which a call runs on fewer threads, topoGetAlgoInfo) of Tree LL/LL128/Simple, Ring
// LL/LL128/Simple, then CollNet direct and chain Simple.
func (t *Table) ThresholdsLine() string {
	th := &t.ThreadThresholds
	return fmt.Sprintf("threadThresholds %d/%d/%d | %d/%d/%d | %d | %d",
		th[coll.Tree][coll.LL], th[coll.Tree][coll.LL128], th[coll.Tree][coll.Simple], th[coll.Ring][coll.LL], th[coll.Ring][coll.LL128], th[coll.Ring][coll.Simple],
		th[coll.CollNetDirect][coll.Simple], th[coll.CollNetChain][coll.Simple])
}

// WriteText writes the table lines and the thresholds line, each preceded by prefix (e.g.
// "NCCL INFO ").
func (t *Table) WriteText(w io.Writer, prefix string) error {
	for _, l := range append(t.Lines(), t.ThresholdsLine()) {
		if _, err := fmt.Fprintf(w, "%s%s\n", prefix, l); err != nil {
			return err
		}
	}
	return nil
}

// TableCell is one cell of the table in JSON (NCCL's table spellings: "AllReduce", "Ring",
// "Simple").
type TableCell struct {
	Coll        string  `json:"coll"`
	Algo        string  `json:"algo"`
	Proto       string  `json:"proto"`
	LatUs       float64 `json:"lat_us"`
	BwGBs       float64 `json:"bw_gbs"`
	MaxNThreads int     `json:"max_nthreads"`
}

// ChoiceJSON is one per-call choice in JSON, with NCCL's names as the table spells them ("Ring",
// "Simple", "LL128"; the text line keeps the choice line's "RING", "SIMPLE").
type ChoiceJSON struct {
	Coll      string  `json:"coll"`
	Bytes     int64   `json:"bytes"`
	Algo      string  `json:"algo"`
	Proto     string  `json:"proto"`
	NChannels int     `json:"nchannels"`
	ChannelLo int     `json:"channel_lo"`
	ChannelHi int     `json:"channel_hi"`
	NThreads  int     `json:"nthreads"`
	ChunkSize int64   `json:"chunk_size"`
	TimeUs    float64 `json:"time_us"`
	Override  int     `json:"override_line,omitempty"`
}

// Report is the JSON document of `simccl tune --json`.
type Report struct {
	Version   string `json:"nccl_version"`
	NRanks    int    `json:"nranks"`
	NNodes    int    `json:"nnodes"`
	NChannels int    `json:"nchannels"`
	// P2PChannels and P2PPerPeer are NCCL's "P p2p channels, Q p2p channels per peer" of its init
	// log (Table.P2PChannels).
	P2PChannels int          `json:"p2p_channels"`
	P2PPerPeer  int          `json:"p2p_channels_per_peer"`
	Table       []TableCell  `json:"table"`
	Choices     []ChoiceJSON `json:"choices"`
	// P2P lists point-to-point choices (send/recv, all-to-all) where they were asked for: NCCL
	// prints no TUNING line for them.
	P2P []P2PChoiceJSON `json:"p2p,omitempty"`
	// Note says what NCCL does unlike the model where that is so (a one-rank communicator).
	Note string `json:"note,omitempty"`
}

// P2PChoiceJSON is the point-to-point plan of one nccl-tests size: Transfers of the call cut
// alike (peer kind, channels, protocol, chunk).
type P2PChoiceJSON struct {
	Coll      string `json:"coll"`
	Bytes     int64  `json:"bytes"` // nccl-tests size
	Transfers int    `json:"transfers"`
	Peer      string `json:"peer,omitempty"` // "intra" (same node) or "net"
	Proto     string `json:"proto"`
	NChannels int    `json:"nchannels"`
	ChunkSize int64  `json:"chunk_size,omitempty"`
}

// Line is the text form of a point-to-point choice (simccl's own; NCCL prints none).
func (c P2PChoiceJSON) Line() string {
	l := fmt.Sprintf("# %s: %d Bytes -> P2P proto %s nchannels %d", c.Coll, c.Bytes, c.Proto, c.NChannels)
	if c.ChunkSize > 0 {
		l += fmt.Sprintf(" chunk %d", c.ChunkSize)
	}
	l += fmt.Sprintf(" (%d transfers", c.Transfers)
	if c.Peer != "" {
		l += ", " + c.Peer
	}
	return l + ")"
}

// Cells lists every cell in NCCL's order (function, algorithm, protocol).
func (t *Table) Cells() []TableCell {
	var out []TableCell
	for f := coll.Func(0); f < coll.NumTunedFuncs; f++ {
		for a := coll.Algo(0); a < coll.NumAlgos; a++ {
			for p := coll.Proto(0); p < coll.NumProtos; p++ {
				out = append(out, TableCell{Coll: f.String(), Algo: a.String(), Proto: p.String(),
					LatUs: round4(float64(t.Lat[f][a][p])), BwGBs: round4(float64(t.Bw[f][a][p])),
					MaxNThreads: t.MaxThreads[a][p]})
			}
		}
	}
	return out
}

func round4(v float64) float64 {
	return float64(int64(v*1e4+0.5)) / 1e4
}

// NewReport assembles the JSON report of a table and its choices.
func (t *Table) NewReport(choices []Choice) Report {
	r := Report{Version: t.K.Release, NRanks: t.Comm.NRanks, NNodes: t.Comm.NNodes, NChannels: t.NChannels,
		Table: t.Cells(), Choices: []ChoiceJSON{}}
	r.P2PChannels, r.P2PPerPeer = t.P2PChannels()
	for _, c := range choices {
		algo, proto, nch := c.Shown()
		cj := ChoiceJSON{Coll: c.Func.String(), Bytes: c.Bytes, Algo: algo,
			Proto: proto, NChannels: nch, ChannelLo: c.ChannelLo, ChannelHi: c.ChannelHi,
			NThreads: c.NThreads, ChunkSize: c.ChunkSize, TimeUs: round4(float64(c.TimeUs)), Override: c.Override}
		if c.OneRank {
			cj.ChannelLo, cj.ChannelHi, cj.NThreads, cj.ChunkSize, cj.TimeUs = 0, 0, 0, 0, 0
		}
		r.Choices = append(r.Choices, cj)
	}
	return r
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
