// Package realnettest is the conformance suite every realnet.Transport runs, in the manner of
// golang.org/x/net/nettest: ordering, large and zero-length messages, concurrency across channels,
// the no-wait buffering guarantee, deadlines, peer death and close semantics.
package realnettest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/simccl/simccl/realnet"
)

// MakeFunc returns n transports, the ranks 0..n-1 of one fresh communicator, ready to Connect.
// The suite closes them.
type MakeFunc func(t *testing.T, n int) []realnet.Transport

// TestTransport runs the whole suite.
func TestTransport(t *testing.T, mk MakeFunc) {
	t.Run("Ordering", func(t *testing.T) { testOrdering(t, mk) })
	t.Run("LargeAndEmpty", func(t *testing.T) { testLargeAndEmpty(t, mk) })
	t.Run("NoWaitSlots", func(t *testing.T) { testNoWait(t, mk) })
	t.Run("ChannelsConcurrent", func(t *testing.T) { testChannels(t, mk) })
	t.Run("SizeMismatch", func(t *testing.T) { testSizeMismatch(t, mk) })
	t.Run("Deadline", func(t *testing.T) { testDeadline(t, mk) })
	t.Run("PeerClose", func(t *testing.T) { testPeerClose(t, mk) })
	t.Run("LocalClose", func(t *testing.T) { testLocalClose(t, mk) })
	t.Run("DuplicateKey", func(t *testing.T) { testDuplicate(t, mk) })
	t.Run("ConnectCancel", func(t *testing.T) { testConnectCancel(t, mk) })
	t.Run("DeliveredAfterGracefulClose", func(t *testing.T) { testGraceful(t, mk) })
}

func closeAll(ts []realnet.Transport) {
	for _, tr := range ts {
		tr.Close()
	}
}

// pair connects rank 0 and rank 1 on key channel ch, connIndex ci.
func pair(t *testing.T, ts []realnet.Transport, a, b, ch, ci int) (realnet.Conn, realnet.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var cb realnet.Conn
	var errb error
	done := make(chan struct{})
	go func() {
		cb, errb = ts[b].Connect(ctx, realnet.Key{Channel: ch, Peer: a, ConnIndex: ci})
		close(done)
	}()
	ca, erra := ts[a].Connect(ctx, realnet.Key{Channel: ch, Peer: b, ConnIndex: ci})
	<-done
	if erra != nil || errb != nil {
		t.Fatalf("connect %d<->%d channel %d: %v / %v", a, b, ch, erra, errb)
	}
	return ca, cb
}

func deadline() time.Time { return time.Now().Add(10 * time.Second) }

func fill(b []byte, seed int64) {
	r := rand.New(rand.NewSource(seed))
	r.Read(b)
}

