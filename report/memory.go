package report

import (
	"fmt"
	"strings"

	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/planner"
)

// Memory is the transport buffer memory per rank from simnet's model (NCCL 2.28 transports):
// lazy (NCCL_RUNTIME_CONNECT=1, the 2.22+ default: only the algorithms tuning picks for the
// swept collectives are connected) against eager (NCCL_RUNTIME_CONNECT=0: everything at init,
// NVLS and CollNet buffers included where the topology has them).
type Memory struct {
	Lazy  *planner.MemoryReport `json:"lazy"`
	Eager *planner.MemoryReport `json:"eager"`
	Notes []string              `json:"notes,omitempty"`
}

// buildMemory runs the planner's memory model for the swept workload (NVLS and CollNet buffers
// where the planner searched those graphs).
func buildMemory(p *planner.Planner, opt Options) (Memory, error) {
	var mem Memory
	var err error
	var calls []planner.MemCall
	for _, f := range opt.Funcs {
		for _, s := range opt.Sizes {
			calls = append(calls, planner.MemCall{Func: f, Bytes: s})
		}
	}
	if mem.Lazy, err = p.Memory(calls, opt.DataType, false); err != nil {
		return mem, err
	}
	if mem.Eager, err = p.Memory(calls, opt.DataType, true); err != nil {
		return mem, err
	}
	return mem, nil
}

// memorySection writes section 5: summary over ranks, breakdowns of the rank with the most GPU
// memory, the per-rank bars and the model's notes.
func memorySection(b *strings.Builder, m *Memory) {
	b.WriteString(`<section id="s-mem"><h2>5. Memory: transport buffers per rank</h2>` + "\n")
	lz, eg := m.Lazy, m.Eager
	if lz == nil || eg == nil {
		b.WriteString("<p>No memory model.</p></section>\n")
		return
	}
	bf := lz.Buffers
	fmt.Fprintf(b, `<p>Per connection: LL %s, LL128 %s, Simple %s (NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE, NCCL_BUFFSIZE); the receiver of a P2P connection holds all three, rounded to 2 MiB. %d collective channels, %d p2p channels (%d per peer, chunk %s).`,
		mib(bf.LL), mib(bf.LL128), mib(bf.Simple), bf.Channels, bf.P2PChannels, bf.P2PPerPeer, units.FormatSize(bf.P2PChunk))
	if bf.NVLSHeads > 0 {
		fmt.Fprintf(b, ` NVLS: %d channels × %d heads × 2 × %s × 8 steps = %s per rank.`, bf.NVLSChannels, bf.NVLSHeads, units.FormatSize(bf.NVLSChunk),
			mib(int64(bf.NVLSChannels)*int64(bf.NVLSHeads)*2*bf.NVLSChunk*8))
	}
	fmt.Fprintf(b, ` Eager (NCCL_RUNTIME_CONNECT=0) connects %s at init; lazy (the default) connects %s, what tuning picks for the swept collectives.</p>`+"\n",
		esc(orNone(eg.Connected)), esc(orNone(lz.Connected)))
	row := func(name string, s planner.Stat) string {
		return fmt.Sprintf("<tr><th>%s</th><td>%s</td><td>%s</td><td>%s</td></tr>", name, mib(s.Min), mib(s.Median), mib(s.Max))
	}
	fmt.Fprintf(b, `<table id="memtable"><thead><tr><th>per rank</th><th>min</th><th>median</th><th>max</th></tr></thead><tbody>%s%s%s%s</tbody></table>`+"\n",
		row("eager, GPU", eg.GPU), row("lazy, GPU", lz.GPU), row("eager, host", eg.Host), row("lazy, host", lz.Host))

	// Per algorithm × protocol, of the rank with the most GPU memory in each mode.
	type key struct{ algo, proto string }
	var order []key
	vals := map[key][2]int64{}
	for i, rep := range []*planner.MemoryReport{eg, lz} {
		for _, ap := range rep.ByAlgoProto {
			k := key{ap.Algo, ap.Proto}
			v, ok := vals[k]
			if !ok {
				order = append(order, k)
			}
			v[i] = ap.Bytes
			vals[k] = v
		}
	}
	fmt.Fprintf(b, `<table id="memalgo"><thead><tr><th>algorithm</th><th>protocol</th><th>eager (rank %d)</th><th>lazy (rank %d)</th></tr></thead><tbody>`, eg.MaxRank, lz.MaxRank)
	for _, k := range order {
		v := vals[k]
		fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>", esc(k.algo), esc(k.proto), mib(v[0]), mib(v[1]))
	}
	b.WriteString("</tbody></table>\n")

	kinds := map[string][2]planner.KindMem{}
	var korder []string
	for i, rep := range []*planner.MemoryReport{eg, lz} {
		for _, k := range rep.ByKind {
			v, ok := kinds[k.Kind]
			if !ok {
				korder = append(korder, k.Kind)
			}
			v[i] = k
			kinds[k.Kind] = v
		}
	}
	b.WriteString(`<table id="memkind"><thead><tr><th>connection type</th><th>eager: connections</th><th>GPU</th><th>host</th><th>lazy: connections</th><th>GPU</th><th>host</th></tr></thead><tbody>`)
	for _, k := range korder {
		v := kinds[k]
		fmt.Fprintf(b, "<tr><td>%s</td><td>%d</td><td>%s</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td></tr>", k, v[0].Conns, mib(v[0].GPU), mib(v[0].Host), v[1].Conns, mib(v[1].GPU), mib(v[1].Host))
	}
	b.WriteString("</tbody></table>\n")
	legend(b, [][2]string{{"eager", "#adb5bd"}, {"lazy", "#2a9d8f"}})
	if n := len(lz.PerRank); n > memBars {
		fmt.Fprintf(b, "<p class=\"note\">GPU memory of the first %d of %d ranks (every rank is in the JSON).</p>\n", memBars, n)
	}
	b.WriteString(`<div class="scroll">`)
	memorySVG(b, eg, lz)
	b.WriteString("</div>\n")
	seen := map[string]bool{}
	for _, n := range append(append(append([]string{}, m.Notes...), eg.Notes...), lz.Notes...) {
		if !seen[n] {
			seen[n] = true
			fmt.Fprintf(b, "<p class=\"note\">%s</p>\n", esc(n))
		}
	}
	b.WriteString("</section>\n")
}

