package simnet

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/tuning"
)

// Router gives the links a message from rank src to rank dst on channel ch crosses. Cluster is
// the Router of real runs; tests use small hand-made ones.
type Router interface {
	NumRanks() int
	Route(src, dst, ch int, buf []LinkID) ([]LinkID, LinkClass)
}

// P2PRouter is a Router whose point-to-point connections (send/recv, connIndex 1) may take
// another route than a collective's between the same ranks (Cluster.RouteP2P: each end's own
// NIC, PXN).
type P2PRouter interface {
	RouteP2P(src, dst, ch int, buf []LinkID) ([]LinkID, LinkClass)
}

// routeP2P is r's route for a point-to-point message: RouteP2P where r has one, else Route.
func routeP2P(r Router, src, dst, ch int, buf []LinkID) ([]LinkID, LinkClass) {
	if pr, ok := r.(P2PRouter); ok {
		return pr.RouteP2P(src, dst, ch, buf)
	}
	return r.Route(src, dst, ch, buf)
}

// Timing holds the time constants the executor applies. Every value comes from NCCL's own cost
// model (tuning.cc, the ncclTunerConstants of the chosen release); none is fitted to a
// measurement.
type Timing struct {
	// Launch is the fixed cost of one collective before its first step can move data: the CUDA
	// kernel launch (KernelLaunch) plus NCCL's base latency of the (algorithm, protocol) (baseLat
	// of ncclTunerConstants, the device-side fixed cost of NCCL's model).
	Launch Time
	// StepLat[class][proto] is added to every message between its last byte leaving the sender
	// and the receiver seeing it: NCCL's per-step hardware latency of the algorithm for the route's
	// class (hwLat of ncclTunerConstants, NVLINK/PCI/NET × LL/LL128/Simple). With NCCL_STEPS slots in
	// flight it is hidden by pipelining once messages are large enough, as on the real machine.
	StepLat [3][coll.NumProtos]Time
	// PerFlowCap caps one message's rate (0: none) per protocol; unused by default (links alone
	// limit the rate).
	PerFlowCap [coll.NumProtos]Rate
	// CTARate is the data rate of one channel's thread block (GPUModel.CTARate; 0: not modelled,
	// steps cost only their links). A channel's lanes (thread groups: p2p sends and receives,
	// the tree's up and down halves) share it equally. With it, every message of a step moves at
	// most at its lane's rate, and a step that sends nothing but copies or reduces data into its
	// destination (Recv, RecvReduceCopy, Copy, Reduce) holds its lane for its bytes at that rate
	// before it completes, so the channel's next primitive waits for it as in NCCL's kernels.
	CTARate Rate
	// CTAMem, where non-zero for a step's protocol (and CTARate is), replaces CTARate by the
	// memory-traffic model (GPUModel.Mem): the step holds its lane for ctaTraffic of its
	// primitive — bytes loaded plus bytes stored, locally and into peers' buffers — at CTAMem over
	// the program's lanes; its messages move no faster than that, and a step that only copies or
	// reduces locally takes that time on no link.
	CTAMem [coll.NumProtos]Rate
	// CTACopy, where set with CTAMem, is the rate of traffic of a step that copies its source
	// straight into its destination (coll.Copy: a rank's transfer to itself; no FIFO, no flag
	// between two CTAs), GPUModel.Copy: such a step holds its lane for its traffic at CTACopy
	// where every other primitive takes CTAMem (copyScale).
	CTACopy Rate
	// MemTraffic, where set with CTACopy, is the traffic (loads plus stores) one GPU's memory
	// carries per second (twice GPUMemory.Copy): a rank whose channels' copies to self could
	// together ask more of it (channels × CTACopy above it) has them share it, as the 64
	// channels of a one-rank all-to-all do (selfMem).
	MemTraffic Rate
	// Memcpy, where set, is the rate at which a one-rank collective's copy moves its bytes:
	// NCCL runs such a call as a device-to-device cudaMemcpyAsync, no kernel of its own
	// (GPUMemory.Copy). Its copy step then takes no CTA, and Launch is the copy's fixed time
	// (MemcpyLat).
	Memcpy Rate
	// ChannelSkew, where set, starts channel c's first steps c × ChannelSkew after the launch
	// and after each kernel start (GPUModel.ChannelSkew): the steps of rank programs only, a
	// switch forwarding what arrives. Machine.Timing sets it for Ring calls on one node.
	ChannelSkew Time
	// Slice, where set (with Fence), is what each Simple primitive of a ring all-gather,
	// reduce-scatter or all-reduce costs its CTA per slice beyond its bytes, fence included
	// (GPUModel.Slice, sliceCosted): a step that sends completes that long after its messages
	// have left, one that sends nothing that long after its local work. Other steps keep Fence.
	Slice SliceCost
	// Fence is what a Simple step costs its CTA after its last store into a peer's buffer
	// (GPUModel.Fence; 0: none, and it applies only where CTARate is set): the memory fence NCCL's
	// Simple protocol runs before posting the step's tail counter. The sending step completes
	// Fence after its messages have left; their arrival is unchanged, NCCL's per-step latency
	// (StepLat) being the whole time from the last store to the receiver seeing the tail, fence
	// included.
	Fence Time
	// NetStage, where the CTA is modelled, sends a rank's messages into the network in two
	// stages, as NCCL's network transport does. The channel's CTA writes the step into the
	// connection's buffer (its share of the step's traffic at the CTA's rate, on no link of the
	// route) and posts it; the proxy thread then hands it to the NIC, which reads it from there
	// and carries it over the route without the CTA, one message of a connection after another
	// (a queue pair sends its work requests in order). The CTA goes on to its next step once it
	// has written this one and passed its fence or slice cost; the receiver sees the message
	// after the NIC's transfer and the step latency, as before. Without it a network message
	// moves as an NVLink store does, the CTA pushing it over the whole route: the CTA's lane is
	// held for the network's time, and the NIC starts on a step before the CTA has written it.
	NetStage bool
	// ChannelCap is the data rate one channel of the algorithm reaches at most (0: none). It caps
	// the messages through which a channel's data enters it — each rank's sends to its node's
	// switch on lane 0 (the NVLS scatter carries every byte of the channel once) — at that rate of
	// payload, so that the channel moves its data at most at that rate. Machine.timing sets it for
	// NVLSTree from NCCL's NVLSTree ceiling (perChMaxNVLSTreeBws).
	ChannelCap Rate
	// SwitchEff is the fraction of a link's bandwidth that messages to and from a switch endpoint
	// (NVLS multimem loads and stores through the NVSwitch) reach: their wire bytes are their bytes
	// divided by it (0: 1). Machine.Timing takes NCCL's nvlsEfficiency of the GPU generation.
	SwitchEff float64
	// LineStream lets LL and LL128 receives overlap the message they receive, as NCCL's do: those
	// protocols carry a flag in every line (LL: 8 bytes of data and a 4-byte flag per 16-byte
	// line pair; LL128: 120 bytes and an 8-byte flag per 128-byte line; NCCL 2.28 prims_ll.h,
	// prims_ll128.h), and each receiving warp polls the flags of its own lines and goes on with
	// them (reduces, forwards, stores) as soon as they land, without waiting for the rest of the
	// step. A step receiving such a message over NVLink or PCI starts when the message's first
	// lines arrive (its start plus the route and step latency) instead of its last; what it
	// sends or writes cannot be done before the lines it is made of have arrived, so its
	// messages leave, and its local work ends, no earlier than the received message's arrival.
	// Sends into the network stay whole: NCCL's proxy posts a step to the NIC only once the GPU
	// has written all of it, so a streaming step's messages into the network start once what it
	// streams in has arrived. The receiver of a network message streams it like any other: the
	// NIC writes the lines with their flags into the receiving buffer and the GPU polls those
	// flags, not the proxy's tail counter (which only Simple waits on). Until 2026-11-29 a
	// network receive started once its message had arrived whole. Only this
	// executor (Simulate) applies it; the compact ring, tree and point-to-point executors stay
	// store-and-forward, so with it on they no longer agree with the schedule replay.
	LineStream bool
}

// SwitchRouter is a Router that also places switch endpoints (Schedule.Switches): the links
// between a rank and the NVSwitch of a node. Simulate needs one for schedules with switches.
type SwitchRouter interface {
	Router
	RouteSwitch(rank, node int, up bool, buf []LinkID) ([]LinkID, error)
}

// KernelLaunch is the device-side cost of starting one collective's kernel after the previous
// kernel on its stream, which every call pays before its first step on top of NCCL's base latency.
// It is the per-kernel cost measured when the host is out of the way, a CUDA graph replay of
// back-to-back kernels on one H100 SXM (bench/gpuprobe/results/h100-sxm-2026-11-25.csv: 0.96 µs,
// GraphLaunch). The host's own enqueue time (HostEnqueue) is not part of it: with one process per
// GPU the host enqueues call k+1 while call k runs, so it bounds a call from below (Machine.Run)
// instead of adding to it. Measured with NCCL 2.28.9 on 4 H200 (testdata/nccl/h200x4/smallmsg.csv,
// one process per GPU, nccl-tests' loop): a small Ring/LL all-reduce takes 9.2–9.6 µs a call, below
// NCCL's own estimate of 10.2 (baseLat 6.6 + 6 steps × 0.6), so nothing larger than this is added.
// (Until 2026-11-28 this was an assumed 3 µs, which put that call at 13.2.)
const KernelLaunch = GraphLaunch

// GraphSaving is how much less of the GPU's time a call takes when its kernel is replayed from a
// CUDA graph rather than launched on a stream ahead of the GPU (LaunchGraph: the call's
// KernelLaunch less this). Measured with NCCL 2.28 on 2 H200, one process per GPU, two leases
// (testdata/nccl/enqueuescan.sh, testdata/nccl/h200x2/enqueuescan-2026-11-29*.csv): the same loop
// of calls enqueued behind a spin kernel (the stream's launches, host out of the way) and replayed
// from a graph, the 7 collectives at 8 B–256 KiB, 448 pairs of rows; the median of their difference
// is 0.59 and 0.62 µs on the two leases (quartiles −0.5 to 1.7).
const GraphSaving = 600 * Nanosecond

// GraphPerNodeCall is what each call costs the GPU beyond a graph replay's when one process
// captures and replays the graphs of both GPUs of a node (LaunchGraphPerNode; nccl_perf.cu GRAPH=1
// with one process, one graph per GPU's stream holding the whole timed loop, as nccl-tests -g 2 -G).
// Measured with NCCL 2.28.9 on 2 H200, three leases (testdata/nccl/enqueuescan.sh b, c and d: the
// same loop replayed from graphs by one process for both GPUs and by a process per GPU, the 7
// collectives at 8 B–1 MiB and, on lease d, to 4 MiB; 784 pairs of rows, the process per GPU's
// slower rank): the median of the one process's time less the process per GPU's is 2.80 µs
// (quartiles 2.28–4.02; per lease 2.73, 3.45, 2.51), the same below and from 1 MiB (2.78, 2.92;
// `python3 testdata/nccl/graph_sp_mp.py`). With streams the two set-ups differ by 0–1.3 µs at
// ≥ 4 MiB (repeatscan), so this is the graphs', not the transfers'. A fourth lease (graphscan,
// 8 B–1 GiB: 4.09 µs) was kept apart to check it (BENCHMARKS.md, stop 52). Only 2 GPUs a process
// were measured; more GPUs are charged the same.
const GraphPerNodeCall = 2800 * Nanosecond

