package colltest_test

import (
	"fmt"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/coll/colltest"
)

// In a test, colltest.Run(t, executor, colltest.Options{}) runs the whole matrix. Without a
// *testing.T, cases run one by one: here a few on coll's reference interpreter, 3 ranks.
func Example() {
	ex := colltest.Interpreter{Plan: coll.Plan{Algo: coll.Ring, Proto: coll.Simple, NChannels: 2}}
	w, err := ex.Open(3)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	m := colltest.Matrix{
		Funcs:  []coll.Func{coll.AllReduce, coll.AllGather},
		Types:  []coll.DataType{coll.Float16, coll.Int32},
		Ops:    []coll.RedOp{coll.Sum, coll.Avg},
		Counts: []int{5},
	}
	cases, wrong := 0, 0
	for _, c := range m.Cases(3) {
		c.Values = true // coll.Execute computes on float64 values
		n, msgs, err := colltest.Verify(w, c)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, msg := range msgs {
			fmt.Println(msg)
		}
		cases++
		wrong += n
	}
	fmt.Printf("%d cases, %d wrong elements\n", cases, wrong)
	// Output: 12 cases, 0 wrong elements
}
