package tuning

import (
	"fmt"

	"github.com/simccl/simccl/coll"
)

// PeerKind is how a send/recv peer is reached (NCCL 2.28 addP2pToPlan).
type PeerKind int

const (
	// PeerSelf: the peer is the rank itself (a copy; never LL).
	PeerSelf PeerKind = iota
	// PeerIntra: P2P or SHM inside the node (LL buffers exist).
	PeerIntra
	// PeerNet: over the network (LL only with NCCL_ALLOC_P2P_NET_LL_BUFFERS=1).
	PeerNet
)

func (k PeerKind) String() string {
	switch k {
	case PeerSelf:
		return "self"
	case PeerIntra:
		return "intra"
	case PeerNet:
		return "net"
	}
	return fmt.Sprintf("PeerKind(%d)", int(k))
}

// P2PChoice is NCCL's plan for one direction of a send/recv (NCCL 2.28 enqueue.cc addP2pToPlan).
type P2PChoice struct {
	Proto     coll.Proto
	NChannels int   // channels this direction is split over
	StepSize  int64 // bytes per NCCL_STEPS slot
	ChunkSize int64 // bytes per chunk (payload ×2 for LL lines)
}

// P2PChannels returns (p2pnChannels, p2pnChannelsPerPeer) of NCCL 2.28 paths.cc: the communicator
// values when set in Comm, else p2pnChannels = pow2Up(NChannels) and per peer all of them when
// every peer is over NVLink or there is no peer (one rank), 2 otherwise; NCCL_MIN/MAX_P2P_NCHANNELS (Config) bound p2pnChannels
// and the channels per peer follow it down. Across nodes the channels per peer are also at most
// those of a network peer (netPeerChannels), then rounded up to a power of two.
func (t *Table) P2PChannels() (total, perPeer int) {
	total = t.Comm.P2PNChannels
	if total <= 0 {
		total = pow2Up(min(max(t.NChannels, 1), MaxChannels))
	}
	// NCCL_MIN/MAX_P2P_NCHANNELS bound the count before NCCL rounds it up to a power of two;
	// bounding the rounded count and rounding again gives the same result.
	if hi := t.Config.MaxP2PNChannels; hi > 0 {
		total = pow2Up(min(total, hi))
	}
	if lo := t.Config.MinP2PNChannels; lo > 0 {
		total = pow2Up(min(max(total, lo), MaxChannels))
	}
	perPeer = t.Comm.P2PChannelsPerPeer
	if perPeer <= 0 {
		perPeer = 2
		// NCCL takes the smallest per-peer figure over the other ranks; the rank itself is no
		// peer, so a one-rank communicator has none to lower it and keeps every p2p channel for
		// its copy to itself (NCCL 2.28 on one H200: "64 p2p channels, 64 p2p channels per
		// peer", testdata/nccl/h200x1/onerank-2026-11-29-init.log).
		if (t.Comm.AllNVLink && t.Comm.NNodes == 1) || t.Comm.NRanks == 1 {
			perPeer = total
		}
	}
	if t.Comm.NNodes > 1 {
		perPeer = min(pow2Up(min(perPeer, t.netPeerChannels(total))), total)
		// 2.30: halved while the channels per peer times ⌈maxP2pPeers / 8⌉ (the ranks, NCCL's
		// default) pass p2pnChannels (the fact sheet's 2.30.7 paths.cc; not measured here).
		for t.K.PeersHalving && perPeer > 1 && perPeer*((t.Comm.NRanks+7)/8) > total {
			perPeer /= 2
		}
	}
	return total, min(perPeer, total)
}

// netPeerChannels is NCCL's channel count for a peer on another node, given p2pnChannels total
// (paths.cc ncclTopoGetNchannels, remote branch): NCCL_NCHANNELS_PER_NET_PEER where set; else
// from 2.29 max(NICs, ⌈NIC bandwidth / NCCL_P2P_PER_CHANNEL_NET_BW⌉), both from
// graph.System.LocalNetCountByBw (NCCL truncates the bandwidth to whole GB/s; 2 without a NIC);
// up to 2.28, 2 halved while it times the ranks passes 4 × total ("avoid 8+ operations a
// channel"), at least the NICs. Measured (testdata/nccl/h200x2/netpeerscan-2026-11-30: ranks on
// separate hosts over NET/Socket, the NIC's speed set by a topology file): NCCL 2.28.9 gives 2 per
// peer at 100, 200, 400 and 800 Gb/s with 2, 4 and 8 ranks on 32 p2p channels, 1 with 8 ranks on
// 2 p2p channels, 2 on 4; NCCL 2.29.7 gives 1, 2, 4 and 4 at 100, 200, 400 and 800 Gb/s (the path
// capped at PCIe's 48 GB/s), 2 and 4 with two NICs of 100 and 400 Gb/s, and no halving with the
// ranks (2 and 4 on 2 and 4 p2p channels, which cap it); NCCL_NCHANNELS_PER_NET_PEER=8 gives 8 on
// both (2.22.3 as 2.28.9). NCCL 2.30 then halves the channels
// per peer with the peers a rank may talk to (P2PChannels; Constants.PeersHalving).
func (t *Table) netPeerChannels(total int) int {
	if v := t.Config.NChannelsPerNetPeer; v > 0 {
		return v
	}
	nics := t.Comm.NetPeerNICs
	if t.K.NetPeerByBw {
		if nics <= 0 {
			return 2
		}
		per := t.Config.P2PPerChannelNetBw
		if per <= 0 {
			per = p2pPerChannelNetBw
		}
		return max(nics, int(ceilDiv(int64(t.Comm.NetPeerBw), int64(per))))
	}
	n := 2
	for n*t.Comm.NRanks > total*4 && n > 1 {
		n /= 2
	}
	return max(nics, n)
}

