package perf

import (
	"fmt"
	"sync"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
	"github.com/simccl/simccl/planner"
)

// BenchmarkAllReduceShm times float32 sum all-reduces of goroutine ranks of one process over the
// shared-memory transport (the data path of one process per rank, without the processes), for
// profiling: go test ./comm/perf -run ^$ -bench AllReduceShm -cpuprofile cpu.prof.
func BenchmarkAllReduceShm(b *testing.B) {
	for _, n := range []int{2, 4} {
		for _, size := range []int{8, 64 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("ranks=%d/bytes=%d", n, size), func(b *testing.B) {
				cs, err := comm.InitAll(n, &comm.Config{Transport: "shm", ShmDir: b.TempDir(), Planners: planner.CPU{}})
				if err != nil {
					b.Fatal(err)
				}
				defer func() {
					for _, c := range cs {
						c.Destroy()
					}
				}()
				count := size / 4
				send := make([][]float32, n)
				recv := make([][]float32, n)
				for r := range cs {
					send[r], recv[r] = make([]float32, count), make([]float32, count)
					for i := range send[r] {
						send[r][i] = float32(r + i%3)
					}
				}
				run := func(iters int) {
					var wg sync.WaitGroup
					for r, c := range cs {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for range iters {
								if err := c.AllReduce(comm.Bytes(send[r]), comm.Bytes(recv[r]), count, coll.Float32, coll.Sum, nil); err != nil {
									b.Error(err)
									return
								}
							}
							if err := c.Synchronize(); err != nil {
								b.Error(err)
							}
						}()
					}
					wg.Wait()
				}
				run(1) // connect
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				run(b.N)
				b.StopTimer()
				want := float32(0)
				for r := range n {
					want += float32(r + 5%3)
				}
				if got := recv[n-1][5%count]; count > 5 && got != want {
					b.Fatalf("element 5 is %v, want %v", got, want)
				}
			})
		}
	}
}
