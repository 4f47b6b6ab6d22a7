package coll

import (
	"fmt"
)

// The schedule contract.
//
// A Schedule is what Compile makes of one collective (or one group of collectives): for every rank,
// for every channel, a Program of Steps written in NCCL's primitive vocabulary (send, recv,
// recvReduceSend, recvCopySend, recvReduceCopySend, …), chunked as NCCL chunks them. It says nothing
// about time or transports. simnet times it; comm executes it with real bytes; coll.Execute is the
// reference interpreter both can be checked against.
//
// Execution rules (every executor must honour exactly these, and nothing else orders steps):
//
//  1. A step may start once every step listed in its Deps (indices into the same Program) has
//     completed. Compile lists the previous step of the same Lane and, at the boundary between two
//     operations of a group, every last step of the previous operation (NCCL runs the work items of
//     a channel one after another). Lanes of one program run concurrently: NCCL's tree all-reduce
//     (runTreeSplit) reduces up on one thread group (lane 0) while it broadcasts down on another
//     (lane 1). Following Deps gives the concurrency NCCL has. Running each program strictly in
//     list order is also deadlock-free for every schedule Compile makes, even with the credits of
//     rule 3 (the definition tests run every algorithm both ways: ExecOptions.Sequential), but it
//     serializes the lanes and so times differently.
//  2. Messages. Every element of Step.Send is one message on connection Conn with sequence number
//     Seq; the element of some Step.Recv on the peer with the same (Conn, Seq) is its only match.
//     A recv-type step needs all its messages to have arrived. Seq numbers count from 0 on each
//     connection in the order the sender issues them, which is also the order the receiver consumes
//     them. Every message of a step carries exactly Step.Bytes of payload (possibly 0: NCCL posts
//     empty slices to keep its step counters aligned) and Step.WireBytes on the wire.
//  3. Flow control. A connection has NCCLSteps (8) slots; a message occupies Xfer.Steps of them from
//     Xfer.Slot on. A send may start only once the message on the same connection with sequence
//     number Xfer.CreditSeq has been received (consumed) by the peer; CreditSeq is −1 when the slots
//     are free from the start. An executor with unbounded buffers may ignore credits; a faithful
//     one (simnet) uses them to model NCCL's back-pressure.
//  4. Data. A step's inputs are its received messages (in Recv order) and, where the primitive reads
//     local data, Src. Reducing primitives fold all inputs with the operation's RedOp (PostOp: the
//     step that finishes the reduction also applies Avg's division by nRanks); the others have
//     exactly one input. The result is written to Dst (if any) and sent on every Send connection.
//     Offsets and sizes are in bytes and always multiples of the data type size.
//  5. Buffers. Src/Dst name a logical buffer of the step's operation: BufSend (the user's send
//     buffer, Op.SendBytes long) or BufRecv (Op.RecvBytes long). Compile emits out-of-place
//     schedules that are also correct in place, provided the executor places both in one buffer
//     at Op.InPlaceOffsets(rank), as nccl-tests does. SendRecv and AllToAll schedules are not
//     in-place safe (nor are NCCL's: a rank may overwrite data it has yet to send).
//
//  6. Switches (only in NVLS and CollNet schedules; Schedule.Switches is empty otherwise). A switch
//     is a virtual endpoint numbered NRanks+i that reduces or multicasts inside the fabric: an
//     NVSwitch's multimem engine (NVLS) or the network's in-network reduction (CollNet/SHARP). Its
//     programs follow the rank programs (Program(NRanks+i, c)), use only RecvReduceForward and
//     RecvSend, touch no buffer, and carry no dependencies: the switch acts on each message as
//     it arrives (an NVSwitch serves the multimem requests of every GPU concurrently), so a
//     switch may send the messages of one connection out of sequence order. An executor that cannot run them must refuse such schedules
//     (Supported reports the algorithms that need none).
//
// The JSON form is encoding/json of these types (field names as tagged below); enumerations are
// written as NCCL's names ("RecvReduceSend", "Simple", "send"/"recv").

