package coll_test

import (
	"fmt"

	"github.com/simccl/simccl/coll"
)

// A 4-rank ring all-reduce of 1 MiB floats on 2 channels: each rank sends 2·3/4 of the 4 MiB
// buffer, in 2 slices per chunk.
func ExampleCompile() {
	s, err := coll.Compile(coll.Plan{Func: coll.AllReduce, Algo: coll.Ring, Proto: coll.Simple,
		NRanks: 4, Count: 1 << 20, DataType: coll.Float32, NChannels: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	sum := coll.Summarize(s)
	fmt.Println("rank 0 sends", sum.Ranks[0].SentBytes, "bytes in", sum.Ranks[0].SendMsgs, "messages")
	first := s.Program(0, 0).Steps[0]
	fmt.Println("first step:", first.Prim, "to rank", first.Send[0].Peer, first.Bytes, "bytes, slot", first.Send[0].Slot)
	// Output:
	// rank 0 sends 6291456 bytes in 24 messages
	// first step: Send to rank 1 262144 bytes, slot 0
}
