package comm_test

import (
	"fmt"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
)

// The schedule the real engine ran, interpreted by coll's reference executor on the same inputs,
// gives the same bytes: both executors consume one schedule.
func TestSameScheduleAsReference(t *testing.T) {
	const n = 4
	cases := []struct {
		algo  string
		f     coll.Func
		count int64
	}{
		{"ring", coll.AllReduce, 100003}, {"tree", coll.AllReduce, 70001}, {"ring", coll.ReduceScatter, 30011},
		{"pat", coll.AllGather, 20011}, {"pat", coll.ReduceScatter, 9001}, {"ring", coll.Broadcast, 50001}, {"ring", coll.Reduce, 50001},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%v", tc.algo, tc.f), func(t *testing.T) {
			cs, err := comm.InitAll(n, slotted(comm.Config{Transport: "inproc", Planners: cpuPlanners(tc.algo, 0), SlotBytes: 16 << 10}))
			if err != nil {
				t.Fatal(err)
			}
			w := &world{cs: cs}
			defer w.close()
			s, err := cs[0].Schedule(tc.f, tc.count, coll.Float64, coll.Sum, 1)
			if err != nil {
				t.Fatal(err)
			}
			op := s.Ops[0]
			if got := op.AlgoName; got == "" {
				t.Fatalf("schedule without an algorithm")
			}
			ref := make([][]coll.Buffers, 1)
			ref[0] = make([]coll.Buffers, n)
			send := make([][]float64, n)
			recv := make([][]float64, n)
			for r := 0; r < n; r++ {
				send[r] = make([]float64, op.SendBytes/8)
				for i := range send[r] {
					send[r][i] = float64((r*31 + i*7) % 1000)
				}
				recv[r] = make([]float64, op.RecvBytes/8)
				ref[0][r] = coll.Buffers{Send: append([]float64(nil), send[r]...), Recv: make([]float64, op.RecvBytes/8)}
			}
			if _, err := coll.Execute(s, ref, coll.ExecOptions{}); err != nil {
				t.Fatal(err)
			}
			for r, c := range cs {
				var err error
				cnt := int(tc.count)
				switch tc.f {
				case coll.AllReduce:
					err = c.AllReduce(comm.Bytes(send[r]), comm.Bytes(recv[r]), cnt, coll.Float64, coll.Sum, nil)
				case coll.ReduceScatter:
					err = c.ReduceScatter(comm.Bytes(send[r]), comm.Bytes(recv[r]), cnt, coll.Float64, coll.Sum, nil)
				case coll.AllGather:
					err = c.AllGather(comm.Bytes(send[r]), comm.Bytes(recv[r]), cnt, coll.Float64, nil)
				case coll.Broadcast:
					err = c.Broadcast(comm.Bytes(send[r]), comm.Bytes(recv[r]), cnt, coll.Float64, 1, nil)
				case coll.Reduce:
					err = c.Reduce(comm.Bytes(send[r]), comm.Bytes(recv[r]), cnt, coll.Float64, coll.Sum, 1, nil)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			w.sync(t, "real run")
			for r := 0; r < n; r++ {
				if tc.f == coll.Reduce && r != 1 {
					continue
				}
				for i := range recv[r] {
					if recv[r][i] != ref[0][r].Recv[i] {
						t.Fatalf("rank %d element %d: real %v, coll.Execute %v", r, i, recv[r][i], ref[0][r].Recv[i])
					}
				}
			}
		})
	}
}
