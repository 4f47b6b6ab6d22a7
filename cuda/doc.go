// Package cuda reaches NVIDIA GPUs through the CUDA driver API at run time: libcuda.so.1 is
// opened with dlopen and its entry points resolved with dlsym under their versioned names
// (cuMemAlloc_v2, cuStreamDestroy_v2, …), declared by us in driver_cgo.go, so that the project
// builds and tests with no CUDA SDK. Without a driver (or without cgo) Init returns an error
// wrapping ErrNoDriver and the GPU tests skip with that message.
//
// Threading: a CUDA context is current on one OS thread. Open(i) starts one goroutine locked to
// its thread, retains device i's primary context and makes it current there; Device.Do runs a
// function on that thread with a *Ctx whose methods call the driver directly:
//
//	d, err := cuda.Open(0)
//	...
//	err = d.Do(func(c *cuda.Ctx) error {
//		p, err := c.Alloc(1 << 20)
//		if err != nil {
//			return err
//		}
//		defer c.Free(p)
//		k, err := c.LoadKernels() // once per device in real code
//		if err != nil {
//			return err
//		}
//		return k.Reduce(c, 0, coll.Float32, coll.Sum, p, p, p, 1<<18, 0, 0)
//	})
//
// Every failed driver call returns an *Error carrying the entry point and the driver's name for
// the CUresult (errors.Is(err, cuda.ErrorOutOfMemory) matches the code). Go memory handed to the
// driver is either used only for the duration of a synchronous call or lives outside the Go heap
// (HostMem from Ctx.HostAlloc, the only host memory the asynchronous copies accept).
//
// What is here: devices and their properties, device and pinned host memory, synchronous and
// stream-ordered copies (host, device, peer), memset, streams, events and timing, peer access,
// IPC memory handles (one process per GPU), modules from PTX with the JIT's error log, kernel
// launches, stream capture into graphs. The kernels (copy; reduction of two inputs for every
// NCCL datatype and Sum/Prod/Min/Max/PreMulSum; integer division for Avg; the LL and LL128
// protocols' copy and reduction, whose messages carry their flags in 16-byte LL lines or 128-byte
// LL128 lines: Kernels.LLCopy, LLReduce, LL128Copy, LL128Reduce, LineCopy, LineReduce) are our
// CUDA C in kernels/kernels.cu, compiled to PTX by kernels/gen.sh (nvcc -ptx -arch=sm_90 -O3) and
// embedded;
// TestPTXCurrent fails when kernels.ptx was not generated from the committed source.
// kernels/devcheck.sh is the one-call device check (regenerate PTX, run the GPU tests, report
// registers and vector loads).
//
// The emulated driver (emulator.go): Emulate(n), or InitOrEmulate(n) where no libcuda.so.1 can be
// loaded, makes the process run on n host-backed devices: streams asynchronous and in order,
// CUDA's event semantics, peer-access and bounds checks, and the kernels executed by the host
// reference they are tested against (emuref.go). Package cuda/engine, the collective engine over
// these kernels, runs its conformance suite on it.
package cuda
