// Package comm is the real engine's public API, shaped like NCCL 2.28's nccl.h: communicators
// made from a UniqueID (InitRank, InitAll, Split), collectives (AllReduce, Broadcast, Reduce,
// AllGather, ReduceScatter, AllToAll) and point-to-point calls (Send, Recv) queued in call order on
// streams, groups (GroupStart/GroupEnd), Abort, Finalize, Destroy and GetAsyncError.
//
// Every call is planned by Config.Planners (planner.CPU: NCCL 2.28's decision for a machine that
// describes this engine — ranks under one CPU per host, reached through host memory, hosts joined by
// a NIC — with what the engine lacks excluded: LL and LL128, NVLS, CollNet; comm.Exclude) and runs
// the schedule package coll compiles from that plan: Ring, Tree and PAT collectives, AllToAll as a
// collective schedule, Send/Recv groups as SendRecv schedules of the rank's transfers; channels in
// parallel. The simulator (simnet) replays the schedule of the same plan, and
// comm/bothexec_test.go checks that both move the same bytes on the same connections, message for
// message. Transports are chosen per peer (in-process, shared memory, TCP, package realnet), with
// reductions in Go for all twelve NCCL data types. Connections are made lazily on first use of a
// (channel, peer, connIndex) and their buffer memory is reported (MemoryBytes); with
// NCCL_RUNTIME_CONNECT=0 (Config.ConnectAtInit) the plan's rings and trees connect at init.
//
// Failures: a call that makes no progress for Config.Timeout (default 10 s) fails; a dead peer is
// seen at once over TCP (reset/EOF) and within ShmLivenessPeriod over shared memory; a failing rank
// tears its connections down so that its peers fail too, and the survivors build a new communicator
// with Shrink (no id sent out of band) or with InitRank on a fresh UniqueID.
//
// Usage (goroutine ranks):
//
//	cs, _ := comm.InitAll(4, &comm.Config{Planners: planner.CPU{}})
//	for r, c := range cs {
//		c.AllReduce(comm.Bytes(in[r]), comm.Bytes(out[r]), n, coll.Float32, coll.Sum, nil)
//	}
//	for _, c := range cs {
//		if err := c.Synchronize(); err != nil { … }
//	}
package comm
