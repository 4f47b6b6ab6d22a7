package engine_test

import (
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/cuda"
	"github.com/simccl/simccl/cuda/engine"
)

// BenchmarkOneRank is the host cost of a one-rank in-place all-reduce through the Go API (no
// driver work: the result is the input), alone and inside a communicator's group and the
// process-wide group: go test -bench OneRank -cpuprofile … ./cuda/engine profiles it.
func BenchmarkOneRank(b *testing.B) {
	if len(devs) < 1 {
		b.Skip("no device")
	}
	comms, err := initAll(devs[:1], &engine.Config{SlotBytes: 512})
	if err != nil {
		b.Fatal(err)
	}
	c := comms[0]
	defer c.Destroy()
	var buf cuda.DevPtr
	if err := c.Device().Do(func(x *cuda.Ctx) (err error) { buf, err = x.Alloc(4096); return }); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"alone", "comm-group", "process-group"} {
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				switch mode {
				case "comm-group":
					c.GroupStart()
				case "process-group":
					engine.GroupStart()
				}
				if err := c.AllReduce(buf, buf, 2, coll.Float32, coll.Sum, 0); err != nil {
					b.Fatal(err)
				}
				var err error
				switch mode {
				case "comm-group":
					err = c.GroupEnd()
				case "process-group":
					err = engine.GroupEnd()
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
