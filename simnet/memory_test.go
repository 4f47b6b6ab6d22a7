package simnet

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/tuning"
)

func memMachine(t *testing.T, name string, data []byte, nodes int, collNet bool, cfg *tuning.Config) (*Machine, *MemSetup) {
	t.Helper()
	m, err := MachineFromXML(data, name, nodes, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewMemSetup(data, name, m, collNet)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

func sweepCalls(funcs []coll.Func, lo, hi int64) []MemCall {
	var calls []MemCall
	for _, f := range funcs {
		for b := lo; b <= hi; b *= 2 {
			calls = append(calls, MemCall{Func: f, Bytes: b})
		}
	}
	return calls
}

func kindOfReport(r RankMemory, kind string) KindMem {
	for _, k := range r.Kinds {
		if k.Kind == kind {
			return k
		}
	}
	return KindMem{}
}

// ncclLogFacts is what an NCCL 2.28 INFO log says about one rank's connections.
type ncclLogFacts struct {
	collChannels int
	p2pChunk     int64 // "P2P Chunksize set to N"
	p2pChannels  int   // "N p2p channels, M p2p channels per peer"
	p2pPerPeer   int
	sends        map[string]int // transport ("P2P", "SHM", "NET") → send connections logged
	rings, trees bool           // "Connected all rings" / "Connected all trees"
	pat          bool           // "Connected binomial trees"
}

// readNCCLLog reads the connection lines of an NCCL INFO log: NCCL prints one "Channel cc/i :
// a -> b via T" line per send connector it sets up (NET prints [send] and [receive] lines; the
// SHM line has no "/connIndex").
func readNCCLLog(t *testing.T, path string) ncclLogFacts {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	facts := ncclLogFacts{sends: map[string]int{}}
	chRe := regexp.MustCompile(`NCCL INFO (\d+) coll channels, .* (\d+) p2p channels, (\d+) p2p channels per peer`)
	chunkRe := regexp.MustCompile(`NCCL INFO P2P Chunksize set to (\d+)`)
	viaRe := regexp.MustCompile(`NCCL INFO Channel \d+(/\d+)? : \d+\[\d+\] -> \d+\[\d+\] (\[send\] |\[receive\] )?via (P2P|SHM|NET)/`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := chRe.FindStringSubmatch(line); m != nil {
			facts.collChannels, _ = strconv.Atoi(m[1])
			facts.p2pChannels, _ = strconv.Atoi(m[2])
			facts.p2pPerPeer, _ = strconv.Atoi(m[3])
		}
		if m := chunkRe.FindStringSubmatch(line); m != nil {
			facts.p2pChunk, _ = strconv.ParseInt(m[1], 10, 64)
		}
		if m := viaRe.FindStringSubmatch(line); m != nil && m[2] != "[receive] " {
			facts.sends[m[3]]++
		}
		facts.rings = facts.rings || strings.Contains(line, "Connected all rings")
		facts.trees = facts.trees || strings.Contains(line, "Connected all trees")
		facts.pat = facts.pat || strings.Contains(line, "Connected binomial trees")
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return facts
}

// TestMemoryMatchesNCCLLogs checks lazy connection against NCCL 2.28.9's own logs of the same
// workload (the five collectives from 8 B to 1 GiB) on the 2×H200 machine and its variants:
// the algorithms connected, the number of connections and their transport.
func TestMemoryMatchesNCCLLogs(t *testing.T) {
	dir := filepath.Join("..", "testdata", "nccl", "h200x2")
	cases := []struct {
		name  string
		topo  string
		log   string
		nodes int
	}{
		{"real machine", "real_topo.xml", "real.677.log", 1},
		{"nvswitch", "nvswitch_topo.xml", "nvswitch.869.log", 1},
		{"nvl4", "nvl4_topo.xml", "nvl4.741.log", 1},
		{"nvl0 (no NVLink: SHM)", "nvl0_topo.xml", "nvl0.803.log", 1},
		{"two hosts (NET, PAT)", "fakehosts_topo.xml", "fakehosts.931.log", 2},
	}
	funcs := []coll.Func{coll.AllReduce, coll.Broadcast, coll.Reduce, coll.AllGather, coll.ReduceScatter}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, c.topo))
			if err != nil {
				t.Fatal(err)
			}
			// NCCL's dump keeps the zero-count NVLink elements of the nvl0 variant; the simulator's
			// node model refuses a 0 GB/s link, so they are dropped (NCCL used none either).
			data = regexp.MustCompile(`<nvlink [^>]*count="0"[^>]*/>`).ReplaceAll(data, nil)
			facts := readNCCLLog(t, filepath.Join(dir, c.log))
			m, s := memMachine(t, c.topo, data, c.nodes, false, nil)
			if len(m.Rings) != facts.collChannels {
				t.Fatalf("%d channels, NCCL's log says %d", len(m.Rings), facts.collChannels)
			}
			rep, err := m.Memory(s, sweepCalls(funcs, 8, 1<<30), coll.Float32, false)
			if err != nil {
				t.Fatal(err)
			}
			if b := rep.Buffers; b.P2PChunk != facts.p2pChunk || b.P2PChannels != facts.p2pChannels || b.P2PPerPeer != facts.p2pPerPeer {
				t.Errorf("p2p chunk %d, %d channels, %d per peer; NCCL %d, %d, %d", b.P2PChunk, b.P2PChannels, b.P2PPerPeer, facts.p2pChunk, facts.p2pChannels, facts.p2pPerPeer)
			}
			if got := slices.Contains(rep.Connected, "Ring"); got != facts.rings {
				t.Errorf("Ring connected %v, NCCL %v (%v)", got, facts.rings, rep.Connected)
			}
			if got := slices.Contains(rep.Connected, "Tree"); got != facts.trees {
				t.Errorf("Tree connected %v, NCCL %v (%v)", got, facts.trees, rep.Connected)
			}
			if got := slices.Contains(rep.Connected, "PAT"); got != facts.pat {
				t.Errorf("PAT connected %v, NCCL %v (%v)", got, facts.pat, rep.Connected)
			}
			r0 := rep.PerRank[0]
			total := 0
			for kind, sends := range facts.sends {
				k := kindOfReport(r0, kind)
				// Each logged send has its receive twin from the other rank (2 ranks).
				if k.Conns != 2*sends {
					t.Errorf("%s: %d connections, NCCL's log shows %d sends (want %d)", kind, k.Conns, sends, 2*sends)
				}
				total += 2 * sends
			}
			if r0.Conns != total {
				t.Errorf("%d connections in all (%+v), NCCL %d (%v)", r0.Conns, r0.Kinds, total, facts.sends)
			}
		})
	}
}

