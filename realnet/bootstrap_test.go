package realnet_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/simccl/simccl/realnet"
)

func bootAll(t *testing.T, id realnet.UniqueID, n int, to time.Duration) ([]*realnet.Bootstrap, []error) {
	t.Helper()
	bs := make([]*realnet.Bootstrap, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bs[r], errs[r] = realnet.NewBootstrap(context.Background(), id, r, n, realnet.BootstrapConfig{Timeout: to})
		}()
	}
	wg.Wait()
	return bs, errs
}

func TestBootstrapAllGather(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			id, root, err := realnet.NewUniqueID("", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			bs, errs := bootAll(t, id, n, 10*time.Second)
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			if err := root.Wait(); err != nil {
				t.Fatalf("root: %v", err)
			}
			var wg sync.WaitGroup
			for round := 0; round < 3; round++ {
				for r := 0; r < n; r++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						data := bytes.Repeat([]byte{byte(r + 1)}, r*100+round)
						got, err := bs[r].AllGather(data)
						if err != nil {
							t.Errorf("rank %d: %v", r, err)
							return
						}
						for p := 0; p < n; p++ {
							if !bytes.Equal(got[p], bytes.Repeat([]byte{byte(p + 1)}, p*100+round)) {
								t.Errorf("rank %d round %d: slot %d wrong (%d bytes)", r, round, p, len(got[p]))
							}
						}
						if err := bs[r].Barrier(); err != nil {
							t.Errorf("rank %d barrier: %v", r, err)
						}
					}()
				}
				wg.Wait()
			}
			for _, b := range bs {
				b.Close()
			}
		})
	}
}

// rawMsg is a bootstrap frame written by hand.
func rawMsg(magic uint64, typ, n uint32, body []byte) []byte {
	b := make([]byte, 16+len(body))
	binary.LittleEndian.PutUint64(b[0:], magic)
	binary.LittleEndian.PutUint32(b[8:], typ)
	binary.LittleEndian.PutUint32(b[12:], n)
	copy(b[16:], body)
	return b
}

// Connections that do not start with the authentication handshake are closed unanswered and do not
// disturb the ranks (security_test.go sends bad messages after a valid handshake).
func TestBootstrapRejectsWrongMagicAndHugeLengths(t *testing.T) {
	id, root, err := realnet.NewUniqueID("", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	addr, _ := id.Addr()
	bad := [][]byte{
		rawMsg(id.Magic()^1, 1, 8, make([]byte, 8)),              // an old-style registration, wrong magic
		rawMsg(id.Magic(), 1, 1<<31, nil),                        // absurd length: must not be allocated or awaited
		rawMsg(id.Magic(), 1, 8, []byte{9, 0, 0, 0, 2, 0, 0, 0}), // an old-style registration with the public magic
		[]byte("GET / HTTP/1.0\r\n\r\n"),
	}
	for i, m := range bad {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(m)
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("bad message %d: the root answered", i)
		}
		c.Close()
	}
	bs, errs := bootAll(t, id, 2, 10*time.Second)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d after bad clients: %v", r, err)
		}
		defer bs[r].Close()
	}
	if got := root.Rejected(); got != int64(len(bad)) {
		t.Fatalf("root rejected %d connections, want %d", got, len(bad))
	}
}

func TestBootstrapTimeoutWhenARankIsMissing(t *testing.T) {
	id, root, err := realnet.NewUniqueID("", 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	start := time.Now()
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ { // 2 of 3 ranks
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := realnet.NewBootstrap(context.Background(), id, r, 3, realnet.BootstrapConfig{Timeout: 500 * time.Millisecond})
			if err == nil {
				t.Errorf("rank %d joined a 3-rank communicator with 2 ranks", r)
			}
		}()
	}
	wg.Wait()
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("missing rank detected after %v", el)
	}
	if err := root.Wait(); err == nil {
		t.Fatalf("root reported success with a missing rank")
	}
}

func TestBootstrapFixedAddress(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	secret := realnet.SecretFromString("a secret the ranks share")
	id, err := realnet.UniqueIDFromAddr(addr, secret)
	if err != nil {
		t.Fatal(err)
	}
	if id.Magic() != secret.Label() || id.Secret() != secret {
		t.Fatalf("magic %#x, secret %x", id.Magic(), id.Secret())
	}
	if id2, _ := realnet.UniqueIDFromAddr(addr, realnet.SecretFromString("another")); id2.Magic() == id.Magic() {
		t.Fatalf("two secrets, one magic %#x", id.Magic())
	}
	if _, err := realnet.UniqueIDFromAddr(addr, realnet.Secret{}); err == nil {
		t.Fatalf("an id without a secret")
	}
	root, err := realnet.StartRoot(id, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	bs, errs := bootAll(t, id, 3, 10*time.Second)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		defer bs[r].Close()
	}
	if _, err := realnet.UniqueIDFromAddr("no-port", secret); err == nil {
		t.Fatalf("address without a port accepted")
	}
	var bad realnet.UniqueID
	if _, err := bad.Addr(); err == nil {
		t.Fatalf("empty id gave an address")
	}
}

func TestBootstrapPeerDeathFailsAllGather(t *testing.T) {
	id, root, err := realnet.NewUniqueID("", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	bs, errs := bootAll(t, id, 3, 2*time.Second)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	bs[1].Close()
	start := time.Now()
	var wg sync.WaitGroup
	for _, r := range []int{0, 2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := bs[r].AllGather([]byte("x")); err == nil {
				t.Errorf("rank %d: allgather without rank 1 succeeded", r)
			}
		}()
	}
	wg.Wait()
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("took %v", el)
	}
}
