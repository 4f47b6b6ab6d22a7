package tuning

import (
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseEnableList(t *testing.T) {
	cases := []struct {
		in   string
		f    coll.Func
		want []int // per algorithm
	}{
		{"", coll.AllReduce, []int{-1, -1, -1, -1, -1, -1, -1}},
		{"ring", coll.AllReduce, []int{0, 1, 0, 0, 0, 0, 0}},
		{"RING,Tree", coll.Broadcast, []int{1, 1, 0, 0, 0, 0, 0}},
		{"^nvls,nvlstree", coll.AllGather, []int{1, 1, 1, 1, 0, 0, 1}},
		{"ring;allreduce:tree,collnetdirect", coll.AllReduce, []int{1, 0, 1, 0, 0, 0, 0}},
		{"ring;allreduce:tree,collnetdirect", coll.AllGather, []int{0, 1, 0, 0, 0, 0, 0}},
		{"allgather:^pat", coll.AllGather, []int{1, 1, 1, 1, 1, 1, 0}},
		{"allgather:^pat", coll.AllReduce, []int{-1, -1, -1, -1, -1, -1, -1}},
		{"AllReduce:NVLSTree;ReduceScatter:ring", coll.ReduceScatter, []int{0, 1, 0, 0, 0, 0, 0}},
	}
	for _, c := range cases {
		got, err := parseEnableList("NCCL_ALGO", c.in, algoNames[:])
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		for a, w := range c.want {
			if got[c.f][a] != w {
				t.Errorf("%q %v: %v = %d, want %d", c.in, c.f, coll.Algo(a), got[c.f][a], w)
			}
		}
	}
	for _, bad := range []string{"rung", "ring;tree", "allreduces:ring", "allreduce:ring,foo"} {
		if _, err := parseEnableList("NCCL_ALGO", bad, algoNames[:]); err == nil || !strings.Contains(err.Error(), "NCCL_ALGO") {
			t.Errorf("%q: error %v, want one naming NCCL_ALGO", bad, err)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	c, err := ConfigFromEnv(env(map[string]string{
		"NCCL_ALGO": "ring", "NCCL_PROTO": "^LL128", "NCCL_MAX_NCHANNELS": "8", "NCCL_MIN_NRINGS": "2",
		"NCCL_NTHREADS": "256", "NCCL_BUFFSIZE": "8388608", "NCCL_NET_OVERHEAD": "500", "NCCL_PAT_ENABLE": "0",
		"NCCL_THREAD_THRESHOLDS": "-1 -1 -1 32 -1 -1",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxNChannels != 8 || c.MinNChannels != 2 || c.NThreads != 256 || c.BuffSize != 8<<20 ||
		*c.NetOverheadNs != 500 || *c.PatEnable || c.Algo != "ring" || c.Proto != "^LL128" {
		t.Errorf("config %+v", c)
	}
	th, _ := c.threadThresholds(8)
	if th[coll.Ring][coll.LL] != 32 || th[coll.Tree][coll.LL] != 8 || th[coll.Ring][coll.Simple] != 64 {
		t.Errorf("thread thresholds %v", th)
	}
	for k, v := range map[string]string{
		"NCCL_MAX_NCHANNELS": "x", "NCCL_BUFFSIZE": "-1", "NCCL_NET_OVERHEAD": "fast", "NCCL_PAT_ENABLE": "yes",
		"NCCL_PROTO": "LL256", "NCCL_THREAD_THRESHOLDS": "1 2 x", "NCCL_MIN_NCHANNELS": "65",
		// Below one protocol grain a slot (coll.MinBuffSize): refused here, not after some rows.
		"NCCL_LL_BUFFSIZE": "127", "NCCL_LL128_BUFFSIZE": "4096", "NCCL_LL128_C2C": "z",
	} {
		_, err := ConfigFromEnv(env(map[string]string{k: v}))
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%q: error %v, want one naming %s", k, v, err, k)
		}
	}
	if _, err := ConfigFromEnv(env(map[string]string{"NCCL_BUFFSIZE": "4095"})); err == nil || !strings.Contains(err.Error(), "want at least 4096 bytes") {
		t.Errorf("NCCL_BUFFSIZE=4095: error %v", err)
	}
	if _, err := ConfigFromEnv(env(map[string]string{"NCCL_LL128_C2C": "z"})); err == nil || strings.Contains(err.Error(), "PAT") {
		t.Errorf("NCCL_LL128_C2C=z: error %v, naming NCCL_PAT_ENABLE's values", err)
	}
	for _, v := range []string{"1e300", "NaN", "-1"} {
		if _, err := ConfigFromEnv(env(map[string]string{"NCCL_NET_OVERHEAD": v})); err == nil || !strings.Contains(err.Error(), "NCCL_NET_OVERHEAD") {
			t.Errorf("NCCL_NET_OVERHEAD=%s: error %v", v, err)
		}
	}
	if _, err := Model(workedExample(), &Config{Version: "2.99"}); err == nil || !strings.Contains(err.Error(), "2.99") {
		t.Errorf("unknown version: %v", err)
	}
}

func TestNCCLAlgoProtoRestrict(t *testing.T) {
	tb, err := Model(workedExample(), &Config{Algo: "allreduce:tree", Proto: "simple"})
	if err != nil {
		t.Fatal(err)
	}
	for a := coll.Algo(0); a < coll.NumAlgos; a++ {
		for p := coll.Proto(0); p < coll.NumProtos; p++ {
			if got, want := tb.Enabled(coll.AllReduce, a, p), a == coll.Tree && p == coll.Simple; got != want {
				t.Errorf("AllReduce %v/%v enabled %v, want %v", a, p, got, want)
			}
		}
	}
	// Latency stays in disabled cells (NCCL prints it).
	if tb.Lat[coll.AllReduce][coll.Ring][coll.LL] == 0 {
		t.Error("disabled Ring/LL lost its latency")
	}
	if !tb.Enabled(coll.Broadcast, coll.Ring, coll.Simple) || tb.Enabled(coll.Broadcast, coll.Ring, coll.LL) {
		t.Error("NCCL_PROTO=simple must apply to every function, NCCL_ALGO=allreduce:… only to AllReduce")
	}
	ch, err := tb.SelectBytes(coll.AllReduce, 4)
	if err != nil || ch.Algo != coll.Tree || ch.Proto != coll.Simple {
		t.Errorf("forced choice %v %v", ch, err)
	}
	// Nothing left for AllGather: a clear error naming the settings.
	tb, _ = Model(workedExample(), &Config{Algo: "tree"})
	if _, err := tb.SelectBytes(coll.AllGather, 1024); err == nil || !strings.Contains(err.Error(), "NCCL_ALGO") {
		t.Errorf("AllGather with NCCL_ALGO=tree: %v", err)
	}
	// ^LL128 (explicit 1 for LL128) bypasses the LL128 auto rule: PCI intra-node.
	c := workedExample()
	c.Graphs[GraphRing].TypeIntra = PathPHB
	tb, _ = Model(c, &Config{})
	if tb.Enabled(coll.AllReduce, coll.Ring, coll.LL128) {
		t.Error("LL128 auto must be off over PHB")
	}
	tb, _ = Model(c, &Config{Proto: "^LL"})
	if !tb.Enabled(coll.AllReduce, coll.Ring, coll.LL128) || tb.Enabled(coll.AllReduce, coll.Ring, coll.LL) {
		t.Error("NCCL_PROTO=^LL must force LL128 on and LL off")
	}
}

func TestVersionedConstants(t *testing.T) {
	k28, _ := ConstantsFor("2.28.9")
	k30, _ := ConstantsFor("2.30")
	if k28.HwLat[hwNet][coll.NVLSTree][coll.Simple] != 14 || k30.HwLat[hwNet][coll.NVLSTree][coll.Simple] != 20.9 {
		t.Error("NVLSTree NET latency: 14 in 2.28, 20.9 from 2.29")
	}
	if k28.PerChMaxRingLL128Bws[ccBlackwell][0] != 73.4 || k30.PerChMaxRingLL128Bws[ccBlackwell][0] != 40 {
		t.Error("Blackwell ring LL128 cap: 2×36.7 in 2.28, 40 in 2.30")
	}
	// The table difference shows: B200 node, ring LL128 busBw capped at 8 channels × cap.
	c := workedExample()
	c.CCMin, c.CCMax = 100, 100
	c.Graphs[GraphRing].NChannels, c.Graphs[GraphRing].BwIntra = 8, 90
	t28, _ := Model(c, &Config{Version: "2.28"})
	t30, _ := Model(c, &Config{Version: "2.30"})
	if !near(float64(t28.Bw[coll.AllReduce][coll.Ring][coll.LL128]), 8*73.4*8/14, 0.01) || !near(float64(t30.Bw[coll.AllReduce][coll.Ring][coll.LL128]), 8*40*8/14.0, 0.01) {
		t.Errorf("ring LL128 bw 2.28 %.2f 2.30 %.2f", t28.Bw[coll.AllReduce][coll.Ring][coll.LL128], t30.Bw[coll.AllReduce][coll.Ring][coll.LL128])
	}
	// Mixed compute capabilities: LL128 auto only from 2.30 (cc ≥ 90).
	c = workedExample()
	c.CCMin, c.CCMax = 90, 100
	t28, _ = Model(c, &Config{Version: "2.28"})
	t30, _ = Model(c, &Config{Version: "2.30"})
	if t28.Enabled(coll.AllReduce, coll.Ring, coll.LL128) || !t30.Enabled(coll.AllReduce, coll.Ring, coll.LL128) {
		t.Error("mixed cc 90/100: LL128 off in 2.28, on in 2.30")
	}
}

func TestSingleRankAndValidate(t *testing.T) {
	c := &Comm{NRanks: 1, NNodes: 1, CCMin: 90, CCMax: 90}
	c.Graphs[GraphRing] = GraphInfo{NChannels: 1, BwIntra: 5000, BwInter: 5000}
	tb, err := Model(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := tb.SelectBytes(coll.AllReduce, 1<<20)
	if err != nil || ch.Algo != coll.Ring || ch.Proto != coll.Simple || ch.TimeUs != 0 {
		t.Errorf("1 rank: %+v %v, want Ring/Simple time 0", ch, err)
	}
	bad := []func(*Comm){
		func(c *Comm) { c.NRanks = 0 },
		func(c *Comm) { c.NNodes = 9 },
		func(c *Comm) { c.CCMin = 0 },
		func(c *Comm) { c.Graphs[GraphRing].NChannels = 0 },
		func(c *Comm) { c.Graphs[GraphTree].BwIntra = -1 },
		func(c *Comm) { c.NChannels = 65 },
	}
	for i, mod := range bad {
		c := workedExample()
		mod(c)
		if _, err := Model(c, nil); err == nil || !strings.Contains(err.Error(), "Comm") {
			t.Errorf("case %d: error %v, want one naming the Comm field", i, err)
		}
	}
	tb, _ = Model(workedExample(), nil)
	if _, err := tb.Select(Call{Func: coll.SendRecv, Count: 4}); err == nil {
		t.Error("SendRecv has no cost-table row: want an error")
	}
}

func TestDeriveNChannels(t *testing.T) {
	c := workedExample()
	if n := DeriveNChannels(c, nil); n != 24 {
		t.Errorf("12 search channels: %d, want 24 (postset twin)", n)
	}
	if n := DeriveNChannels(c, &Config{MaxNChannels: 16}); n != 16 {
		t.Errorf("NCCL_MAX_NCHANNELS=16: %d", n)
	}
	if n := DeriveNChannels(c, &Config{MinNChannels: 32, MaxNChannels: 16}); n != 32 {
		t.Errorf("NCCL_MIN_NCHANNELS=32 NCCL_MAX_NCHANNELS=16: %d, want 32 (the minimum is applied last)", n)
	}
	tb, err := Model(workedExample(), &Config{MaxNChannels: 4})
	if err != nil {
		t.Fatal(err)
	}
	if ch, _ := tb.SelectBytes(coll.AllReduce, 1<<30); tb.NChannels != 4 || ch.ChannelHi != 3 {
		t.Errorf("NCCL_MAX_NCHANNELS=4: NChannels %d, 1 GiB on channels {%d..%d}", tb.NChannels, ch.ChannelLo, ch.ChannelHi)
	}
	c.NNodes, c.NRanks = 2, 16
	c.Graphs[GraphRing].NChannels, c.Graphs[GraphTree].NChannels = 4, 4
	c.Graphs[GraphRing].BwIntra = 48
	if n := DeriveNChannels(c, nil); n != 16 {
		t.Errorf("Hopper multi-node, bwIntra 48, 4 channels: %d, want 16 (×2 postset twin, ×2 Hopper multi-node)", n)
	}
}

// NCCL_MIN_CTAS / NCCL_MAX_CTAS (init.cc envConfigOverride) bound the channel count with
// NCCL_MIN/MAX_NCHANNELS and, unlike those, comm->nvlsChannels (transport/nvls.cc).
func TestMinMaxCTAs(t *testing.T) {
	env := map[string]string{"NCCL_MIN_CTAS": "24", "NCCL_MAX_CTAS": "200"}
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinCTAs != 24 || cfg.MaxCTAs != MaxChannels {
		t.Fatalf("MinCTAs %d MaxCTAs %d, want 24 and %d (capped at MAXCHANNELS)", cfg.MinCTAs, cfg.MaxCTAs, MaxChannels)
	}
	c := workedExample()
	if n := DeriveNChannels(c, cfg); n != 24 {
		t.Errorf("NCCL_MIN_CTAS=24 with 24 channels: %d", n)
	}
	if n := DeriveNChannels(c, &Config{MinCTAs: 32, MinNChannels: 28}); n != 32 {
		t.Errorf("minCTAs 32, NCCL_MIN_NCHANNELS 28: %d, want 32 (the larger minimum)", n)
	}
	if n := DeriveNChannels(c, &Config{MaxCTAs: 8, MaxNChannels: 16}); n != 8 {
		t.Errorf("maxCTAs 8, NCCL_MAX_NCHANNELS 16: %d, want 8 (the smaller maximum)", n)
	}
	c.CCMin = 90
	for _, tc := range []struct {
		cfg  Config
		want int
	}{{Config{}, 16}, {Config{MinCTAs: 24}, 24}, {Config{MaxCTAs: 8}, 8}, {Config{MinNChannels: 24}, 16}} {
		tb, err := Model(c, &tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if tb.NVLSChannels != tc.want {
			t.Errorf("%+v: nvlsChannels %d, want %d", tc.cfg, tb.NVLSChannels, tc.want)
		}
	}
	env = map[string]string{"NCCL_MIN_CTAS": "16", "NCCL_MAX_CTAS": "4"}
	if cfg, err = ConfigFromEnv(func(k string) string { return env[k] }); err != nil || cfg.MinCTAs != 4 {
		t.Errorf("NCCL_MIN_CTAS=16 NCCL_MAX_CTAS=4: %+v %v, want minCTAs lowered to 4", cfg, err)
	}
	env = map[string]string{"NCCL_MIN_CTAS": "0"}
	if _, err := ConfigFromEnv(func(k string) string { return env[k] }); err == nil {
		t.Error("NCCL_MIN_CTAS=0: want an error")
	}
}
