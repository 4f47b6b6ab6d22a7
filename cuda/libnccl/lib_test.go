package main

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCAPI builds the library as a C program links it (libnccl.so.2, go build -buildmode=c-shared)
// and runs testdata/api_check.c against it on the emulated driver: every exported call of the
// API, one rank, ncclCommInitAll, two ranks as threads of one process, split, errors.
func TestCAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a c-shared library (-short)")
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-o", filepath.Join(dir, "libnccl.so.2"), ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildmode=c-shared: %v\n%s", err, out)
	}
	checkStaticTLS(t, filepath.Join(dir, "libnccl.so.2"))
	bin := filepath.Join(dir, "api_check")
	if out, err := exec.CommandContext(ctx, cc, "-O1", "-o", bin, "testdata/api_check.c", "-L"+dir, "-l:libnccl.so.2", "-Wl,-rpath,"+dir, "-lpthread").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	run := exec.CommandContext(ctx, bin)
	run.Env = append(os.Environ(), "SIMCCL_CUDA_EMULATE=2", "SIMCCL_TIMEOUT=30s", "SIMCCL_CPUPROFILE="+filepath.Join(dir, "cpu"))
	out, err := run.CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !strings.Contains(string(out), "ok: 0 failures") {
		t.Fatalf("api_check: %v", err)
	}
	// SIMCCL_CPUPROFILE: the profile is written once the last communicator is gone.
	profs, _ := filepath.Glob(filepath.Join(dir, "cpu.*"))
	if len(profs) != 1 {
		t.Fatalf("SIMCCL_CPUPROFILE: profiles %v, want one", profs)
	}
	if st, err := os.Stat(profs[0]); err != nil || st.Size() == 0 {
		t.Errorf("SIMCCL_CPUPROFILE: %s is empty or missing (%v)", profs[0], err)
	}
}

func TestHalf(t *testing.T) {
	for h, want := range map[uint16]float64{0x3c00: 1, 0xc000: -2, 0x3800: 0.5, 0x0001: 5.960464477539063e-08} {
		if got := halfToFloat(h); got != want {
			t.Errorf("halfToFloat(%#x) = %v, want %v", h, got, want)
		}
	}
}

// maxStaticTLS bounds the library's thread-local storage. A Go c-shared library's TLS is static
// (DF_STATIC_TLS), and glibc keeps only a small reserve of static TLS for libraries loaded with
// dlopen (glibc.rtld.optional_static_tls, 512 bytes by default), which other libraries of the
// process also draw on: 16 KiB of thread-local group state made Python's ctypes.CDLL fail with
// "cannot allocate memory in static TLS block" on the device machine (2026-11-28).
const maxStaticTLS = 256

func checkStaticTLS(t *testing.T, lib string) {
	t.Helper()
	f, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_TLS && p.Memsz > maxStaticTLS {
			t.Errorf("%s: %d bytes of thread-local storage (want at most %d: dlopen needs static TLS)", lib, p.Memsz, maxStaticTLS)
		}
	}
}
