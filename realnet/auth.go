package realnet

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Every connection a communicator accepts (bootstrap root, bootstrap ring, TCP data) is
// authenticated by a shared Secret before anything else is read or written: a mutual
// challenge-response with HMAC-SHA256, so the secret itself never crosses the wire and a party that
// does not know it learns nothing but two random nonces and a MAC it cannot reuse.
//
//	dialler  → acceptor: authHello (8 bytes) ‖ nonceD (16 random bytes)
//	acceptor → dialler:  nonceA (16) ‖ HMAC(K, "simccl auth v1" ‖ purpose ‖ "acceptor" ‖ nonceD ‖ nonceA)
//	dialler  → acceptor: HMAC(K, "simccl auth v1" ‖ purpose ‖ "dialler" ‖ nonceD ‖ nonceA)
//
// Both MACs are compared in constant time (hmac.Equal). The dialler checks the acceptor's MAC before
// it sends its own, so it never sends anything (registration, rank, addresses) to a listener that
// does not know the secret; the acceptor reads nothing but the 24-byte hello and the 32-byte MAC
// from a party it has not authenticated. The roles and the purpose (bootstrap root, bootstrap ring,
// TCP data) are part of every MAC, so a MAC seen in one place is useless in another. What this does
// not give: confidentiality or integrity after the handshake (a party that can read or rewrite the
// traffic on the path sees and can alter the payload; see docs/security.md).

// SecretBytes is the size of a Secret.
const SecretBytes = 32

// Secret is a communicator's shared secret. It is part of the communicator's UniqueID; whoever holds
// the id can join the communicator, so an id is handed out only to the ranks (as NCCL's is).
type Secret [SecretBytes]byte

// ErrAuth: the other end of a connection did not prove that it knows the communicator's secret.
var ErrAuth = errors.New("realnet: authentication failed")

// HandshakeTimeout bounds the authentication of one incoming connection: a connection that has not
// authenticated within it is closed, so idle connections cannot hold a listener.
const HandshakeTimeout = 5 * time.Second

// maxPendingHandshakes bounds the incoming connections a listener authenticates at once; beyond it
// new connections are closed at once (a legitimate dialler retries).
const maxPendingHandshakes = 1024

const (
	authHello    uint64 = 0x3176687463636d73 // "smcchtv1"
	authNonceLen        = 16
	authMACLen          = sha256.Size
)

// NewSecret returns a random secret.
func NewSecret() (Secret, error) {
	var s Secret
	_, err := rand.Read(s[:])
	return s, err
}

// SecretFromString makes a secret from a text a user chose (SIMCCL_COMM_ID=host:port#TEXT, a
// secret file): every rank that is given the same text gets the same secret. A short text is a weak
// secret.
func SecretFromString(text string) Secret {
	return Secret(sha256.Sum256([]byte("simccl secret v1\x00" + text)))
}

// IsZero reports whether s is the zero secret (no secret).
func (s Secret) IsZero() bool { return s == Secret{} }

// Derive returns the secret HMAC(s, label ‖ parts), each part length-prefixed: a secret for one
// purpose (a split or shrunk communicator, shared-memory names) that every holder of s can compute
// and nobody else can.
func (s Secret) Derive(label string, parts ...[]byte) Secret {
	m := hmac.New(sha256.New, s[:])
	writeField(m, []byte(label))
	for _, p := range parts {
		writeField(m, p)
	}
	var out Secret
	copy(out[:], m.Sum(nil))
	return out
}

// Label is a public 64-bit name of the communicator derived from the secret (the magic that frames
// bootstrap messages, the communicator id of the transports): it tells communicators apart and
// reveals nothing about the secret.
func (s Secret) Label() uint64 {
	d := s.Derive("label")
	return binary.LittleEndian.Uint64(d[:8])
}

func writeField(w io.Writer, b []byte) {
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(b)))
	w.Write(n[:])
	w.Write(b)
}

func authMAC(s Secret, purpose, role string, nd, na []byte) []byte {
	m := hmac.New(sha256.New, s[:])
	writeField(m, []byte("simccl auth v1"))
	writeField(m, []byte(purpose))
	writeField(m, []byte(role))
	writeField(m, nd)
	writeField(m, na)
	return m.Sum(nil)
}

// authDial authenticates a connection from the dialling side. An error wrapping ErrAuth means the
// acceptor answered without knowing the secret (another communicator, or a stranger); any other
// error is an I/O failure (the acceptor closed the connection before answering, a timeout).
func authDial(c net.Conn, s Secret, purpose string) error {
	hello := make([]byte, 8+authNonceLen)
	binary.LittleEndian.PutUint64(hello, authHello)
	if _, err := rand.Read(hello[8:]); err != nil {
		return err
	}
	if _, err := c.Write(hello); err != nil {
		return err
	}
	ans := make([]byte, authNonceLen+authMACLen)
	if _, err := io.ReadFull(c, ans); err != nil {
		return err
	}
	nd, na := hello[8:], ans[:authNonceLen]
	if !hmac.Equal(ans[authNonceLen:], authMAC(s, purpose, "acceptor", nd, na)) {
		return fmt.Errorf("%w: %s at %s does not know this communicator's secret", ErrAuth, purpose, c.RemoteAddr())
	}
	_, err := c.Write(authMAC(s, purpose, "dialler", nd, na))
	return err
}

