package realnet_test

import (
	"math/rand"
	"testing"

	"github.com/simccl/simccl/realnet"
	"github.com/simccl/simccl/realnet/realnettest"
)

const testSlot = 8 << 10

func TestInProc(t *testing.T) {
	realnettest.TestTransport(t, func(t *testing.T, n int) []realnet.Transport {
		hub := realnet.NewHub()
		comm := rand.Uint64()
		ts := make([]realnet.Transport, n)
		for r := range ts {
			ts[r] = realnet.NewInProc(hub, comm, r, testSlot)
		}
		return ts
	})
}

func TestShm(t *testing.T) {
	dir := t.TempDir() // the same code path as /dev/shm, cleaned up by the test
	realnettest.TestTransport(t, func(t *testing.T, n int) []realnet.Transport {
		secret := newSecret(t)
		ts := make([]realnet.Transport, n)
		for r := range ts {
			ts[r] = realnet.NewShm(dir, secret, r, testSlot)
		}
		return ts
	})
}

func TestTCP(t *testing.T) {
	realnettest.TestTransport(t, func(t *testing.T, n int) []realnet.Transport {
		secret, comm := newSecret(t), rand.Uint64()
		ts := make([]realnet.Transport, n)
		addrs := make([]string, n)
		for r := range ts {
			tr, err := realnet.NewTCP(realnet.TCPConfig{Secret: secret, Comm: comm, Rank: r, SlotBytes: testSlot})
			if err != nil {
				t.Fatal(err)
			}
			ts[r], addrs[r] = tr, tr.Addr()
		}
		for _, tr := range ts {
			tr.(*realnet.TCP).SetPeers(addrs)
		}
		return ts
	})
}

func newSecret(t testing.TB) realnet.Secret {
	s, err := realnet.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