// NCCLSteps is the number of buffer slots per connection and protocol (NCCL_STEPS, NCCL 2.30.7
// device.h).
const NCCLSteps = 8

// Prim is an NCCL device primitive: what one step does with its received data, its local buffers and
// its outgoing connections.
type Prim int32

const (
	// Send reads Src and sends it.
	Send Prim = iota
	// Recv receives one message into Dst.
	Recv
	// CopySend copies Src to Dst and sends Src (ring all-gather's first step out of place).
	CopySend
	// RecvReduceSend reduces the received data with Src and sends the result.
	RecvReduceSend
	// RecvReduceCopy reduces the received data with Src into Dst.
	RecvReduceCopy
	// RecvCopySend receives one message, writes it to Dst and forwards it.
	RecvCopySend
	// RecvReduceCopySend reduces the received data with Src, writes the result to Dst and sends it.
	RecvReduceCopySend
	// RecvSend forwards one received message without touching local memory.
	RecvSend
	// Copy copies Src to Dst locally (a rank's own block, a send to self).
	Copy
	// LocalReduce reduces Src into Dst locally (Dst = Dst ⊕ Src).
	LocalReduce
	// RecvReduceForward reduces the received messages, without local data, and sends the result (a
	// switch: NVLS multimem ld_reduce, SHARP).
	RecvReduceForward
	NumPrims
)

var primNames = [...]string{"Send", "Recv", "CopySend", "RecvReduceSend", "RecvReduceCopy", "RecvCopySend",
	"RecvReduceCopySend", "RecvSend", "Copy", "Reduce", "RecvReduceForward"}

func (p Prim) String() string {
	if p >= 0 && p < NumPrims {
		return primNames[p]
	}
	return fmt.Sprintf("Prim(%d)", int(p))
}

// MarshalText writes the primitive's name.
func (p Prim) MarshalText() ([]byte, error) {
	if p < 0 || p >= NumPrims {
		return nil, fmt.Errorf("coll: bad primitive %d", int(p))
	}
	return []byte(primNames[p]), nil
}

// UnmarshalText reads a primitive's name.
func (p *Prim) UnmarshalText(b []byte) error {
	for i, n := range primNames {
		if n == string(b) {
			*p = Prim(i)
			return nil
		}
	}
	return fmt.Errorf("coll: unknown primitive %q", b)
}

// Receives reports whether the primitive consumes messages.
func (p Prim) Receives() bool {
	switch p {
	case Recv, RecvReduceSend, RecvReduceCopy, RecvCopySend, RecvReduceCopySend, RecvSend, RecvReduceForward:
		return true
	}
	return false
}

// Sends reports whether the primitive emits messages.
func (p Prim) Sends() bool {
	switch p {
	case Send, CopySend, RecvReduceSend, RecvCopySend, RecvReduceCopySend, RecvSend, RecvReduceForward:
		return true
	}
	return false
}

// Reduces reports whether the primitive folds several inputs with the reduction operation.
func (p Prim) Reduces() bool {
	switch p {
	case RecvReduceSend, RecvReduceCopy, RecvReduceCopySend, LocalReduce, RecvReduceForward:
		return true
	}
	return false
}

// ReadsSrc reports whether the primitive reads local data (Src).
func (p Prim) ReadsSrc() bool {
	switch p {
	case Send, CopySend, RecvReduceSend, RecvReduceCopy, RecvReduceCopySend, Copy, LocalReduce:
		return true
	}
	return false
}

// WritesDst reports whether the primitive writes local data (Dst).
func (p Prim) WritesDst() bool {
	switch p {
	case Recv, CopySend, RecvReduceCopy, RecvCopySend, RecvReduceCopySend, Copy, LocalReduce:
		return true
	}
	return false
}

// BufKind names one of an operation's logical buffers.
type BufKind int

const (
	// BufSend is the user's send buffer of the operation.
	BufSend BufKind = iota
	// BufRecv is the user's receive buffer of the operation.
	BufRecv
)

