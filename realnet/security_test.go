package realnet

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The attacks of the security issue (docs/security.md), each against the real listeners.

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// fixedRoot starts the root of a fixed-address id, as rank 0 of a launcher job does.
func fixedRoot(t *testing.T, secret string, timeout time.Duration) (UniqueID, *Root) {
	t.Helper()
	id, err := UniqueIDFromAddr(freeAddr(t), SecretFromString(secret))
	if err != nil {
		t.Fatal(err)
	}
	root, err := StartRoot(id, timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return id, root
}

func bootRanks(id UniqueID, ranks []int, n int, timeout time.Duration) ([]*Bootstrap, []error) {
	bs := make([]*Bootstrap, len(ranks))
	errs := make([]error, len(ranks))
	var wg sync.WaitGroup
	for i, r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bs[i], errs[i] = NewBootstrap(context.Background(), id, r, n, BootstrapConfig{Timeout: timeout})
		}()
	}
	wg.Wait()
	return bs, errs
}

func registerMsg(magic uint64, rank, n int, addr string) []byte {
	body := make([]byte, 8+len(addr))
	binary.LittleEndian.PutUint32(body[0:], uint32(rank))
	binary.LittleEndian.PutUint32(body[4:], uint32(n))
	copy(body[8:], addr)
	var b bytes.Buffer
	h := make([]byte, 16)
	binary.LittleEndian.PutUint64(h[0:], magic)
	binary.LittleEndian.PutUint32(h[8:], msgRegister)
	binary.LittleEndian.PutUint32(h[12:], uint32(len(body)))
	b.Write(h)
	b.Write(body)
	return b.Bytes()
}

// A stranger who knows everything public about a launcher job (the root's address, the magic that
// frames its messages) but not its secret cannot register: neither with a bare registration (the
// protocol before authentication) nor after a handshake it cannot complete. It receives no peer
// information, and the real ranks are not locked out.
func TestBootstrapStrangerCannotRegister(t *testing.T) {
	id, root := fixedRoot(t, "the job's secret", 10*time.Second)
	addr, _ := id.Addr()
	got := make(chan string, 2)
	stranger := func(handshake bool) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			got <- "dial: " + err.Error()
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		if handshake {
			err := authDial(c, SecretFromString("a guess"), purposeRoot)
			if !errors.Is(err, ErrAuth) {
				got <- fmt.Sprintf("a handshake with a guessed secret gave %v, want ErrAuth", err)
				return
			}
			c.Write(make([]byte, authMACLen)) // go on regardless, with a MAC of zeros
		}
		c.Write(registerMsg(id.Magic(), 1, 2, "10.9.8.7:6543"))
		b, _ := io.ReadAll(c)
		// The acceptor's handshake answer (a nonce and a MAC) is all a stranger may see.
		if handshake && len(b) > authNonceLen+authMACLen || !handshake && len(b) > 0 {
			got <- fmt.Sprintf("the stranger received %d bytes: %q", len(b), b)
			return
		}
		got <- ""
	}
	stranger(false)
	stranger(true)
	for range 2 {
		if s := <-got; s != "" {
			t.Error(s)
		}
	}
	bs, errs := bootRanks(id, []int{0, 1}, 2, 10*time.Second)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d after the stranger: %v", r, err)
		}
		defer bs[r].Close()
	}
	if n := root.Rejected(); n != 2 {
		t.Errorf("root rejected %d connections, want 2", n)
	}
}

// An authenticated peer's bad messages (absurd length, rank out of range) are refused too.
func TestBootstrapRejectsBadRegistrations(t *testing.T) {
	id, root := fixedRoot(t, "s", 10*time.Second)
	addr, _ := id.Addr()
	for i, m := range [][]byte{
		registerMsg(id.Magic(), 9, 2, "127.0.0.1:1"),
		registerMsg(id.Magic(), 0, MaxRanks+1, "127.0.0.1:1"),
		append(registerMsg(id.Magic(), 0, 2, "")[:12], 0xff, 0xff, 0xff, 0x7f), // a 2 GiB body
		registerMsg(id.Magic()^1, 0, 2, "127.0.0.1:1"),
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if err := authDial(c, id.Secret(), purposeRoot); err != nil {
			t.Fatal(err)
		}
		c.Write(m)
		if b, _ := io.ReadAll(c); len(b) > 0 {
			t.Errorf("bad registration %d answered: %q", i, b)
		}
		c.Close()
	}
	bs, errs := bootRanks(id, []int{0, 1}, 2, 10*time.Second)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		defer bs[r].Close()
	}
	if n := root.Rejected(); n != 4 {
		t.Errorf("root rejected %d connections, want 4", n)
	}
}

