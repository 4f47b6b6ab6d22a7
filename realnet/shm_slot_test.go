package realnet_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/simccl/simccl/realnet"
)

// shmPair connects ranks 0 and 1 of a fresh shared-memory communicator and returns their conns as
// SlotConns.
func shmPair(t *testing.T, slot int) (a, b realnet.SlotConn) {
	t.Helper()
	dir := t.TempDir()
	secret := newSecret(t)
	ts := []realnet.Transport{realnet.NewShm(dir, secret, 0, slot), realnet.NewShm(dir, secret, 1, slot)}
	t.Cleanup(func() {
		for _, tr := range ts {
			tr.Close()
		}
	})
	conns := make([]realnet.Conn, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conns[r], errs[r] = ts[r].Connect(ctx, realnet.Key{Channel: 0, Peer: 1 - r})
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	var ok bool
	if a, ok = conns[0].(realnet.SlotConn); !ok {
		t.Fatalf("shm conn %T is not a SlotConn", conns[0])
	}
	if b, ok = conns[1].(realnet.SlotConn); !ok {
		t.Fatalf("shm conn %T is not a SlotConn", conns[1])
	}
	return a, b
}

// TestShmSlotConn: messages written in place with ReserveSend/PublishSend arrive whole through Recv,
// messages sent with Send arrive piece by piece through PeekRecv/ReleaseRecv, and a full ring makes a
// non-waiting ReserveSend report no slot instead of blocking.
func TestShmSlotConn(t *testing.T) {
	const slot = 4096
	a, b := shmPair(t, slot)
	dl := time.Now().Add(10 * time.Second)

	// In-place send of a 2.5-slot message, read with Recv.
	msg := make([]byte, slot*5/2)
	rand.New(rand.NewSource(1)).Read(msg)
	for off := 0; off < len(msg); {
		sl, ok, err := a.ReserveSend(true, dl)
		if err != nil || !ok {
			t.Fatalf("ReserveSend: ok %v, %v", ok, err)
		}
		if len(sl) != slot {
			t.Fatalf("ReserveSend gave %d bytes, want %d", len(sl), slot)
		}
		m := copy(sl, msg[off:])
		a.PublishSend(m, len(msg))
		off += m
	}
	got := make([]byte, len(msg))
	if err := b.Recv(got, dl); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("in-place message arrived changed")
	}

	// Send, read in place.
	if err := b.Send(msg, dl); err != nil {
		t.Fatal(err)
	}
	var back []byte
	for len(back) < len(msg) {
		piece, total, err := a.PeekRecv(dl)
		if err != nil {
			t.Fatal(err)
		}
		if total != len(msg) || len(piece) != min(slot, len(msg)-len(back)) {
			t.Fatalf("piece of %d bytes of a %d-byte message at %d, want %d-byte pieces of %d", len(piece), total, len(back), slot, len(msg))
		}
		back = append(back, piece...)
		a.ReleaseRecv()
	}
	if !bytes.Equal(back, msg) {
		t.Fatal("message read in place arrived changed")
	}

	// Fill every slot; the next non-waiting reservation finds none, a waiting one times out.
	for i := 0; i < realnet.Steps; i++ {
		if _, ok, err := a.ReserveSend(false, dl); err != nil || !ok {
			t.Fatalf("slot %d: ok %v, %v", i, ok, err)
		}
		a.PublishSend(1, 1)
	}
	if _, ok, err := a.ReserveSend(false, dl); err != nil || ok {
		t.Fatalf("full ring: ok %v, %v; want no slot and no error", ok, err)
	}
	if _, _, err := a.ReserveSend(true, time.Now().Add(20*time.Millisecond)); !errors.Is(err, realnet.ErrTimeout) {
		t.Fatalf("full ring, waiting: %v, want ErrTimeout", err)
	}
	one := make([]byte, 1)
	if err := b.Recv(one, dl); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.ReserveSend(false, dl); err != nil || !ok {
		t.Fatalf("after one slot was freed: ok %v, %v", ok, err)
	}

	// A closed peer ends a waiting PeekRecv with ErrPeerGone.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := a.PeekRecv(time.Now().Add(5 * time.Second))
		done <- err
	}()
	if err := <-done; !errors.Is(err, realnet.ErrPeerGone) {
		t.Fatalf("PeekRecv after the peer closed: %v, want ErrPeerGone", err)
	}
}