func testOrdering(t *testing.T, mk MakeFunc) {
	ts := mk(t, 2)
	defer closeAll(ts)
	a, b := pair(t, ts, 0, 1, 0, 0)
	slot := a.SlotBytes()
	const n = 300
	sizes := make([]int, n)
	r := rand.New(rand.NewSource(1))
	for i := range sizes {
		sizes[i] = r.Intn(2*slot + 1)
	}
	errc := make(chan error, 1)
	go func() {
		for i, s := range sizes {
			p := make([]byte, s)
			fill(p, int64(i))
			if err := a.Send(p, deadline()); err != nil {
				errc <- fmt.Errorf("send %d: %w", i, err)
				return
			}
		}
		errc <- nil
	}()
	for i, s := range sizes {
		got := make([]byte, s)
		if err := b.Recv(got, deadline()); err != nil {
			t.Fatalf("recv %d (%d bytes): %v", i, s, err)
		}
		want := make([]byte, s)
		fill(want, int64(i))
		if !bytes.Equal(got, want) {
			t.Fatalf("message %d (%d bytes) differs", i, s)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func testLargeAndEmpty(t *testing.T, mk MakeFunc) {
	ts := mk(t, 2)
	defer closeAll(ts)
	a, b := pair(t, ts, 0, 1, 0, 1)
	sizes := []int{0, 1, a.SlotBytes(), a.SlotBytes() + 1, 7*a.SlotBytes()/2 + 13, 0, 3 << 20}
	errc := make(chan error, 1)
	go func() {
		for i, s := range sizes {
			p := make([]byte, s)
			fill(p, int64(100+i))
			if err := b.Send(p, deadline()); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i, s := range sizes {
		got := make([]byte, s)
		if err := a.Recv(got, deadline()); err != nil {
			t.Fatalf("recv %d bytes: %v", s, err)
		}
		want := make([]byte, s)
		fill(want, int64(100+i))
		if !bytes.Equal(got, want) {
			t.Fatalf("%d-byte message differs", s)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if d, ok := a.(realnet.DirectReceiver); ok {
		go func() { errc <- b.Send([]byte("direct"), deadline()) }()
		var got []byte
		if err := d.RecvFunc(6, deadline(), func(p []byte) { got = append(got, p...) }); err != nil || string(got) != "direct" {
			t.Fatalf("RecvFunc: %q, %v", got, err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

// testNoWait: both ends send Steps slot-sized messages before either receives (a ring step on
// every rank at once); this must not deadlock.
func testNoWait(t *testing.T, mk MakeFunc) {
	ts := mk(t, 2)
	defer closeAll(ts)
	a, b := pair(t, ts, 0, 1, 2, 0)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, c := range []realnet.Conn{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, c.SlotBytes())
			for s := 0; s < realnet.Steps; s++ {
				p[0] = byte(s)
				if err := c.Send(p, time.Now().Add(5*time.Second)); err != nil {
					errs[i] = fmt.Errorf("send %d without a receiver: %w", s, err)
					return
				}
			}
			for s := 0; s < realnet.Steps; s++ {
				if err := c.Recv(p, deadline()); err != nil || p[0] != byte(s) {
					errs[i] = fmt.Errorf("recv %d: %v (first byte %d)", s, err, p[0])
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func testChannels(t *testing.T, mk MakeFunc) {
	const n, nch, msgs = 4, 3, 20
	ts := mk(t, n)
	defer closeAll(ts)
	// A ring on every channel, every rank sending to next and receiving from prev concurrently.
	type ends struct{ next, prev realnet.Conn }
	conns := make([][]ends, n)
	for r := range conns {
		conns[r] = make([]ends, nch)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for r := 0; r < n; r++ {
		for ch := 0; ch < nch; ch++ {
			for _, dir := range []int{1, n - 1} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					peer := (r + dir) % n
					c, err := ts[r].Connect(ctx, realnet.Key{Channel: ch, Peer: peer, ConnIndex: 0})
					mu.Lock()
					defer mu.Unlock()
					if err != nil && firstErr == nil {
						firstErr = err
					}
					if dir == 1 {
						conns[r][ch].next = c
					} else {
						conns[r][ch].prev = c
					}
				}()
			}
		}
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	errc := make(chan error, 2*n*nch)
	for r := 0; r < n; r++ {
		for ch := 0; ch < nch; ch++ {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for m := 0; m < msgs; m++ {
					p := bytes.Repeat([]byte{byte(r), byte(ch), byte(m)}, 1000+m)
					if err := conns[r][ch].next.Send(p, deadline()); err != nil {
						errc <- err
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				prev := (r + n - 1) % n
				for m := 0; m < msgs; m++ {
					p := make([]byte, 3*(1000+m))
					if err := conns[r][ch].prev.Recv(p, deadline()); err != nil {
						errc <- err
						return
					}
					if !bytes.Equal(p, bytes.Repeat([]byte{byte(prev), byte(ch), byte(m)}, 1000+m)) {
						errc <- fmt.Errorf("rank %d channel %d message %d: wrong content", r, ch, m)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

func testSizeMismatch(t *testing.T, mk MakeFunc) {
	ts := mk(t, 2)
	defer closeAll(ts)
	a, b := pair(t, ts, 0, 1, 0, 0)
	if err := a.Send(make([]byte, 10), deadline()); err != nil {
		t.Fatal(err)
	}
	err := b.Recv(make([]byte, 11), deadline())
	if !errors.Is(err, realnet.ErrSize) {
		t.Fatalf("recv of 11 bytes for a 10-byte message: %v, want ErrSize", err)
	}
}

func testDeadline(t *testing.T, mk MakeFunc) {
	ts := mk(t, 2)
	defer closeAll(ts)
	a, _ := pair(t, ts, 0, 1, 0, 0)
	start := time.Now()
	err := a.Recv(make([]byte, 4), time.Now().Add(100*time.Millisecond))
	if !errors.Is(err, realnet.ErrTimeout) {
		t.Fatalf("recv with nothing sent: %v, want ErrTimeout", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("100 ms deadline took %v", el)
	}
	// Send times out once every slot (and any kernel buffer behind them) is full.
	p := make([]byte, a.SlotBytes())
	var serr error
	for sent := 0; sent < 256<<20 && serr == nil; sent += len(p) {
		serr = a.Send(p, time.Now().Add(200*time.Millisecond))
	}
	if !errors.Is(serr, realnet.ErrTimeout) {
		t.Fatalf("sends with a receiver that never reads: %v, want ErrTimeout", serr)
	}
}

func testPeerClose(t *testing.T, mk MakeFunc) {
	ts := mk(t, 2)
	defer closeAll(ts)
	a, b := pair(t, ts, 0, 1, 0, 0)
	// A message sent before the close is still delivered.
	if err := b.Send([]byte("last"), deadline()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	got := make(chan error, 1)
	go func() {
		p := make([]byte, 4)
		if err := a.Recv(p, deadline()); err != nil || string(p) != "last" {
			got <- fmt.Errorf("message sent before close: %q %v", p, err)
			return
		}
		got <- a.Recv(p, time.Now().Add(30*time.Second))
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	ts[1].Close()
	select {
	case err := <-got:
		if !errors.Is(err, realnet.ErrPeerGone) {
			t.Fatalf("pending recv after peer close: %v, want ErrPeerGone", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("pending recv still blocked 5 s after the peer closed")
	}
	t.Logf("peer close detected in %v", time.Since(start))
	var err error
	for i := 0; i < 100 && err == nil; i++ { // a socket may accept a few writes before the reset
		err = a.Send(make([]byte, 1000), time.Now().Add(5*time.Second))
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(err, realnet.ErrPeerGone) && !errors.Is(err, realnet.ErrClosed) {
		t.Fatalf("send after peer close: %v, want ErrPeerGone", err)
	}
}

func testLocalClose(t *testing.T, mk MakeFunc) {
	ts := mk(t, 2)
	defer closeAll(ts)
	a, _ := pair(t, ts, 0, 1, 0, 0)
	got := make(chan error, 1)
	go func() { got <- a.Recv(make([]byte, 4), time.Time{}) }()
	time.Sleep(50 * time.Millisecond)
	ts[0].Close()
	select {
	case err := <-got:
		if !errors.Is(err, realnet.ErrClosed) {
			t.Fatalf("recv blocked when its transport closed: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Close did not unblock a pending recv with no deadline")
	}
	if _, err := ts[0].Connect(context.Background(), realnet.Key{Channel: 9, Peer: 1}); err == nil {
		t.Fatalf("connect on a closed transport succeeded")
	}
	if err := ts[0].Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func testDuplicate(t *testing.T, mk MakeFunc) {
	ts := mk(t, 2)
	defer closeAll(ts)
	pair(t, ts, 0, 1, 5, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := ts[0].Connect(ctx, realnet.Key{Channel: 5, Peer: 1, ConnIndex: 0}); err == nil {
		t.Fatalf("second connect for one key succeeded")
	}
}

func testConnectCancel(t *testing.T, mk MakeFunc) {
	ts := mk(t, 2)
	defer closeAll(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	for _, r := range []int{0, 1} { // both the dialing and the waiting side
		if _, err := ts[r].Connect(ctx, realnet.Key{Channel: 7 + r, Peer: 1 - r}); err == nil {
			t.Fatalf("rank %d: connect to an absent peer succeeded", r)
		}
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("connect with a 100 ms context took %v", el)
	}
}

// testGraceful: messages sent (and flushed, where the connection buffers outside shared memory)
// before the sender closes are all delivered.
func testGraceful(t *testing.T, mk MakeFunc) {
	ts := mk(t, 2)
	defer closeAll(ts)
	a, b := pair(t, ts, 0, 1, 0, 0)
	for i := 0; i < realnet.Steps-1; i++ {
		if err := a.Send([]byte{byte(i), 1, 2, 3}, deadline()); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Send(nil, deadline()); err != nil {
		t.Fatal(err)
	}
	if f, ok := a.(realnet.Flusher); ok {
		if err := f.Flush(deadline()); err != nil {
			t.Fatalf("flush: %v", err)
		}
	}
	ts[0].Close()
	for i := 0; i < realnet.Steps-1; i++ {
		p := make([]byte, 4)
		if err := b.Recv(p, deadline()); err != nil || p[0] != byte(i) {
			t.Fatalf("message %d after the sender closed: %v %v", i, p, err)
		}
	}
	if err := b.Recv(nil, deadline()); err != nil {
		t.Fatalf("empty message after the sender closed: %v", err)
	}
	if err := b.Recv(make([]byte, 1), deadline()); !errors.Is(err, realnet.ErrPeerGone) {
		t.Fatalf("recv past the last message: %v, want ErrPeerGone", err)
	}
}
