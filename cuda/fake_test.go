package cuda

import (
	"encoding/binary"
	"errors"
	"sync"
	"syscall"
	"testing"

	"github.com/simccl/simccl/coll"
)

// fakeDriver stands in for libcuda.so.1 where none is present, so that the Go side (device
// thread, Close, launch arguments and grids) is tested on every machine. Methods it does not
// override belong to the nil embedded interface and would panic: the tests call none of them.
type fakeDriver struct {
	driver
	mu        sync.Mutex
	ctxTid    int
	callTids  map[int]bool
	released  int
	synced    int
	launches  []fakeLaunch
	functions map[string]Function
	major     int
}

type fakeLaunch struct {
	f           Function
	grid, block [3]uint32
	args        []byte
	offs        []int32
}

func (f *fakeDriver) deviceCount() (int, error)        { return 1, nil }
func (f *fakeDriver) deviceGet(o int) (int32, error)   { return int32(o), nil }
func (f *fakeDriver) deviceName(int32) (string, error) { return "Fake GPU", nil }
func (f *fakeDriver) devicePCIBusID(int32) (string, error) {
	return "0000:00:06.0", nil
}
func (f *fakeDriver) deviceTotalMem(int32) (uint64, error)    { return 1 << 30, nil }
func (f *fakeDriver) primaryCtxRetain(int32) (uintptr, error) { return 0x1234, nil }
func (f *fakeDriver) deviceAttribute(a int, _ int32) (int, error) {
	switch a {
	case attrComputeCapMajor:
		return f.major, nil
	case attrSMCount:
		return 132, nil
	case attrUnifiedAddr:
		return 1, nil
	}
	return 0, nil
}
func (f *fakeDriver) ctxSetCurrent(uintptr) error {
	f.mu.Lock()
	f.ctxTid = syscall.Gettid()
	f.mu.Unlock()
	return nil
}
func (f *fakeDriver) ctxGetDevice() (int32, error)    { return 0, nil }
func (f *fakeDriver) ctxGetCurrent() (uintptr, error) { return 0, nil }
func (f *fakeDriver) ctxSynchronize() error           { f.mu.Lock(); f.synced++; f.mu.Unlock(); return nil }
func (f *fakeDriver) primaryCtxRelease(int32) error {
	f.mu.Lock()
	f.released++
	f.mu.Unlock()
	return nil
}
func (f *fakeDriver) memAlloc(n uint64) (DevPtr, error) {
	f.mu.Lock()
	f.callTids[syscall.Gettid()] = true
	f.mu.Unlock()
	return 0x10000, nil
}
func (f *fakeDriver) moduleLoadData([]byte) (Module, string, error) { return 1, "", nil }
func (f *fakeDriver) moduleUnload(Module) error                     { return nil }
func (f *fakeDriver) moduleGetFunction(_ Module, name string) (Function, error) {
	fn := Function(len(f.functions) + 1)
	f.functions[name] = fn
	return fn, nil
}
func (f *fakeDriver) launchKernel(fn Function, grid, block [3]uint32, _ uint32, _ Stream, args []byte, offs []int32) error {
	f.launches = append(f.launches, fakeLaunch{fn, grid, block, append([]byte(nil), args...), append([]int32(nil), offs...)})
	return nil
}

// withFakeDriver runs body with the fake as the process's driver; it skips where a real driver
// is loaded (the real tests cover that case).
func withFakeDriver(t *testing.T, major int, body func(f *fakeDriver)) {
	if Init() == nil {
		t.Skip("a real driver is loaded; the fake-driver tests run where none is")
	}
	f := &fakeDriver{callTids: map[int]bool{}, functions: map[string]Function{}, major: major}
	oldDrv, oldErr := drv, initErr
	drv, initErr = f, nil
	defer func() { drv, initErr = oldDrv, oldErr }()
	body(f)
}

