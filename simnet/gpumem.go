package simnet

import "fmt"

// GPUMemory is what one GPU's device memory lets a plain copy do, the figures of a one-rank
// collective (NCCL runs it as a device-to-device cudaMemcpyAsync) and of the copies that load
// the memory from many CTAs at once.
type GPUMemory struct {
	Name string
	// Copy is the bytes a device-to-device cudaMemcpyAsync copies per second on a buffer far
	// larger than L2 (each byte is loaded and stored once: the memory moves twice this).
	Copy Rate
	// Source says where Copy comes from.
	Source string
}

// MemcpyLat is a device-to-device cudaMemcpyAsync's fixed time in a stream of them: the
// intercept of the least-squares line through the copies of 32 MiB–1 GiB timed back to back
// (bench/gpuprobe/memcpy.cu on one H200, 2026-11-29, two leases of two runs each:
// results/h200-memcpy-2026-11-29*.csv: 3.14 µs + bytes at 2,146.8 GB/s). Taken for every GPU,
// for want of another measurement.
const MemcpyLat = 3140 * Nanosecond

// OneRankHost and OneRankP2PHost are NCCL's host time to enqueue one call on a one-rank
// communicator: a collective (which queues a cudaMemcpyAsync: ncclLaunchOneRank) and an
// all-to-all or send/recv (a send and a receive to the rank itself, a kernel on the p2p
// channels). Measured with NCCL 2.28 on one H200 (kind nvidia-h200, 2026-11-29;
// testdata/nccl/onerank.sh, testdata/nccl/h200x1/onerank-2026-11-29b.csv): every collective from
// 8 B to 1 MiB enqueued behind a 50 ms spin kernel, so that the host never waits on the GPU, twice;
// the median host time per call over the 180 rows of the five collectives is 5.89 µs (per
// collective 5.56–6.33), over the 72 of the all-to-all and send/recv 9.38 µs. (The memcpy alone
// costs that host 4.21 µs a copy: NCCL's own work on a one-rank collective is the rest.) One
// lease: on another the same day the calls ran 25–40% faster in nccl-tests' loop (the host's fast
// mode, see HostEnqueue).
const (
	OneRankHost    = 5885 * Nanosecond
	OneRankP2PHost = 9379 * Nanosecond
)

// memcpyPerPeak is how much of its datasheet memory bandwidth a GPU's device-to-device copy
// moves (loads plus stores): measured on two GPUs, H100 SXM5 2 × 1,487 / 3,350 GB/s = 0.888 and
// H200 2 × 2,146.8 / 4,800 = 0.895; their mean stands for GPUs with HBM not measured here.
const memcpyPerPeak = (2*1487.0/3350 + 2*2146.8/4800) / 2

// gpuMemories are the GPUs whose memory figures are known, by PCI device id (the <pci device>
// of the GPU in NCCL's topology file).
var gpuMemories = map[uint16]GPUMemory{
	0x2335: {Name: "H200", Copy: GBps(2146.8), Source: "measured: bench/gpuprobe/memcpy.cu on one H200, 2026-11-29 (32 MiB–1 GiB fit, two leases)"},
	0x2330: {Name: "H100 SXM5 80GB", Copy: GBps(1487), Source: "measured: bench/gpuprobe/probe.cu memcpy of 1 GiB on one H100 SXM, 2026-11-25"},
	0x20b0: datasheetMemory("A100 SXM4 40GB", 1555),
	0x20b2: datasheetMemory("A100 SXM4 80GB", 2039),
	0x2901: datasheetMemory("B200", 8000),
	0x2941: datasheetMemory("GB200 (B200)", 8000),
	0x1db1: datasheetMemory("V100 SXM2 16GB", 900),
}

// datasheetMemory is a GPU whose copy rate is its datasheet bandwidth (GB/s) × memcpyPerPeak / 2.
func datasheetMemory(name string, peakGBps float64) GPUMemory {
	return GPUMemory{Name: name, Copy: GBps(peakGBps * memcpyPerPeak / 2),
		Source: fmt.Sprintf("datasheet %.0f GB/s × %.3f (memcpy over peak, measured on H100 and H200) / 2", peakGBps, memcpyPerPeak)}
}

// GPUMemoryFor returns the memory figures of the GPU with PCI device id dev, or where it is not
// known (0: no id in the topology) those of its generation's GPU here (compute capability sm:
// Blackwell B200, Hopper H100 SXM5 — the lower of the two Hopper figures —, Ampere A100 40GB,
// older V100), named "as …".
func GPUMemoryFor(dev uint16, sm int) GPUMemory {
	if m, ok := gpuMemories[dev]; ok {
		return m
	}
	var m GPUMemory
	switch smIndex(sm) {
	case 3:
		m = gpuMemories[0x2901]
	case 2:
		m = gpuMemories[0x2330]
	case 1:
		m = gpuMemories[0x20b0]
	default:
		m = gpuMemories[0x1db1]
	}
	m.Name = "as " + m.Name
	return m
}