// HostEnqueue is NCCL's host time to enqueue one collective call on one communicator (the API
// call, its plan and its kernel launch) whose work spans one channel, HostPerChannel what each
// further channel of the call adds, and GraphLaunch the cost per kernel replayed from a CUDA graph.
//
// Both were measured with NCCL 2.28 on 2 H200 (driver 580.159.04, kind nvidia-h200-x2, three
// leases on 2026-11-29; testdata/nccl/enqueuescan.sh, testdata/nccl/h200x2/enqueuescan-2026-11-29*.csv):
// the five collectives (all-reduce, all-gather, reduce-scatter, broadcast, reduce) from 8 B to
// 1 MiB, one process per GPU, nccl-tests' loop of calls, and the same loop enqueued behind a 50 ms
// spin kernel so that the host never waits on the GPU (the enqueue alone); times of the slower
// process. HostEnqueue is the median of the loop's 306 one-channel calls (up to 8 KiB, whose
// kernels take 7.5–8.0 µs: the host's time bounds them): 10.12 µs; the enqueue alone of the same
// calls takes 9.89, the loop adding about 0.2 µs a call. The enqueue grows with the channels NCCL
// spreads a call over (2–24 from 16 KiB on 2 H200): the median of (time − 9.89 µs) / (channels − 1)
// over the 210 enqueues alone of 2–24 channels is 0.064 µs (HostPerChannel), a line within 0.12 µs
// of their medians at every channel count (1, 2, 4, 8, 16, 22, 24 channels: 9.89, 10.07, 10.23,
// 10.37, 10.87, 11.13, 11.25 µs); least squares per lease give 0.049, 0.059 and 0.072 µs a channel,
// one thread enqueueing on both GPUs 0.095–0.109 (two ranks' worth), and the loop's own calls
// 0.068 (where their kernels, longer at many channels, do not bound them instead). What grows is
// NCCL's work per channel of the call (its kernel arguments and work batches are per channel). The
// host has a fast mode near 8 µs a call and a slow one near 10–11 (HostEnqueueSpan). (Until stop 50
// the floor was one figure for every call, 10.22 µs: the median of the enqueue alone over 8 B–256
// KiB, one to 22 channels, of all seven collectives, which put calls on many channels up to 15%
// fast; before stop 42, 9.67 µs from two of the leases; before 2026-11-29 the bare launch, 5.18 µs,
// which put small calls with a process per GPU 17–31% fast on 2 H200.)
// A bare kernel launch costs about half of it: NCCL's own host work is the rest. Leases of the
// same kind have measured 6.5–12.9 µs per call with a process per GPU in nccl-tests' loop (medians per
// collective and run of 8 captures, testdata/nccl/h200x2/README.md, testdata/nccl/h200x4/README.md).
//
// HostP2PPerChannel is the same growth for point-to-point calls: what each operation to another
// rank (a send or a receive) adds for each channel it spans beyond its first. The lines of
// HostSendRecv and HostAllToAll were measured on one channel a transfer; over the rows of 2–16
// channels a transfer (the three enqueuescan leases' send/recv and all-to-all, 8 B–1 MiB, one
// pair a group; testdata/nccl/h200x2/p2popsscan-2026-11-29-big.csv, groups of 1–64 pairs to 4 MiB;
// 182 rows), the median of the time over the same run's one-channel median, per operation to the
// other rank and channel beyond the first, is 0.035 µs (single send/recv pairs 0.046, groups of
// 8–64 pairs 0.032–0.038, all-to-alls 0.017–0.036): about half a collective's channel, as NCCL
// batches a channel's point-to-point works.
//
// A plain kernel launch back to back on a stream takes the host 5.18 µs on one H100 SXM with driver
// 580.159.04 (bench/gpuprobe/results/h100-sxm-2026-11-25.csv) and 4.09–4.36 on the 2 H200 of
// 2026-11-29: NCCL's enqueue of a call on one communicator-rank (HostEnqueue) is about two of them.
//
// HostPerRank is what each further communicator-rank costs one thread that enqueues a call on
// several (LaunchPerNode: one thread for the G GPUs of a node pays HostEnqueue + (G−1) ×
// HostPerRank a call). Measured with NCCL 2.28 on 2 H200 (kind nvidia-h200-x2, 2026-11-29;
// testdata/nccl/commscan.sh, testdata/nccl/h200x2/commscan-2026-11-29.csv): K communicators over the
// same 2 GPUs, each timed call the collective on every one of them in one group, enqueued behind a
// 60 ms spin so that the host never waits on the GPU, one thread for both GPUs (2K
// communicator-ranks) and a thread per GPU (K), K = 1–4, the 7 collectives, 8 B–64 KiB, twice: the
// host's time per call, medians 10.35, 18.45, 29.27, 34.47, 57.92, 66.13 µs at 1, 2, 3, 4, 6, 8
// communicator-ranks a thread; the least-squares line through the 1,568 host times is 2.57 µs +
// 7.93 µs a communicator-rank. Whether the ranks are on one GPU or on two does not change it (two
// communicators on one GPU 17.9–19.6 µs, one on each of two GPUs 17.4–18.0), so one thread driving
// 8 GPUs is taken to pay 8 of them (65.7 µs). The host has a fast and a slow mode (see HostEnqueue):
// one thread for 2 GPUs took 12.4–13.9 µs a call in 7 of 25 runs on six leases and 16.1–21.4 in
// the other 18 (testdata/nccl/hostmodes.sh ran eight in a row: one fast), the mode changing from
// one run to the next; the model's 18.2 µs is the median run's 18.5 within 2%. Until 2026-11-29 only a bound was modelled (one HostEnqueue and G bare
// launches of 5.18 µs: 10.36 µs for 2 GPUs, 41.4 for 8).
//
// GraphLaunch was measured on one H100 SXM with driver 580.159.04
// (bench/gpuprobe/results/h100-sxm-2026-11-25.csv: 0.96 µs; 0.68 on H200). All are host and
// driver costs; the simulator applies them to every GPU generation, for want of a measurement on another.
const (
	HostEnqueue       = 10120 * Nanosecond
	HostPerChannel    = 64 * Nanosecond
	HostP2PPerChannel = 35 * Nanosecond
	HostPerRank       = 7930 * Nanosecond
	GraphLaunch       = 960 * Nanosecond
)

// HostEnqueueSpan is the range of HostEnqueue's measurement over the five leases that have it (the
// median per lease of the slower process's time per one-channel call of the five collectives in
// nccl-tests' loop, a process per GPU: enqueuescan a, b, c 10.12, 7.82, 10.72 µs; releasescan a, b
// 7.95, 8.44): 7.82 µs (enqueuescan b, stop 42, the host's fast mode) to 10.72 µs (enqueuescan c,
// its slow mode). A host-bound row's note gives it: the model is the pooled median, and a given
// host is in one mode or the other. (Until stop 50, medians of the enqueue alone over 8 B–256 KiB:
// 6.31–11.20.)
var HostEnqueueSpan = [2]Time{7820 * Nanosecond, 10720 * Nanosecond}

// HostLine is NCCL's host enqueue of a group of point-to-point operations (sends and receives) on
// one communicator: Base + ops × PerOp, where that is above HostEnqueue.
type HostLine struct{ Base, PerOp Time }

// At returns the line's time for ops operations.
func (h HostLine) At(ops int) Time { return h.Base + Time(ops)*h.PerOp }

// HostSendRecv and HostAllToAll are the lines of send/recv groups and of all-to-alls, measured
// with NCCL 2.28 on 2 H200 (kind nvidia-h200-x2, 2026-11-29; testdata/nccl/p2popsscan.sh,
// testdata/nccl/h200x2/p2popsscan-2026-11-29.csv): one process per GPU, groups of K send/recv pairs
// (2K operations a rank) and of K all-to-alls (4K, half of them to the rank itself), K = 1–64,
// 8 B–4 KiB, enqueued behind a spin as for HostEnqueue; the least-squares lines through the 80 host
// times of each kind at 16–128 operations: send/recv 5.42 µs + 0.430 µs an operation, all-to-all
// 10.19 + 0.272 (a transfer to self costs less). Past 128 operations the lines are extrapolated: an
// all-to-all on N ranks is 2N operations a rank, nearly all to other ranks, whose cost per
// operation the send/recv line suggests is nearer 0.430 (1,024 ranks: 567 µs on the all-to-all
// line, 886 on the send/recv line); NCCL splitting a long group into several kernel launches would
// add. They are lines of transfers on one channel: one that spans several costs the host more (32
// send/recv pairs of 128 KiB–2 MiB on 16 channels: 54–84 µs a group against 20–22 of 8 B;
// p2popsscan-2026-11-29-big.csv), so for those they are lower bounds.
var (
	HostSendRecv = HostLine{Base: 5420 * Nanosecond, PerOp: 430 * Nanosecond}
	HostAllToAll = HostLine{Base: 10190 * Nanosecond, PerOp: 272 * Nanosecond}
)

// LaunchMode is how the host launches a collective's kernels, NCCL's usage modes.
type LaunchMode int

const (
	// LaunchPerGPU: one process (or thread) per GPU, as torchrun and mpirun -np N … -g 1 run.
	// Each call pays KernelLaunch, and a call in a loop takes at least one HostEnqueue (more for
	// a point-to-point call's operations: HostSendRecv, HostAllToAll).
	LaunchPerGPU LaunchMode = iota
	// LaunchPerNode: one thread drives every GPU of its node (nccl-tests -g N, ncclCommInitAll):
	// it enqueues the call on its GPUs one after another, so a call in a loop takes at least
	// HostEnqueue + (GPUs per node − 1) × HostPerRank, and a point-to-point call each GPU's
	// point-to-point work beyond a collective's enqueue on top (see hostFloor).
	LaunchPerNode
	// LaunchGraph: the calls are replayed from a CUDA graph (nccl-tests -G): no host floor, and
	// KernelLaunch less GraphSaving.
	LaunchGraph
	// LaunchGraphPerNode: one process captures and replays the graphs of every GPU of its node
	// (nccl-tests -g N -G): LaunchGraph's timing, and each call GraphPerNodeCall more on the GPU
	// where the node has more than one GPU.
	LaunchGraphPerNode
)

var launchNames = [...]string{"per-gpu", "per-node", "graph", "graph-per-node"}

// Graph reports whether the calls are replayed from CUDA graphs (no host floor).
func (l LaunchMode) Graph() bool { return l == LaunchGraph || l == LaunchGraphPerNode }

// hostWork is what one communicator-rank's enqueue of a call costs the host: a collective's
// channels, or the point-to-point operations of the call's busiest rank on their line and the
// channels its operations to other ranks span beyond their first; and the host it runs on.
type hostWork struct {
	chans    int      // a collective's channels (0 and 1: one)
	ops      int      // point-to-point operations, sends and receives (0: a collective)
	line     HostLine // the line of those operations
	p2pChans int      // Σ over the operations to other ranks of their channels beyond the first
	// host is the host's enqueue of a one-channel collective call (Machine.HostEnqueue; 0: the
	// measured HostEnqueue). The collective terms (HostEnqueue, HostPerChannel, HostPerRank)
	// scale with it; the point-to-point lines and HostP2PPerChannel do not (Machine.HostEnqueue).
	host Time
}

// base is w's host's enqueue of a one-channel collective call.
func (w hostWork) base() Time {
	if w.host > 0 {
		return w.host
	}
	return HostEnqueue
}

// scaled is t, a collective term measured on the 2 H200, on w's host.
func (w hostWork) scaled(t Time) Time {
	if w.host <= 0 || w.host == HostEnqueue {
		return t
	}
	return Time(math.Round(float64(t) * hostScale(w.host)))
}

// enqueue is the host's time for w on one communicator-rank: the host's collective enqueue and
// HostPerChannel (scaled) for each further channel of a collective; for point-to-point operations
// their line where it is above the collective enqueue, and HostP2PPerChannel for each further
// channel an operation spans.
func (w hostWork) enqueue() Time {
	if w.ops > 0 {
		return max(w.base(), w.line.At(w.ops)) + Time(w.p2pChans)*HostP2PPerChannel
	}
	return w.base() + w.scaled(Time(max(w.chans-1, 0))*HostPerChannel)
}