// Idle connections (opened, then silent; or half a hello) do not stall the bootstrap: the root
// serves connections concurrently and gives each a short handshake deadline. Before, the root read
// them one at a time, each for the whole bootstrap timeout.
func TestBootstrapIdleConnectionsDoNotStall(t *testing.T) {
	id, root := fixedRoot(t, "s", 30*time.Second)
	addr, _ := id.Addr()
	for i := range 50 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if i%2 == 1 {
			c.Write([]byte("smcc")) // half a hello
		}
	}
	start := time.Now()
	bs, errs := bootRanks(id, []int{0, 1, 2}, 3, 20*time.Second)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		defer bs[r].Close()
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("bootstrap behind 50 idle connections took %v", el)
	}
	if err := root.Wait(); err != nil {
		t.Fatal(err)
	}
}

// Two jobs whose rank 0s were given one port: the second root cannot listen, and the second job's
// ranks, finding the first job's root there, fail at once ("serves another communicator") instead of
// joining it; the first job is not disturbed.
func TestBootstrapTwoJobsOnOnePort(t *testing.T) {
	idA, _ := fixedRoot(t, "job A", 10*time.Second)
	addr, _ := idA.Addr()
	idB, err := UniqueIDFromAddr(addr, SecretFromString("job B"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := StartRoot(idB, 10*time.Second); err == nil {
		t.Fatalf("a second root listened on %s", addr)
	}
	start := time.Now()
	_, errsB := bootRanks(idB, []int{1}, 2, 10*time.Second) // first in line, before job A's ranks
	if errsB[0] == nil || !strings.Contains(errsB[0].Error(), "another communicator") {
		t.Fatalf("job B's rank 1 at job A's root: %v", errsB[0])
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("job B's rank took %v to fail", el)
	}
	bs, errs := bootRanks(idA, []int{0, 1}, 2, 10*time.Second)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("job A rank %d: %v", r, err)
		}
		defer bs[r].Close()
	}
}

// The ring listeners authenticate too: a stranger that connects to a rank's ring listener first
// (idle, or with a hello naming the predecessor but no secret) neither stalls nor joins the ring.
func TestBootstrapRingStrangers(t *testing.T) {
	id, root := fixedRoot(t, "s", 10*time.Second)
	_ = root
	secret := id.Secret()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &Bootstrap{rank: 1, n: 2, magic: id.Magic(), secret: secret, ln: ln}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.acceptPrev(ctx) }()
	idle, _ := net.Dial("tcp", ln.Addr().String())
	defer idle.Close()
	bad, _ := net.Dial("tcp", ln.Addr().String())
	bad.SetDeadline(time.Now().Add(5 * time.Second))
	if err := authDial(bad, SecretFromString("guess"), purposeRing); !errors.Is(err, ErrAuth) {
		t.Fatalf("ring handshake with a guessed secret: %v", err)
	}
	bad.Close()
	good, err := dialAuth(ctx, ln.Addr().String(), secret, purposeRing, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	hi := make([]byte, 4)
	if err := writeMsg(good, id.Magic(), msgRingHi, hi); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("ring accept took %v", time.Since(start))
	}
	b.Close()
}

// shmName is the file name of a connection of a transport (as Connect makes it).
func shmName(t *Shm, lo, hi int, k Key) string { return t.fileName(lo, hi, k) }

func connectPair(ts [2]*Shm, k0, k1 Key, timeout time.Duration) ([2]Conn, [2]error) {
	var cs [2]Conn
	var errs [2]error
	var wg sync.WaitGroup
	for r, k := range [2]Key{k0, k1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			cs[r], errs[r] = ts[r].Connect(ctx, k)
		}()
	}
	wg.Wait()
	return cs, errs
}

