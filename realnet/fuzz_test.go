package realnet

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// FuzzReadMsg: any bytes on a bootstrap socket give a message within the bounds or an error,
// never a panic, a huge allocation or a hang.
func FuzzReadMsg(f *testing.F) {
	const magic = 0x1122334455667788
	f.Add([]byte{})
	f.Add([]byte{0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 1, 0, 0, 0, 3, 0, 0, 0, 'a', 'b', 'c'})
	f.Add([]byte{0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, z := net.Pipe()
		go func() {
			z.Write(b)
			z.Close()
		}()
		a.SetDeadline(time.Now().Add(5 * time.Second))
		_, body, err := readMsg(a, magic, 1024)
		a.Close()
		if err == nil && len(body) > 1024 {
			t.Fatalf("body of %d bytes beyond the bound", len(body))
		}
	})
}

// FuzzUniqueID: any 128 bytes give an address or an error.
func FuzzUniqueID(f *testing.F) {
	id, _ := makeID(SecretFromString("fuzz"), "127.0.0.1:1234")
	f.Add(id[:])
	f.Fuzz(func(t *testing.T, b []byte) {
		var id UniqueID
		copy(id[:], b)
		if a, err := id.Addr(); err == nil && (len(a) == 0 || len(a) > maxIDAddr) {
			t.Fatalf("address of %d bytes", len(a))
		}
	})
}

// FuzzBootstrapHandshake: whatever a party sends to the bootstrap root, from the first byte (it
// does not know the secret) or after a valid handshake (a confused rank), gives a registration
// within the bounds or an error: never a registration without the secret, a panic, a huge
// allocation or a hang.
func FuzzBootstrapHandshake(f *testing.F) {
	secret := SecretFromString("fuzz")
	r := &Root{secret: secret, magic: secret.Label(), timeout: 2 * time.Second}
	hello := make([]byte, 8+authNonceLen)
	binary.LittleEndian.PutUint64(hello, authHello)
	reg := func(rank, n uint32, addr string) []byte {
		b := make([]byte, 24+len(addr))
		binary.LittleEndian.PutUint64(b[0:], r.magic)
		binary.LittleEndian.PutUint32(b[8:], msgRegister)
		binary.LittleEndian.PutUint32(b[12:], uint32(8+len(addr)))
		binary.LittleEndian.PutUint32(b[16:], rank)
		binary.LittleEndian.PutUint32(b[20:], n)
		copy(b[24:], addr)
		return b
	}
	f.Add(false, []byte{})
	f.Add(false, hello)
	f.Add(false, append(append([]byte{}, hello...), make([]byte, authMACLen)...))
	f.Add(false, reg(1, 2, "127.0.0.1:1"))
	f.Add(true, reg(1, 2, "127.0.0.1:1"))
	f.Add(true, reg(5, 2, "x"))
	f.Add(true, []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, authed bool, b []byte) {
		a, z := net.Pipe()
		go func() {
			defer z.Close()
			z.SetDeadline(time.Now().Add(5 * time.Second))
			if authed && authDial(z, secret, purposeRoot) != nil {
				return
			}
			go io.Copy(io.Discard, z) // whatever the root answers
			z.Write(b)
		}()
		g, err := r.register(a)
		a.Close()
		if err != nil {
			return
		}
		if !authed {
			t.Fatalf("registered rank %d without the secret", g.rank)
		}
		if g.n <= 0 || g.n > MaxRanks || g.rank < 0 || g.rank >= g.n || len(g.addr) > maxAddrLen {
			t.Fatalf("registration out of bounds: rank %d of %d, address of %d bytes", g.rank, g.n, len(g.addr))
		}
	})
}
