// Package engine runs simccl's collectives on NVIDIA GPUs: the coll schedules (Ring, Tree, PAT;
// channels in parallel; the same schedules comm runs on CPUs) executed by the copy and reduce
// kernels of package cuda, for one process driving several GPUs (ncclCommInitAll's shape).
//
//	devs := []*cuda.Device{d0, d1}                       // cuda.Open(0), cuda.Open(1)
//	comms, err := engine.InitAll(devs, nil)              // peer access, kernels, one Comm per GPU
//	...
//	// one goroutine per rank (or engine.GroupStart/GroupEnd around a loop over the ranks):
//	err = comms[r].AllReduce(send, recv, count, coll.Float32, coll.Sum, stream)
//	// the call is enqueued on stream (of rank r's device) and returns; synchronize the stream.
//
// How a step runs (exec.go has the details): every (channel, lane) of a rank has a stream; a
// step's kernel reads the messages it receives straight from the sending GPU's memory (peer
// access), reduces them with its local input in the same pass and writes its output; the order
// across GPUs is carried by CUDA events (cuStreamWaitEvent on the event the sending step
// recorded), and staging slots are reused under the schedule's credits.
//
// Launches: every rank makes the same sequence of launches (a call, or a group of calls). The
// ranks of the n-th launch meet on the host (a rendezvous inside the call) to check that their
// calls agree and to enqueue concurrently: a call returns once its rank's work is enqueued, not
// when it has run, but it waits for the other ranks to make the same call. So each rank needs
// its own goroutine, or one goroutine wraps the calls of all ranks in GroupStart/GroupEnd (as
// one thread driving several GPUs does with NCCL); a rank that never comes makes the others
// fail with ErrTimeout after Config.Timeout. Send and Recv run in launches of every rank too:
// put them in a group on every rank (nccl-tests' pattern); the matching is checked. A
// process-wide group that holds calls for every rank of the clique skips the rendezvous: the
// calling goroutine enqueues every rank's part itself, each device's context made current in turn
// (together.go), which makes small launches about 3× cheaper than the per-rank path.
//
// Tests run on the emulated driver (cuda.Emulate) where no GPU is present; the same tests run
// on real GPUs where libcuda.so.1 is. devcheck.sh is the one-call check on a GPU machine.
//
// CUDA graphs: the calls can be captured and the graph replayed, in any capture mode. The ranks'
// launches wait on each other's events, so every rank's stream must be in one capture sequence:
// Capture begins it on rank 0's stream, forks the other ranks' streams from it, runs the calls
// and joins the streams back (TestGraphCapture; runccl -G). A capture per rank cannot work there
// (CUDA refuses a wait on another capture's event). Ranks in separate processes (InitRank) each
// capture their own stream: a capturing launch is ordered by flags in device memory instead of
// events (flags.go). Launches run in relaxed capture mode, so the first launch of a shape may
// allocate its staging buffers during a global-mode capture.
//
// One process per rank: InitRank (xproc.go) makes one rank of a clique whose ranks are in other
// processes; the launch rendezvous and progress live in a /dev/shm segment, step events and
// staging buffers cross processes through CUDA IPC (README.md). cuda/libnccl puts NCCL's C API on
// top of InitAll and InitRank.
//
// Protocols: Simple, LL and LL128, as the planner picks them per call (NCCL's choice: LL128 only
// where NCCL enables it, NVLink paths, or under NCCL_PROTO; Exclude lists what is left out). An
// LL message travels as flagged 16-byte lines, an LL128 message as 128-byte lines of 120 payload
// bytes and an 8-byte flag written and read by one warp instruction (NCCL's assumption that such
// a line arrives whole); the receiving kernel polls the flags, so no event orders it after the
// sender (exec.go, stepLL). Simple steps are ordered by events as above.
//
// Not here yet: NVLS and CollNet schedules, graph capture across processes.
package engine