// A link or file planted at a connection's name (which a stranger cannot compute without the
// secret, but a local user could plant if the name leaked) is never followed, truncated, written
// or used: the connection fails and the target is untouched. Before, the name came from a public
// constant and was opened with O_CREAT and without O_NOFOLLOW: a root job overwrote the link's
// target, and a pre-created 0666 file let its owner read the payload.
func TestShmRefusesPlantedFiles(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	const content = "do not touch"
	for _, plant := range []string{"symlink", "file 0666", "file 0644 of this user"} {
		t.Run(plant, func(t *testing.T) {
			if err := os.WriteFile(victim, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			secret := SecretFromString(plant)
			ts := [2]*Shm{NewShm(dir, secret, 0, 4096), NewShm(dir, secret, 1, 4096)}
			defer ts[0].Close()
			defer ts[1].Close()
			name := shmName(ts[0], 0, 1, Key{})
			switch plant {
			case "symlink":
				if err := os.Symlink(victim, name); err != nil {
					t.Fatal(err)
				}
			case "file 0666":
				if err := os.WriteFile(name, []byte("planted"), 0o666); err != nil {
					t.Fatal(err)
				}
				os.Chmod(name, 0o666)
			default: // the size the peer expects: only the mode gives it away
				rb := (ringBytes(4096) + 4095) &^ 4095
				if err := os.WriteFile(name, make([]byte, shmHeaderBytes+2*rb), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			defer os.Remove(name)
			// The creating end (rank 0) and the opening end (rank 1) each refuse it.
			_, errs := connectPair(ts, Key{Peer: 1}, Key{Peer: 0}, 500*time.Millisecond)
			if errs[0] == nil {
				t.Errorf("rank 0 used the planted %s", plant)
			}
			if errs[1] == nil {
				t.Errorf("rank 1 used the planted %s", plant)
			}
			if b, _ := os.ReadFile(victim); string(b) != content {
				t.Errorf("the link's target now holds %d bytes: %q…", len(b), b[:min(len(b), 16)])
			}
			if st, err := os.Lstat(name); err != nil || st.Size() > 1<<20 {
				t.Errorf("planted %s removed or resized: %v", plant, err)
			}
		})
	}
}

// Two jobs on one host (same ranks, same channels, one directory) never meet in a shared-memory
// file: the names come from each communicator's secret. Before, launcher jobs named their files
// from a public constant and collided. One name says nothing of another connection's.
func TestShmTwoJobsOneHost(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for job := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			secret := SecretFromString(fmt.Sprint("job ", job))
			for round := range 20 {
				ts := [2]*Shm{NewShm(dir, secret, 0, 4096), NewShm(dir, secret, 1, 4096)}
				k := Key{Channel: round % 2}
				cs, errs := connectPair(ts, Key{Channel: k.Channel, Peer: 1}, Key{Channel: k.Channel, Peer: 0}, 5*time.Second)
				if errs[0] != nil || errs[1] != nil {
					t.Errorf("job %d round %d: %v, %v", job, round, errs[0], errs[1])
				} else {
					msg := []byte(fmt.Sprintf("job %d round %d", job, round))
					cs[0].Send(msg, time.Now().Add(5*time.Second))
					got := make([]byte, len(msg))
					if err := cs[1].Recv(got, time.Now().Add(5*time.Second)); err != nil || !bytes.Equal(got, msg) {
						t.Errorf("job %d round %d: received %q, %v", job, round, got, err)
					}
				}
				ts[0].Close()
				ts[1].Close()
			}
		}()
	}
	wg.Wait()
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
		t.Errorf("files left behind: %v", left)
	}
	tr := NewShm(dir, SecretFromString("job 0"), 0, 4096)
	a, b := tr.fileName(0, 1, Key{}), tr.fileName(0, 2, Key{})
	if strings.Contains(b, strings.TrimPrefix(filepath.Base(a), "simccl-")[:8]) {
		t.Errorf("two connections' names share their secret part: %s, %s", a, b)
	}
}

