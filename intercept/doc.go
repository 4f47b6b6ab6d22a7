// Package intercept captures the NCCL calls of real programs into a workload trace and replays
// such traces on simulated machines of any size.
//
// Three ways in, one trace format (Record, JSON lines, one file per rank):
//
//   - the preloadable shim (intercept/shim, go build -buildmode=c-shared) exports NCCL's C API;
//     in record mode it forwards every call to the real libnccl and appends a Record, in
//     virtual mode its communicators are virtual (any size, init returns at once) and
//     collectives complete without moving data;
//   - ParseLog reads NCCL_DEBUG=INFO logs (the COLL lines) of programs that cannot be preloaded;
//   - ReadTrace reads what the shim wrote.
//
// Launches groups a trace into what each communicator runs as one unit (one call, or one
// ncclGroupStart/End), Replay simulates the launches on a simnet.Machine (scaling data-parallel
// communicators by a documented rule) and Compare puts the result beside a measured run.
//
// PlanReal checks the rank traces of one run together and RunActor executes one of them on the
// real engine (package comm), rank by rank with real buffers and checked results;
// RunRealInProcess runs them all as goroutines (runccl replay).
//
// Usage:
//
//	recs, _ := intercept.ReadTraceFile("simccl-trace.rank0.jsonl")
//	launches, _ := intercept.Launches(recs)
//	rep, _ := intercept.Replay(launches, machine, intercept.ReplayOptions{Links: true})
//	fmt.Println(rep.TotalUs, rep.Slowest(5))
//
// See README.md beside this file for the shim's environment variables and the trace fields.
package intercept