var bufNames = [...]string{"send", "recv"}

func (k BufKind) String() string {
	if k >= 0 && int(k) < len(bufNames) {
		return bufNames[k]
	}
	return fmt.Sprintf("BufKind(%d)", int(k))
}

// MarshalText writes "send" or "recv".
func (k BufKind) MarshalText() ([]byte, error) {
	if k < 0 || int(k) >= len(bufNames) {
		return nil, fmt.Errorf("coll: bad buffer kind %d", int(k))
	}
	return []byte(bufNames[k]), nil
}

// UnmarshalText reads "send" or "recv".
func (k *BufKind) UnmarshalText(b []byte) error {
	for i, n := range bufNames {
		if n == string(b) {
			*k = BufKind(i)
			return nil
		}
	}
	return fmt.Errorf("coll: unknown buffer kind %q", b)
}

// BufRef is a place in one of the step's operation's buffers; the length is Step.Bytes.
type BufRef struct {
	Buf    BufKind `json:"buf"`
	Offset int64   `json:"offset"` // bytes from the start of the buffer
}

// Xfer is one message of a step, on one connection. Its fields are 32-bit (24 bytes, not 48): a
// schedule holds one or two for each of its steps (MaxSteps bounds every count they hold), and
// the simulator's large schedules are mostly page faults and cache misses.
type Xfer struct {
	Conn int32 `json:"conn"` // index into Schedule.Conns
	Peer int32 `json:"peer"` // the rank at the other end (redundant with Conns[Conn], for readers)
	Seq  int32 `json:"seq"`  // message number on the connection, from 0, in issue order
	// Slot is the first of the connection's NCCLSteps buffer slots the message uses; Steps how many.
	Slot  int32 `json:"slot"`
	Steps int32 `json:"steps"`
	// CreditSeq (sends only): the message on this connection that must have been consumed by the
	// receiver before this one may be written; −1 if none.
	CreditSeq int32 `json:"credit_seq"`
}

// Step is one primitive call of one rank on one channel. Its counts are 32-bit (136 bytes, not
// 168; MaxSteps bounds them), for the reason Xfer's are.
type Step struct {
	Index  int32   `json:"i"`     // position in Program.Steps
	Op     int32   `json:"op"`    // index into Schedule.Ops
	Prim   Prim    `json:"prim"`  // what the step does
	Lane   int32   `json:"lane"`  // thread group within the channel (0, or 1 for tree broadcast-down)
	Deps   []int   `json:"deps"`  // indices of steps of the same program that must complete first
	Recv   []Xfer  `json:"recv"`  // messages consumed (several: a tree node reducing its children)
	Send   []Xfer  `json:"send"`  // messages emitted (several: a tree node feeding its children)
	Src    *BufRef `json:"src"`   // local input, nil if the primitive reads none
	Dst    *BufRef `json:"dst"`   // local output, nil if the primitive writes none
	Bytes  int64   `json:"bytes"` // payload bytes read/written/sent per input/output/message
	Wire   int64   `json:"wire"`  // bytes on the wire per message (LL 2×, LL128 128/120×, Simple 1×)
	Proto  Proto   `json:"proto"` // NCCL numbering: LL 0, LL128 1, Simple 2
	Chunk  int32   `json:"chunk"` // chunk index within the channel's part of the operation
	Slice  int32   `json:"slice"` // slice within the chunk (Ring Simple splits a chunk in 2)
	PostOp bool    `json:"post_op,omitempty"`
}

// Program is the steps one rank runs on one channel.
type Program struct {
	Rank    int    `json:"rank"`
	Channel int    `json:"channel"`
	Steps   []Step `json:"steps"`
}