// hostFloor is the least time of a call in a loop under launch mode l on nodes of gpus GPUs, each
// of whose ranks enqueues w: the host's enqueue, which overlaps the previous call (none from a CUDA
// graph).
func (l LaunchMode) hostFloor(gpus int, w hostWork) Time {
	enq := w.enqueue()
	switch l {
	case LaunchPerGPU:
		return enq
	case LaunchPerNode:
		// One thread does every GPU's enqueue, one after another: the collective enqueue of its
		// GPUs' communicator-ranks (HostEnqueue and HostPerRank, commscan), and each GPU's work
		// beyond a one-channel collective's enqueue (further channels, point-to-point operations
		// past HostEnqueue's worth), which one thread adds up: on 2 H200 one thread for both GPUs
		// paid 0.095–0.109 µs a further channel of a collective where a process per GPU paid
		// 0.049–0.072 (enqueuescan a–c). On 2 H200 with one
		// process for both GPUs (NCCL 2.28.9, nccl-tests' loop) an all-to-all of 8 B–16 KiB, 4
		// operations a rank, took 0.5–3.1 µs a call more than the median of the other collectives
		// of the same run, median 1.6, in 14 runs (testdata/nccl/h200x2: nccl_perf.csv, repeatscan,
		// enqueuescan a–c, releasescan a–b); this floor puts it 2 × 1.16 µs above a one-channel
		// collective's. With a process per GPU the same 13 runs' medians give 0.7 (−2.3…3.5)
		// against 1.16. (Until stop 49 the largest of the terms stood, not their sum: an
		// all-to-all's floor was a collective's until its operations alone outlasted the enqueues.)
		g := Time(max(gpus, 1))
		return w.base() + w.scaled((g-1)*HostPerRank) + g*(enq-w.base())
	}
	return 0
}

// callWork is the enqueue of plan p, a call of f on n ranks, on its busiest rank (the largest
// hostWork.enqueue): a collective's channels; all-to-all sends to and receives from every rank,
// itself included (NCCL 2.28 expands it into send/recv tasks), each of the 2(n − 1) to other ranks
// over the plan's channels; send/recv one send and one receive, or a traced group's own (the
// plan's Transfers, each over its own channels, else the call's transfers over the plan's).
func callWork(f coll.Func, n int, p coll.Plan, transfers []coll.Transfer) hostWork {
	extra := max(p.NChannels-1, 0)
	switch {
	case f == coll.AllToAll:
		return hostWork{ops: 2 * n, line: HostAllToAll, p2pChans: 2 * (n - 1) * extra}
	case f == coll.SendRecv && (len(p.Transfers) > 0 || len(transfers) > 0):
		if len(p.Transfers) > 0 {
			transfers = p.Transfers
		}
		ops := make(map[int]int)
		chans := make(map[int]int)
		for _, t := range transfers {
			ops[t.From]++
			ops[t.To]++
			if t.From != t.To {
				c := extra
				if t.NChannels > 0 {
					c = t.NChannels - 1
				}
				chans[t.From] += c
				chans[t.To] += c
			}
		}
		var w hostWork
		for r, k := range ops {
			if c := (hostWork{ops: k, line: HostSendRecv, p2pChans: chans[r]}); w.ops == 0 || c.enqueue() > w.enqueue() {
				w = c
			}
		}
		return w
	case f == coll.SendRecv:
		w := hostWork{ops: 2, line: HostSendRecv}
		if n > 1 {
			w.p2pChans = 2 * extra
		}
		return w
	}
	return hostWork{chans: p.NChannels}
}

func (l LaunchMode) String() string {
	if l >= 0 && int(l) < len(launchNames) {
		return launchNames[l]
	}
	return fmt.Sprintf("LaunchMode(%d)", int(l))
}

// ParseLaunchMode parses per-gpu, per-node, graph or graph-per-node.
func ParseLaunchMode(s string) (LaunchMode, error) {
	for i, n := range launchNames {
		if s == n {
			return LaunchMode(i), nil
		}
	}
	return 0, fmt.Errorf("launch mode %q (want per-gpu, per-node, graph or graph-per-node)", s)
}

// TimingFor returns the timing of algorithm a with protocol p under the constants of an NCCL
// release ("2.28", "2.30"; "" = tuning.DefaultRelease). CollNet/NVLS/PAT rows whose hardware
// latencies are zero fall back to the Ring row so that every step costs something.
func TimingFor(release string, a coll.Algo, p coll.Proto) (Timing, error) {
	if release == "" {
		release = tuning.DefaultRelease
	}
	k, err := tuning.ConstantsFor(release)
	if err != nil {
		return Timing{}, err
	}
	if a < 0 || a >= coll.NumAlgos || p < 0 || p >= coll.NumProtos {
		return Timing{}, fmt.Errorf("simnet: bad algorithm/protocol %v/%v", a, p)
	}
	var t Timing
	t.Launch = KernelLaunch + FromMicros(k.BaseLat[a][p])
	if a == coll.NVLS || a == coll.NVLSTree {
		// NCCL's model gives NVLS one latency for the whole collective, its NVLINK hwLat (which
		// replaces the base latency), and NVLSTree that plus an interLat per tree hop across
		// nodes (NCCL 2.28 tuning.cc). The simulator charges the first once, at launch, and the
		// second on every message that crosses the network; messages within a node (to and from
		// the NVSwitch) pay their links' latency only.
		t.Launch += FromMicros(k.HwLat[0][a][p])
		for q := coll.Proto(0); q < coll.NumProtos; q++ {
			t.StepLat[2][q] = FromMicros(k.HwLat[2][a][q])
		}
		return t, nil
	}
	for hw := 0; hw < 3; hw++ {
		for q := coll.Proto(0); q < coll.NumProtos; q++ {
			v := k.HwLat[hw][a][q]
			if v == 0 {
				v = k.HwLat[hw][coll.Ring][q]
			}
			t.StepLat[hw][q] = FromMicros(v)
		}
	}
	return t, nil
}

// OpRecord is one point-to-point message of a simulated schedule.
type OpRecord struct {
	Rank, Peer int
	Channel    int
	Step       int // index of the sending step in its program
	Seq        int // message number on its connection, from 0
	Chunk      int
	Bytes      int64 // payload
	Wire       int64 // bytes on the wire
	Proto      coll.Proto
	Start, End Time // first byte leaves the sender; the receiver sees the message
	Class      LinkClass
	Route      []LinkID
}

// Result is the outcome of one simulated schedule.
type Result struct {
	Time     Time // completion of the last step, launch included
	Events   uint64
	Messages int
	Ops      []OpRecord // nil unless Options.Record
	// LinkName names the links of the routes in Ops.
	LinkName func(LinkID) string
	// LinkShare is the part of a message's wire bytes each link of its route carries: 1, but on
	// the switch links a connection's queue pairs cross side by side (Fabric.QPs), 1/QPs each
	// (Engine.LinkShare). nil: 1 everywhere.
	LinkShare func(LinkID) float64
	// MeanBacklog: P2PResult.MeanBacklog of a point-to-point replay, TreeResult.MeanBacklog of a
	// tree all-reduce (0 elsewhere).
	MeanBacklog float64
}

// Options of Simulate.
type Options struct {
	// Record keeps an OpRecord per message (memory grows with the schedule).
	Record bool
	// OpsPerKernel > 0 runs every OpsPerKernel consecutive operations of the schedule as one
	// kernel, the kernels of a rank one after another, as back-to-back launches on one CUDA stream
	// do (nccl-tests' timing loop): rank r's steps of kernel j start Timing.Launch after all its
	// steps of kernel j−1 are done, while another rank may still be in kernel j−1; connections,
	// their message numbers and slots carry over, as NCCL's do between kernels. 0: the whole
	// schedule is one group (one launch; steps ordered by their dependencies only).
	OpsPerKernel int
	// watch, if set, is given the schedule and the connection of each flow tag (−1: a step's
	// local work) before the replay starts, and returns an observer of the engine's rate changes
	// (the checked NVLS fold, nvlsecmp.go).
	watch func(s *coll.Schedule, conn func(tag int64) int32) observer
	// prune leaves out of the rate computations the links whose constraint another link of the
	// schedule's routes implies (Engine.pruneImplied; the same rates). e must serve no other flows.
	prune bool
	// index, where set, is coll.NewIndex of the schedule, shared by its replays (a schedule
	// replayed twice: foldScheds); else Simulate makes one. The first replay checks the schedule
	// within its records' pass; one started elsewhere runs beside the replay (indexJob).
	index *indexJob
	// prefix, where set, watches the replay for the end of the schedule's first chunks
	// (prefixProbe: a replay that agrees with any schedule that begins with the same steps).
	prefix *prefixProbe
}

// prefixProbe watches a replay (Options.prefix) for the first instant at which a longer schedule
// whose programs begin with the same steps could be replayed otherwise: the steps of the chunks
// below Chunks (in Step.Chunk's numbering) form a prefix of every program, and the replay is that
// of every such schedule as long as none of its other steps has started. The executor's choices
// depend only on the steps' order within each program and the messages' within each connection,
// which the prefix keeps; the other steps' numbers change nothing before one of them runs.
//
// Simulate checks that the prefix is closed (every message a prefix step sends, a prefix step
// receives, and the reverse, so its credits wait for prefix steps too) and that every rank step
// past it waits for an earlier step of its lane, its lane having steps in the prefix; a switch
// step past it receives messages from past it only. No step past the prefix can then start
// before the last prefix step of some lane of some rank completes: Diverged says one has, and
// the replay then stops (errHalted) at the end of that instant. OK says the schedule had that
// structure (else the probe proves nothing).
type prefixProbe struct {
	Chunks       int
	OK, Diverged bool
}

// Event kinds of the executor.
const (
	evLaunch int32 = iota
	evArrive
	evKernel   // arg: kernel rank×nk+j starts
	evComplete // arg: a global step whose fence has passed completes
	evFirst    // arg: the first lines of a streamed LL/LL128 message reach its receiver
	evSkewed   // arg: a global step held back by its channel's start skew (Timing.ChannelSkew)
)

// stepRec is what the replay reads of a global step on every release and send: 16 bytes, four
// to a cache line (the replay's reads of them are scattered over the programs' frontiers).
type stepRec struct {
	pending   int32 // dependencies, messages and credits not yet there
	sendsLeft int32 // messages whose last byte has not left
	rel       int32 // sim.rel[rel:next.rel]: the steps its completion releases
	send      int32 // sim.sendList[send:next.send]: the messages it sends
}

// msgRec is what the replay reads of a message: its steps, and the flow it becomes.
type msgRec struct {
	send, recv int32 // sending and receiving step
	conn       int32
	proto      int8  // the sending step's protocol, coll.Simple where out of range
	stepLat    bool  // the step latency applies (not a CollNet switch's send)
	wire       int64 // wire bytes of the flow, SwitchEff applied
	cap        Rate  // the flow's cap on the plain path (laneRate 0)
}

// msgLat is message mr's route and step latency, from its start to its arrival (once started:
// its connection's route is known).
func (x *sim) msgLat(mr *msgRec) Time {
	c := mr.conn
	lat := x.connLat[c]
	if mr.stepLat {
		// NCCL's model charges CollNet's network latency once per round trip through the
		// switches (interLat of ncclTopoTuneModel): on the way up, not again on the way back.
		lat += x.tm.StepLat[x.connClass[c]][mr.proto]
	}
	return lat
}

