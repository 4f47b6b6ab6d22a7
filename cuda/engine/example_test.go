package engine_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/cuda"
	"github.com/simccl/simccl/cuda/engine"
	"github.com/simccl/simccl/planner"
)

// Two GPUs (emulated where this machine has none; two ranks sharing the GPU of a one-GPU machine)
// all-reduce four floats, one goroutine per rank. The planner decides what each call runs, with
// NCCL's rules for the machine (here planner.CPUMachine's description of two GPUs; runccl
// describes the live machine).
func Example() {
	m, err := planner.CPUMachine(2, 1, planner.Settings{})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := planner.New(m)
	if err != nil {
		fmt.Println(err)
		return
	}
	comms, err := engine.InitAll(devs[:2], &engine.Config{ShareGPUs: shared, Planner: p})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		for _, c := range comms {
			_ = c.Destroy()
		}
	}()
	bufs := make([]cuda.DevPtr, 2)
	for r, c := range comms {
		in := make([]byte, 16)
		for i := 0; i < 4; i++ {
			binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(float32(10*r+i)))
		}
		if bufs[r], err = upload(c.Device(), in); err != nil {
			fmt.Println(err)
			return
		}
	}
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.AllReduce(bufs[r], bufs[r], 4, coll.Float32, coll.Sum, 0); err != nil { // in place, legacy stream
				fmt.Println(err)
			}
		}()
	}
	wg.Wait()
	out, err := download(comms[1].Device(), bufs[1], 16, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := 0; i < 4; i++ {
		fmt.Print(math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])), " ")
	}
	fmt.Println()
	// Output: 10 12 14 16
}
