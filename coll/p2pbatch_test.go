package coll

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestP2PRepeatedPeerBatches: NCCL takes one send and one receive per peer on each pass over its
// rounds, and a batch holds one work of a round, so a second transfer to the same peer in a group
// runs after the first, in the next batch (testdata/nccl/p2popsscan.sh measured such transfers one
// after another on 2 H200). Distinct peers still share a batch, up to P2PBatch of them. The data
// still lands where it belongs (Execute).
func TestP2PRepeatedPeerBatches(t *testing.T) {
	const n = 4
	var tr []Transfer
	for range 3 { // three transfers 0→1 and 1→0 in one group
		tr = append(tr, Transfer{From: 0, To: 1, Count: 8}, Transfer{From: 1, To: 0, Count: 8})
	}
	tr = append(tr, Transfer{From: 0, To: 2, Count: 8}, Transfer{From: 2, To: 0, Count: 8})
	p := Plan{Func: SendRecv, Proto: Simple, NRanks: n, Count: 8, DataType: Float32, NChannels: 1, Transfers: tr}
	s, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	steps := s.Program(0, 0).Steps
	// Rank 0 sends to 1 at distance 1 and to 2 at distance 2: the first pass (0→1, 0→2 and their
	// receives) is one batch; each later 0→1 waits on everything before it.
	var sendsTo1 []Step
	for _, st := range steps {
		if st.Prim == Send && len(st.Send) == 1 && st.Send[0].Peer == 1 {
			sendsTo1 = append(sendsTo1, st)
		}
	}
	if len(sendsTo1) != 3 {
		t.Fatalf("rank 0 has %d sends to rank 1, want 3", len(sendsTo1))
	}
	before := func(st Step) map[int]bool { // the steps st waits on, transitively
		seen := map[int]bool{}
		var walk func(i int)
		walk = func(i int) {
			for _, d := range steps[i].Deps {
				if !seen[d] {
					seen[d] = true
					walk(d)
				}
			}
		}
		walk(int(st.Index))
		return seen
	}
	if len(before(sendsTo1[0])) != 0 {
		t.Errorf("the first send to rank 1 waits on %v", before(sendsTo1[0]))
	}
	for k := 1; k < 3; k++ {
		if !before(sendsTo1[k])[int(sendsTo1[k-1].Index)] {
			t.Errorf("send %d to rank 1 does not wait for send %d (deps %v)", k, k-1, sendsTo1[k].Deps)
		}
	}
	sendTo2 := -1
	for _, st := range steps {
		if st.Prim == Send && len(st.Send) == 1 && st.Send[0].Peer == 2 {
			sendTo2 = int(st.Index)
			if before(st)[int(sendsTo1[0].Index)] {
				t.Errorf("the send to rank 2 waits for the first send to rank 1: one batch holds both rounds")
			}
		}
	}
	// The second pass starts when the whole first batch is done, the send to rank 2 included.
	if sendTo2 < 0 || !before(sendsTo1[1])[sendTo2] {
		t.Errorf("the second send to rank 1 does not wait for the first pass's send to rank 2 (step %d)", sendTo2)
	}
	op := &s.Ops[0]
	elt := int64(op.DataType.Size())
	bufs := [][]Buffers{make([]Buffers, n)}
	ins := [][][]float64{make([][]float64, n)}
	for r := 0; r < n; r++ {
		ins[0][r] = inputs(&p, op, r)
		rb := make([]float64, op.RecvBytes/elt)
		for i := range rb {
			rb[i] = sentinel
		}
		bufs[0][r] = Buffers{Send: append([]float64(nil), ins[0][r]...), Recv: rb}
	}
	if _, err := Execute(s, bufs, ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	ref := reference(&p, ins[0])
	for r := 0; r < n; r++ {
		if m := mismatch(ref, p.DataType, r, bufs[0][r].Recv); m != "" {
			t.Fatal(m)
		}
	}
}

// TestSendRecvOpShowsLargestTransfer: a group's op reads as rows show the call (Plan.Shown: the
// largest transfer's protocol and channels) and carries that transfer's chunk, not the plan's
// base protocol and channel span, which no transfer here uses.
func TestSendRecvOpShowsLargestTransfer(t *testing.T) {
	tr := []Transfer{
		{From: 0, To: 1, Count: 64, NChannels: 1, LL: true, ChunkSize: 4096},
		{From: 1, To: 0, Count: 4096, NChannels: 2, LL: true, ChunkSize: 8192},
	}
	p := Plan{Func: SendRecv, Proto: Simple, NRanks: 2, DataType: Float32, NChannels: 8, Transfers: tr}
	s, err := Compile(p)
	require.NoError(t, err)
	op := s.Ops[0]
	assert.Equal(t, LL, op.Proto)
	assert.Equal(t, "LL", op.ProtoName)
	assert.Equal(t, 2, op.NChannels)
	assert.Equal(t, int64(8192), op.ChunkSize)
}
