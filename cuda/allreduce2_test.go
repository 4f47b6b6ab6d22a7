package cuda

import (
	"sort"
	"testing"
	"time"

	"github.com/simccl/simccl/coll"
)

// allReduce2 is a two-GPU float32 sum all-reduce built from the existing kernels, out of place:
// GPU r owns half r of the buffer; it reduces that half reading the peer's input over NVLink
// (in_r + in_p → out_r) and pushes the result into the peer's output. Both GPUs work at once and
// in both directions; nothing waits across GPUs because each half of each output has one writer.
// It measures what the kernels and peer mappings reach before the real GPU transports exist.
func allReduce2(ds []*Device, ks [2]*Kernels, s [2]Stream, in, out [2]DevPtr, cnt int) error {
	halves := [2][2]int{{0, cnt / 2}, {cnt / 2, cnt - cnt/2}}
	for r := 0; r < 2; r++ {
		p := 1 - r
		off, n := halves[r][0], halves[r][1]
		err := ds[r].Do(func(c *Ctx) error {
			if err := ks[r].Reduce(c, s[r], coll.Float32, coll.Sum, out[r].Add(4*off), in[r].Add(4*off), in[p].Add(4*off), n, 0, 0); err != nil {
				return err
			}
			return ks[r].Copy(c, s[r], out[p].Add(4*off), out[r].Add(4*off), 4*n)
		})
		if err != nil {
			return err
		}
	}
	for r := 0; r < 2; r++ {
		if err := ds[r].Do(func(c *Ctx) error { return c.StreamSync(s[r]) }); err != nil {
			return err
		}
	}
	return nil
}

// TestAllReduce2Sketch checks allReduce2 on distinct data at an odd count, then times it at 1 GiB
// and logs busbw (for 2 ranks busbw = algbw = bytes/time; NCCL ≈ 330 GB/s on this 2×H200,
// testdata/nccl/h200x2/nccl_perf.csv).
func TestAllReduce2Sketch(t *testing.T) {
	ds := needDevices(t, 2)
	if ok, err := CanAccessPeer(0, 1); err != nil || !ok {
		t.Skipf("devices 0 and 1 cannot access each other (%v)", err)
	}
	for r := 0; r < 2; r++ {
		if err := ds[r].Do(func(c *Ctx) error { return c.EnablePeer(ds[1-r]) }); err != nil {
			t.Fatal(err)
		}
	}
	ks := [2]*Kernels{kernelsFor(t, ds[0]), kernelsFor(t, ds[1])}
	const bytes = 1 << 30
	var in, out [2]DevPtr
	var s [2]Stream
	for r := 0; r < 2; r++ {
		err := ds[r].Do(func(c *Ctx) (err error) {
			if in[r], err = c.Alloc(bytes); err != nil {
				return err
			}
			if out[r], err = c.Alloc(bytes); err != nil {
				return err
			}
			s[r], err = c.NewStream()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for r := 0; r < 2; r++ {
			ds[r].Do(func(c *Ctx) error {
				c.Free(in[r])
				c.Free(out[r])
				return c.DestroyStream(s[r])
			})
		}
	}()

	// Correctness on distinct values.
	const cnt = 1<<22 + 3
	var host [2][]float32
	for r := 0; r < 2; r++ {
		host[r] = make([]float32, cnt)
		for i := range host[r] {
			host[r][i] = float32((i*(r+3))%4093) - 2000
		}
		if err := ds[r].Do(func(c *Ctx) error {
			if err := c.Memset(out[r], 0xa5, 4*cnt); err != nil {
				return err
			}
			return c.CopyHtoD(in[r], asBytes(host[r]))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := allReduce2(ds, ks, s, in, out, cnt); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, cnt)
	for r := 0; r < 2; r++ {
		if err := ds[r].Do(func(c *Ctx) error { return c.CopyDtoH(asBytes(got), out[r]) }); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if want := host[0][i] + host[1][i]; got[i] != want {
				t.Fatalf("GPU %d: element %d = %g, want %g", r, i, got[i], want)
			}
		}
	}

	// Timing at 1 GiB (contents are whatever the buffers hold; only time matters here).
	full := bytes / 4
	if err := allReduce2(ds, ks, s, in, out, full); err != nil { // warm-up
		t.Fatal(err)
	}
	var ts []float64
	for i := 0; i < 7; i++ {
		t0 := time.Now()
		if err := allReduce2(ds, ks, s, in, out, full); err != nil {
			t.Fatal(err)
		}
		ts = append(ts, time.Since(t0).Seconds())
	}
	sort.Float64s(ts)
	sec := ts[len(ts)/2]
	t.Logf("two-GPU all-reduce sketch, float sum, 1 GiB: %.3f ms, busbw %.1f GB/s (host-timed median of 7; NCCL ≈ 330)", sec*1e3, bytes/sec/1e9)
}