// Conn is one directed connection (NCCL: one channel, one peer, one direction, one connIndex).
type Conn struct {
	ID      int `json:"id"`
	Channel int `json:"channel"`
	From    int `json:"from"`
	To      int `json:"to"`
	// ConnIndex separates FIFOs between the same two endpoints: 0 collectives, 1 send/recv (NCCL
	// 2.30.7's connIndex), 2 the downward direction of NVLS and CollNet schedules, PATFoldConn+k
	// the connection of distance 2^k of a PAT fold (CompilePATFold), which may join a rank to
	// itself.
	ConnIndex int `json:"conn_index"`
	Messages  int `json:"messages"` // number of messages the schedule puts on it
}

// Op describes one operation of the schedule (one entry of a group).
type Op struct {
	Func      Func     `json:"-"`
	FuncName  string   `json:"func"`
	Algo      Algo     `json:"-"`
	AlgoName  string   `json:"algo"`
	Proto     Proto    `json:"-"`
	ProtoName string   `json:"proto"`
	Count     int64    `json:"count"` // as NCCL's API takes it (AllGather: per-rank send count, …)
	DataType  DataType `json:"-"`
	TypeName  string   `json:"type"`
	RedOp     RedOp    `json:"-"`
	OpName    string   `json:"redop"`
	Root      int      `json:"root"`
	ChannelLo int      `json:"channel_lo"` // first channel (NCCL's channel{Lo..Hi})
	NChannels int      `json:"nchannels"`
	ChunkSize int64    `json:"chunk_size"` // wire bytes per chunk as NCCL's work carries it
	SendBytes int64    `json:"send_bytes"` // size of each rank's send buffer
	RecvBytes int64    `json:"recv_bytes"` // size of each rank's receive buffer
	// InPlaceStride describes the in-place layout (nccl-tests 2.19 convention): AllGather's
	// send buffer is its block of the receive buffer (recv + rank×stride); ReduceScatter's receive
	// buffer is its block of the send buffer (send + rank×stride); other functions alias both at 0.
	InPlaceStride int64 `json:"in_place_stride"`
}

// InPlaceOffsets gives, for an in-place run, where rank's send and receive buffers start inside the
// one buffer of max(SendBytes, RecvBytes) bytes that holds both.
func (o *Op) InPlaceOffsets(rank int) (send, recv int64) {
	switch o.Func {
	case AllGather:
		return int64(rank) * o.InPlaceStride, 0
	case ReduceScatter:
		return 0, int64(rank) * o.InPlaceStride
	}
	return 0, 0
}

// InPlaceBytes is the size of the single buffer of an in-place run.
func (o *Op) InPlaceBytes() int64 { return max64(o.SendBytes, o.RecvBytes) }

// Switch is a virtual endpoint of an NVLS or CollNet schedule (rule 6 above).
type Switch struct {
	ID   int    `json:"id"`   // endpoint number, NRanks + index in Schedule.Switches
	Kind string `json:"kind"` // SwitchNVLS or SwitchCollNet
	Node int    `json:"node"` // NVLS: the node whose NVSwitch it is; CollNet: −1 (the network)
}

// Switch kinds.
const (
	SwitchNVLS    = "nvls"
	SwitchCollNet = "collnet"
)

// Schedule is a compiled collective or group of collectives.
type Schedule struct {
	NRanks    int       `json:"nranks"`
	NChannels int       `json:"nchannels"`
	Ops       []Op      `json:"ops"`
	Conns     []Conn    `json:"conns"`
	Switches  []Switch  `json:"switches,omitempty"`
	Programs  []Program `json:"programs"` // endpoint-major: endpoint e (rank, then switch) channel c at e*NChannels+c
}

// Endpoints is the number of ranks plus switches.
func (s *Schedule) Endpoints() int { return s.NRanks + len(s.Switches) }

// NumSteps is the number of steps of every program (what MaxSteps bounds).
func (s *Schedule) NumSteps() int {
	n := 0
	for _, p := range s.Programs {
		n += len(p.Steps)
	}
	return n
}

// Program returns rank's (or switch endpoint's) program on channel c.
func (s *Schedule) Program(rank, channel int) *Program {
	return &s.Programs[rank*s.NChannels+channel]
}
