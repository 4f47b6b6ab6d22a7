package realnet

import (
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
	id, _ := makeID(7, "127.0.0.1:1234")
	f.Add(id[:])
	f.Fuzz(func(t *testing.T, b []byte) {
		var id UniqueID
		copy(id[:], b)
		if a, err := id.Addr(); err == nil && (len(a) == 0 || len(a) > maxIDAddr) {
			t.Fatalf("address of %d bytes", len(a))
		}
	})
}
