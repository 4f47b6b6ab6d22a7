package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/simccl/simccl/coll"
)

func TestDevices(t *testing.T) {
	ds := needDevices(t, 1)
	v, err := DriverVersion()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("driver supports CUDA %d.%d", v/1000, v%1000/10)
	for _, d := range ds {
		var free, total uint64
		if err := d.Do(func(c *Ctx) (err error) { free, total, err = c.MemInfo(); return }); err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: %.1f GiB of %.1f GiB free, L2 %d MiB", d, float64(free)/(1<<30), float64(total)/(1<<30), d.L2Bytes>>20)
		if total == 0 || d.SMs == 0 || d.Name == "" {
			t.Errorf("%v: implausible properties", d)
		}
	}
	if _, err := Open(len(devs) + 5); err == nil {
		t.Error("opening a device beyond the count succeeded")
	}
}

func TestDoRecoversPanic(t *testing.T) {
	d := needDevices(t, 1)[0]
	err := d.Do(func(c *Ctx) error { var s []int; s[len(s)] = 1; return nil })
	if err == nil {
		t.Fatal("panic in submitted work was not reported")
	}
	if err := d.Do(func(c *Ctx) error { return nil }); err != nil {
		t.Fatalf("device unusable after a recovered panic: %v", err)
	}
}

func TestBadCallsReturnTypedErrors(t *testing.T) {
	d := needDevices(t, 1)[0]
	err := d.Do(func(c *Ctx) error {
		_, err := c.Alloc(1 << 62) // 4 EiB
		return err
	})
	var ce *Error
	if !errors.As(err, &ce) || !errors.Is(err, ErrorOutOfMemory) {
		t.Fatalf("huge alloc: %v, want a *cuda.Error with CUDA_ERROR_OUT_OF_MEMORY", err)
	}
	if ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" || ce.Call != "cuMemAlloc_v2" {
		t.Errorf("error %+v lacks the driver's name or the call", ce)
	}
	t.Logf("huge alloc: %v", err)
	err = d.Do(func(c *Ctx) error {
		_, err := c.LoadModule([]byte(".version 8.0\n.target sm_90\n.address_size 64\nthis is not ptx\n"))
		return err
	})
	var me *ModuleError
	if !errors.As(err, &me) {
		t.Fatalf("bad PTX: %v, want a *cuda.ModuleError", err)
	}
	t.Logf("bad PTX: %v", err)
}