type sim struct {
	e   *Engine
	s   *coll.Schedule
	r   Router
	tm  Timing
	opt Options
	off []int32 // first global step of each program
	// per global step (one more: the ends of the last step's lists), what the replay reads of it,
	// so that a step's events touch one small record instead of the schedule's steps
	rec []stepRec
	// per global step its program, and its hold (holdOf; nil without a CTA rate, where no step
	// has one); per program whether start takes the plain path (no lane rate, no line streaming)
	progOf []int32
	hold   []Time
	plain  []bool
	// the steps a step's completion releases, in the order it releases them (stepRec.rel): its
	// dependents, then the steps waiting for the credits of the messages it consumed, message by
	// message
	rel []int32
	// the messages each step sends, in the order of its sends (stepRec.send)
	sendList []int32
	done     int
	// per message (connOff[conn]+seq)
	connOff  []int32
	msg      []msgRec
	msgStart []Time // Options.Record only
	msgEnd   []Time
	routes   map[[3]int32][]LinkID
	classes  map[[3]int32]LinkClass
	// per connection, the route of its sends and its class once asked for (route's, the same
	// slice: without a map look-up per message)
	connRoute [][]LinkID
	connClass []LinkClass
	connKnown []bool
	connLat   []Time // RouteLatency of connRoute
	// Timing.LineStream: per message 0, msgFirst once its first lines released the receiver
	// early, msgArrived once it has arrived; per step the streamed messages it started on that
	// have not all arrived, and what it finished meanwhile (held until they have)
	msgState  []uint8
	inflight  []int32
	heldSends map[int32][]int32
	heldLocal map[int32]bool
	netDec    []bool            // per message: sent in two stages, the CTA's and the NIC's (Timing.NetStage)
	netBusy   []bool            // per connection: a network message of it is on the wire
	netQueue  map[int32][]int32 // per connection, its messages written and waiting for the wire
	netHeld   map[int32][]int32 // per step, its sends (indices in Step.Send) into the network waiting for its streamed receives
	laneRate  []Rate            // per program: CTARate over the program's lanes (0: not modelled)
	stepLanes [][]int32         // per program: each step's lanes in its batch where batches differ (nil: lanes)
	// SharedCTA: per program its CTA's link (-1: none), and the routes extended by it, one per
	// (route, CTA link, weight on it), so that every message of a connection and primitive shares
	// one route and one set of weights
	ctaLink   []LinkID
	ctaRoutes map[ctaRouteKey][]LinkID
	// memLink: per rank, the link of its GPU's memory its copies to self share (-1: none;
	// nil where no rank has one: Timing.MemTraffic); copyRoutes per program, the route of its
	// copies to self on it
	memLink    []LinkID
	copyRoutes map[int32][]LinkID
	lanes      []int32 // per program: its lanes (CTAMem is shared among them as CTARate is)
	// Options.OpsPerKernel: per kernel (rank×nk+j) the steps not yet done, and (CSR) the steps
	// waiting for it to start
	nk        int // kernels per rank
	kernLeft  []int32
	kernOff   []int32
	kernSteps []int32
	// Options.prefix: per global step, whether its completion ends the prefix's replay
	frontier []bool
	job      *indexJob          // the schedule's check (build)
	check    *coll.IndexChecker // the check within the records' pass (buildChecked)
	err      error
	end      Time
}

// Simulate times schedule s on the links of e reached through r. e must hold the links r
// returns and no active flow.
// replayed, where set (tests), makes every replay keep its records (Options.Record) and is given
// each schedule and its result once the replay ends.
var replayed func(s *coll.Schedule, res *Result)

func Simulate(e *Engine, r Router, s *coll.Schedule, tm Timing, opt Options) (_ *Result, err error) {
	if replayed != nil {
		opt.Record = true
	}
	if s == nil || s.NRanks <= 0 || s.NChannels <= 0 {
		return nil, fmt.Errorf("simnet: empty schedule")
	}
	if s.NRanks != r.NumRanks() {
		return nil, fmt.Errorf("simnet: schedule has %d ranks, the cluster %d", s.NRanks, r.NumRanks())
	}
	if len(s.Programs) != s.Endpoints()*s.NChannels {
		return nil, fmt.Errorf("simnet: schedule has %d programs, want %d endpoints x %d channels", len(s.Programs), s.Endpoints(), s.NChannels)
	}
	if len(s.Switches) > 0 {
		if _, ok := r.(SwitchRouter); !ok {
			return nil, fmt.Errorf("simnet: the schedule has switch endpoints (NVLS, CollNet) and the network places none")
		}
		for _, sw := range s.Switches {
			switch sw.Kind {
			case coll.SwitchNVLS:
			case coll.SwitchCollNet:
				if _, ok := r.(CollNetRouter); !ok {
					return nil, fmt.Errorf("simnet: the schedule reduces in the network (CollNet) and the network places no reduction")
				}
			default:
				return nil, fmt.Errorf("simnet: %s switch endpoints are not simulated", sw.Kind)
			}
		}
	}
	x := &sim{e: e, s: s, r: r, tm: tm, opt: opt, routes: map[[3]int32][]LinkID{}, classes: map[[3]int32]LinkClass{}}
	defer func() {
		// The replay runs while coll.NewIndex checks the schedule (build): a schedule that
		// breaks the contract gets the check's error, whatever its replay did (a panic included).
		if x.job == nil {
			return
		}
		p := recover()
		if _, ierr := x.job.wait(); ierr != nil {
			err = ierr
			return
		}
		if p != nil {
			panic(p)
		}
	}()
	if err := x.build(); err != nil {
		return nil, err
	}
	if len(s.Switches) > 0 {
		for _, c := range s.Conns { // place every switch connection before any time passes
			if c.From >= s.NRanks || c.To >= s.NRanks {
				x.route(c.From, c.To, c.Channel, false)
			}
		}
		if x.err != nil {
			return nil, x.err
		}
	}
	if opt.prune {
		e.pruneImplied(func(yield func([]LinkID)) {
			for _, c := range s.Conns {
				r, _ := x.routeConn(&c)
				yield(r)
			}
		})
		if x.err != nil {
			return nil, x.err
		}
	}
	if opt.watch != nil {
		msg := x.msg // every message's connection (its sender's transfer names it)
		e.obs = opt.watch(s, func(tag int64) int32 {
			if tag < 0 || tag >= int64(len(msg)) {
				return -1
			}
			return msg[tag].conn
		})
	}
	e.handler = x
	startEvents := e.Events
	e.At(e.Now()+tm.Launch, evLaunch, 0)
	t0 := e.Now()
	e.abort = x.job.failed
	defer func() { e.abort = nil }() // whatever the replay did, a panic included
	if n := len(x.rec) - 1; n >= progressSteps {
		// A large schedule: a progress bar may follow its steps (simccl run's bar).
		defer e.trackSteps(int64(n), func() int64 { return int64(x.done) })()
	}
	if _, err = e.Run(); err != nil {
		return nil, err
	}
	if x.err != nil {
		return nil, x.err
	}
	if n := len(x.rec) - 1; x.done != n {
		return nil, fmt.Errorf("simnet: schedule deadlocked: %d of %d steps never ran (a dependency or message that cannot be satisfied)", n-x.done, n)
	}
	res := &Result{Time: x.end - t0, Events: e.Events - startEvents, Messages: len(x.msg), LinkName: e.LinkName, LinkShare: e.LinkShare}
	if x.end < t0+tm.Launch {
		res.Time = tm.Launch
	}
	if opt.Record {
		res.Ops = x.records()
	}
	if replayed != nil {
		replayed(s, res)
	}
	return res, nil
}

// progressSteps is the fewest steps of a schedule whose replay a progress bar follows
// (Engine.trackSteps): several seconds of replay on this project's 2-core host (a PAT schedule of
// 4 M steps on 1,000 one-GPU nodes took 32 s at 64 MiB), where a bar that only counts events
// leaves its user guessing.
const progressSteps = 1_000_000

// indexJob is coll.NewIndex of a schedule. The first Simulate of the schedule checks it within
// its records' pass (build: coll.IndexChecker, program by program as the records are built);
// else the check runs on a goroutine of its own (start), beside the replay, and Simulate returns
// its error where it finds one (the replay is then stopped: Engine.abort).
type indexJob struct {
	s    *coll.Schedule
	once sync.Once
	done chan struct{}
	ix   *coll.Index
	err  error
}

// startIndex is coll.NewIndex(s), to be started (indexJob.start).
func startIndex(s *coll.Schedule) *indexJob {
	return &indexJob{s: s, done: make(chan struct{})}
}

// start starts the check, once.
func (j *indexJob) start() {
	j.once.Do(func() {
		go func() {
			defer close(j.done)
			j.ix, j.err = coll.NewIndex(j.s)
			if j.err != nil {
				j.err = fmt.Errorf("simnet: %w", j.err)
			}
		}()
	})
}

// claim takes the check for the caller, who then ends it (finish), where nobody has started it.
func (j *indexJob) claim() (claimed bool) {
	j.once.Do(func() { claimed = true })
	return claimed
}

// finish ends a claimed check with its index or its error (NewIndex's, wrapped as start wraps it).
func (j *indexJob) finish(ix *coll.Index, err error) {
	if err != nil {
		ix, err = nil, fmt.Errorf("simnet: %w", err)
	}
	j.ix, j.err = ix, err
	close(j.done)
}

// wait is the index, or NewIndex's error.
func (j *indexJob) wait() (*coll.Index, error) {
	j.start()
	<-j.done
	return j.ix, j.err
}

// failed is NewIndex's error once it has found one, without waiting (nil: none, or not yet).
func (j *indexJob) failed() error {
	select {
	case <-j.done:
		return j.err
	default:
		return nil
	}
}

// errUnchecked is what build reports of a schedule it cannot read, where the index it waits for
// finds no fault (it always does: build checks a part of the contract).
var errUnchecked = errors.New("simnet: the schedule breaks its contract")

func (x *sim) build() error {
	// The schedule's check (coll.NewIndex: connections, sequences, credits, dependencies) runs
	// beside the replay (Simulate returns its error where it finds one); build reads the
	// schedule only where it holds what build indexes by, and returns the check's error where
	// it does not.
	job := x.opt.index
	if job == nil {
		job = startIndex(x.s)
	}
	x.job = job
	if job.claim() {
		if err := x.buildChecked(job); err != nil {
			return err
		}
		return x.buildRest()
	}
	if err := x.buildRecords(); err != nil {
		if _, ierr := job.wait(); ierr != nil {
			return ierr
		}
		return err
	}
	job.start()
	return x.buildRest()
}

// buildChecked builds the records and checks the schedule in the same pass (job claimed): each
// program is checked (coll.IndexChecker) before its records are built, the messages' two ends
// once all are. A schedule that fails gets coll.NewIndex's error (the first in program order,
// wherever the parts stopped).
func (x *sim) buildChecked(job *indexJob) error {
	ck, err := coll.NewIndexChecker(x.s)
	if err != nil {
		job.finish(nil, err)
		return job.err
	}
	x.check = ck
	err = x.buildRecords()
	x.check = nil
	if err == nil {
		ix, ierr := ck.Index()
		job.finish(ix, ierr)
		return job.err
	}
	ix, ierr := coll.NewIndex(x.s)
	job.finish(ix, ierr)
	if job.err != nil {
		return job.err
	}
	return err
}

