package cuda

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/simccl/simccl/coll"
)

// Tests that need no GPU run everywhere; GPU tests call needDevices and skip, with the reason,
// where no driver or too few devices are present.

var devOnce sync.Once
var devs []*Device
var devErr error

// needDevices returns n open devices shared by the tests of this binary, or skips.
func needDevices(t testing.TB, n int) []*Device {
	t.Helper()
	if err := Init(); err != nil {
		t.Skipf("GPU test skipped: %v", err)
	}
	devOnce.Do(func() {
		cnt, err := DeviceCount()
		if err != nil {
			devErr = err
			return
		}
		for i := 0; i < cnt; i++ {
			d, err := Open(i)
			if err != nil {
				devErr = err
				return
			}
			devs = append(devs, d)
		}
	})
	if devErr != nil {
		t.Fatalf("opening devices: %v", devErr)
	}
	if len(devs) < n {
		t.Skipf("GPU test skipped: needs %d devices, this machine has %d", n, len(devs))
	}
	return devs[:n]
}

var kernOnce sync.Map // *Device -> *Kernels

func kernelsFor(t testing.TB, d *Device) *Kernels {
	t.Helper()
	if k, ok := kernOnce.Load(d); ok {
		return k.(*Kernels)
	}
	var k *Kernels
	if err := d.Do(func(c *Ctx) (err error) { k, err = c.LoadKernels(); return }); err != nil {
		t.Fatalf("loading kernels on %v: %v", d, err)
	}
	kernOnce.Store(d, k)
	return k
}

func TestNoDriverMessage(t *testing.T) {
	err := Init()
	if err == nil {
		t.Skip("a driver is present; the no-driver path is exercised on machines without one")
	}
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Init error %v does not wrap ErrNoDriver", err)
	}
	if !strings.Contains(err.Error(), "no CUDA driver") {
		t.Errorf("message %q does not say that the driver is missing", err)
	}
	if _, err := Open(0); !errors.Is(err, ErrNoDriver) {
		t.Errorf("Open without a driver: %v", err)
	}
	if _, err := DeviceCount(); !errors.Is(err, ErrNoDriver) {
		t.Errorf("DeviceCount without a driver: %v", err)
	}
}

func TestErrorFormat(t *testing.T) {
	e := &Error{Call: "cuMemAlloc_v2", Code: ErrorOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY", Text: "out of memory"}
	want := "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"
	if e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
	var err error = e
	if !errors.Is(err, ErrorOutOfMemory) || errors.Is(err, ErrorInvalidValue) {
		t.Errorf("errors.Is does not match the code")
	}
	if got := (&Error{Call: "cuInit", Code: 999}).Error(); got != "cuda: cuInit: CUresult 999" {
		t.Errorf("unnamed code: %q", got)
	}
}

func TestArgsLayout(t *testing.T) {
	var a Args
	if err := a.Add(uint32(7), DevPtr(0x1122334455667788), int32(-1), float32(1), 3.5); err != nil {
		t.Fatal(err)
	}
	wantOffs := []int32{0, 8, 16, 20, 24}
	for i, o := range wantOffs {
		if a.offs[i] != o {
			t.Fatalf("offsets %v, want %v", a.offs, wantOffs)
		}
	}
	if len(a.buf) != 32 || a.buf[8] != 0x88 || a.buf[15] != 0x11 || a.buf[16] != 0xff {
		t.Errorf("buffer % x", a.buf)
	}
	if err := a.Add("x"); err == nil {
		t.Error("a string argument was accepted")
	}
}

// TestPTXCurrent checks that the embedded PTX was generated from the committed kernels.cu (its
// header records the source's SHA-256) and holds every kernel this package looks up.
func TestPTXCurrent(t *testing.T) {
	src, err := os.ReadFile("kernels/kernels.cu")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	want := hex.EncodeToString(sum[:])
	var got string
	sc := bufio.NewScanner(bytes.NewReader(kernelsPTX))
	for i := 0; i < 5 && sc.Scan(); i++ {
		if rest, ok := strings.CutPrefix(sc.Text(), "// simccl: source-sha256 "); ok {
			got = strings.TrimSpace(rest)
		}
	}
	if got != want {
		t.Fatalf("kernels/kernels.ptx records source sha256 %q, kernels/kernels.cu has %s: run cuda/kernels/gen.sh on a machine with nvcc and commit the result", got, want)
	}
	entries := map[string]bool{}
	for _, line := range strings.Split(string(kernelsPTX), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), ".visible .entry "); ok {
			entries[strings.TrimRight(strings.SplitN(rest, "(", 2)[0], " ")] = true
		}
	}
	names := []string{"simccl_copy", "simccl_ll_copy"}
	for ty := coll.DataType(0); ty < coll.NumDataTypes; ty++ {
		for _, op := range kernelOps {
			names = append(names, ReduceKernelName(ty, op), LLReduceKernelName(ty, op))
		}
		if isIntType(ty) {
			names = append(names, "simccl_divide_"+kernelTypeNames[ty])
		}
	}
	for _, n := range names {
		if !entries[n] {
			t.Errorf("kernels.ptx has no entry %s", n)
		}
	}
}

func TestScalarBits(t *testing.T) {
	cases := []struct {
		t    coll.DataType
		v    float64
		want uint64
	}{
		{coll.Int8, -1, 0xff}, {coll.Uint32, 3.9, 3}, {coll.Int64, -2, math.MaxUint64 - 1},
		{coll.Float32, 0.5, 0x3f000000}, {coll.Float16, 0.5, 0x3800}, {coll.Bfloat16, 0.5, 0x3f00},
		{coll.Float8e4m3, 0.5, 0x30}, {coll.Float64, 0.5, 0x3fe0000000000000},
	}
	for _, c := range cases {
		if got := ScalarBits(c.t, c.v); got != c.want {
			t.Errorf("ScalarBits(%v, %g) = %#x, want %#x", c.t, c.v, got, c.want)
		}
	}
}
