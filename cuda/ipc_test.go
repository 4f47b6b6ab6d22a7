package cuda

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

const ipcEnv = "SIMCCL_CUDA_IPC_CHILD" // "handle-hex,device,bytes" for the child half of TestIPC

func ipcPattern(i int) byte { return byte(i*7 + 1) }

// TestIPC exports device memory of this process with an IPC handle; a second process (this test
// binary again, running TestIPCChild) opens it on the last device, checks the bytes, overwrites
// them, and this process sees the new bytes: one process per GPU.
func TestIPC(t *testing.T) {
	ds := needDevices(t, 1)
	d := ds[0]
	childDev := len(devs) - 1
	const n = 64 << 20
	src := make([]byte, n)
	for i := range src {
		src[i] = ipcPattern(i)
	}
	var p DevPtr
	var h IPCHandle
	if err := d.Do(func(c *Ctx) (err error) {
		if p, err = c.Alloc(n); err != nil {
			return err
		}
		if err = c.CopyHtoD(p, src); err != nil {
			return err
		}
		h, err = c.IPCHandle(p)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer d.Do(func(c *Ctx) error { return c.Free(p) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestIPCChild$", "-test.v")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d", ipcEnv, hex.EncodeToString(h[:]), childDev, n))
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("IPC child ok")) {
		t.Fatalf("child process (device %d): %v\n%s", childDev, err, out)
	}
	t.Logf("child on device %d: %s", childDev, strings.TrimSpace(string(bytes.SplitN(out, []byte("IPC child ok"), 2)[1])))
	got := make([]byte, n)
	if err := d.Do(func(c *Ctx) error { return c.CopyDtoH(got, p) }); err != nil {
		t.Fatal(err)
	}
	for i, b := range got {
		if b != 0x3c {
			t.Fatalf("byte %d = %#x after the child's memset, want 0x3c", i, b)
		}
	}
}

// TestIPCChild is the second process of TestIPC; it does nothing when run directly.
func TestIPCChild(t *testing.T) {
	spec := os.Getenv(ipcEnv)
	if spec == "" {
		t.Skip("runs only as TestIPC's child process")
	}
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		t.Fatalf("%s=%q: want handle,device,bytes", ipcEnv, spec)
	}
	hb, err := hex.DecodeString(parts[0])
	if err != nil || len(hb) != 64 {
		t.Fatalf("bad handle %q: %v", parts[0], err)
	}
	var h IPCHandle
	copy(h[:], hb)
	ord, _ := strconv.Atoi(parts[1])
	n, _ := strconv.Atoi(parts[2])
	d, err := Open(ord)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var gbps float64
	err = d.Do(func(c *Ctx) error {
		p, err := c.IPCOpen(h)
		if err != nil {
			return err
		}
		defer c.IPCClose(p)
		got := make([]byte, n)
		if err := c.CopyDtoH(got, p); err != nil {
			return err
		}
		for i, b := range got {
			if b != ipcPattern(i) {
				return fmt.Errorf("byte %d = %#x, want %#x", i, b, ipcPattern(i))
			}
		}
		// Time a pull of the whole buffer into local memory over the IPC mapping.
		q, err := c.Alloc(n)
		if err != nil {
			return err
		}
		defer c.Free(q)
		sec, err := timeIt(c, 0, 5, func() error { return c.CopyDtoDAsync(q, p, n, 0) })
		if err != nil {
			return err
		}
		gbps = float64(n) / sec / 1e9
		if err := c.Memset(p, 0x3c, n); err != nil {
			return err
		}
		return c.Synchronize()
	})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("IPC child ok: opened %d bytes on device %d, copy over the mapping %.1f GB/s\n", n, ord, gbps)
}
