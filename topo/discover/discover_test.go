package discover

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/beevik/etree"

	"github.com/simccl/simccl/topo/ncclxml"
)

var update = flag.Bool("update", false, "rewrite testdata/*/want.xml and want_warnings.txt")

// caseOptions is testdata/<case>/options.json (optional).
type caseOptions struct {
	Env             map[string]string `json:"env"`
	GPULinkFromNVML bool              `json:"gpu_link_from_nvml"`
	GOARCH          string            `json:"goarch"`
}

func runCase(t *testing.T, dir string) *Result {
	t.Helper()
	root := buildTree(t, filepath.Join(dir, "tree.txt"))
	lib, err := LoadFakeNVML(filepath.Join(dir, "nvml.json"))
	if err != nil {
		t.Fatal(err)
	}
	var co caseOptions
	if data, err := os.ReadFile(filepath.Join(dir, "options.json")); err == nil {
		if err := json.Unmarshal(data, &co); err != nil {
			t.Fatalf("%s/options.json: %v", dir, err)
		}
	}
	if co.GOARCH == "" {
		co.GOARCH = "amd64"
	}
	res, err := Discover(Options{
		Root:            root,
		NVML:            lib,
		GOARCH:          co.GOARCH,
		Getenv:          func(k string) string { return co.Env[k] },
		GPULinkFromNVML: co.GPULinkFromNVML,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestGolden: a fake tree and a fake NVML in, NCCL-format XML out (go test -update rewrites).
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*/tree.txt")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no testdata/*/tree.txt (%v)", err)
	}
	for _, spec := range dirs {
		dir := filepath.Dir(spec)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			res := runCase(t, dir)
			got, err := res.Doc.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			// What we write must read back through topo/ncclxml.
			if _, err := ncclxml.ParseBytes(got, dir); err != nil {
				t.Fatalf("output does not parse: %v", err)
			}
			warn := []byte(strings.Join(res.Warnings, "\n") + "\n")
			compareGolden(t, filepath.Join(dir, "want.xml"), got)
			compareGolden(t, filepath.Join(dir, "want_warnings.txt"), warn)
		})
	}
}

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// canonical renders an element with sorted attributes and sorted children, so that two dumps
// compare equal whatever the order NCCL's rank fusion left them in. Attributes named in drop
// are left out.
func canonical(e *etree.Element, drop map[string]bool) string {
	var attrs []string
	for _, a := range e.Attr {
		if !drop[a.Key] {
			attrs = append(attrs, a.Key+"="+a.Value)
		}
	}
	sort.Strings(attrs)
	var kids []string
	for _, c := range e.ChildElements() {
		kids = append(kids, canonical(c, drop))
	}
	sort.Strings(kids)
	return "<" + e.Tag + " " + strings.Join(attrs, " ") + ">" + strings.Join(kids, "") + "</" + e.Tag + ">"
}

// TestMatchesNCCLDump: the VM's sysfs as captured on the lent 2xH200 machine, with NVML answering
// what that machine answered, gives NCCL 2.28.9's own dumps of it: nccl_topo.xml, dumped by
// device_check.sh on the boot whose boot id the fake tree holds, attribute for attribute
// (host_hash included), and the dump in testdata/nccl (another boot) but for host_hash.
func TestMatchesNCCLDump(t *testing.T) {
	res := runCase(t, "testdata/h200x2-vm")
	for _, c := range []struct {
		file string
		drop map[string]bool
	}{
		{"testdata/h200x2-vm/nccl_topo.xml", nil},
		{"../../testdata/nccl/h200x2/real_topo.xml", map[string]bool{"host_hash": true}},
	} {
		want, err := ncclxml.ReadFile(c.file)
		if err != nil {
			t.Errorf("NCCL's dump: %v", err)
			continue
		}
		g, w := canonical(res.Doc.Root(), c.drop), canonical(want.Root(), c.drop)
		if g != w {
			t.Errorf("discovered topology differs from NCCL's dump %s\n got: %s\nwant: %s", c.file, g, w)
		}
	}
}

