package tuning

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/internal/input"
)

func h200Real(t *testing.T) *Table {
	t.Helper()
	// Graph lines of NCCL 2.28.9 on the 2×H200 machine (testdata/nccl/h200x2/real.677.log).
	c := &Comm{NRanks: 2, NNodes: 1, CCMin: 90, CCMax: 90, CPUArch: "x86", CPUVendor: "intel", AllNVLink: true}
	c.Graphs[GraphRing] = GraphInfo{Pattern: 4, NChannels: 12, BwIntra: 30, BwInter: 30, TypeIntra: PathNVL, TypeInter: PathPIX, SameChannels: true}
	c.Graphs[GraphTree] = GraphInfo{Pattern: 1, NChannels: 12, BwIntra: 60, BwInter: 60, TypeIntra: PathNVL, TypeInter: PathPIX}
	tb, err := Model(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestSelectGroupAggregation(t *testing.T) {
	tb := h200Real(t)
	a := Call{Func: coll.AllReduce, Count: 1 << 18, ElemSize: 4}   // 1 MiB
	b := Call{Func: coll.AllReduce, Count: 3 << 17, ElemSize: 4}   // 1.5 MiB, within 4× of a: aggregated
	c := Call{Func: coll.AllReduce, Count: 100 << 18, ElemSize: 4} // 100 MiB: tuned alone
	d := Call{Func: coll.AllGather, Count: 1 << 10, ElemSize: 4}   // other function: own bin
	got, err := tb.SelectGroup([]Call{c, a, d, b})
	if err != nil {
		t.Fatal(err)
	}
	agg, _ := tb.Select(Call{Func: coll.AllReduce, Count: a.Count + b.Count, ElemSize: 4})
	for _, i := range []int{1, 3} {
		if got[i].Algo != agg.Algo || got[i].Proto != agg.Proto || got[i].TimeUs != agg.TimeUs {
			t.Errorf("call %d: %v/%v %.2f µs, want the aggregate's %v/%v %.2f", i, got[i].Algo, got[i].Proto, got[i].TimeUs, agg.Algo, agg.Proto, agg.TimeUs)
		}
	}
	if got[1].Bytes != a.Bytes() || got[3].Bytes != b.Bytes() {
		t.Error("each choice must keep its own byte count")
	}
	alone, _ := tb.Select(c)
	if got[0].Algo != alone.Algo || got[0].Proto != alone.Proto || got[0].TimeUs != alone.TimeUs {
		t.Errorf("100 MiB call: %v/%v, want %v/%v", got[0].Algo, got[0].Proto, alone.Algo, alone.Proto)
	}
	for i, ch := range got {
		if ch.ChannelLo < 0 || ch.ChannelHi >= tb.NChannels || ch.ChannelHi < ch.ChannelLo || ch.NChannels != ch.ChannelHi-ch.ChannelLo+1 {
			t.Errorf("call %d: channels {%d..%d} n %d outside 0..%d", i, ch.ChannelLo, ch.ChannelHi, ch.NChannels, tb.NChannels-1)
		}
	}
	// numPipeOps: 100 calls on 24 channels → ceil(100/24) = 5 pipelined ops for Ring latency.
	calls := make([]Call, 100)
	for i := range calls {
		calls[i] = Call{Func: coll.AllReduce, Count: 2, ElemSize: 4}
	}
	many, err := tb.SelectGroup(calls)
	if err != nil {
		t.Fatal(err)
	}
	want := tb.Time(coll.AllReduce, many[0].Algo, many[0].Proto, 800, 5)
	if many[0].TimeUs != want {
		t.Errorf("100 tiny calls: %.3f µs, want %.3f (800 B aggregated, numPipeOps 5)", many[0].TimeUs, want)
	}
}

func TestChunkSize(t *testing.T) {
	tb := h200Real(t)
	cases := []struct {
		f     coll.Func
		a     coll.Algo
		p     coll.Proto
		bytes int64
		want  int64
	}{
		{coll.AllReduce, coll.Ring, coll.Simple, 1 << 30, 4 * 512 << 10}, // chunkSteps 4 × 512 KiB step
		{coll.Broadcast, coll.Ring, coll.Simple, 1 << 30, 512 << 10},     // chunkSteps 1
		{coll.AllReduce, coll.Ring, coll.LL, 1 << 20, 32 << 10},          // 64 KiB step, half payload
		{coll.AllReduce, coll.Ring, coll.LL128, 1 << 20, 576000},         // 614400 × 15/16, multiple of 1920
		{coll.AllReduce, coll.Tree, coll.Simple, 1 << 20, 512 << 10},
	}
	for _, c := range cases {
		if got := tb.ChunkSize(c.f, c.a, c.p, 1, c.bytes); got != c.want {
			t.Errorf("%v %v/%v %d B: chunk %d, want %d", c.f, c.a, c.p, c.bytes, got, c.want)
		}
	}
	tb.Config.BuffSize = 1 << 20
	if got := tb.ChunkSize(coll.AllReduce, coll.Ring, coll.Simple, 1, 1<<30); got != 4*(1<<20)/8 {
		t.Errorf("NCCL_BUFFSIZE=1M: chunk %d", got)
	}
}

func TestOverrides(t *testing.T) {
	src := `# collective,minBytes,maxBytes,algorithm,protocol,channels
collective,minBytes,maxBytes,algorithm,protocol,channels
allreduce, 0, 64K, tree, simple, 2   # small all-reduces on the tree
allreduce,64K,*,*,LL128,
*,,,nvls,simple,   # never usable here: ignored
`
	ov, err := ParseOverrides("t.csv", strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(ov) != 3 || ov[0].Line != 3 || ov[0].Channels != 2 || ov[0].MaxBytes != 64<<10 || ov[1].Algo != -1 {
		t.Fatalf("parsed %+v", ov)
	}
	tb := h200Real(t)
	tb.Config.Overrides = ov
	ch, _ := tb.SelectBytes(coll.AllReduce, 4096)
	if ch.Algo != coll.Tree || ch.Proto != coll.Simple || ch.MaxChannels != 2 || ch.Override != 3 {
		t.Errorf("4 KiB: %+v, want Tree/Simple on 2 channels by line 3", ch)
	}
	ch, _ = tb.SelectBytes(coll.AllReduce, 256<<20)
	if ch.Proto != coll.LL128 || ch.Override != 4 {
		t.Errorf("256 MiB: %v/%v line %d, want LL128 by line 4", ch.Algo, ch.Proto, ch.Override)
	}
	ch, _ = tb.SelectBytes(coll.Broadcast, 4096)
	if ch.Override != 0 || ch.Algo != coll.Ring || ch.Proto != coll.LL {
		t.Errorf("Broadcast: %+v, want the model's Ring/LL (NVLS rule unusable)", ch)
	}
	bad := map[string]string{
		"allreduce,0,1K,ring,ll":          "t.csv:1: want 6 fields",
		"allreduces,0,1K,ring,ll,1":       "t.csv:1: collective",
		"allreduce,x,1K,ring,ll,1":        "t.csv:1: minBytes",
		"allreduce,2K,1K,ring,ll,1":       "t.csv:1: maxBytes",
		"allreduce,0,1K,rung,ll,1":        "t.csv:1: unknown algorithm",
		"allreduce,0,1K,ring,ll256,1":     "t.csv:1: unknown protocol",
		"\n\nallreduce,0,1K,ring,ll,65":   "t.csv:3: channels",
		"sendrecv,0,1K,ring,ll,1":         "t.csv:1: collective",
		"allreduce,0,1K,ring,ll,1,extra":  "t.csv:1: want 6 fields",
		"# only a comment\nallreduce,,,,": "t.csv:2: want 6 fields",
	}
	for in, want := range bad {
		if _, err := ParseOverrides("t.csv", strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}

func TestP2P(t *testing.T) {
	tb := h200Real(t)
	total, perPeer := tb.P2PChannels()
	if total != 32 || perPeer != 32 {
		t.Errorf("p2p channels %d/%d, want 32/32 (NCCL 2.28 log: 32 p2p channels, 32 per peer)", total, perPeer)
	}
	if cs := tb.P2PChunkSize(); cs != 512<<10 {
		t.Errorf("P2P chunk %d, want 524288 (log: P2P Chunksize set to 524288)", cs)
	}
	cases := []struct {
		n     int64
		peer  PeerKind
		proto coll.Proto
		nch   int
	}{
		{0, PeerIntra, coll.LL, 1},
		{4096, PeerIntra, coll.LL, 1},         // ≤ 32 × 16 KiB → LL; 4 KiB on 8 KiB min parts
		{512 << 10, PeerIntra, coll.LL, 16},   // LL step 64 KiB, min part 8 KiB, nMin 16
		{1 << 20, PeerIntra, coll.Simple, 16}, // min part 64 KiB → 16 channels
		{1 << 30, PeerIntra, coll.Simple, 32}, // parts above 16 MiB → doubled to 32
		{4096, PeerSelf, coll.Simple, 1},      // self: never LL
		{4096, PeerNet, coll.Simple, 1},       // no LL buffers over the network by default
	}
	for _, c := range cases {
		got, err := tb.P2P(c.n, c.peer)
		if err != nil || got.Proto != c.proto || got.NChannels != c.nch {
			t.Errorf("%d B %v: %+v %v, want %v on %d channels", c.n, c.peer, got, err, c.proto, c.nch)
		}
	}
	if _, err := tb.P2P(-1, PeerIntra); err == nil {
		t.Error("negative size: want an error")
	}

	// NCCL_MIN/MAX_P2P_NCHANNELS on the same machine (32 p2p channels by default). The 64 MiB
	// rows of NCCL 2.28 measured with NCCL_MAX_P2P_NCHANNELS=4 and 8 take the same time
	// (testdata/nccl/h200x2/p2pscan-2026-11-28.csv, 812 and 814 µs): a 64 MiB transfer is split
	// over 4 channels either way.
	bounds := []struct {
		lo, hi, total, perPeer, nch64M int
	}{
		{0, 1, 1, 1, 1},
		{0, 3, 4, 4, 4},
		{0, 8, 8, 8, 4},
		{0, 64, 32, 32, 16},
		{33, 0, 64, 64, 32},
		{2, 1, 2, 2, 2}, // the minimum is applied after the maximum, as NCCL does
	}
	for _, b := range bounds {
		tb.Config.MinP2PNChannels, tb.Config.MaxP2PNChannels = b.lo, b.hi
		total, perPeer := tb.P2PChannels()
		got, err := tb.P2P(64<<20, PeerIntra)
		if total != b.total || perPeer != b.perPeer || err != nil || got.NChannels != b.nch64M {
			t.Errorf("NCCL_MIN/MAX_P2P_NCHANNELS %d/%d: %d/%d channels, 64 MiB on %d (%v), want %d/%d and %d",
				b.lo, b.hi, total, perPeer, got.NChannels, err, b.total, b.perPeer, b.nch64M)
		}
	}
}

func TestLinesFormatAndJSON(t *testing.T) {
	tb := h200Real(t)
	lines := tb.Lines()
	if len(lines) != 3*(3+int(coll.NumTunedFuncs)) {
		t.Fatalf("%d lines", len(lines))
	}
	ch, _ := tb.SelectBytes(coll.AllReduce, 1<<20)
	if got, want := ch.Line(), "AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}"; got != want {
		t.Errorf("line %q, want %q (NCCL 2.28.9 log)", got, want)
	}
	var b strings.Builder
	if err := tb.NewReport([]Choice{ch}).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"coll": "AllReduce"`, `"algo": "Ring"`, `"proto": "LL"`, `"nchannels": 24`, `"max_nthreads": 640`, `"lat_us": 7.8`} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("JSON lacks %s", s)
		}
	}
}

// TestParseOverridesBounds: finding 6 of the input-bounds issue for tuner files: the rules, one
// line and the whole input are bounded, and the errors name the file and the line ("bufio.Scanner:
// token too long" named neither).
func TestParseOverridesBounds(t *testing.T) {
	for _, tc := range []struct {
		in   io.Reader
		want string
	}{
		{strings.NewReader(strings.Repeat("allreduce,0,64K,ring,ll,4\n", MaxOverrides+1)), "t.csv:1001: more than 1000 rules"},
		{strings.NewReader("# rules\n" + strings.Repeat("#", 2<<20)), "t.csv:2: input too large (a line longer than 1 MiB)"},
		{io.LimitReader(newlines{}, 100<<20), "t.csv: input too large (more than 64 MiB)"},
	} {
		_, err := ParseOverrides("t.csv", tc.in)
		require.EqualError(t, err, tc.want)
		if strings.Contains(tc.want, "too large") {
			require.ErrorIs(t, err, input.ErrTooLarge)
		}
	}
}

type newlines struct{}

func (newlines) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '\n'
	}
	return len(p), nil
}

// TestNetPeerChannels: the channels per peer of a communicator whose ranks are on different hosts,
// as NCCL printed them on 2 H200 with every rank its own host over NET/Socket, the NIC declared at
// 400 Gb/s (testdata/nccl/h200x2/netpeerscan-2026-11-30/summary.txt: "4 coll channels, …, P p2p
// channels, Q p2p channels per peer"); the rows marked "rule" were not run.
func TestNetPeerChannels(t *testing.T) {
	for _, c := range []struct {
		release        string
		ranks, lo, hi  int
		env            int
		nics           int
		bw             float64
		total, perPeer int
	}{
		{"2.28", 2, 0, 0, 0, 1, 50, 4, 2},     // img_np2_400000
		{"2.28", 2, 32, 0, 0, 1, 50, 32, 2},   // img_np2_400000_p2p32 (and 100, 200, 800 Gb/s)
		{"2.28", 4, 32, 0, 0, 1, 50, 32, 2},   // img_np4_400000_p2p32
		{"2.28", 8, 32, 0, 0, 1, 50, 32, 2},   // img_np8_400000_p2p32
		{"2.28", 8, 0, 2, 0, 1, 50, 2, 1},     // img_np8_400000_p2p2: 2 × 8 ranks > 4 × 2 channels
		{"2.28", 8, 4, 4, 0, 1, 50, 4, 2},     // img_np8_400000_p2p4: 16 > 16 does not halve
		{"2.28", 2, 32, 0, 8, 1, 50, 32, 8},   // img_np2_400000_env8: NCCL_NCHANNELS_PER_NET_PEER=8
		{"2.28", 2, 32, 0, 0, 2, 25, 32, 2},   // img_np2_nic2_*: two NICs, still 2
		{"2.29", 2, 32, 0, 0, 1, 50, 32, 4},   // 2.29.7_np2_400000_p2p32: ⌈50 / 14⌉
		{"2.29", 8, 0, 2, 0, 1, 50, 2, 2},     // 2.29.7_np8_400000_p2p2: no rank rule, the total caps
		{"2.29", 8, 4, 4, 0, 1, 50, 4, 4},     // 2.29.7_np8_400000_p2p4
		{"2.29", 2, 32, 0, 8, 1, 50, 32, 8},   // 2.29.7_np2_400000_env8
		{"2.28", 1024, 0, 0, 0, 1, 48, 16, 1}, // rule: 128 DGX H100 nodes, 16 p2p channels
		{"2.28", 16, 0, 0, 0, 1, 48, 16, 2},   // rule: 2 DGX H100 nodes
		{"2.28", 1024, 0, 0, 0, 2, 50, 16, 2}, // rule: two NICs a GPU keep 2 at any scale
		{"2.29", 1024, 0, 0, 0, 1, 48, 16, 4}, // rule: ⌈48 / 14⌉ at any scale
		{"2.30", 1024, 0, 0, 0, 1, 48, 16, 1}, // rule: 4, halved while × ⌈1024 / 8⌉ passes 16
		{"2.30", 64, 0, 0, 0, 1, 48, 16, 2},   // rule: 4 × 8 > 16, 2 × 8 = 16 stays
		{"2.30", 16, 0, 0, 0, 1, 100, 16, 8},  // rule: 800 Gb/s, ⌈100 / 14⌉ = 8
		{"2.30", 16, 0, 0, 0, 0, 0, 16, 2},    // rule: no NIC counted, 2
	} {
		tb := h200Real(t)
		k, err := ConstantsFor(c.release)
		if err != nil {
			t.Fatal(err)
		}
		tb.K = k
		tb.Comm.NRanks, tb.Comm.NNodes = c.ranks, c.ranks
		tb.Comm.P2PNChannels, tb.Comm.P2PChannelsPerPeer = c.total, MaxChannels
		if c.lo > 0 || c.hi > 0 {
			tb.Comm.P2PNChannels = 4 // the search's 4 coll channels; the bounds set the total
		}
		tb.Comm.NetPeerNICs, tb.Comm.NetPeerBw = c.nics, c.bw
		tb.Config.MinP2PNChannels, tb.Config.MaxP2PNChannels, tb.Config.NChannelsPerNetPeer = c.lo, c.hi, c.env
		total, perPeer := tb.P2PChannels()
		if total != c.total || perPeer != c.perPeer {
			t.Errorf("%s, %d ranks, p2p bounds %d/%d, env %d, %d NICs at %.0f GB/s: %d/%d, want %d/%d",
				c.release, c.ranks, c.lo, c.hi, c.env, c.nics, c.bw, total, perPeer, c.total, c.perPeer)
		}
	}
	env := map[string]string{"NCCL_NCHANNELS_PER_NET_PEER": "4", "NCCL_P2P_PER_CHANNEL_NET_BW": "25"}
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || cfg.NChannelsPerNetPeer != 4 || cfg.P2PPerChannelNetBw != 25 {
		t.Errorf("from the environment: %+v %v", cfg, err)
	}
	env["NCCL_NCHANNELS_PER_NET_PEER"] = "0"
	if _, err := ConfigFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "NCCL_NCHANNELS_PER_NET_PEER") {
		t.Errorf("NCCL_NCHANNELS_PER_NET_PEER=0: %v", err)
	}
}