func TestMemoryConnectionSizes(t *testing.T) {
	m, err := HGXH100(1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	G := m.Node.NumGPUs
	read := make([][]bool, G)
	for i := range read {
		read[i] = make([]bool, G)
		for j := range read[i] {
			read[i][j] = i != j
		}
	}
	small := m.Table.Config
	small.BuffSize = 1 << 20
	smallTable := *m.Table
	smallTable.Config = small
	for _, c := range []struct {
		name       string
		s          *MemSetup
		kind       string
		send       bool
		idx        int
		gpu, host  int64
		llBuf, sim int64
	}{
		// 524288 + 4915200 + 4194304 + one page → 10 MiB at 2 MiB granularity; sender: ncclSendMem → 2 MiB.
		{"P2P recv", &MemSetup{}, KindP2P, false, 0, 10 << 20, 0, 524288, 4 << 20},
		{"P2P send", &MemSetup{}, KindP2P, true, 0, 2 << 20, 0, 0, 0},
		// P2P read: Simple on the sender.
		{"P2P read recv", &MemSetup{Read: read}, KindP2P, false, 0, 6 << 20, 0, 524288, 0},
		{"P2P read send", &MemSetup{Read: read}, KindP2P, true, 0, 6 << 20, 0, 0, 4 << 20},
		// NCCL_BUFFSIZE=1M: 524288 + 4915200 + 1048576 + page → 8 MiB.
		{"P2P recv BUFFSIZE=1M", &MemSetup{Table: &smallTable}, KindP2P, false, 0, 8 << 20, 0, 524288, 1 << 20},
		{"SHM recv", &MemSetup{}, KindSHM, false, 0, 0, 9633792 + 4096, 524288, 4 << 20},
		{"NET send GDR", &MemSetup{}, KindNET, true, 0, 10 << 20, 524288 + 4096, 524288, 4 << 20},
		{"NET recv GDR", &MemSetup{}, KindNET, false, 0, 10 << 20, 4096, 524288, 4 << 20},
		{"NET recv no GDR", &MemSetup{GDR: make([]bool, G)}, KindNET, false, 0, 0, 9633792 + 4096, 524288, 4 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.s.Table == nil {
				c.s.Table = m.Table
			}
			mm := &memModel{m: m, s: c.s, t: c.s.Table, G: G, n: G, nch: len(m.Rings)}
			mm.buf = [coll.NumProtos]int64{524288, 4915200, 4 << 20}
			if c.s.Table.Config.BuffSize > 0 {
				mm.buf[coll.Simple] = c.s.Table.Config.BuffSize
			}
			a := mm.connAlloc(c.kind, 0, 1, c.send, c.idx)
			if a.gpu != c.gpu || a.host != c.host || a.proto[coll.LL] != c.llBuf || a.proto[coll.Simple] != c.sim {
				t.Errorf("gpu %d host %d LL %d Simple %d; want %d %d %d %d", a.gpu, a.host, a.proto[coll.LL], a.proto[coll.Simple], c.gpu, c.host, c.llBuf, c.sim)
			}
			var sum int64
			for _, b := range a.proto {
				sum += b
			}
			if sum+a.ctrl != a.gpu+a.host {
				t.Errorf("protocols %d + ctrl %d != gpu+host %d", sum, a.ctrl, a.gpu+a.host)
			}
		})
	}
}