// A connection that never completes (the peer never comes, the transport is closed) leaves no file.
func TestShmRemovesFilesOnFailure(t *testing.T) {
	dir := t.TempDir()
	secret := SecretFromString("x")
	tr := NewShm(dir, secret, 0, 4096)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := tr.Connect(ctx, Key{Peer: 1}); err == nil {
		t.Fatal("connected without a peer")
	}
	tr2 := NewShm(dir, secret, 0, 4096)
	go func() { time.Sleep(100 * time.Millisecond); tr2.Close() }()
	if _, err := tr2.Connect(context.Background(), Key{Peer: 2}); err == nil {
		t.Fatal("connected without a peer")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
		t.Errorf("files left behind: %v", left)
	}
}

// The TCP data listener refuses a stranger that knows the communicator's public magic (the hello
// of before) or guesses at the secret; the ranks still connect.
func TestTCPRefusesStrangers(t *testing.T) {
	secret := SecretFromString("tcp job")
	ts := make([]*TCP, 2)
	addrs := make([]string, 2)
	for r := range ts {
		tr, err := NewTCP(TCPConfig{Secret: secret, Comm: 7, Rank: r, SlotBytes: 4096})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		ts[r], addrs[r] = tr, tr.Addr()
	}
	for _, tr := range ts {
		tr.SetPeers(addrs)
	}
	// An old-style hello with the public magic, from "rank 0" to rank 1's listener.
	c, err := net.Dial("tcp", addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	c.Write(ts[0].hello(0, Key{}))
	c.(*net.TCPConn).CloseWrite()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if b, _ := io.ReadAll(c); len(b) > 0 {
		t.Errorf("an unauthenticated hello was answered: %q", b)
	}
	c.Close()
	c, _ = net.Dial("tcp", addrs[1])
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := authDial(c, SecretFromString("guess"), purposeTCP); !errors.Is(err, ErrAuth) {
		t.Errorf("handshake with a guessed secret: %v", err)
	}
	c.Close()
	var wg sync.WaitGroup
	conns := make([]Conn, 2)
	errs := make([]error, 2)
	for r := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conns[r], errs[r] = ts[r].Connect(ctx, Key{Peer: 1 - r})
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("%v, %v", errs[0], errs[1])
	}
	conns[0].Send([]byte("hi"), time.Now().Add(5*time.Second))
	got := make([]byte, 2)
	if err := conns[1].Recv(got, time.Now().Add(5*time.Second)); err != nil || string(got) != "hi" {
		t.Fatalf("%q %v", got, err)
	}
	for deadline := time.Now().Add(5 * time.Second); ts[1].Rejected() < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := ts[1].Rejected(); n != 2 {
		t.Errorf("rank 1 rejected %d connections, want 2", n)
	}
	// A rank of another communicator (another secret) dialling rank 1 is told so at once.
	other, err := NewTCP(TCPConfig{Secret: SecretFromString("other job"), Comm: 7, Rank: 0, SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SetPeers(addrs)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := other.Connect(ctx, Key{Peer: 1, Channel: 1}); !errors.Is(err, ErrAuth) {
		t.Errorf("a rank of another communicator: %v, want ErrAuth", err)
	}
}

// The per-user secret file of launcher jobs: created once (concurrent ranks agree on it), mode 0600,
// and refused when it is a link, or others may read it.
func TestUserSecret(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cfg", "simccl", "secret")
	secrets := make([]Secret, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range secrets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			secrets[i], errs[i] = UserSecret(path)
		}()
	}
	wg.Wait()
	for i := range secrets {
		if errs[i] != nil || secrets[i] != secrets[0] || secrets[i].IsZero() {
			t.Fatalf("rank %d: %x, %v (rank 0: %x)", i, secrets[i], errs[i], secrets[0])
		}
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v, %v", st.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".secret-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(path, link)
	if _, err := UserSecret(link); err == nil || !strings.Contains(err.Error(), "link") {
		t.Errorf("a link: %v", err)
	}
	open := filepath.Join(dir, "open")
	os.WriteFile(open, []byte("0123456789abcdef0123"), 0o644)
	if _, err := UserSecret(open); err == nil || !strings.Contains(err.Error(), "mode") {
		t.Errorf("a file of mode 0644: %v", err)
	}
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abc\n"), 0o600)
	if _, err := UserSecret(short); err == nil {
		t.Errorf("a 3-character secret accepted")
	}
}
