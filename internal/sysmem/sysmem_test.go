package sysmem

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMemAvailable(t *testing.T) {
	p := filepath.Join(t.TempDir(), "meminfo")
	os.WriteFile(p, []byte("MemTotal:       24000000 kB\nMemFree:  1 kB\nMemAvailable:   23000000 kB\n"), 0o600)
	if v, ok := memAvailable(p); !ok || v != 23000000<<10 {
		t.Fatalf("%d %v", v, ok)
	}
	if _, ok := memAvailable(filepath.Join(t.TempDir(), "none")); ok {
		t.Fatal("a missing file gave a value")
	}
	if _, err := os.Stat("/proc/meminfo"); err == nil {
		if v, ok := Available(); !ok || v <= 0 {
			t.Fatalf("Available: %d %v", v, ok)
		}
	}
}
