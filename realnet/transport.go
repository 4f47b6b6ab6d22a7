package realnet

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Steps is the number of buffer slots of one connection direction: NCCL_STEPS = 8
// (NCCL 2.28 src/include/device.h).
const Steps = 8

// DefaultSlotBytes is the size of one slot: the Simple protocol's step, DEFAULT_BUFFSIZE 4 MiB / NCCL_STEPS
// (NCCL 2.28 src/init.cc).
const DefaultSlotBytes = 4 << 20 / Steps

// Key names one connection: the channel, the peer rank and the connection index (0 collectives,
// 1 send/recv), as NCCL's connectors are indexed (NCCL 2.28 device.h ncclChannelPeer
// send/recv[NCCL_MAX_CONNS]).
type Key struct {
	Channel   int
	Peer      int
	ConnIndex int
}

func (k Key) String() string {
	return fmt.Sprintf("channel %d peer %d conn %d", k.Channel, k.Peer, k.ConnIndex)
}

// Errors every transport returns (possibly wrapped); test with errors.Is.
var (
	// ErrClosed: the connection or transport was closed or aborted locally.
	ErrClosed = errors.New("realnet: connection closed")
	// ErrPeerGone: the peer closed its end, exited, or the link dropped.
	ErrPeerGone = errors.New("realnet: peer gone")
	// ErrTimeout: the deadline passed before the operation could complete.
	ErrTimeout = errors.New("realnet: timeout")
	// ErrSize: the next message does not have the length the receiver asked for, or is larger
	// than the transport allows.
	ErrSize = errors.New("realnet: message size mismatch")
	// ErrProtocol: the peer sent something that is not this protocol (wrong magic, bad header).
	ErrProtocol = errors.New("realnet: protocol error")
)

// Transport is the required contract of a data transport, in the manner of database/sql/driver:
// small, with optional capabilities found by type assertion (MemoryReporter, DirectReceiver).
//
// A Transport belongs to one rank of one communicator. Both ends of a connection call Connect with
// keys that name each other (rank a calls Connect({c, b, i}) while rank b calls Connect({c, a, i}));
// Connect returns when both ends are attached, when ctx is done, or when the transport is closed.
// Connect may be called concurrently for different keys; calling it twice for one key is a
// programming error and returns an error.
//
// Close tears down every connection (pending Send/Recv return ErrClosed) and frees the transport's
// resources. It is safe to call more than once and from any goroutine; it is how Abort unblocks
// waiting calls.
type Transport interface {
	Name() string
	Connect(ctx context.Context, key Key) (Conn, error)
	Close() error
}

// Conn is one bidirectional connection to a peer. Messages are delivered whole and in order.
//
// Concurrency: one goroutine may Send while another Recvs; Send is not called concurrently with Send
// on one Conn, nor Recv with Recv. Close may be called at any time from any goroutine and unblocks
// both.
//
// Ownership and buffering: Send copies p into the connection's buffer (Steps slots) and returns;
// the caller may reuse p at once. A message of at most SlotBytes() bytes does not wait for the
// receiver while fewer than Steps messages are outstanding; longer messages are cut into slot-sized
// pieces and may wait for the receiver to drain. Recv(p) fills p with the next message, whose length
// must be exactly len(p) (else ErrSize). Zero-length messages are allowed.
//
// Deadlines: a zero deadline means none. When the deadline passes, the call returns an error that
// wraps ErrTimeout; the connection is then in an undefined state and should be closed. A peer that
// exits or closes makes pending and later calls fail with ErrPeerGone (after the messages already
// received have been read) within the transport's detection time.
type Conn interface {
	Send(p []byte, deadline time.Time) error
	Recv(p []byte, deadline time.Time) error
	// SlotBytes is the largest message that is buffered in one slot.
	SlotBytes() int
	Close() error
}

// MemoryReporter is an optional capability: the bytes of buffer memory the connection allocated
// (both directions, this rank's share), reported as NCCL reports its connection buffers (NCCL
// 2.28 src/transport/p2p.cc, shm.cc, net.cc).
type MemoryReporter interface {
	BufferBytes() int64
}

// Flusher is an optional capability of connections that buffer sends outside memory the peer can
// read (a TCP writer queue): Flush returns once every message sent so far has been handed to the
// network, or the deadline passed. A graceful shutdown flushes before Close; an abort does not.
type Flusher interface {
	Flush(deadline time.Time) error
}

// DirectReceiver is an optional capability: RecvFunc hands the next message, which must be n bytes
// long, to fn in place (for example in shared memory) so the caller can reduce from it without a
// copy. fn must not keep the slice; the data may come in several calls (pieces in order).
type DirectReceiver interface {
	RecvFunc(n int, deadline time.Time, fn func(piece []byte)) error
}

// SlotConn is an optional capability of connections whose buffer slots the caller may read and fill
// in place (shared memory): a step can then reduce straight from the incoming slot into the outgoing
// one, as NCCL's primitives read the previous rank's buffer and write the next rank's (NCCL 2.28
// src/device/prims_simple.h), with no staging copy. The wire format is that of Send/Recv: a
// message is a sequence of pieces of at most SlotBytes, each tagged with the whole message's
// length, so SlotConn and Send/Recv may be mixed message by message on one connection (not within
// a message).
//
// Receiving: PeekRecv waits for the next piece and returns it in place with the length of the message
// it belongs to; the piece stays valid until ReleaseRecv frees its slot. Sending: ReserveSend returns
// the next free slot (SlotBytes long); with wait false it returns ok false at once when none is free,
// with wait true it waits like Send. PublishSend makes the first n bytes of the reserved slot the next
// piece of a msgLen-byte message; a sender publishes full slots except for a message's last piece.
// The concurrency rules of Conn apply (one receiver, one sender).
type SlotConn interface {
	Conn
	PeekRecv(deadline time.Time) (piece []byte, msgLen int, err error)
	ReleaseRecv()
	ReserveSend(wait bool, deadline time.Time) (slot []byte, ok bool, err error)
	PublishSend(n, msgLen int)
}

// RecvFunc receives an n-byte message into fn, in place when c implements DirectReceiver and through
// scratch (len ≥ n or grown) otherwise. It returns the scratch buffer for reuse.
func RecvFunc(c Conn, n int, deadline time.Time, scratch []byte, fn func(piece []byte)) ([]byte, error) {
	if d, ok := c.(DirectReceiver); ok {
		return scratch, d.RecvFunc(n, deadline, fn)
	}
	if cap(scratch) < n {
		scratch = make([]byte, n)
	}
	buf := scratch[:n]
	if err := c.Recv(buf, deadline); err != nil {
		return scratch, err
	}
	fn(buf)
	return scratch, nil
}