// memBars is the most ranks the memory bars draw.
const memBars = 64

// memorySVG draws eager and lazy GPU buffer bytes per rank (the first memBars ranks).
func memorySVG(b *strings.Builder, eg, lz *planner.MemoryReport) {
	n := min(len(eg.PerRank), len(lz.PerRank), memBars)
	maxB := int64(1)
	for i := 0; i < n; i++ {
		maxB = max(maxB, eg.PerRank[i].GPU, lz.PerRank[i].GPU)
	}
	bwid, left, H := 14.0, 60.0, 220.0
	W := left + float64(n)*bwid*2.4 + 40
	plot := H - 40
	fmt.Fprintf(b, `<svg id="memory" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`+"\n", W, H, W, H)
	fmt.Fprintf(b, `<text class="tick" x="%.0f" y="14" text-anchor="end">%s</text><text class="tick" x="%.0f" y="%.0f" text-anchor="end">0</text>`, left-4, mib(maxB), left-4, plot+10)
	tip := func(mode string, r planner.RankMemory) string {
		var parts []string
		for _, k := range r.Kinds {
			parts = append(parts, fmt.Sprintf("%s %d conns %s", k.Kind, k.Conns, mib(k.GPU+k.Host)))
		}
		return fmt.Sprintf("rank %d %s: %s GPU, %s host; %s", r.Rank, mode, mib(r.GPU), mib(r.Host), strings.Join(parts, ", "))
	}
	for i := 0; i < n; i++ {
		e, l := eg.PerRank[i], lz.PerRank[i]
		x := left + float64(i)*bwid*2.4
		he := float64(e.GPU) / float64(maxB) * (plot - 10)
		hl := float64(l.GPU) / float64(maxB) * (plot - 10)
		fmt.Fprintf(b, `<rect class="eager" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#adb5bd" data-tip="%s"/>`, x, plot+10-he, bwid, he, esc(tip("eager", e)))
		fmt.Fprintf(b, `<rect class="lazy" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#2a9d8f" data-tip="%s"/>`, x+bwid, plot+10-hl, bwid, hl, esc(tip("lazy", l)))
		if n <= 16 || i%8 == 0 {
			fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%.0f" text-anchor="middle">%d</text>`, x+bwid, plot+26, e.Rank)
		}
	}
	b.WriteString("</svg>\n")
}
