// Package coll compiles a collective (or a group of them) and the choices tuning made for it into a
// Schedule: for every rank and channel, the ordered NCCL primitives (Send, Recv, RecvReduceSend,
// RecvCopySend, RecvReduceCopySend, …) with their peers, connections, buffer offsets, payload and
// wire bytes, NCCL_STEPS slots, chunk and slice numbers, and dependencies. It knows nothing about
// time or transports: simnet times a schedule, comm executes it with real bytes, and Execute, the
// reference interpreter here, runs it on float64 buffers to check it. Reference and ReduceRef say
// what every collective must produce (the one reference, with its tolerance), and the
// conformance kit that every executor runs, coll/colltest, checks against them. coll also owns
// the element types' encodings (DataType.Bits, Float, FromFloat; the narrow floats' NarrowFormat).
//
// The contract every executor follows is written at the top of schedule.go. In short: a step runs
// once its Deps (same program) are done, its Recv messages have arrived (matched by connection and
// sequence number, never guessed) and, for a faithful executor, the slots of its Send messages are
// free (Xfer.CreditSeq consumed); lanes of a program run concurrently.
//
// What compiles (Supported):
//   - Ring: AllReduce (reduce-scatter then all-gather, 2(n−1) primitives per loop), AllGather,
//     ReduceScatter, Broadcast, Reduce, with NCCL 2.30.7's runRing step structure.
//   - Tree: AllReduce as runTreeSplit (reduce up on lane 0, broadcast down on lane 1, the root
//     doing recvReduceCopySend), over trees from BuildTrees (NCCL's double binary tree across
//     nodes, intra-node chains, balanced/split/tree patterns) or any Plan.Trees.
//   - PAT: AllGather and ReduceScatter as per-block binomial trees over rank±2^k (PAT's peers and
//     bytes; NCCL's step aggregation is not reproduced, so message counts differ).
//   - SendRecv (ring shift or an explicit Transfer list) and AllToAll as grouped send/recv.
//   - NVLS AllReduce, AllGather and ReduceScatter within one node, NVLSTree AllReduce (NVLS in
//     each node, NCCL's double binary tree between the nodes' heads) and CollNetChain AllReduce,
//     through switch endpoints (the
//     NVSwitch's multimem engine, the network's SHARP reduction) that run their own programs of
//     RecvReduceForward and RecvSend steps (NeedsSwitches; contract rule 6).
//   - Groups: Compile(plans...) runs the operations one after another on every channel.
//
// Not modelled: CollNetDirect, CollNet and NVLSTree for functions other than AllReduce, NVLS
// AllGather/ReduceScatter across nodes (Compile returns ErrUnsupported).
//
// Chunking follows NCCL 2.30.7 calcCollChunking: stepSize = buffSize/NCCL_STEPS, Ring Simple
// chunkSteps 4 and sliceSteps 2 for AllReduce/AllGather/ReduceScatter (two slices per chunk, every
// slice posted even when empty), LL payload = half the wire bytes, LL128 120 of every 128. Each
// channel handles a contiguous part of the buffer (NCCL 2.19+); the part sizes are equal
// 16-byte-aligned splits, an approximation of scheduleCollTasksToPlan's cell packing.
//
// Usage:
//
//	s, err := coll.Compile(coll.Plan{Func: AllReduce, Algo: Ring, Proto: Simple,
//		NRanks: 8, Count: 1 << 20, DataType: coll.Float32, NChannels: 2})
//	sum := coll.Summarize(s)              // bytes and messages per rank
//	coll.WriteText(os.Stdout, s, coll.DumpOptions{Steps: true})
//	coll.WriteJSON(w, s)                  // ReadJSON validates on the way back
//	stats, err := coll.Execute(s, bufs, coll.ExecOptions{}) // bufs[op][rank]
package coll