// buildRecords numbers the steps and messages as coll.Index does and builds the replay's records.
// It checks what it indexes by (connections, sequences, dependencies, programs' ranks), not the
// rest of the contract.
func (x *sim) buildRecords() error {
	s := x.s
	ne := s.Endpoints()
	x.off = make([]int32, len(s.Programs)+1)
	var nsteps int64
	for p := range s.Programs {
		if pr := &s.Programs[p]; pr.Rank != p/s.NChannels || pr.Channel != p%s.NChannels {
			return errUnchecked
		}
		nsteps += int64(len(s.Programs[p].Steps))
		if nsteps > math.MaxInt32 {
			return errUnchecked
		}
		x.off[p+1] = int32(nsteps)
	}
	x.connOff = make([]int32, len(s.Conns)+1)
	var nmsgs int64
	for i, c := range s.Conns {
		if c.Messages < 0 || c.From < 0 || c.From >= ne || c.To < 0 || c.To >= ne || c.Channel < 0 || c.Channel >= s.NChannels {
			return errUnchecked
		}
		nmsgs += int64(c.Messages)
		if nmsgs > math.MaxInt32 {
			return errUnchecked
		}
		x.connOff[i+1] = int32(nmsgs)
	}
	nmsg := int(nmsgs)
	nstep := int(nsteps)
	x.rec = make([]stepRec, nstep+1)
	x.progOf = make([]int32, nstep)
	x.hold = nil
	if x.tm.CTARate > 0 { // else no step has a lane rate, nor a hold (holdOf)
		x.hold = make([]Time, nstep)
	}
	x.msg = make([]msgRec, nmsg)
	x.laneRate = make([]Rate, len(s.Programs))
	x.stepLanes = make([][]int32, len(s.Programs))
	x.lanes = make([]int32, len(s.Programs))
	x.plain = make([]bool, len(s.Programs))
	// One pass over the steps: per program its lanes, per step its counts, its hold and the
	// messages it sends, per message its flow's constants; and, for the lists of steps each
	// completion releases (stepRec.rel), the (dependency, step) pairs, the (credit message,
	// step) pairs and the messages each step consumes, in step order. Two ranges of programs at
	// once on a large schedule: each writes the records of its own steps and, of a message, what
	// its sender (or its receiver) gives it (a connection has one sending program and one
	// receiving program); its lists are joined in program order, the same lists as one pass.
	credCnt := make([]int32, nmsg+1)
	recvOff := make([]int32, nstep+1)
	parts := []recordPart{{p1: len(s.Programs)}}
	if recordsSplit(nstep) {
		split := sort.Search(len(s.Programs), func(p int) bool { return x.off[p] >= x.off[len(s.Programs)]/2 })
		parts = []recordPart{{p1: split}, {p0: split, p1: len(s.Programs)}}
	}
	// Every part's lists have room for every part's (each message is sent and received once;
	// about a dependency a step): the first part's for the join, the others' because their
	// share of messages is not their share of steps (the switches' programs, last, send and
	// receive many a step). Room never written costs no page; a list grown by append is
	// copied, and both faulted in (12.5 MB on the 128-node quotient schedule).
	for i := range parts {
		pt := &parts[i]
		pt.sends, pt.recvs = make([]int32, 0, nmsg), make([]int32, 0, nmsg)
		pt.deps, pt.creds = make([][2]int32, 0, nstep), make([][2]int32, 0, nmsg)
	}
	if len(parts) == 1 {
		parts[0].err = x.recordRange(&parts[0], credCnt, recvOff)
	} else {
		var wg sync.WaitGroup
		for i := range parts[1:] {
			wg.Add(1)
			go func(pt *recordPart) {
				defer wg.Done()
				pt.err = x.recordRange(pt, credCnt, recvOff)
			}(&parts[1+i])
		}
		parts[0].err = x.recordRange(&parts[0], credCnt, recvOff)
		wg.Wait()
	}
	for i := range parts {
		if parts[i].err != nil {
			return parts[i].err
		}
	}
	x.sendList = parts[0].sends
	recvList, depPairs, credPairs := parts[0].recvs, parts[0].deps, parts[0].creds
	for i := range parts[1:] {
		pt := &parts[1+i]
		// The part's list positions count from its own start.
		ds, dr := int32(len(x.sendList)), int32(len(recvList))
		for g := x.off[pt.p0]; g < x.off[pt.p1]; g++ {
			x.rec[g].send += ds
			recvOff[g+1] += dr
		}
		x.sendList = append(x.sendList, pt.sends...)
		recvList = append(recvList, pt.recvs...)
		depPairs = append(depPairs, pt.deps...)
		credPairs = append(credPairs, pt.creds...)
	}
	x.rec[nstep].send = int32(len(x.sendList))
	for m := 0; m < nmsg; m++ {
		credCnt[m+1] += credCnt[m]
	}
	// The steps waiting for each message's credit (CSR by message, in step order), then every
	// step's list: its dependents (in step order), then the credit waiters of what it consumes,
	// message by message.
	cred := make([]int32, credCnt[nmsg])
	cf := append([]int32(nil), credCnt[:nmsg]...)
	for _, pr := range credPairs {
		cred[cf[pr[0]]] = pr[1]
		cf[pr[0]]++
	}
	for g := 0; g < nstep; g++ {
		n := x.rec[g+1].rel // its dependents
		for _, m := range recvList[recvOff[g]:recvOff[g+1]] {
			n += credCnt[m+1] - credCnt[m]
		}
		x.rec[g+1].rel = x.rec[g].rel + n
	}
	x.rel = make([]int32, x.rec[nstep].rel)
	fill := make([]int32, nstep) // per step, its dependents filled so far
	for _, pr := range depPairs {
		dg := pr[0]
		x.rel[x.rec[dg].rel+fill[dg]] = pr[1]
		fill[dg]++
	}
	for g := 0; g < nstep; g++ {
		at := x.rec[g].rel + fill[g]
		for _, m := range recvList[recvOff[g]:recvOff[g+1]] {
			at += int32(copy(x.rel[at:], cred[credCnt[m]:credCnt[m+1]]))
		}
	}
	return nil
}

// recordsSplit reports whether buildRecords builds the records of nstep steps in two parts at
// once: from 65,536 steps where there are two cores (tests set it).
var recordsSplit = func(nstep int) bool { return nstep >= 1<<16 && runtime.GOMAXPROCS(0) > 1 }

// recordPart is what buildRecords' pass over programs p0..p1−1 gives beside the records: its
// lists in step order, with positions counted from the part's start (sim.rec's send, recvOff).
type recordPart struct {
	p0, p1       int
	sends, recvs []int32
	deps, creds  [][2]int32
	err          error
}

// recordRange is buildRecords' pass over the programs of part pt, appending to its lists.
func (x *sim) recordRange(pt *recordPart, credCnt, recvOff []int32) error {
	s := x.s
	for p := pt.p0; p < pt.p1; p++ {
		pr := &s.Programs[p]
		if x.tm.CTARate > 0 && pr.Rank < s.NRanks { // a switch has no CTA
			n := programLanes(pr.Steps)
			x.laneRate[p] = x.tm.CTARate / Rate(max(n, 1))
			x.lanes[p] = int32(max(n, 1))
			if n > 1 && x.p2pOnly(pr) {
				x.stepLanes[p] = batchLanes(pr.Steps)
			}
		}
		if x.check != nil {
			if err := x.check.CheckProgram(p); err != nil {
				return err
			}
		}
		x.plain[p] = x.laneRate[p] <= 0 && !x.tm.LineStream && x.tm.Memcpy <= 0
		for i := range pr.Steps {
			st := &pr.Steps[i]
			g := x.off[p] + int32(i)
			r := &x.rec[g]
			for _, d := range st.Deps {
				if d < 0 || d >= i {
					return errUnchecked
				}
				dg := x.off[p] + int32(d)
				x.rec[dg+1].rel++
				pt.deps = append(pt.deps, [2]int32{dg, g})
			}
			r.pending = int32(len(st.Deps) + len(st.Recv))
			r.send = int32(len(pt.sends))
			x.progOf[g] = int32(p)
			for _, xf := range st.Send {
				if !x.onConn(xf, pr, true) || xf.CreditSeq >= xf.Seq {
					return errUnchecked
				}
				m := x.connOff[xf.Conn] + int32(xf.Seq)
				pt.sends = append(pt.sends, m)
				x.msg[m].send = g
				if xf.CreditSeq >= 0 {
					mc := x.connOff[xf.Conn] + int32(xf.CreditSeq)
					credCnt[mc+1]++
					pt.creds = append(pt.creds, [2]int32{mc, g})
					r.pending++
				}
				x.msgConsts(&x.msg[m], st, pr, xf)
			}
			r.sendsLeft = int32(len(st.Send))
			for _, xf := range st.Recv {
				if !x.onConn(xf, pr, false) {
					return errUnchecked
				}
				m := x.connOff[xf.Conn] + int32(xf.Seq)
				pt.recvs = append(pt.recvs, m)
				x.msg[m].recv = g
			}
			recvOff[g+1] = int32(len(pt.recvs))
			if x.hold != nil {
				x.hold[g] = x.holdOf(g)
			}
		}
	}
	return nil
}

// onConn reports whether transfer xf of a step of program pr names a message of a connection
// of pr's (from pr's endpoint where send, to it where not).
func (x *sim) onConn(xf coll.Xfer, pr *coll.Program, send bool) bool {
	if xf.Conn < 0 || int(xf.Conn) >= len(x.s.Conns) {
		return false
	}
	c := &x.s.Conns[xf.Conn]
	self := c.To
	if send {
		self = c.From
	}
	return self == pr.Rank && c.Channel == pr.Channel && xf.Seq >= 0 && int(xf.Seq) < c.Messages
}

// buildRest builds what the replay needs beside the records, on a schedule that keeps the
// contract.
func (x *sim) buildRest() error {
	s := x.s
	nmsg := len(x.msg)
	nstep := len(x.rec) - 1
	if x.opt.OpsPerKernel > 0 {
		if err := x.buildKernels(); err != nil {
			return err
		}
	}
	x.buildMem()
	if x.tm.CTARate > 0 && SharedCTA {
		x.ctaLink = make([]LinkID, len(s.Programs))
		for p := range s.Programs {
			x.ctaLink[p] = -1
			if x.lanes[p] <= 1 {
				continue
			}
			for i := range s.Programs[p].Steps {
				if pp := s.Programs[p].Steps[i].Proto; pp >= 0 && pp < coll.NumProtos && x.tm.CTAMem[pp] > 0 {
					x.ctaLink[p] = x.e.AddLink("cta", x.tm.CTAMem[pp], 0)
					break
				}
			}
		}
	}
	if x.opt.prefix != nil {
		x.markPrefix(x.opt.prefix)
	}
	if x.opt.Record { // the records' times (nothing else reads them)
		x.msgStart = make([]Time, nmsg)
		x.msgEnd = make([]Time, nmsg)
	}
	if x.tm.LineStream {
		x.msgState = make([]uint8, nmsg)
		x.inflight = make([]int32, nstep)
		x.heldSends = map[int32][]int32{}
		x.heldLocal = map[int32]bool{}
		x.netHeld = map[int32][]int32{}
	}
	return nil
}

// markPrefix checks the structure Options.prefix needs (prefixProbe) and marks, in every rank
// program, the last prefix step of each lane (sim.frontier).
func (x *sim) markPrefix(pp *prefixProbe) {
	s := x.s
	pp.OK, pp.Diverged = false, false
	in := func(g int32) bool { return int(x.step(g).Chunk) < pp.Chunks }
	for m := range x.msg {
		if in(x.msg[m].send) != in(x.msg[m].recv) {
			return
		}
	}
	frontier := make([]bool, len(x.rec)-1)
	var last, prev []int // per lane, the index of its last prefix step and of its last step (-1: none)
	for p := range s.Programs {
		pr := &s.Programs[p]
		rank := pr.Rank < s.NRanks
		last, prev = last[:0], prev[:0]
		past := false
		for i := range pr.Steps {
			st := &pr.Steps[i]
			if st.Lane < 0 || st.Lane > 64 {
				return
			}
			for len(last) <= int(st.Lane) {
				last, prev = append(last, -1), append(prev, -1)
			}
			l := st.Lane
			if int(st.Chunk) < pp.Chunks {
				if past {
					return // not a prefix
				}
				last[l], prev[l] = i, i
				continue
			}
			past = true
			// A rank step past the prefix waits for the previous step of its lane.
			if rank && (last[l] < 0 || !slices.Contains(st.Deps, prev[l])) {
				return
			}
			prev[l] = i
		}
		if rank {
			for _, i := range last {
				if i >= 0 {
					frontier[x.off[p]+int32(i)] = true
				}
			}
		}
	}
	x.frontier = frontier
	pp.OK = true
}