// authAccept authenticates a connection from the accepting side.
func authAccept(c net.Conn, s Secret, purpose string) error {
	hello := make([]byte, 8+authNonceLen)
	if _, err := io.ReadFull(c, hello); err != nil {
		return err
	}
	if binary.LittleEndian.Uint64(hello) != authHello {
		return fmt.Errorf("%w: %s: not a simccl hello", ErrAuth, purpose)
	}
	ans := make([]byte, authNonceLen+authMACLen)
	if _, err := rand.Read(ans[:authNonceLen]); err != nil {
		return err
	}
	nd, na := hello[8:], ans[:authNonceLen]
	copy(ans[authNonceLen:], authMAC(s, purpose, "acceptor", nd, na))
	if _, err := c.Write(ans); err != nil {
		return err
	}
	mac := make([]byte, authMACLen)
	if _, err := io.ReadFull(c, mac); err != nil {
		return err
	}
	if !hmac.Equal(mac, authMAC(s, purpose, "dialler", nd, na)) {
		return fmt.Errorf("%w: %s: a dialler from %s does not know this communicator's secret", ErrAuth, purpose, c.RemoteAddr())
	}
	return nil
}

// acceptor accepts connections on a listener and hands each to handle in its own goroutine (at
// most maxPendingHandshakes at once: beyond that a new connection is closed at once), so one slow
// or idle connection never delays the others. Stop ends it.
type acceptor struct {
	ln       net.Listener
	stop     chan struct{}
	stopOnce sync.Once
	loop     sync.WaitGroup
	handlers sync.WaitGroup
}

func startAcceptor(ln net.Listener, handle func(net.Conn)) *acceptor {
	a := &acceptor{ln: ln, stop: make(chan struct{})}
	sem := make(chan struct{}, maxPendingHandshakes)
	a.loop.Add(1)
	go func() {
		defer a.loop.Done()
		for {
			c, err := ln.Accept()
			select {
			case <-a.stop:
				if c != nil {
					c.Close()
				}
				return
			default:
			}
			if err != nil {
				if errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) {
					return
				}
				// Out of file descriptors and the like: wait a little and go on.
				if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				return
			}
			select {
			case sem <- struct{}{}:
			default:
				c.Close() // too many connections authenticating at once
				continue
			}
			a.handlers.Add(1)
			go func() {
				defer a.handlers.Done()
				defer func() { <-sem }()
				handle(c)
			}()
		}
	}()
	return a
}

// Stop ends the accept loop; keep leaves the listener open (its deadline is reset), otherwise it is
// closed. It returns once the loop has ended (handlers may still be running: Wait waits for them).
func (a *acceptor) Stop(keep bool) {
	a.stopOnce.Do(func() {
		close(a.stop)
		if keep {
			if d, ok := a.ln.(interface{ SetDeadline(time.Time) error }); ok {
				d.SetDeadline(time.Unix(1, 0))
				a.loop.Wait()
				d.SetDeadline(time.Time{})
				return
			}
		}
		a.ln.Close()
	})
	a.loop.Wait()
}

// Wait waits for the running handlers.
func (a *acceptor) Wait() { a.handlers.Wait() }

// UserSecret reads the secret kept in the file at path, creating the file (64 random hex digits,
// mode 0600, its directory 0700) when it does not exist: a secret that every process of this user
// shares where path is on a shared file system, and that other users cannot read. It refuses a
// link at path, a file that is not a regular file of this user, or one that others may read or
// write.
func UserSecret(path string) (Secret, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if errors.Is(err, syscall.ENOENT) {
		if err := createSecretFile(path); err != nil {
			return Secret{}, err
		}
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	}
	if errors.Is(err, syscall.ELOOP) {
		return Secret{}, fmt.Errorf("secret file %s is a symbolic link: not followed", path)
	}
	if err != nil {
		return Secret{}, fmt.Errorf("secret file %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return Secret{}, fmt.Errorf("secret file %s: %w", path, err)
	}
	switch {
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		return Secret{}, fmt.Errorf("secret file %s is not a regular file", path)
	case int(st.Uid) != os.Geteuid():
		return Secret{}, fmt.Errorf("secret file %s belongs to user %d, not to this user (%d)", path, st.Uid, os.Geteuid())
	case st.Mode&0o077 != 0:
		return Secret{}, fmt.Errorf("secret file %s has mode %#o: others may read it (chmod 600 it)", path, st.Mode&0o777)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return Secret{}, fmt.Errorf("secret file %s: %w", path, err)
	}
	text := strings.TrimSpace(string(b))
	if len(text) < 16 {
		return Secret{}, fmt.Errorf("secret file %s holds %d characters: want at least 16", path, len(text))
	}
	return SecretFromString(text), nil
}

// createSecretFile writes a new random secret at path without ever replacing a file there: it is
// written in full under a temporary name, then linked to path (which fails if another process got
// there first: its secret is then used).
func createSecretFile(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("secret file %s: %w", path, err)
	}
	s, err := NewSecret()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".secret-*") // mode 0600
	if err != nil {
		return fmt.Errorf("secret file %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(hex.EncodeToString(s[:]) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if err = os.Link(tmp.Name(), path); errors.Is(err, os.ErrExist) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("secret file %s: %w", path, err)
	}
	return nil
}
