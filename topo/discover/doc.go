// Package discover reads the live machine — NVML for the GPUs and their NVLinks, sysfs and /proc for
// the PCI tree, NUMA nodes, CPUs and NICs — and builds the NCCL topology XML (<system version="1">)
// that NCCL 2.28 writes with NCCL_TOPO_DUMP_FILE for a communicator holding every GPU of the
// machine (rank = NVML index).
//
// It is the only package that touches NVML and sysfs. Everything is read below Options.Root, so
// tests run on a fake tree, and NVML is reached through the small NVML interface: the real
// implementation (github.com/NVIDIA/go-nvml, loaded with dlopen at run time) needs cgo; a build
// without cgo compiles and reports ErrNoNVML.
//
//	lib, err := discover.OpenNVML()   // errors.Is(err, discover.ErrNoNVML) without a driver
//	if err != nil { ... }
//	defer lib.Close()
//	res, err := discover.Discover(discover.Options{NVML: lib})
//	res.Doc.WriteTo(os.Stdout)        // a topo/ncclxml Document
//	for _, w := range res.Warnings { ... } // facts that had to be approximated
//
// How each element is found is documented on Discover; what cannot be read the way NCCL reads it
// (an InfiniBand device's max_qp, DMA-BUF support) is left out or approximated and said so in
// Result.Warnings.
package discover