// programLanes is the number of distinct lanes of steps.
func programLanes(steps []coll.Step) int {
	var low uint64 // lanes 0..63
	var other map[int]bool
	for i := range steps {
		if l := steps[i].Lane; l >= 0 && l < 64 {
			low |= 1 << l
		} else {
			if other == nil {
				other = map[int]bool{}
			}
			other[int(l)] = true
		}
	}
	return bits.OnesCount64(low) + len(other)
}

// batchLanes returns, for each step of a point-to-point program, the number of lanes of its batch,
// where the program's batches do not all have the same number (nil where they do, and
// programLanes is each step's). A batch is what the program runs between two of coll's barriers
// (a batch of up to coll.P2PBatch works, or an operation of a group): the first step of each of its lanes
// depends on the barrier, the last steps of every lane of the batch before (none for the first),
// and every other step on its lane's previous step. NCCL's kernel splits a CTA's warps among the
// works of the batch it runs (NCCL 2.28 sendrecv.h RunWorkBatch), so a lane's fixed share of the
// CTA is taken over its batch. Where the batch before used one lane only, the first step of that
// lane in the next batch reads as that lane going on, and the two batches count as one (their lanes
// together, as programLanes counts them all).
func batchLanes(steps []coll.Step) []int32 {
	out := make([]int32, len(steps))
	var barrier []int
	var lanes uint64 // lanes 0..63 of the batch; others counted in more
	var more map[int32]bool
	start := 0 // the batch's first step
	count := func() int32 { return int32(bits.OnesCount64(lanes) + len(more)) }
	seen := func(l int32) bool {
		if l >= 0 && l < 64 {
			return lanes&(1<<l) != 0
		}
		return more[l]
	}
	add := func(l int32) {
		if l >= 0 && l < 64 {
			lanes |= 1 << l
		} else {
			if more == nil {
				more = map[int32]bool{}
			}
			more[l] = true
		}
	}
	uniform := true
	first := int32(-1)
	closeBatch := func(end int) {
		n := count()
		for i := start; i < end; i++ {
			out[i] = n
		}
		if first < 0 {
			first = n
		} else if n != first {
			uniform = false
		}
	}
	for i := range steps {
		st := &steps[i]
		goesOn := len(st.Deps) == 1 && st.Deps[0] >= start && steps[st.Deps[0]].Lane == st.Lane && seen(st.Lane)
		if !goesOn && (seen(st.Lane) || !slices.Equal(st.Deps, barrier)) && i > start {
			closeBatch(i)
			start, lanes, more = i, 0, nil
		}
		if !goesOn && i == start {
			barrier = st.Deps
		}
		add(st.Lane)
	}
	closeBatch(len(steps))
	if uniform {
		return nil
	}
	return out
}

// p2pOnly reports whether every step of program pr belongs to a send/recv or all-to-all
// operation, whose batches batchLanes reads (a collective's steps may depend on more than their
// lane's previous step).
func (x *sim) p2pOnly(pr *coll.Program) bool {
	for i := range pr.Steps {
		if !x.s.Ops[pr.Steps[i].Op].Func.IsP2P() {
			return false
		}
	}
	return true
}

// laneShare is step g's lane's fixed share of its CTA's rate (CTARate over the lanes of its
// batch), 0 where the CTA is not modelled.
func (x *sim) laneShare(g int32) Rate {
	p := x.progOf[g]
	if sl := x.stepLanes[p]; sl != nil && x.laneRate[p] > 0 {
		return x.tm.CTARate / Rate(sl[g-x.off[p]])
	}
	return x.laneRate[p]
}

// laneCount is the number of lanes among which step g's CTA is shared (laneShare).
func (x *sim) laneCount(g int32) int32 {
	p := x.progOf[g]
	if sl := x.stepLanes[p]; sl != nil {
		return sl[g-x.off[p]]
	}
	return x.lanes[p]
}

// Message states under Timing.LineStream (sim.msgState).
const (
	msgFirst   uint8 = 1
	msgArrived uint8 = 2
)

// buildKernels gates every step of kernel j > 0 on its rank's kernel j starting.
func (x *sim) buildKernels() error {
	s := x.s
	per := x.opt.OpsPerKernel
	nops := max(len(s.Ops), 1)
	x.nk = (nops + per - 1) / per
	nk := s.NRanks * x.nk
	x.kernLeft = make([]int32, nk)
	x.kernOff = make([]int32, nk+1)
	for p := range s.Programs {
		for i := range s.Programs[p].Steps {
			if op := s.Programs[p].Steps[i].Op; op < 0 || int(op) >= nops {
				return fmt.Errorf("simnet: rank %d channel %d step %d: operation %d outside the schedule's %d", s.Programs[p].Rank, s.Programs[p].Channel, i, op, nops)
			}
			k := x.kernel(x.off[p] + int32(i))
			if k < 0 {
				continue // a switch endpoint runs no kernel
			}
			x.kernLeft[k]++
			if k%x.nk > 0 {
				x.kernOff[k+1]++
				x.rec[x.off[p]+int32(i)].pending++
			}
		}
	}
	for k := 0; k < nk; k++ {
		x.kernOff[k+1] += x.kernOff[k]
	}
	x.kernSteps = make([]int32, x.kernOff[nk])
	fill := append([]int32(nil), x.kernOff[:nk]...)
	for g := range x.rec[:len(x.rec)-1] {
		if k := x.kernel(int32(g)); k >= 0 && k%x.nk > 0 {
			x.kernSteps[fill[k]] = int32(g)
			fill[k]++
		}
	}
	return nil
}

// kernel is the kernel (rank×nk+j) of global step g; −1 for a switch endpoint's step (a switch
// forwards what arrives, launching nothing).
func (x *sim) kernel(g int32) int {
	r := x.s.Programs[x.progOf[g]].Rank
	if r >= x.s.NRanks {
		return -1
	}
	return r*x.nk + int(x.step(g).Op)/x.opt.OpsPerKernel
}

// kernelDone: every step of kernel k is done; the rank's next kernel starts one launch later.
func (x *sim) kernelDone(k int) {
	if k%x.nk+1 < x.nk {
		x.e.After(x.tm.Launch, evKernel, int64(k+1))
	}
}

// kernelStart releases the steps of kernel k.
func (x *sim) kernelStart(k int) {
	if x.kernLeft[k] == 0 {
		x.kernelDone(k)
	}
	for _, g := range x.kernSteps[x.kernOff[k]:x.kernOff[k+1]] {
		if d := x.skew(g); d > 0 && x.rec[g].pending == 1 {
			// Its kernel was all it waited for: it starts with its channel's skew.
			x.rec[g].pending = 0
			x.e.After(d, evSkewed, int64(g))
			continue
		}
		x.release(g)
	}
}

// skew is how long after its kernel's start step g's channel begins (Timing.ChannelSkew): c ×
// the skew for channel c of a rank's program in a ring collective, nothing for a switch
// endpoint or a point-to-point call.
func (x *sim) skew(g int32) Time {
	if x.tm.ChannelSkew <= 0 {
		return 0
	}
	pr := &x.s.Programs[x.progOf[g]]
	if pr.Rank >= x.s.NRanks {
		return 0
	}
	if op := &x.s.Ops[x.step(g).Op]; op.Algo != coll.Ring || op.Func == coll.SendRecv || op.Func == coll.AllToAll {
		return 0 // point-to-point keeps its channels in step, as SimulateP2P does
	}
	return x.tm.ChannelSkew * Time(pr.Channel)
}

// nvSwitch reports whether endpoint id is a node's NVSwitch (NVLS), whose multimem loads and
// stores reach Timing.SwitchEff of the links.
func (x *sim) nvSwitch(id int) bool {
	return id >= x.s.NRanks && x.s.Switches[id-x.s.NRanks].Kind == coll.SwitchNVLS
}

func (x *sim) step(g int32) *coll.Step {
	p := x.progOf[g]
	return &x.s.Programs[p].Steps[g-x.off[p]]
}

func (x *sim) route(src, dst, ch int, p2p bool) ([]LinkID, LinkClass) {
	k := [3]int32{int32(src), int32(dst), int32(ch)}
	if p2p {
		k[2] |= 1 << 30 // a point-to-point route is cached apart from a collective's
	}
	if r, ok := x.routes[k]; ok {
		return r, x.classes[k]
	}
	var r []LinkID
	c := ClassNVLink
	if n := x.s.NRanks; src >= n || dst >= n {
		// A message to or from a switch endpoint crosses the rank's link to its node's NVSwitch
		// (Simulate checked that the router places switches).
		rank, sw, up := src, dst, true
		if src >= n {
			rank, sw, up = dst, src, false
		}
		var err error
		if swi := x.s.Switches[sw-n]; swi.Kind == coll.SwitchCollNet {
			// The network's reduction (CollNet): through the rank's NIC (Simulate checked the
			// router places it).
			r, err = x.r.(CollNetRouter).RouteCollNet(rank, ch, up, nil)
			c = ClassNet
		} else {
			r, err = x.r.(SwitchRouter).RouteSwitch(rank, swi.Node, up, nil)
		}
		if err != nil && x.err == nil {
			x.err = err
		}
	} else if p2p {
		r, c = routeP2P(x.r, src, dst, ch, nil)
	} else {
		r, c = x.r.Route(src, dst, ch, nil)
	}
	x.routes[k] = r
	x.classes[k] = c
	return r, c
}

type ctaRouteKey struct {
	route *LinkID
	cta   LinkID
	w     float64
}

// ctaRoute is route followed by cta, crossed with weight w (its CTA's traffic per wire byte);
// the same slice for the same arguments.
func (x *sim) ctaRoute(route []LinkID, cta LinkID, w float64) []LinkID {
	k := ctaRouteKey{cta: cta, w: w}
	if len(route) > 0 {
		k.route = &route[0]
	}
	if r, ok := x.ctaRoutes[k]; ok {
		return r
	}
	r := append(append(make([]LinkID, 0, len(route)+1), route...), cta)
	ws := make([]float64, len(r))
	for i := range ws {
		ws[i] = 1
	}
	ws[len(ws)-1] = w
	x.e.weighRoute(r, ws)
	if x.ctaRoutes == nil {
		x.ctaRoutes = map[ctaRouteKey][]LinkID{}
	}
	x.ctaRoutes[k] = r
	return r
}

// rankMem is the memory link of program p's rank (Timing.MemTraffic), -1 where it has none.
func (x *sim) rankMem(p int32) LinkID {
	if x.memLink == nil {
		return -1
	}
	return x.memLink[x.s.Programs[p].Rank]
}

// copyRoute is program p's route of its copies to self over links weighted w (built once: a
// program's copies take one route).
func (x *sim) copyRoute(p int32, links []LinkID, w []float64) []LinkID {
	if r, ok := x.copyRoutes[p]; ok {
		return r
	}
	x.e.weighRoute(links, w)
	if x.copyRoutes == nil {
		x.copyRoutes = map[int32][]LinkID{}
	}
	x.copyRoutes[p] = links
	return links
}

