// Package comm is the real engine's public API, shaped like NCCL 2.28's nccl.h: communicators
// made from a UniqueID (InitRank, InitAll, Split), collectives (AllReduce, Broadcast, Reduce,
// AllGather, ReduceScatter, AllToAll) and point-to-point calls (Send, Recv) queued in call order on
// streams, groups (GroupStart/GroupEnd), Abort, Finalize, Destroy and GetAsyncError.
//
// Collectives execute the schedules package coll compiles (Ring for every collective, Tree for
// AllReduce, PAT for AllGather/ReduceScatter; Simple protocol; channels in parallel) — the same schedules simnet times — over realnet
// transports chosen per peer (in-process, shared memory, TCP), with reductions in Go for all twelve
// NCCL data types. Connections are made lazily on first use of a (channel, peer, connIndex) and
// their buffer memory is reported (MemoryBytes); Config.ConnectAtInit connects rings and trees at
// init. Point-to-point calls and AllToAll run directly on connIndex 1.
//
// Failures: a call that makes no progress for Config.Timeout (default 10 s) fails; a dead peer is
// seen at once over TCP (reset/EOF) and within ShmLivenessPeriod over shared memory; a failing rank
// tears its connections down so that its peers fail too, and the survivors build a new communicator
// with Shrink (no id sent out of band) or with InitRank on a fresh UniqueID.
//
// Usage (goroutine ranks):
//
//	cs, _ := comm.InitAll(4, nil)
//	for r, c := range cs {
//		c.AllReduce(comm.Bytes(in[r]), comm.Bytes(out[r]), n, coll.Float32, coll.Sum, nil)
//	}
//	for _, c := range cs {
//		if err := c.Synchronize(); err != nil { … }
//	}
package comm
