package coll

import "testing"

// TestTestWant checks the --check expectations against hand-computed elements and against the
// buffer-backed Reference of the same call.
func TestTestWant(t *testing.T) {
	const n, count = 3, 4
	hand := []struct {
		f          Func
		op         RedOp
		rank, root int
		i          int64
		want       float64
	}{
		{AllReduce, Sum, 1, 0, 0, 0 + 3 + 2},                       // TestValue(r, 0) = 7r mod 4
		{AllReduce, Max, 2, 0, 1, max(3, 2, 1)},                    // TestValue(r, 1) = (7r+3) mod 4
		{ReduceScatter, Sum, 1, 0, 0, 0 + 3 + 2},                   // element 4 of every rank: (7r+12) mod 4
		{Reduce, Prod, 2, 2, 1, 3 * 2 * 1},                         // on the root only
		{Broadcast, Sum, 0, 2, 3, float64((14 + 9) % 4)},           // the root's element
		{AllGather, Sum, 0, 0, 5, float64((7 + 3) % 4)},            // block 1 is rank 1's
		{AllToAll, Sum, 2, 0, 5, float64((7 + 3*(2*count+1)) % 4)}, // rank 1's block 2
		{SendRecv, Sum, 0, 0, 2, float64((14 + 6) % 4)},            // from rank 2
	}
	for _, c := range hand {
		want, err := TestWant(c.f, Float32, c.op, 0, n, c.rank, c.root, count, TestValue)
		if err != nil || want == nil {
			t.Fatalf("%v rank %d: %v (nil %v)", c.f, c.rank, err, want == nil)
		}
		if got := want(c.i); !got.Holds(Float32, Float32.FromFloat(c.want)) || got.Tol != 0 {
			t.Errorf("%v %v rank %d element %d: want %v, TestWant says %v", c.f, c.op, c.rank, c.i, c.want, got.Describe(Float32))
		}
	}
	if want, err := TestWant(Reduce, Float32, Sum, 0, n, 1, 0, count, TestValue); want != nil || err != nil {
		t.Errorf("Reduce off the root: %v, %v; want nothing to check", want != nil, err)
	}
	if _, err := TestWant(Broadcast, Float32, Sum, 0, n, 0, n, count, TestValue); err == nil {
		t.Error("root out of range accepted")
	}
	for _, dt := range []DataType{Int8, Uint64, Float16, Bfloat16, Float64} {
		for f := Func(0); f <= AllToAll; f++ {
			for _, op := range []RedOp{Sum, Prod, Avg, PreMulSum} {
				p := &Plan{Func: f, NRanks: n, Count: count, DataType: dt, Op: op, Peer: 1}
				send := make([][]byte, n)
				for r := range send {
					send[r] = make([]byte, n*count*dt.Size())
					for j := 0; j < n*count; j++ {
						dt.SetValue(send[r], j, TestValue(r, int64(j)))
					}
				}
				ref, err := NewReference(p, 0.5, send)
				if err != nil {
					t.Fatal(err)
				}
				for r := 0; r < n; r++ {
					want, err := TestWant(f, dt, op, 0.5, n, r, 0, count, TestValue)
					if err != nil {
						t.Fatal(err)
					}
					for i := int64(0); i < ref.RecvCount(); i++ {
						e, ok := ref.Want(r, i)
						if ok != (want != nil) || ok && want(i) != e {
							t.Fatalf("%v %v %v rank %d element %d: Reference %v (%v), TestWant differs", dt, f, op, r, i, e.Describe(dt), ok)
						}
					}
				}
			}
		}
	}
}