// buildMem gives every rank whose channels' copies to self could together ask more than
// Timing.MemTraffic of its GPU's memory a link of that capacity (memLink; Timing.memBinds).
func (x *sim) buildMem() {
	if !x.tm.memBinds(len(x.s.Programs)) { // no rank has more channels than programs
		return
	}
	s := x.s
	copies := make([]int, s.NRanks)
	for p := range s.Programs {
		pr := &s.Programs[p]
		if pr.Rank >= s.NRanks {
			continue
		}
		for i := range pr.Steps {
			if st := &pr.Steps[i]; st.Prim == coll.Copy && len(st.Send) == 0 && st.Bytes > 0 {
				copies[pr.Rank]++
				break
			}
		}
	}
	for r, c := range copies {
		if !x.tm.memBinds(c) {
			continue
		}
		if x.memLink == nil {
			x.memLink = make([]LinkID, s.NRanks)
			for i := range x.memLink {
				x.memLink[i] = -1
			}
		}
		x.memLink[r] = x.e.AddLink(fmt.Sprintf("mem%d", r), x.tm.MemTraffic, 0)
	}
}

// ctaOnly is the route of local work on CTA link cta (one slice per link).
func (x *sim) ctaOnly(cta LinkID) []LinkID {
	return x.ctaRoute(nil, cta, 1)
}

// routeConn is the route of connection c: the router's own (ConnRouter), else route's.
func (x *sim) routeConn(c *coll.Conn) ([]LinkID, LinkClass) {
	if cr, ok := x.r.(ConnRouter); ok {
		return cr.RouteConn(*c)
	}
	return x.route(c.From, c.To, c.Channel, c.ConnIndex == 1)
}

// sendRoute is route for the sends of program pr on connection c (from pr's rank to the
// connection's other end), remembered per connection.
func (x *sim) sendRoute(c int, pr *coll.Program) ([]LinkID, LinkClass) {
	if x.connKnown == nil {
		n := len(x.s.Conns)
		x.connRoute, x.connClass, x.connKnown = make([][]LinkID, n), make([]LinkClass, n), make([]bool, n)
		x.connLat = make([]Time, n)
	}
	if x.connKnown[c] {
		return x.connRoute[c], x.connClass[c]
	}
	cn := &x.s.Conns[c]
	var r []LinkID
	var class LinkClass
	if cr, ok := x.r.(ConnRouter); ok && cn.From == pr.Rank {
		r, class = cr.RouteConn(*cn)
	} else {
		r, class = x.route(pr.Rank, cn.To, pr.Channel, cn.ConnIndex == 1)
	}
	if cn.From == pr.Rank && cn.Channel == pr.Channel {
		x.connRoute[c], x.connClass[c], x.connKnown[c] = r, class, true
		x.connLat[c] = x.e.RouteLatency(r)
	}
	return r, class
}

// Fire handles the executor's own events.
func (x *sim) Fire(kind int32, arg int64) {
	switch kind {
	case evLaunch:
		if x.opt.OpsPerKernel > 0 {
			for r := 0; r < x.s.NRanks; r++ {
				if x.kernLeft[r*x.nk] == 0 {
					x.kernelDone(r * x.nk)
				}
			}
		}
		for g := range x.rec[:len(x.rec)-1] {
			if x.rec[g].pending == 0 {
				if d := x.skew(int32(g)); d > 0 {
					x.e.After(d, evSkewed, int64(g))
					continue
				}
				x.start(int32(g))
			}
		}
	case evSkewed:
		x.start(int32(arg))
	case evKernel:
		x.kernelStart(int(arg))
	case evComplete:
		x.complete(int32(arg))
	case evFirst:
		m := int32(arg)
		if x.msgState[m] == msgArrived {
			return // it arrived whole first (released then)
		}
		x.msgState[m] = msgFirst
		x.inflight[x.msg[m].recv]++
		x.release(x.msg[m].recv)
	case evArrive:
		m := int32(arg)
		if x.msgEnd != nil {
			x.msgEnd[m] = x.e.Now()
		}
		if x.msgState != nil {
			if x.msgState[m] == msgFirst {
				x.msgState[m] = msgArrived
				x.arrived(x.msg[m].recv)
				return
			}
			x.msgState[m] = msgArrived
		}
		x.release(x.msg[m].recv)
	}
}

// streams reports whether message m of step g (sent by program pr over a route of class) is
// received line by line (Timing.LineStream).
func (x *sim) streams(st *coll.Step, pr *coll.Program, peer int, class LinkClass) bool {
	return x.tm.LineStream && (st.Proto == coll.LL || st.Proto == coll.LL128) &&
		pr.Rank < x.s.NRanks && peer < x.s.NRanks
}

// arrived: a streamed message step g started on has arrived whole; once the last has, what g
// finished meanwhile completes now.
func (x *sim) arrived(g int32) {
	x.inflight[g]--
	if x.inflight[g] > 0 {
		return
	}
	if ms, ok := x.netHeld[g]; ok {
		delete(x.netHeld, g)
		x.startHeld(g, ms)
	}
	if ms, ok := x.heldSends[g]; ok {
		delete(x.heldSends, g)
		for _, m := range ms {
			x.sent(m)
		}
	}
	if x.heldLocal[g] {
		delete(x.heldLocal, g)
		x.complete(g)
	}
}

// startHeld starts the sends held of step g (indices in its Send) that waited for its streamed
// receives (start).
func (x *sim) startHeld(g int32, held []int32) {
	st := x.step(g)
	pr := &x.s.Programs[x.progOf[g]]
	lane := x.laneShare(g)
	memT := x.memTime(g)
	cta := LinkID(-1)
	if memT > 0 && x.ctaLink != nil {
		cta = x.ctaLink[x.progOf[g]]
	}
	for _, i := range held {
		xf := st.Send[i]
		route, class := x.sendRoute(int(xf.Conn), pr)
		x.startSend(g, st, pr, xf, route, class, cta, memT, lane)
	}
}

// finishLocal completes step g's local part, or holds it while a message it streams from has
// not arrived. A step that sends nothing completes after its slice cost (hold) where it has one.
func (x *sim) finishLocal(g int32) {
	if x.inflight != nil && x.inflight[g] > 0 {
		x.heldLocal[g] = true
		return
	}
	if h := x.holdAt(g); h > 0 {
		x.e.After(h, evComplete, int64(g))
		return
	}
	x.complete(g)
}

// holdAt is step g's hold (holdOf).
func (x *sim) holdAt(g int32) Time {
	if x.hold == nil {
		return 0
	}
	return x.hold[g]
}

func (x *sim) release(g int32) {
	r := &x.rec[g]
	r.pending--
	if r.pending == 0 {
		x.start(g)
	}
}

// msgConsts is what msgRec holds of the message xf that step st of program pr sends (but its
// steps and latency).
func (x *sim) msgConsts(mr *msgRec, st *coll.Step, pr *coll.Program, xf coll.Xfer) {
	p := st.Proto
	if p < 0 || p >= coll.NumProtos {
		p = coll.Simple
	}
	mr.conn, mr.proto = int32(xf.Conn), int8(p)
	mr.stepLat = pr.Rank < x.s.NRanks || x.s.Switches[pr.Rank-x.s.NRanks].Kind != coll.SwitchCollNet
	wire := st.Wire
	if wire == 0 && st.Bytes > 0 {
		wire = coll.WireBytes(p, st.Bytes)
	}
	peer := x.s.Conns[xf.Conn].To // xf.Peer (NewIndex checks it), known to be an endpoint
	if eff := x.tm.SwitchEff; eff > 0 && eff < 1 && (x.nvSwitch(pr.Rank) || x.nvSwitch(peer)) {
		wire = int64(math.Ceil(float64(wire) / eff))
	}
	mr.wire = wire
	// The cap where the step's program has no lane rate (start's plain path).
	capRate := x.tm.PerFlowCap[p]
	if cc := x.tm.ChannelCap; cc > 0 && st.Lane == 0 && pr.Rank < x.s.NRanks && peer >= x.s.NRanks {
		// The cap is on the payload: the flow carries wire bytes.
		if st.Bytes > 0 {
			cc = cc * Rate(float64(wire)/float64(st.Bytes))
		}
		if capRate <= 0 || cc < capRate {
			capRate = cc
		}
	}
	mr.cap = capRate
}

// startPlain is start for a step of a program with no lane rate, without line streaming: what
// start does there, read from the step's and its messages' records.
func (x *sim) startPlain(g, p int32) {
	ms := x.sendList[x.rec[g].send:x.rec[g+1].send]
	if len(ms) == 0 {
		x.finishLocal(g)
		return
	}
	pr := &x.s.Programs[p]
	for _, m := range ms {
		mr := &x.msg[m]
		route, _ := x.sendRoute(int(mr.conn), pr)
		if x.msgStart != nil {
			x.msgStart[m] = x.e.Now()
		}
		x.e.StartFlow(route, float64(mr.wire), mr.cap, int64(m))
	}
}

// start runs step g: every message it sends becomes a flow; a step that sends nothing is done at
// once, or, when the CTA is modelled and the step copies or reduces data locally, after a flow of
// its bytes at its lane's rate on no link.
func (x *sim) start(g int32) {
	if p := x.progOf[g]; x.plain[p] {
		x.startPlain(g, p)
		return
	}
	st := x.step(g)
	lane := x.laneShare(g)
	memT := x.memTime(g) // the memory-traffic model's time of the step (0: not modelled)
	cta := LinkID(-1)
	if memT > 0 && x.ctaLink != nil {
		cta = x.ctaLink[x.progOf[g]]
	}
	if len(st.Send) == 0 {
		if x.tm.Memcpy > 0 && st.Prim == coll.Copy && st.Bytes > 0 {
			// A one-rank collective: NCCL's device-to-device cudaMemcpyAsync.
			x.e.StartFlow(nil, float64(st.Bytes), x.tm.Memcpy, int64(len(x.msg))+int64(g))
			return
		}
		if cta >= 0 && localWork(st.Prim) {
			w := st.Wire
			if w == 0 {
				w = coll.WireBytes(st.Proto, st.Bytes)
			}
			sc := x.tm.copyScale(st.Prim, st.Proto)
			tr := ctaTraffic(st.Prim, float64(st.Bytes), float64(w), 0) * sc
			route := x.ctaOnly(cta)
			if m := x.rankMem(x.progOf[g]); m >= 0 && st.Prim == coll.Copy {
				route = x.copyRoute(x.progOf[g], []LinkID{cta, m}, []float64{1, 1 / sc})
			}
			x.e.StartFlow(route, tr, 0, int64(len(x.msg))+int64(g))
			return
		}
		if memT > 0 && localWork(st.Prim) {
			var route []LinkID
			if m := x.rankMem(x.progOf[g]); m >= 0 && st.Prim == coll.Copy {
				// The flow moves memT units at 1 a second: its traffic per unit on the memory.
				tr := ctaTraffic(st.Prim, float64(st.Bytes), float64(st.Bytes), 0)
				route = x.copyRoute(x.progOf[g], []LinkID{m}, []float64{tr / memT})
			}
			x.e.StartFlow(route, memT, 1, int64(len(x.msg))+int64(g))
			return
		}
		if lane > 0 && st.Bytes > 0 && localWork(st.Prim) {
			// A received message is read from the FIFO as it lies there: its wire bytes (LL
			// lines carry 8 B of data in 16 B, LL128 120 in 128).
			b := st.Bytes
			if len(st.Recv) > 0 {
				b = st.Wire
				if b == 0 {
					b = coll.WireBytes(st.Proto, st.Bytes)
				}
			}
			var route []LinkID
			if m := x.rankMem(x.progOf[g]); m >= 0 && st.Prim == coll.Copy {
				route = x.copyRoute(x.progOf[g], []LinkID{m}, []float64{2}) // loaded and stored
			}
			x.e.StartFlow(route, float64(b), lane, int64(len(x.msg))+int64(g))
			return
		}
		x.finishLocal(g)
		return
	}
	pr := &x.s.Programs[x.progOf[g]]
	for i, xf := range st.Send {
		route, class := x.sendRoute(int(xf.Conn), pr)
		if class == ClassNet && x.inflight != nil && x.inflight[g] > 0 {
			// A step streaming in what it sends over the network: NCCL's proxy posts the step
			// to the NIC once the GPU has written all of it, so the message leaves after the
			// lines it is made of have arrived (arrived).
			x.netHeld[g] = append(x.netHeld[g], int32(i))
			continue
		}
		x.startSend(g, st, pr, xf, route, class, cta, memT, lane)
	}
}

