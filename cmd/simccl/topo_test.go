package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runTopoCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := mainRun(append([]string{"topo"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

func TestTopoDefault(t *testing.T) {
	out, errs, code := runTopoCLI(t)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.HasPrefix(out, "=== System : maxBw 370.8 totalBw 370.8 ===\nCPU/0-0 (1/1/3)\n") {
		t.Errorf("default topology printout starts:\n%s", out[:min(len(out), 200)])
	}
	if !strings.Contains(out, "GPU/0-1b000 :GPU/0-1b000 (0/5000.0/LOC) GPU/0-43000 (2/370.8/NVL)") {
		t.Errorf("no GPU path line in:\n%s", out)
	}
}

func TestTopoJSON(t *testing.T) {
	out, errs, code := runTopoCLI(t, "--json", "--nodes", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var v struct {
		Nodes  int     `json:"nodes"`
		NRanks int     `json:"nranks"`
		MaxBw  float64 `json:"max_bw"`
		GPUs   []struct {
			Name string `json:"name"`
		} `json:"gpus"`
		NICs  []json.RawMessage `json:"nics"`
		Links []json.RawMessage `json:"links"`
		Paths []struct {
			From, To, Type string
			BW             float64
			Hops           int
		} `json:"paths"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if v.Nodes != 2 || v.NRanks != 16 || len(v.GPUs) != 8 || len(v.NICs) != 8 || len(v.Links) == 0 || v.MaxBw != 48 {
		t.Fatalf("gpus %d nics %d links %d maxBw %v", len(v.GPUs), len(v.NICs), len(v.Links), v.MaxBw)
	}
	found := false
	for _, p := range v.Paths {
		if p.From == "GPU/0" && p.To == "NET/0" {
			found = p.Type == "PIX" && p.BW == 48 && p.Hops == 3
		}
	}
	if !found {
		t.Error(`no {"from":"GPU/0","to":"NET/0","type":"PIX","bw":48,"hops":3}`)
	}
}

func TestTopoFileAndVersion(t *testing.T) {
	f := filepath.Join("..", "..", "testdata", "nccl", "h200x2", "real_topo.xml")
	out, errs, code := runTopoCLI(t, "--topo", f, "--nccl-version", "2.30")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "GPU/0-60 :GPU/0-60 (0/5000.0/LOC) GPU/0-70 (2/370.8/NVL)") {
		t.Errorf("got:\n%s", out)
	}
}

func TestTopoErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.xml")
	os.WriteFile(bad, []byte(`<system version="1"><cpu numaid="0"><pci class="0x060400"/></cpu></system>`), 0o644)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--topo", bad}, 1, "bad.xml:1: <pci> without busid"},
		{[]string{"--topo", filepath.Join(dir, "none.xml")}, 1, "none.xml"},
		{[]string{"--nccl-version", "2.99"}, 2, "want one of 2.18, 2.26, 2.28, 2.29, 2.30"},
		{[]string{"--nodes", "0"}, 2, "--nodes 0"},
		{[]string{"--p2p-level", "FAST"}, 2, "unknown path level"},
		{[]string{"--bogus"}, 2, "unknown flag"},
		{[]string{"extra"}, 2, "unexpected argument"},
	}
	for _, c := range cases {
		_, errs, code := runTopoCLI(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
}

// `topo dump` is a subcommand of topo (cobra dispatches it with its own flags): topo's flags are
// not dump's, and an argument after dump is a usage error.
func TestTopoDumpDispatch(t *testing.T) {
	if _, errs, code := runTopoCLI(t, "dump", "--json"); code != 2 || !strings.Contains(errs, "simccl topo dump: usage: unknown flag: --json") {
		t.Errorf("dump --json: exit %d %q", code, errs)
	}
	if _, errs, code := runTopoCLI(t, "dump", "extra"); code != 2 || !strings.Contains(errs, "unexpected argument \"extra\"") {
		t.Errorf("dump extra: exit %d %q", code, errs)
	}
	if out, _, code := runTopoCLI(t, "dump", "--help"); code != 0 || !strings.Contains(out, "--nvml-json") || strings.Contains(out, "--p2p-level") {
		t.Errorf("dump --help: exit %d %q", code, out)
	}
}
