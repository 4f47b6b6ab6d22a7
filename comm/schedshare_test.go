package comm_test

import (
	"sync"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
)

// TestScheduleSharedByRanks: the goroutine ranks of one process run one compiled schedule, not a
// copy each (a schedule holds every rank's programs: a copy per rank made memory grow as ranks³),
// including when they all compile it at the same moment.
func TestScheduleSharedByRanks(t *testing.T) {
	const n, count = 8, 40000
	cs, err := comm.InitAll(n, &comm.Config{Planners: cpuPlanners("", 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range cs {
			c.Destroy()
		}
	}()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := make([]float32, count)
			if err := c.AllReduce(comm.Bytes(x), comm.Bytes(x), count, coll.Float32, coll.Sum, nil); err != nil {
				t.Error(err)
			}
			if err := c.Synchronize(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	first, err := cs[0].Schedule(coll.AllReduce, count, coll.Float32, coll.Sum, 0)
	if err != nil {
		t.Fatal(err)
	}
	for r, c := range cs {
		s, err := c.Schedule(coll.AllReduce, count, coll.Float32, coll.Sum, 0)
		if err != nil {
			t.Fatal(err)
		}
		if s != first {
			t.Errorf("rank %d compiled its own copy of the all-reduce schedule", r)
		}
	}
	other, err := cs[1].Schedule(coll.AllReduce, count+1, coll.Float32, coll.Sum, 0)
	if err != nil {
		t.Fatal(err)
	}
	if other == first {
		t.Errorf("two different all-reduces share a schedule")
	}
}
