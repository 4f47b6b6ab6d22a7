package cuda

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/coll"
)

// withEmulator runs body with a fresh emulated driver of n devices as the process's driver; it
// skips where a real driver is loaded.
func withEmulator(t *testing.T, n int, body func(e *emu, ds []*Device)) {
	if Init() == nil {
		t.Skip("a real driver is loaded; the emulator tests run where none is")
	}
	e := newEmu(n)
	oldDrv, oldErr := drv, initErr
	drv, initErr = e, nil
	defer func() { drv, initErr = oldDrv, oldErr }()
	var ds []*Device
	for i := 0; i < n; i++ {
		d, err := Open(i)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		ds = append(ds, d)
	}
	body(e, ds)
}

// openedAndCopied waits for stream s, whose copy into dst waited on another stream (an event or a
// flag, named by what) held until the test opened its gate, and checks that the copy saw want.
func openedAndCopied(t *testing.T, c *Ctx, s Stream, dst DevPtr, want []byte, what string) error {
	t.Helper()
	if err := c.StreamSync(s); err != nil {
		return err
	}
	got := make([]byte, len(want))
	if err := c.CopyDtoH(got, dst); err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the copy after the %s wait did not see the data", what)
	}
	return nil
}

func TestEmulatorEventOrder(t *testing.T) {
	withEmulator(t, 1, func(e *emu, ds []*Device) {
		gate := make(chan struct{})
		pattern := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, 100)
		err := ds[0].Do(func(c *Ctx) error {
			k, err := c.LoadKernels()
			if err != nil {
				return err
			}
			a, _ := c.NewStream()
			b, _ := c.NewStream()
			ev, _ := c.NewEvent(false)
			never, _ := c.NewEvent(false)
			src, _ := c.Alloc(len(pattern))
			mid, _ := c.Alloc(len(pattern))
			dst, _ := c.Alloc(len(pattern))
			if err := c.CopyHtoD(src, pattern); err != nil {
				return err
			}
			sa, _ := e.stream("test", a)
			sa.push(func() error { <-gate; return nil }) // stream a is held until the gate opens
			if err := k.Copy(c, a, mid, src, len(pattern)); err != nil {
				return err
			}
			if err := c.Record(ev, a); err != nil {
				return err
			}
			// A wait on an event never recorded is a no-op: b runs although a is held.
			if err := c.StreamWait(b, never); err != nil {
				return err
			}
			if err := c.StreamSync(b); err != nil {
				return err
			}
			if done, _ := c.EventDone(ev); done {
				t.Error("event done while its stream is held")
			}
			// b waits for a's copy: it sees the data only through the event.
			if err := c.StreamWait(b, ev); err != nil {
				return err
			}
			if err := k.Copy(c, b, dst, mid, len(pattern)); err != nil {
				return err
			}
			if done, _ := c.StreamDone(b); done {
				t.Error("stream b done before the event it waits for")
			}
			close(gate)
			return openedAndCopied(t, c, b, dst, pattern, "event")
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestEmulatorPeerAccessAndBounds(t *testing.T) {
	withEmulator(t, 2, func(e *emu, ds []*Device) {
		var remote DevPtr
		if err := ds[0].Do(func(c *Ctx) error {
			var err error
			remote, err = c.Alloc(1024)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		err := ds[1].Do(func(c *Ctx) error {
			k, err := c.LoadKernels()
			if err != nil {
				return err
			}
			local, _ := c.Alloc(1024)
			s, _ := c.NewStream()
			if err := k.Reduce(c, s, coll.Float32, coll.Sum, local, local, remote, 256, 0, 0); err != nil {
				return err
			}
			if err := c.StreamSync(s); !errors.Is(err, ErrorIllegalAddress) {
				t.Errorf("peer read without peer access: %v, want CUDA_ERROR_ILLEGAL_ADDRESS", err)
			}
			if err := c.EnablePeer(ds[0]); err != nil {
				return err
			}
			s2, _ := c.NewStream()
			if err := k.Reduce(c, s2, coll.Float32, coll.Sum, local, local, remote, 256, 0, 0); err != nil {
				return err
			}
			if err := c.StreamSync(s2); err != nil {
				t.Errorf("peer read with peer access: %v", err)
			}
			if err := k.Copy(c, s2, local, local.Add(1000), 100); err != nil {
				return err
			}
			if err := c.StreamSync(s2); !errors.Is(err, ErrorIllegalAddress) {
				t.Errorf("read past the allocation: %v, want CUDA_ERROR_ILLEGAL_ADDRESS", err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestEmulatorKernels checks the emulated reduce and divide against the reference on a few
// elements, through the launch path (argument decoding included).
func TestEmulatorKernels(t *testing.T) {
	withEmulator(t, 1, func(e *emu, ds []*Device) {
		err := ds[0].Do(func(c *Ctx) error {
			k, err := c.LoadKernels()
			if err != nil {
				return err
			}
			p, _ := c.Alloc(64)
			in := []byte{10, 0, 0, 0, 0xf6, 0xff, 0xff, 0xff} // int32 10, -10
			if err := c.CopyHtoD(p, in); err != nil {
				return err
			}
			if err := k.Reduce(c, 0, coll.Int32, coll.PreMulSum, p.Add(16), p, p, 2, 3, ScaleA); err != nil { // 3a + a
				return err
			}
			if err := k.Divide(c, 0, coll.Int32, p.Add(32), p.Add(16), 2, 3); err != nil { // truncating
				return err
			}
			if err := c.Synchronize(); err != nil {
				return err
			}
			got := make([]byte, 48)
			if err := c.CopyDtoH(got, p); err != nil {
				return err
			}
			want := []byte{40, 0, 0, 0, 0xd8, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 13, 0, 0, 0, 0xf3, 0xff, 0xff, 0xff}
			if !bytes.Equal(got[16:40], want) {
				t.Errorf("premulsum then divide: % x, want % x", got[16:40], want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestEmulatorFlags: a stream waiting on a flag (WaitFlag) runs only after another stream's
// WriteFlag, and sees the data written before it; GEQ compares as CUDA does.
func TestEmulatorFlags(t *testing.T) {
	withEmulator(t, 1, func(e *emu, ds []*Device) {
		gate := make(chan struct{})
		pattern := bytes.Repeat([]byte{9, 8, 7, 6, 5}, 64)
		err := ds[0].Do(func(c *Ctx) error {
			k, err := c.LoadKernels()
			if err != nil {
				return err
			}
			a, _ := c.NewStream()
			b, _ := c.NewStream()
			src, _ := c.Alloc(len(pattern))
			mid, _ := c.Alloc(len(pattern))
			dst, _ := c.Alloc(len(pattern))
			flag, _ := c.Alloc(64)
			if err := c.Memset(flag, 0, 64); err != nil {
				return err
			}
			if err := c.CopyHtoD(src, pattern); err != nil {
				return err
			}
			sa, _ := e.stream("test", a)
			sa.push(func() error { <-gate; return nil })
			if err := k.Copy(c, a, mid, src, len(pattern)); err != nil {
				return err
			}
			if err := c.WriteFlag(a, flag, 1); err != nil {
				return err
			}
			if err := c.WaitFlag(b, flag, 1); err != nil {
				return err
			}
			if err := k.Copy(c, b, dst, mid, len(pattern)); err != nil {
				return err
			}
			if err := c.WriteFlag(b, flag, 0); err != nil { // the reader resets it
				return err
			}
			time.Sleep(5 * time.Millisecond)
			if done, _ := c.StreamDone(b); done {
				t.Error("stream b passed its flag wait before the flag was written")
			}
			close(gate)
			if err := openedAndCopied(t, c, b, dst, pattern, "flag"); err != nil {
				return err
			}
			word := make([]byte, 4)
			if err := c.CopyDtoH(word, flag); err != nil {
				return err
			}
			if word[0] != 0 {
				t.Errorf("flag after the reader's reset: %v", word)
			}
			// GEQ: a word above the value satisfies the wait.
			if err := c.CopyHtoD(flag.Add(4), []byte{7, 0, 0, 0}); err != nil {
				return err
			}
			if err := c.WaitFlag(b, flag.Add(4), 3); err != nil {
				return err
			}
			if err := c.StreamSync(b); err != nil {
				t.Errorf("a wait on a word above its value: %v", err)
			}
			if err := c.WaitFlag(b, flag.Add(2), 1); err == nil {
				t.Error("a wait on a misaligned word was accepted")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestEmulatorSynchronizeWhileDestroying: cuCtxSynchronize lists the context's streams, then waits
// for each; a stream another thread destroys meanwhile must not hold it. The emulator's stream
// counted its destroy sentinel as queued work it never marked done, so the synchronize hung for
// ever (libnccl's api_check under load: one rank's thread in ncclCommDestroy's synchronize while
// the other rank's thread destroyed its streams). The legacy stream, held by a gate, keeps the
// synchronize waiting after it has listed the stream that the test then destroys.
func TestEmulatorSynchronizeWhileDestroying(t *testing.T) {
	withEmulator(t, 1, func(e *emu, ds []*Device) {
		var s Stream
		require.NoError(t, ds[0].Do(func(c *Ctx) error {
			var err error
			s, err = c.NewStream()
			return err
		}))
		st, err := e.stream("test", s)
		require.NoError(t, err)
		gate := make(chan struct{})
		e.legacy[0].push(func() error { <-gate; return nil })
		synced := make(chan error, 1)
		go func() { synced <- ds[0].Do(func(c *Ctx) error { return c.Synchronize() }) }()
		time.Sleep(50 * time.Millisecond) // the synchronize lists s and waits on the legacy stream
		require.NoError(t, ds[0].OnThisThread(func(c *Ctx) error { return c.DestroyStream(s) }))
		time.Sleep(50 * time.Millisecond) // s's goroutine takes the destroy
		close(gate)
		select {
		case err := <-synced:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Error("the synchronize still waits for a stream destroyed while it ran")
			st.mu.Lock() // let it return, so that the device closes
			st.done = st.enq
			st.cond.Broadcast()
			st.mu.Unlock()
			<-synced
		}
	})
}