// p2pPerChannelNetBw is NCCL_P2P_PER_CHANNEL_NET_BW's default, GB/s (NCCL 2.29+ paths.cc).
const p2pPerChannelNetBw = 14

func pow2Up(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// P2PChunkSize is comm->p2pChunkSize (NCCL 2.28 init.cc): NCCL_P2P_NET_CHUNKSIZE (128 KiB, ×2 on ARM with
// cc ≥ 100) across nodes, NCCL_P2P_NVL_CHUNKSIZE (512 KiB) when every peer is over NVLink,
// NCCL_P2P_PCI_CHUNKSIZE (128 KiB) otherwise; capped at the Simple buffer / NCCL_STEPS.
func (t *Table) P2PChunkSize() int64 {
	cfg, c := &t.Config, &t.Comm
	var cs int64
	switch {
	case c.NNodes > 1:
		cs = 128 << 10
		if cfg.P2PNetChunkSize > 0 {
			cs = cfg.P2PNetChunkSize
		} else if c.CPUArch == "arm" && c.CCMin >= 100 {
			cs *= 2
		}
	case c.AllNVLink:
		cs = 512 << 10
		if cfg.P2PNVLChunkSize > 0 {
			cs = cfg.P2PNVLChunkSize
		}
	default:
		cs = 128 << 10
		if cfg.P2PPCIChunkSize > 0 {
			cs = cfg.P2PPCIChunkSize
		}
	}
	return min(cs, cfg.buffSize(coll.Simple)/ncclSteps)
}

// P2P plans one direction of a send or receive of nBytes to a peer of the given kind, alone in
// its round (addP2pToPlan). nRanks bounds how many peers share the channels (nChannelsMin of
// scheduleP2pTasksToPlan).
func (t *Table) P2P(nBytes int64, peer PeerKind) (P2PChoice, error) {
	if nBytes < 0 {
		return P2PChoice{}, fmt.Errorf("tuning: P2P of %d bytes", nBytes)
	}
	total, perPeer := t.P2PChannels()
	nMax := perPeer
	nMin := nMax
	for nMin*t.Comm.NRanks > total && nMin > 1 {
		nMin /= 2
	}
	thr := int64(p2pLLThreshold)
	if t.Config.P2PLLThreshold > 0 {
		thr = t.Config.P2PLLThreshold
	}
	hasLL := peer == PeerIntra || (peer == PeerNet && t.Config.AllocP2PNetLLBuffers)
	ch := P2PChoice{Proto: coll.Simple}
	if hasLL && nBytes <= int64(nMax)*thr {
		ch.Proto = coll.LL
	}
	if ch.Proto == coll.LL {
		ch.StepSize = t.Config.buffSize(coll.LL) / ncclSteps
	} else {
		ch.StepSize = t.P2PChunkSize()
	}
	ch.ChunkSize = ch.StepSize
	if peer == PeerNet {
		if ch.Proto == coll.Simple && nBytes < ch.StepSize {
			ch.ChunkSize /= 4
		} else if nBytes < 8*ch.StepSize {
			ch.ChunkSize /= 2
		}
	}
	switch {
	case nBytes == 0:
		ch.NChannels = 1
	default:
		minPart, maxPart := ch.StepSize/8, ch.StepSize*32
		if t.Comm.NNodes > 1 {
			minPart, maxPart = ch.StepSize/2, ch.StepSize
		}
		minPart = max(minPart, 1)
		n := int(min(int64(nMin), ceilDiv(nBytes, minPart)))
		part := max(minPart, ceilDiv(nBytes, int64(n)))
		for part > maxPart && n <= nMax/2 {
			n *= 2
			part = ceilDiv(nBytes, int64(n))
		}
		ch.NChannels = n
	}
	return ch, nil
}
