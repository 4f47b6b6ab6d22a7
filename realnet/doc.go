// Package realnet holds the real engine's transports and its bootstrap.
//
// Transports implement a small contract in the manner of database/sql/driver (transport.go): a
// Transport connects to a peer for a Key (channel, peer, connIndex) and returns a Conn that sends and
// receives whole messages with deadlines; optional capabilities are found by type assertion
// (MemoryReporter, DirectReceiver, Flusher). Three implementations:
//
//   - InProc: goroutine ranks of one process, rings in Go memory meeting at a Hub.
//   - Shm: processes of one host, a file in /dev/shm mapped by both, a lock-free single-producer
//     single-consumer ring of NCCL_STEPS slots per direction, polling with backoff, peer liveness by
//     pid. File names are derived from the communicator's secret; the file is created exclusively
//     (O_EXCL|O_NOFOLLOW, 0600), links are never followed, names are removed on every exit path.
//   - TCP: one socket per connection, authenticated with the communicator's secret, then a hello
//     naming the key, framed messages with bounded lengths, a writer goroutine behind NCCL_STEPS
//     slot buffers.
//
// Every transport runs the same conformance suite, realnettest.TestTransport.
//
// The bootstrap (bootstrap.go) follows NCCL's: a UniqueID holds the root's address and the
// communicator's Secret; ranks register with the root, learn their ring successor, connect a ring
// of sockets and run AllGather/Barrier on it. Every connection a communicator accepts (root, ring,
// TCP data) first passes a mutual HMAC challenge-response on the secret (auth.go), with a short
// deadline and served concurrently, so that strangers can neither join nor stall it; every length
// read is bounded. docs/security.md says what this protects against and what it does not.
//
// Usage:
//
//	id, root, _ := realnet.NewUniqueID("", 0)          // on one process; send id to the others
//	defer root.Close()
//	b, _ := realnet.NewBootstrap(ctx, id, rank, n, realnet.BootstrapConfig{})
//	all, _ := b.AllGather([]byte(myAddress))
package realnet