func TestFakeDeviceThread(t *testing.T) {
	withFakeDriver(t, 9, func(f *fakeDriver) {
		d, err := Open(0)
		if err != nil {
			t.Fatal(err)
		}
		if d.SMs != 132 || d.Name != "Fake GPU" || d.Major != 9 {
			t.Errorf("properties not read: %v", d)
		}
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					if err := d.Do(func(c *Ctx) error { _, err := c.Alloc(64); return err }); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		if len(f.callTids) != 1 || !f.callTids[f.ctxTid] {
			t.Errorf("driver calls ran on threads %v, the context was made current on %d", f.callTids, f.ctxTid)
		}
		if _, err := Open(1); err == nil {
			t.Error("device 1 of 1 opened")
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if f.released != 1 || f.synced != 1 {
			t.Errorf("Close: %d releases, %d syncs; want 1 and 1", f.released, f.synced)
		}
		if err := d.Do(func(*Ctx) error { return nil }); !errors.Is(err, ErrClosed) {
			t.Errorf("Do after Close: %v", err)
		}
		if err := d.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
}

func TestFakeKernelLaunches(t *testing.T) {
	withFakeDriver(t, 9, func(f *fakeDriver) {
		d, err := Open(0)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		err = d.Do(func(c *Ctx) error {
			k, err := c.LoadKernels()
			if err != nil {
				return err
			}
			if len(f.functions) != 3+3*int(coll.NumDataTypes)*len(kernelOps)+6 { // copy, LL and LL128 copy, reduce, LL and LL128 reduce, divide
				t.Errorf("looked up %d kernels", len(f.functions))
			}
			// 1000 halves: 125 vectors of 8, one block; 1<<30 floats: capped at 4 blocks per SM.
			if err := k.Reduce(c, 0, coll.Float16, coll.PreMulSum, 0x100, 0x200, 0x300, 1000, 0.5, ScaleA); err != nil {
				return err
			}
			if err := k.Reduce(c, 0, coll.Float32, coll.Max, 0x100, 0x200, 0x300, 1<<30, 0, 0); err != nil {
				return err
			}
			if err := k.Copy(c, 0, 0x100, 0x200, 16*512*3); err != nil {
				return err
			}
			if err := k.Reduce(c, 0, coll.Float32, coll.Avg, 0x100, 0x200, 0x300, 10, 0, 0); err == nil {
				t.Error("Avg launched")
			}
			if err := k.Reduce(c, 0, coll.Float32, coll.Sum, 0x100, 0x200, 0x300, 0, 0, 0); err != nil {
				t.Errorf("empty reduce: %v", err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(f.launches) != 3 {
			t.Fatalf("%d launches, want 3", len(f.launches))
		}
		l := f.launches[0]
		if l.f != f.functions["simccl_reduce_premulsum_f16"] || l.grid[0] != 1 || l.block[0] != 512 {
			t.Errorf("half premulsum launch %+v", l)
		}
		u64 := func(i int) uint64 { return binary.LittleEndian.Uint64(l.args[l.offs[i]:]) }
		if len(l.offs) != 6 || u64(0) != 0x100 || u64(1) != 0x200 || u64(2) != 0x300 || u64(3) != 1000 || u64(4) != 0x3800 ||
			binary.LittleEndian.Uint32(l.args[l.offs[5]:]) != ScaleA {
			t.Errorf("half premulsum arguments % x at %v", l.args, l.offs)
		}
		if g := f.launches[1].grid[0]; g != 4*132 {
			t.Errorf("1<<30 floats: grid %d, want %d", g, 4*132)
		}
		if g := f.launches[2].grid[0]; g != 3 || f.launches[2].f != f.functions["simccl_copy"] {
			t.Errorf("copy of 3 blocks' worth: grid %d", g)
		}
	})
}

func TestFakeOldGPURefusesKernels(t *testing.T) {
	withFakeDriver(t, 8, func(f *fakeDriver) {
		d, err := Open(0)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if err := d.Do(func(c *Ctx) error { _, err := c.LoadKernels(); return err }); err == nil {
			t.Error("kernels loaded on an sm_80 device")
		}
	})
}
