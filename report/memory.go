package report

import (
	"sort"

	"github.com/simccl/simccl/simnet"
)

// Default receive buffers of one connection, NCCL 2.28 (fact sheet §6.1–6.2): LL 8 lines/thread ×
// 512 threads × NCCL_STEPS 8 × 16 B, LL128 120 u64/thread × 640 threads × 8 × 8 B, Simple
// DEFAULT_BUFFSIZE 4 MiB. The P2P transport's receiver allocates all three.
const (
	bufLL     = 524288
	bufLL128  = 4915200
	bufSimple = 4194304
	// ConnBytes is one connection's receive buffers with NCCL's defaults.
	ConnBytes = bufLL + bufLL128 + bufSimple
)

// Memory is the transport buffer memory per rank: eager (NCCL_RUNTIME_CONNECT=0, everything
// connected at init) against lazy (the 2.22+ default: only what the swept collectives used).
type Memory struct {
	ConnBytes int64     `json:"bytes_per_connection"`
	Eager     []string  `json:"eager_algos"`
	Lazy      []string  `json:"lazy_algos"`
	Ranks     []RankMem `json:"ranks"`
	Notes     []string  `json:"notes"`
}

// RankMem is one rank's receive connections and their buffers.
type RankMem struct {
	Rank       int   `json:"rank"`
	EagerConns int   `json:"eager_connections"`
	LazyConns  int   `json:"lazy_connections"`
	EagerBytes int64 `json:"eager_bytes"`
	LazyBytes  int64 `json:"lazy_bytes"`
	P2PConns   int   `json:"p2p_connections"` // send/recv (connIndex 1), in both
	// EagerNet and LazyNet count the connections to ranks on other nodes (NET transport: buffers
	// in GPU memory with GPUDirect RDMA, else in host memory, §6.2).
	EagerNet int `json:"eager_net_connections"`
	LazyNet  int `json:"lazy_net_connections"`
}

// buildMemory counts, for every rank, the receive side of its connections (the receiver allocates
// the buffers, §6.2): rings receive from the previous rank on every channel, trees from the parent
// and each child, PAT from the binomial peers r±2^k; a connection to a peer that the ring already
// uses on the same channel is reused (dedup). Eager connects Ring and Tree (PAT too with one rank
// per node, §6.3); lazy connects only the algorithms used. Send/recv connections (connIndex 1) are
// made on first use in both modes: all-to-all connects every peer, send/recv the previous rank,
// each on the per-peer P2P channels.
func buildMemory(m *simnet.Machine, u used) Memory {
	n := m.NRanks()
	mem := Memory{ConnBytes: ConnBytes, Lazy: []string{}, Notes: []string{}}
	eager := map[string]bool{"Ring": true, "Tree": true}
	if m.Node.NumGPUs == 1 && n > 1 {
		eager["PAT"] = true
	}
	for a := range eager {
		mem.Eager = append(mem.Eager, a)
	}
	for a := range u.algos {
		mem.Lazy = append(mem.Lazy, a)
	}
	sort.Strings(mem.Eager)
	sort.Strings(mem.Lazy)
	_, perPeer := m.Table.P2PChannels()
	if perPeer < 1 {
		perPeer = 1
	}
	ppn := m.Node.NumGPUs
	p2p, p2pNet := 0, 0
	if n > 1 {
		if u.alltoall {
			p2p, p2pNet = (n-1)*perPeer, (n-ppn)*perPeer
		} else if u.sendrecv {
			p2p = perPeer
			if ppn == 1 {
				p2pNet = perPeer
			}
		}
	}
	if p2p > 0 {
		mem.Notes = append(mem.Notes, "send/recv across nodes draws from a shared pool (NCCL_NET_SHARED_BUFFERS); counted here per connection, an upper bound")
	}
	for a := range u.algos {
		if a != "Ring" && a != "Tree" && a != "PAT" {
			mem.Notes = append(mem.Notes, a+" buffers are not counted (not simulated)")
		}
	}
	nch := len(m.Rings)
	prev := make([][]int, nch) // [channel][rank] previous rank of the ring
	for c, ring := range m.Rings {
		prev[c] = make([]int, n)
		for i, r := range ring {
			prev[c][ring[(i+1)%len(ring)]] = r
		}
	}
	count := func(r int, algos map[string]bool) (int, int) {
		type key struct{ ch, peer int }
		seen := map[key]bool{}
		for c := 0; c < nch; c++ {
			if algos["Ring"] && n > 1 {
				seen[key{c, prev[c][r]}] = true
			}
			if algos["Tree"] && c < len(m.Trees) {
				t := m.Trees[c]
				if r < len(t.Up) && t.Up[r] >= 0 {
					seen[key{c, t.Up[r]}] = true
				}
				if r < len(t.Down) {
					for _, ch := range t.Down[r] {
						seen[key{c, ch}] = true
					}
				}
			}
			if algos["PAT"] {
				for d := 1; d < n; d *= 2 {
					seen[key{c, (r + d) % n}] = true
					seen[key{c, (r - d%n + n) % n}] = true
				}
			}
		}
		net := 0
		for k := range seen {
			if k.peer/ppn != r/ppn {
				net++
			}
		}
		return len(seen), net
	}
	for r := 0; r < n; r++ {
		e, en := count(r, eager)
		l, ln := count(r, u.algos)
		mem.Ranks = append(mem.Ranks, RankMem{Rank: r, EagerConns: e + p2p, LazyConns: l + p2p, P2PConns: p2p,
			EagerBytes: int64(e+p2p) * ConnBytes, LazyBytes: int64(l+p2p) * ConnBytes, EagerNet: en + p2pNet, LazyNet: ln + p2pNet})
	}
	return mem
}