func TestNoNVML(t *testing.T) {
	if _, err := Discover(Options{}); !errors.Is(err, ErrNoNVML) {
		t.Fatalf("Discover without NVML: got %v, want ErrNoNVML", err)
	}
	// This machine has no NVIDIA driver (CI neither): OpenNVML must say so, not crash.
	lib, err := OpenNVML()
	if err == nil {
		lib.Close()
		t.Skip("an NVIDIA driver is present here; the no-driver path cannot be tested")
	}
	if !errors.Is(err, ErrNoNVML) {
		t.Fatalf("OpenNVML: got %v, want an error wrapping ErrNoNVML", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error should be one line: %q", err)
	}
}

func TestHostHash(t *testing.T) {
	// Measured on the lent 2xH200 machine (hostname "vm") with NCCL 2.28.9: the host_hash of its
	// topology dump with NCCL_HOSTID=simccltest, and without it for that boot's boot_id.
	for s, want := range map[string]uint64{
		"simccltest":                             0xfcda32d212eccf55,
		"vm6d4eeb6f-70c6-4540-bf66-a1a034fd5fc6": 0x2aef8d72528a7278,
	} {
		if got := ncclHash([]byte(s)); got != want {
			t.Errorf("ncclHash(%q) = %#x, want %#x", s, got, want)
		}
	}
	fs := newSysfs(t.TempDir())
	if hostHash(fs, "simccltest") != 0xfcda32d212eccf55 {
		t.Error("NCCL_HOSTID must be hashed alone")
	}
}

func TestCPUFamily(t *testing.T) {
	// NCCL dumps of AMD Zen 2 and Zen 4 machines carry familyid 143 and 175 (testdata/topos).
	for linux, want := range map[int]int{6: 6, 23: 143, 25: 175, 15: 15} {
		if got := ncclFamily(linux); got != want {
			t.Errorf("ncclFamily(%d) = %d, want %d", linux, got, want)
		}
	}
}

func TestIBGUID(t *testing.T) {
	// The A100 box of testdata/topos dumps guid 0x58a32a0003d23fb8 for the CX-6 whose sysfs GUID
	// reads b83f:d203:002a:a358 (Mellanox OUI b8:3f:d2 first).
	if got := ibGUID("b83f:d203:002a:a358"); got != 0x58a32a0003d23fb8 {
		t.Errorf("ibGUID = %#x", got)
	}
	if got := ibGUID("zz"); got != 0 {
		t.Errorf("ibGUID of garbage = %#x, want 0", got)
	}
}

func TestStrtolAndSpeed(t *testing.T) {
	for in, want := range map[string]int64{"16": 16, "": 0, "-1": -1, "0x10": 16, "8 lanes": 8, "x": 0} {
		if got := strtol(in); got != want {
			t.Errorf("strtol(%q) = %d, want %d", in, got, want)
		}
	}
	if !(gts("8.0 GT/s PCIe") < gts("16.0 GT/s PCIe")) || gts("Unknown") < 1e30 {
		t.Error("gts ordering wrong")
	}
	if got := rateMbps("400 Gb/sec (4X NDR)"); got != 400000 {
		t.Errorf("rateMbps = %d", got)
	}
}

func TestParseBusID(t *testing.T) {
	a, err := parseBusID("00000000:0F:00.0")
	if err != nil || a.String() != "0000:0f:00.0" {
		t.Errorf("parseBusID: %v %v", a, err)
	}
	for _, bad := range []string{"", "0000:0f:00", "0000:0f:20.0", "0000:0f:00.8", "x:y:z.w", "0000:100:00.0"} {
		if _, err := parseBusID(bad); err == nil {
			t.Errorf("parseBusID(%q) accepted", bad)
		}
	}
}

func TestIfFilter(t *testing.T) {
	f := parseIfFilter("^docker,lo,virbr")
	for name, want := range map[string]bool{"eth0": true, "lo": false, "docker0": false, "virbr0": false, "ib0": true} {
		if got := f.match(name, -1); got != want {
			t.Errorf("^docker,lo,virbr match %q = %v", name, got)
		}
	}
	g := parseIfFilter("=mlx5_1:1")
	if !g.match("mlx5_1", 1) || g.match("mlx5_10", 1) || g.match("mlx5_1", 2) {
		t.Error("=mlx5_1:1 wrong")
	}
	if !naturalLess("mlx5_2", "mlx5_10") || naturalLess("mlx5_10", "mlx5_2") {
		t.Error("naturalLess wrong")
	}
}

func TestLoadFakeNVMLErrors(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"syntax.json":  `{"gpus": [`,
		"unknown.json": `{"gpus": [], "extra": 1}`,
		"busid.json":   `{"gpus": [{"busid": "nope", "sm": 90}]}`,
		"sm.json":      `{"gpus": [{"busid": "0000:01:00.0", "sm": 0}]}`,
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadFakeNVML(p)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v, want an error naming the file", name, err)
		}
	}
	// --nvml-json is read with simccl's bound on every input (a sparse file over it: not read).
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, nil, 0o644); err != nil || os.Truncate(big, 65<<20) != nil {
		t.Fatal(err)
	}
	if _, err := LoadFakeNVML(big); err == nil || err.Error() != big+": input too large (more than 64 MiB)" {
		t.Errorf("65 MiB file: %v", err)
	}
}
