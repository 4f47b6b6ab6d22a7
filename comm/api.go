package comm

import (
	"fmt"

	"github.com/simccl/simccl/coll"
)

// The collective and point-to-point calls (NCCL 2.28 nccl.h). Buffers are byte slices holding count
// elements of dt in native byte order (see Bytes/As in buffer.go for typed views). Every call is
// asynchronous: it is validated, queued on the communicator (in a group when one is open) and run
// by the communicator's executor; wait with Stream.Synchronize (nil stream: the communicator's
// default stream, Comm.Synchronize). In-place operation is as NCCL defines it: AllReduce,
// Broadcast and Reduce with send and recv the same memory; AllGather with send = recv[rank×count
// elements:]; ReduceScatter with recv = send[rank×count elements:].

func (c *Comm) need(what string, b []byte, bytes int64) ([]byte, error) {
	if int64(len(b)) < bytes {
		return nil, fmt.Errorf("%w: rank %d: %s buffer of %d bytes, need %d", ErrInvalidArgument, c.rank, what, len(b), bytes)
	}
	return b[:bytes], nil
}

func (c *Comm) checkType(dt coll.DataType, count int) error {
	if dt.Size() == 0 {
		return fmt.Errorf("%w: rank %d: data type %v", ErrInvalidArgument, c.rank, dt)
	}
	if count < 0 {
		return fmt.Errorf("%w: rank %d: count %d", ErrInvalidArgument, c.rank, count)
	}
	return nil
}

func (c *Comm) checkRoot(root int) error {
	if root < 0 || root >= c.n {
		return fmt.Errorf("%w: rank %d: root %d of %d ranks", ErrInvalidArgument, c.rank, root, c.n)
	}
	return nil
}

func (c *Comm) reduceCall(f coll.Func, send, recv []byte, count int, dt coll.DataType, op coll.RedOp, root int, sendBytes, recvBytes int64, s *Stream) error {
	if err := c.checkType(dt, count); err != nil {
		return err
	}
	base, scalar, err := c.resolveOp(op)
	if err != nil {
		return err
	}
	if send, err = c.need("send", send, sendBytes); err != nil {
		return err
	}
	if f == coll.Reduce && c.rank != root && int64(len(recv)) < recvBytes {
		recv = make([]byte, recvBytes) // non-root ranks' receive buffer is not used by NCCL
	}
	if recv, err = c.need("recv", recv, recvBytes); err != nil {
		return err
	}
	return c.enqueue(&call{f: f, count: int64(count), dt: dt, op: base, scalar: scalar, root: root, send: send, recv: recv, stream: s})
}

// AllReduce reduces count elements across ranks into every rank's recv (ncclAllReduce).
func (c *Comm) AllReduce(send, recv []byte, count int, dt coll.DataType, op coll.RedOp, s *Stream) error {
	b := int64(count) * int64(dt.Size())
	return c.reduceCall(coll.AllReduce, send, recv, count, dt, op, 0, b, b, s)
}

// Reduce reduces count elements across ranks into root's recv (ncclReduce).
func (c *Comm) Reduce(send, recv []byte, count int, dt coll.DataType, op coll.RedOp, root int, s *Stream) error {
	if err := c.checkRoot(root); err != nil {
		return err
	}
	b := int64(count) * int64(dt.Size())
	return c.reduceCall(coll.Reduce, send, recv, count, dt, op, root, b, b, s)
}

// ReduceScatter reduces n×recvcount elements and leaves block rank in every rank's recv
// (ncclReduceScatter).
func (c *Comm) ReduceScatter(send, recv []byte, recvcount int, dt coll.DataType, op coll.RedOp, s *Stream) error {
	b := int64(recvcount) * int64(dt.Size())
	return c.reduceCall(coll.ReduceScatter, send, recv, recvcount, dt, op, 0, b*int64(c.n), b, s)
}

// Broadcast copies count elements from root's send to every rank's recv (ncclBroadcast); send is
// only read on root.
func (c *Comm) Broadcast(send, recv []byte, count int, dt coll.DataType, root int, s *Stream) error {
	if err := c.checkType(dt, count); err != nil {
		return err
	}
	if err := c.checkRoot(root); err != nil {
		return err
	}
	b := int64(count) * int64(dt.Size())
	var err error
	if recv, err = c.need("recv", recv, b); err != nil {
		return err
	}
	if c.rank != root && int64(len(send)) < b {
		send = recv
	}
	if send, err = c.need("send", send, b); err != nil {
		return err
	}
	return c.enqueue(&call{f: coll.Broadcast, count: int64(count), dt: dt, root: root, send: send, recv: recv, stream: s})
}

// AllGather gathers sendcount elements from every rank into every rank's recv, rank order
// (ncclAllGather).
func (c *Comm) AllGather(send, recv []byte, sendcount int, dt coll.DataType, s *Stream) error {
	if err := c.checkType(dt, sendcount); err != nil {
		return err
	}
	b := int64(sendcount) * int64(dt.Size())
	var err error
	if send, err = c.need("send", send, b); err != nil {
		return err
	}
	if recv, err = c.need("recv", recv, b*int64(c.n)); err != nil {
		return err
	}
	return c.enqueue(&call{f: coll.AllGather, count: int64(sendcount), dt: dt, send: send, recv: recv, stream: s})
}

// AllToAll sends block j (count elements) of send to rank j, which stores it as block rank of its
// recv (ncclAlltoAll).
func (c *Comm) AllToAll(send, recv []byte, count int, dt coll.DataType, s *Stream) error {
	if err := c.checkType(dt, count); err != nil {
		return err
	}
	b := int64(count) * int64(dt.Size()) * int64(c.n)
	var err error
	if send, err = c.need("send", send, b); err != nil {
		return err
	}
	if recv, err = c.need("recv", recv, b); err != nil {
		return err
	}
	if count > 0 && sameStart(send, recv) {
		return fmt.Errorf("%w: rank %d: AllToAll in place is not supported (NCCL neither)", ErrInvalidArgument, c.rank)
	}
	return c.enqueue(&call{f: coll.AllToAll, count: int64(count), dt: dt, send: send, recv: recv, stream: s})
}

// Send sends count elements to peer (ncclSend); the matching Recv must be in the same group if the
// two ranks also exchange in the other direction.
func (c *Comm) Send(buf []byte, count int, dt coll.DataType, peer int, s *Stream) error {
	if err := c.checkType(dt, count); err != nil {
		return err
	}
	if err := c.checkRoot(peer); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	b, err := c.need("send", buf, int64(count)*int64(dt.Size()))
	if err != nil {
		return err
	}
	return c.enqueue(&call{f: coll.SendRecv, p2pSend: true, peer: peer, count: int64(count), dt: dt, send: b, stream: s})
}

// Recv receives count elements from peer (ncclRecv).
func (c *Comm) Recv(buf []byte, count int, dt coll.DataType, peer int, s *Stream) error {
	if err := c.checkType(dt, count); err != nil {
		return err
	}
	if err := c.checkRoot(peer); err != nil {
		return fmt.Errorf("recv: %w", err)
	}
	b, err := c.need("recv", buf, int64(count)*int64(dt.Size()))
	if err != nil {
		return err
	}
	return c.enqueue(&call{f: coll.SendRecv, peer: peer, count: int64(count), dt: dt, recv: b, stream: s})
}