func TestMemoryNVLSAndEager(t *testing.T) {
	name, data := topos.Default() // DGX H100: NVSwitch, sm90
	for _, nodes := range []int{1, 4} {
		m, s := memMachine(t, name, data, nodes, false, nil)
		if s.NVLS == nil {
			t.Fatalf("%d nodes: no NVLS graph on %s", nodes, name)
		}
		calls := sweepCalls([]coll.Func{coll.AllReduce}, 8, 1<<30)
		lazy, err := m.Memory(s, calls, coll.Float32, false)
		if err != nil {
			t.Fatal(err)
		}
		eager, err := m.Memory(s, calls, coll.Float32, true)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(eager.Connected, "NVLS") || (nodes > 1) != slices.Contains(eager.Connected, "NVLSTree") {
			t.Errorf("%d nodes: eager connects %v", nodes, eager.Connected)
		}
		// The NVLS buffer: nvlsChannels × 2 × 128 KiB × NCCL_STEPS × nHeads (NCCL 2.28
		// ncclNvlsBufferSetup).
		want := int64(s.Table.NVLSChannels) * 2 * (128 << 10) * 8 * int64(s.NVLS.NChannels)
		if k := kindOfReport(eager.PerRank[0], KindNVLS); k.GPU != roundUp(want, 2<<20) {
			t.Errorf("%d nodes: NVLS %d bytes, want %d (%d channels, %d heads)", nodes, k.GPU, want, s.Table.NVLSChannels, s.NVLS.NChannels)
		}
		for r := range lazy.PerRank {
			if lazy.PerRank[r].GPU > eager.PerRank[r].GPU {
				t.Fatalf("%d nodes rank %d: lazy %d > eager %d bytes", nodes, r, lazy.PerRank[r].GPU, eager.PerRank[r].GPU)
			}
		}
		for _, p := range lazy.Picks {
			if !slices.Contains(lazy.Connected, p.Algo) {
				t.Errorf("%d nodes: %s %d picks %s, not connected (%v)", nodes, p.Coll, p.Bytes, p.Algo, lazy.Connected)
			}
		}
		if nodes > 1 && kindOfReport(eager.PerRank[0], KindNET).Conns == 0 {
			t.Errorf("%d nodes: no NET connection", nodes)
		}
		if eager.GPU.Min > eager.GPU.Median || eager.GPU.Median > eager.GPU.Max {
			t.Errorf("stat %+v", eager.GPU)
		}
		var sum int64
		for _, ap := range eager.ByAlgoProto {
			sum += ap.Bytes
		}
		if mr := eager.PerRank[eager.MaxRank]; sum != mr.GPU+mr.Host {
			t.Errorf("breakdown %d != rank %d total %d", sum, eager.MaxRank, mr.GPU+mr.Host)
		}
		t.Logf("%s × %d: lazy %v %d MiB, eager %v %d MiB (median GPU)", name, nodes, lazy.Connected, lazy.GPU.Median>>20, eager.Connected, eager.GPU.Median>>20)
	}
}

func TestMemorySendRecvAndCollNet(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "shared", "topos", "h800-8gpu-nvswitch-8x400g-ib.xml"))
	if err != nil {
		t.Skip(err)
	}
	m, s := memMachine(t, "h800", data, 2, true, nil)
	if s.CollNetChain == nil && s.CollNetDirect == nil {
		t.Fatal("no CollNet graph with coll=1 NICs")
	}
	rep, err := m.Memory(s, []MemCall{{coll.AllToAll, 1 << 20}}, coll.Float32, true)
	if err != nil {
		t.Fatal(err)
	}
	r0 := rep.PerRank[0]
	if kindOfReport(r0, KindCollNet).Conns == 0 && kindOfReport(rep.PerRank[1], KindCollNet).Conns == 0 {
		t.Errorf("no CollNet connection: %+v", r0.Kinds)
	}
	// All-to-all connects every other rank both ways on connIndex 1: 15 peers here.
	lazy, err := m.Memory(s, []MemCall{{coll.AllToAll, 1 << 20}}, coll.Float32, false)
	if err != nil {
		t.Fatal(err)
	}
	l0 := lazy.PerRank[0]
	if got := len(lazy.Connected); got != 1 || lazy.Connected[0] != AlgoSendRecv {
		t.Errorf("lazy all-to-all connects %v", lazy.Connected)
	}
	if kindOfReport(l0, KindP2P).Conns < 2*7 || kindOfReport(l0, KindNET).Conns < 2*8 {
		t.Errorf("all-to-all connections %+v", l0.Kinds)
	}
	if _, err := m.Memory(s, []MemCall{{coll.AllReduce, -1}}, coll.Float32, false); err == nil {
		t.Error("negative size accepted")
	}
}