func TestAllocCopyRoundTrip(t *testing.T) {
	d := needDevices(t, 1)[0]
	const n = 3<<20 + 5
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(rand.Uint32())
	}
	got := make([]byte, n)
	err := d.Do(func(c *Ctx) error {
		a, err := c.Alloc(n)
		if err != nil {
			return err
		}
		defer c.Free(a)
		b, err := c.Alloc(n)
		if err != nil {
			return err
		}
		defer c.Free(b)
		if err := c.Memset(b, 0xa5, n); err != nil {
			return err
		}
		if err := c.CopyHtoD(a, src); err != nil {
			return err
		}
		if err := c.CopyDtoD(b, a, n); err != nil {
			return err
		}
		if err := c.CopyDtoH(got, b); err != nil {
			return err
		}
		if !bytes.Equal(got, src) {
			return errors.New("synchronous round trip changed the bytes")
		}
		// Pinned memory and a stream: H→D, D→D at an odd offset, D→H.
		h, err := c.HostAlloc(n)
		if err != nil {
			return err
		}
		defer c.FreeHost(h)
		copy(h.Bytes(), src)
		s, err := c.NewStream()
		if err != nil {
			return err
		}
		defer c.DestroyStream(s)
		if err := c.MemsetAsync(b, 0, n, s); err != nil {
			return err
		}
		if err := c.CopyHtoDAsync(a, h, 0, n, s); err != nil {
			return err
		}
		if err := c.CopyDtoDAsync(b.Add(1), a, n-1, s); err != nil {
			return err
		}
		clear(h.Bytes())
		if err := c.CopyDtoHAsync(h, 0, b, n, s); err != nil {
			return err
		}
		if err := c.StreamSync(s); err != nil {
			return err
		}
		if done, err := c.StreamDone(s); err != nil || !done {
			return fmt.Errorf("stream not done after sync: %v %v", done, err)
		}
		hb := h.Bytes()
		if hb[0] != 0 || !bytes.Equal(hb[1:], src[:n-1]) {
			return errors.New("asynchronous round trip changed the bytes")
		}
		if err := c.CopyDtoHAsync(h, n-4, b, 8, s); err == nil {
			return errors.New("a copy past the end of pinned memory was accepted")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCopyKernel(t *testing.T) {
	d := needDevices(t, 1)[0]
	k := kernelsFor(t, d)
	for _, tc := range []struct{ n, dOff, sOff int }{{1, 0, 0}, {15, 0, 0}, {1 << 20, 0, 0}, {1<<20 + 13, 16, 32}, {99999, 3, 1}, {4097, 1, 1}} {
		src := make([]byte, tc.n)
		for i := range src {
			src[i] = byte(rand.Uint32())
		}
		got := make([]byte, tc.n+64)
		err := d.Do(func(c *Ctx) error {
			a, err := c.Alloc(tc.n + 64)
			if err != nil {
				return err
			}
			defer c.Free(a)
			b, err := c.Alloc(tc.n + 64)
			if err != nil {
				return err
			}
			defer c.Free(b)
			if err := c.Memset(b, 0x5a, tc.n+64); err != nil {
				return err
			}
			if err := c.CopyHtoD(a.Add(tc.sOff), src); err != nil {
				return err
			}
			if err := k.Copy(c, 0, b.Add(tc.dOff), a.Add(tc.sOff), tc.n); err != nil {
				return err
			}
			if err := c.Synchronize(); err != nil {
				return err
			}
			return c.CopyDtoH(got, b)
		})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[tc.dOff:tc.dOff+tc.n], src) {
			t.Errorf("copy of %d bytes (dst+%d, src+%d): wrong bytes", tc.n, tc.dOff, tc.sOff)
		}
		for i, b := range got {
			if (i < tc.dOff || i >= tc.dOff+tc.n) && b != 0x5a {
				t.Errorf("copy of %d bytes (dst+%d): byte %d outside the range was written", tc.n, tc.dOff, i)
				break
			}
		}
	}
}

// timeIt runs body reps times between timing events on stream s and returns the median seconds.
func timeIt(c *Ctx, s Stream, reps int, body func() error) (float64, error) {
	e0, err := c.NewEvent(true)
	if err != nil {
		return 0, err
	}
	defer c.DestroyEvent(e0)
	e1, err := c.NewEvent(true)
	if err != nil {
		return 0, err
	}
	defer c.DestroyEvent(e1)
	if err := body(); err != nil { // warm-up
		return 0, err
	}
	var ts []float64
	for i := 0; i < reps; i++ {
		if err := c.Record(e0, s); err != nil {
			return 0, err
		}
		if err := body(); err != nil {
			return 0, err
		}
		if err := c.Record(e1, s); err != nil {
			return 0, err
		}
		if err := c.EventSync(e1); err != nil {
			return 0, err
		}
		sec, err := c.Elapsed(e0, e1)
		if err != nil {
			return 0, err
		}
		ts = append(ts, sec)
	}
	sort.Float64s(ts)
	return ts[len(ts)/2], nil
}

// TestBandwidth times 1 GiB device copies (copy engine and copy kernel) and a float32 sum of two
// 1 GiB inputs, and logs GB/s (bytes moved = bytes read + bytes written; "algbw" = bytes of one buffer).
func TestBandwidth(t *testing.T) {
	d := needDevices(t, 1)[0]
	k := kernelsFor(t, d)
	const n = 1 << 30
	err := d.Do(func(c *Ctx) error {
		var bufs [3]DevPtr
		for i := range bufs {
			p, err := c.Alloc(n)
			if err != nil {
				return err
			}
			defer c.Free(p)
			if err := c.Memset(p, byte(0x11*(i+1)), n); err != nil {
				return err
			}
			bufs[i] = p
		}
		s, err := c.NewStream()
		if err != nil {
			return err
		}
		defer c.DestroyStream(s)
		report := func(what string, moved float64, sec float64) {
			t.Logf("%-32s %8.3f ms  %7.1f GB/s moved (read+write)  %7.1f GB/s per buffer", what, sec*1e3, moved/sec/1e9, n/sec/1e9)
		}
		sec, err := timeIt(c, s, 10, func() error { return c.CopyDtoDAsync(bufs[1], bufs[0], n, s) })
		if err != nil {
			return err
		}
		report("cuMemcpyDtoDAsync 1 GiB", 2*n, sec)
		sec, err = timeIt(c, s, 10, func() error { return k.Copy(c, s, bufs[1], bufs[0], n) })
		if err != nil {
			return err
		}
		report("copy kernel 1 GiB", 2*n, sec)
		for _, ty := range []coll.DataType{coll.Float32, coll.Bfloat16, coll.Float8e4m3, coll.Float64} {
			cnt := n / ty.Size()
			sec, err = timeIt(c, s, 10, func() error {
				return k.Reduce(c, s, ty, coll.Sum, bufs[2], bufs[0], bufs[1], cnt, 0, 0)
			})
			if err != nil {
				return err
			}
			report(fmt.Sprintf("reduce sum %v 2×1 GiB → 1 GiB", ty), 3*n, sec)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestGraphCapture(t *testing.T) {
	d := needDevices(t, 1)[0]
	k := kernelsFor(t, d)
	const cnt = 1<<16 + 3
	a := make([]float32, cnt)
	b := make([]float32, cnt)
	for i := range a {
		a[i], b[i] = float32(i), float32(2*i+1)
	}
	got := make([]float32, cnt)
	err := d.Do(func(c *Ctx) error {
		pa, err := c.Alloc(4 * cnt)
		if err != nil {
			return err
		}
		defer c.Free(pa)
		pb, err := c.Alloc(4 * cnt)
		if err != nil {
			return err
		}
		defer c.Free(pb)
		po, err := c.Alloc(4 * cnt)
		if err != nil {
			return err
		}
		defer c.Free(po)
		if err := c.CopyHtoD(pa, asBytes(a)); err != nil {
			return err
		}
		if err := c.CopyHtoD(pb, asBytes(b)); err != nil {
			return err
		}
		s, err := c.NewStream()
		if err != nil {
			return err
		}
		defer c.DestroyStream(s)
		if err := c.BeginCapture(s, CaptureThreadLocal); err != nil {
			return err
		}
		// out = a + b; a = out + b  → after one launch: a' = a + 2b.
		if err := k.Reduce(c, s, coll.Float32, coll.Sum, po, pa, pb, cnt, 0, 0); err != nil {
			return err
		}
		if err := k.Reduce(c, s, coll.Float32, coll.Sum, pa, po, pb, cnt, 0, 0); err != nil {
			return err
		}
		g, err := c.EndCapture(s)
		if err != nil {
			return err
		}
		defer c.DestroyGraph(g)
		// Captured work must not have run yet.
		if err := c.CopyDtoH(asBytes(got), pa); err != nil {
			return err
		}
		for i := range got {
			if got[i] != a[i] {
				return fmt.Errorf("captured kernels ran during capture: a[%d] = %g, want %g", i, got[i], a[i])
			}
		}
		ex, err := c.Instantiate(g)
		if err != nil {
			return err
		}
		defer c.DestroyGraphExec(ex)
		for i := 0; i < 3; i++ {
			if err := c.LaunchGraph(ex, s); err != nil {
				return err
			}
		}
		if err := c.StreamSync(s); err != nil {
			return err
		}
		return c.CopyDtoH(asBytes(got), pa)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if want := a[i] + 6*b[i]; got[i] != want {
			t.Fatalf("after 3 graph launches a[%d] = %g, want %g", i, got[i], want)
		}
	}
}

// TestPeer enables peer access both ways, copies between the GPUs with the copy engines and with
// the copy kernel reading the peer's memory, reduces with one input on the peer, and logs GB/s.
func TestPeer(t *testing.T) {
	ds := needDevices(t, 2)
	d0, d1 := ds[0], ds[1]
	ok, err := CanAccessPeer(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("devices 0 and 1 cannot access each other")
	}
	if err := d0.Do(func(c *Ctx) error { return c.EnablePeer(d1) }); err != nil {
		t.Fatal(err)
	}
	if err := d1.Do(func(c *Ctx) error { return c.EnablePeer(d0) }); err != nil {
		t.Fatal(err)
	}
	if err := d1.Do(func(c *Ctx) error { return c.EnablePeer(d0) }); err != nil {
		t.Fatalf("enabling twice: %v", err)
	}
	k1 := kernelsFor(t, d1)
	const n = 256 << 20
	const cnt = n / 4
	src := make([]float32, cnt)
	for i := range src {
		src[i] = float32(i % 1000)
	}
	var p0 DevPtr
	if err := d0.Do(func(c *Ctx) (err error) {
		if p0, err = c.Alloc(n); err != nil {
			return err
		}
		return c.CopyHtoD(p0, asBytes(src))
	}); err != nil {
		t.Fatal(err)
	}
	defer d0.Do(func(c *Ctx) error { return c.Free(p0) })
	got := make([]float32, cnt)
	err = d1.Do(func(c *Ctx) error {
		p1, err := c.Alloc(n)
		if err != nil {
			return err
		}
		defer c.Free(p1)
		q1, err := c.Alloc(n)
		if err != nil {
			return err
		}
		defer c.Free(q1)
		s, err := c.NewStream()
		if err != nil {
			return err
		}
		defer c.DestroyStream(s)
		sec, err := timeIt(c, s, 10, func() error { return c.CopyPeerAsync(p1, d1, p0, d0, n, s) })
		if err != nil {
			return err
		}
		t.Logf("cuMemcpyPeerAsync GPU0→GPU1 256 MiB: %.3f ms, %.1f GB/s", sec*1e3, n/sec/1e9)
		if err := c.CopyDtoH(asBytes(got), p1); err != nil {
			return err
		}
		for i := range got {
			if got[i] != src[i] {
				return fmt.Errorf("peer copy: element %d = %g, want %g", i, got[i], src[i])
			}
		}
		if err := c.Memset(p1, 0, n); err != nil {
			return err
		}
		sec, err = timeIt(c, s, 10, func() error { return k1.Copy(c, s, p1, p0, n) })
		if err != nil {
			return err
		}
		t.Logf("copy kernel on GPU1 pulling from GPU0 256 MiB: %.3f ms, %.1f GB/s", sec*1e3, n/sec/1e9)
		if err := c.CopyDtoH(asBytes(got), p1); err != nil {
			return err
		}
		for i := range got {
			if got[i] != src[i] {
				return fmt.Errorf("kernel peer copy: element %d = %g, want %g", i, got[i], src[i])
			}
		}
		// q1 = p1 (local) + p0 (peer) = 2 src.
		sec, err = timeIt(c, s, 10, func() error { return k1.Reduce(c, s, coll.Float32, coll.Sum, q1, p1, p0, cnt, 0, 0) })
		if err != nil {
			return err
		}
		t.Logf("reduce sum float on GPU1, one input on GPU0, 256 MiB: %.3f ms, %.1f GB/s of peer input", sec*1e3, n/sec/1e9)
		if err := c.CopyDtoH(asBytes(got), q1); err != nil {
			return err
		}
		for i := range got {
			if got[i] != 2*src[i] {
				return fmt.Errorf("peer reduce: element %d = %g, want %g", i, got[i], 2*src[i])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