// startSend starts step g's message xf (st, of program pr) over route of class: its flow,
// capped by the step's CTA (cta, memT, lane: start's), and its first lines' event where it
// streams.
func (x *sim) startSend(g int32, st *coll.Step, pr *coll.Program, xf coll.Xfer, route []LinkID, class LinkClass, cta LinkID, memT float64, lane Rate) {
	m := x.connOff[xf.Conn] + int32(xf.Seq)
	if x.msgStart != nil {
		x.msgStart[m] = x.e.Now()
	}
	mr := &x.msg[m]
	p := coll.Proto(mr.proto)
	wire := mr.wire
	capRate := x.tm.PerFlowCap[p]
	if cta >= 0 {
		tr := ctaTraffic(st.Prim, float64(st.Bytes), float64(wire), len(st.Send)) / float64(len(st.Send))
		route = x.ctaRoute(route, cta, tr/float64(wire))
	} else if memT > 0 {
		// The step's whole traffic at the lane's rate bounds each of its messages.
		if r := Rate(float64(wire) / memT); capRate <= 0 || r < capRate {
			capRate = r
		}
	} else if lane > 0 && (capRate <= 0 || lane < capRate) {
		capRate = lane
	}
	if cc := x.tm.ChannelCap; cc > 0 && st.Lane == 0 && pr.Rank < x.s.NRanks && int(xf.Peer) >= x.s.NRanks {
		// The cap is on the payload: the flow carries wire bytes.
		if st.Bytes > 0 {
			cc = cc * Rate(float64(wire)/float64(st.Bytes))
		}
		if capRate <= 0 || cc < capRate {
			capRate = cc
		}
	}
	if x.tm.NetStage && class == ClassNet && x.inflight == nil && pr.Rank < x.s.NRanks && x.connKnown[xf.Conn] && (cta >= 0 || memT > 0 || lane > 0) {
		// Timing.NetStage: the CTA writes the message into its connection's buffer, its share
		// of the step's traffic at the CTA's rate on no link of the route; netSend then hands
		// it to the NIC.
		if x.netDec == nil {
			x.netDec = make([]bool, len(x.msg))
		}
		x.netDec[m] = true
		tag := int64(len(x.msg)) + int64(len(x.rec)) + int64(m)
		switch {
		case cta >= 0:
			tr := ctaTraffic(st.Prim, float64(st.Bytes), float64(wire), len(st.Send)) / float64(len(st.Send))
			x.e.StartFlow(x.ctaOnly(cta), tr, 0, tag)
		case memT > 0:
			x.e.StartFlow(nil, memT, 1, tag) // the step's traffic at the lane's rate, as its cap says
		default:
			x.e.StartFlow(nil, float64(wire), lane, tag)
		}
		return
	}
	x.e.StartFlow(route, float64(wire), capRate, int64(m))
	if x.streams(st, pr, int(xf.Peer), class) {
		x.e.After(x.msgLat(mr), evFirst, int64(m))
	}
}

// memTime is the time step g holds its lane under the memory-traffic model (Timing.CTAMem):
// its primitive's traffic over the lane's share of the CTA's rate; 0 where the model does not
// apply (no CTA, no rate for the protocol, an empty step, a switch endpoint).
func (x *sim) memTime(g int32) float64 {
	st := x.step(g)
	p := x.progOf[g]
	pp := st.Proto
	if x.laneRate[p] <= 0 || pp < 0 || pp >= coll.NumProtos || x.tm.CTAMem[pp] <= 0 || st.Bytes <= 0 {
		return 0
	}
	w := st.Wire
	if w == 0 {
		w = coll.WireBytes(pp, st.Bytes)
	}
	return ctaTraffic(st.Prim, float64(st.Bytes), float64(w), len(st.Send)) * x.tm.copyScale(st.Prim, pp) / float64(x.tm.CTAMem[pp]/Rate(x.laneCount(g)))
}

// copyScale is the factor on the traffic of a step of primitive p and protocol proto that makes
// it, held at CTAMem[proto], take the time of its traffic at CTACopy: for a Copy (a direct copy,
// CTACopy) CTAMem / CTACopy, 1 for every other primitive or where either rate is unset.
func (tm *Timing) copyScale(p coll.Prim, proto coll.Proto) float64 {
	if p != coll.Copy || tm.CTACopy <= 0 || proto < 0 || proto >= coll.NumProtos || tm.CTAMem[proto] <= 0 {
		return 1
	}
	return float64(tm.CTAMem[proto]) / float64(tm.CTACopy)
}

// copyRate is the memory traffic one channel's copy to self moves at most: CTACopy, or under the
// flat CTA model its payload at CTARate loaded and stored (0: no CTA model).
func (tm *Timing) copyRate() Rate {
	if tm.CTACopy > 0 {
		return tm.CTACopy
	}
	return 2 * tm.CTARate
}

// memBinds reports whether a rank's copies to self on copies channels could together ask more of
// its GPU's memory than it gives (MemTraffic), so that they must share it: both executors give such
// a rank a memory link (sim.buildMem, p2pSim.shareMem).
func (tm *Timing) memBinds(copies int) bool {
	per := tm.copyRate()
	return tm.MemTraffic > 0 && per > 0 && float64(copies)*float64(per) > float64(tm.MemTraffic)
}

// hold is the time step g holds its CTA beyond its bytes, on a rank whose CTA is modelled: a
// Simple primitive of a ring all-gather, reduce-scatter or all-reduce its slice cost
// (Timing.Slice, at least the fence where it sends), whether it sends or not; any other Simple
// step that sends, the fence after its stores (Timing.Fence).
func (x *sim) holdOf(g int32) Time {
	if x.laneRate[x.progOf[g]] <= 0 {
		return 0
	}
	st := x.step(g)
	if st.Proto != coll.Simple {
		return 0
	}
	if op := &x.s.Ops[st.Op]; x.tm.Fence > 0 {
		if h, ok := x.tm.Slice.For(op.Algo, op.Func, st.Prim, st.Bytes); ok {
			if len(st.Send) > 0 {
				h = max(h, x.tm.Fence)
			}
			return h
		}
	}
	if x.tm.Fence <= 0 || len(st.Send) == 0 {
		return 0
	}
	return x.tm.Fence
}

// FlowDone: the message's last byte has left; it arrives after the route and step latency. Tags
// from len(msg) on are the local work of step tag−len(msg), from len(msg)+len(rec) on the CTA's
// stage of network message tag−len(msg)−len(rec) (Timing.NetStage).
func (x *sim) FlowDone(tag int64) {
	if n := int64(len(x.msg)); tag >= n+int64(len(x.rec)) {
		x.netSend(int32(tag - n - int64(len(x.rec))))
		return
	} else if tag >= n {
		x.finishLocal(int32(tag - n))
		return
	}
	m := int32(tag)
	if x.netDec != nil && x.netDec[m] {
		// Its NIC's stage is done (netStart): it arrives, and its connection's next one goes.
		x.e.After(x.msgLat(&x.msg[m]), evArrive, int64(m))
		x.netDone(m)
		return
	}
	if g := x.msg[m].send; x.inflight != nil && x.inflight[g] > 0 {
		// Its last lines cannot leave before the lines they are made of have arrived.
		x.heldSends[g] = append(x.heldSends[g], m)
		return
	}
	x.sent(m)
}

// netSend: the CTA has written network message m into its buffer: the NIC carries it from now,
// and its step goes on as if it had left.
func (x *sim) netSend(m int32) {
	mr := &x.msg[m]
	if x.netBusy == nil {
		x.netBusy = make([]bool, len(x.s.Conns))
		x.netQueue = map[int32][]int32{}
	}
	if x.netBusy[mr.conn] {
		x.netQueue[mr.conn] = append(x.netQueue[mr.conn], m)
	} else {
		x.netStart(m)
	}
	x.stepSent(mr.send)
}

// netStart puts network message m on its connection's route: the connection sends its messages
// one after another, as a queue pair does.
func (x *sim) netStart(m int32) {
	mr := &x.msg[m]
	x.netBusy[mr.conn] = true
	if x.msgStart != nil {
		x.msgStart[m] = x.e.Now()
	}
	x.e.StartFlow(x.connRoute[mr.conn], float64(mr.wire), x.tm.PerFlowCap[mr.proto], int64(m))
}

// netDone: network message m has left; the next one its connection holds goes.
func (x *sim) netDone(m int32) {
	c := x.msg[m].conn
	x.netBusy[c] = false
	if q := x.netQueue[c]; len(q) > 0 {
		if len(q) == 1 {
			delete(x.netQueue, c)
		} else {
			x.netQueue[c] = q[1:]
		}
		x.netStart(q[0])
	}
}

// sent: message m's last byte has left; it arrives after the route and step latency.
func (x *sim) sent(m int32) {
	mr := &x.msg[m]
	x.e.After(x.msgLat(mr), evArrive, int64(m))
	x.stepSent(mr.send)
}

// stepSent: one more of step g's messages has left.
func (x *sim) stepSent(g int32) {
	r := &x.rec[g]
	r.sendsLeft--
	if r.sendsLeft == 0 {
		if f := x.holdAt(g); f > 0 {
			x.e.After(f, evComplete, int64(g))
			return
		}
		x.complete(g)
	}
}

// complete marks step g done: its dependents may start, and the messages it consumed free their
// slots for the sends waiting on those credits.
func (x *sim) complete(g int32) {
	x.done++
	if x.frontier != nil && x.frontier[g] && !x.opt.prefix.Diverged {
		// Past here the replay tells nothing of the longer schedules: it stops at the end of
		// the instant.
		x.opt.prefix.Diverged = true
		x.e.halted = true
	}
	if x.opt.OpsPerKernel > 0 {
		if k := x.kernel(g); k >= 0 {
			x.kernLeft[k]--
			if x.kernLeft[k] == 0 {
				x.kernelDone(k)
			}
		}
	}
	if now := x.e.Now(); now > x.end {
		x.end = now
	}
	for _, d := range x.rel[x.rec[g].rel:x.rec[g+1].rel] {
		x.release(d)
	}
}

func (x *sim) records() []OpRecord {
	out := make([]OpRecord, 0, len(x.msg))
	for m := range x.msg {
		g := x.msg[m].send
		st := x.step(g)
		pr := &x.s.Programs[x.progOf[g]]
		cn := x.connOfMsg(int32(m))
		peer := x.s.Conns[cn].To
		route, class := x.route(pr.Rank, peer, pr.Channel, x.s.Conns[cn].ConnIndex == 1)
		wire := st.Wire
		if wire == 0 {
			wire = coll.WireBytes(st.Proto, st.Bytes)
		}
		out = append(out, OpRecord{Rank: pr.Rank, Peer: peer, Channel: pr.Channel, Step: int(g - x.off[x.progOf[g]]), Seq: m - int(x.connOff[cn]), Chunk: int(st.Chunk),
			Bytes: st.Bytes, Wire: wire, Proto: st.Proto, Start: x.msgStart[m], End: x.msgEnd[m], Class: class, Route: route})
	}
	return out
}

// connOfMsg is the connection of global message m.
func (x *sim) connOfMsg(m int32) int {
	return sort.Search(len(x.connOff)-1, func(c int) bool { return x.connOff[c+1] > m })
}
