package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSearchCommand(t *testing.T) {
	var out, errb bytes.Buffer
	topo := filepath.Join("..", "..", "testdata", "nccl", "h200x2", "real_topo.xml")
	dump := filepath.Join(t.TempDir(), "graph.xml")
	if rc := mainRun([]string{"search", "--topo", topo, "--nvls", "off", "--graph-dump", dump, "--rings"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	// NCCL 2.28.9 printed these on the machine (testdata/nccl/h200x2/real.677.log).
	for _, want := range []string{
		"=== System : maxBw 370.8 totalBw 370.8 ===",
		"Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1",
		" 0 : GPU/0-60 GPU/0-70",
		"Pattern 1, crossNic 0, nChannels 12, bw 60.000000/60.000000, type NVL/PIX, sameChannels 0",
		"24 coll channels",
		"Channel 00/24 : 0 1",
		"Channel 23/24 : 0 1",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	got, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := os.ReadFile(filepath.Join("..", "..", "testdata", "nccl", "h200x2", "real_graph.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(ref) {
		t.Errorf("--graph-dump differs from NCCL's dump:\n%s", got)
	}

	// Two fake hosts with one GPU each (testdata/nccl/h200x2/fakehosts.931.log).
	out.Reset()
	fake := filepath.Join("..", "..", "testdata", "nccl", "h200x2", "fakehosts_topo.xml")
	if rc := mainRun([]string{"search", "--topo", fake, "--nodes", "2", "--rings"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	for _, want := range []string{
		"=== System : maxBw 1.2 totalBw 370.8 ===",
		"Pattern 4, crossNic 0, nChannels 1, bw 1.200000/1.200000, type LOC/PHB, sameChannels 1",
		" 0 : NET/0-0 GPU/0-60 NET/0-0",
		"Pattern 3, crossNic 0, nChannels 1, bw 2.400000/1.200000, type LOC/PHB, sameChannels 1",
		"Channel 00/02 : 0 1",
		"Channel 01/02 : 0 1",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("fake hosts: output lacks %q:\n%s", want, out.String())
		}
	}

	// --graph loads instead of searching (the Azure NC A100 v4 hand-written NCCL_GRAPH_FILE).
	out.Reset()
	args := []string{"search", "--json", "--topo", filepath.Join("..", "..", "testdata", "topos", "azure-ncv4-a100pcie.xml"),
		"--graph", filepath.Join("..", "..", "testdata", "topos", "azure-ncv4-a100pcie-graph.xml")}
	if rc := mainRun(args, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var v struct {
		Ring struct {
			NChannels int     `json:"nchannels"`
			BwIntra   float64 `json:"bw_intra"`
			TypeIntra string  `json:"type_intra"`
			Intra     [][]int `json:"intra"`
		} `json:"ring"`
		Tree struct {
			NChannels int `json:"nchannels"`
		} `json:"tree"`
		NChannels int `json:"nchannels"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if v.Ring.NChannels != 2 || v.Ring.BwIntra != 12 || v.Ring.TypeIntra != "SYS" || len(v.Ring.Intra) != 2 ||
		v.Ring.Intra[1][1] != 3 || v.Tree.NChannels != 4 || v.NChannels != 4 {
		t.Errorf("loaded graphs: %+v", v)
	}

	for _, bad := range [][]string{
		{"search", "--nodes", "0"},
		{"search", "--cross-nic", "3"},
		{"search", "--nvls", "maybe"},
		{"search", "--nccl-version", "1.0"},
		{"search", "extra"},
	} {
		errb.Reset()
		if rc := mainRun(bad, &out, &errb); rc != 2 {
			t.Errorf("%v: rc %d, want 2 (%s)", bad, rc, errb.String())
		}
	}
	badGraph := filepath.Join(t.TempDir(), "bad.xml")
	if err := os.WriteFile(badGraph, []byte(`<graphs version="1"><graph id="0" pattern="4" crossnic="0" nchannels="1" speedintra="1" speedinter="1" typeintra="NVL" typeinter="PIX" samechannels="1"><channel><gpu dev="7"/><gpu dev="1"/></channel></graph></graphs>`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{
		{"search", "--topo", "/nonexistent.xml"},
		{"search", "--topo", topo, "--graph", badGraph},
	} {
		errb.Reset()
		if rc := mainRun(bad, &out, &errb); rc != 1 || errb.Len() == 0 {
			t.Errorf("%v: rc %d, want 1 with a message (%q)", bad, rc, errb.String())
		}
	}
	if !strings.Contains(errb.String(), "bad.xml:1") || !strings.Contains(errb.String(), "dev 0x7") {
		t.Errorf("graph file error does not name the file, line and dev: %q", errb.String())
	}
}

// --trees and --rings print what NCCL 2.28.9's init printed on the 2×H200 machine, for each rank.
func TestSearchTreesRingsLikeNCCL(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "nccl", "h200x2")
	for _, c := range []struct {
		topo  string
		nodes string
		logs  []string
	}{
		{"real_topo.xml", "1", []string{"real.677.log", "real.678.log"}},
		{"fakehosts_topo.xml", "2", []string{"fakehosts.931.log", "fakehosts.932.log"}},
	} {
		for rank, logName := range c.logs {
			data, err := os.ReadFile(filepath.Join(dir, logName))
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, line := range strings.Split(string(data), "\n") {
				i := strings.Index(line, "NCCL INFO ")
				if i < 0 {
					continue
				}
				l := line[i+len("NCCL INFO "):]
				if strings.HasPrefix(l, "Trees ") || (rank == 0 && strings.HasPrefix(l, "Channel ") && strings.Count(l, "/") == 1 && !strings.Contains(l, "via")) {
					want = append(want, l)
				}
			}
			if len(want) < 1 {
				t.Fatalf("%s: no Trees/Channel lines", logName)
			}
			var out, errb bytes.Buffer
			args := []string{"search", "--topo", filepath.Join(dir, c.topo), "--nodes", c.nodes, "--nvls", "off", "--trees", fmt.Sprint(rank)}
			if rank == 0 {
				args = append(args, "--rings")
			}
			if rc := mainRun(args, &out, &errb); rc != 0 {
				t.Fatalf("%v: rc %d: %s", args, rc, errb.String())
			}
			for _, w := range want {
				if !strings.Contains(out.String(), w+"\n") {
					t.Errorf("%s rank %d: NCCL printed %q, we did not:\n%s", c.topo, rank, w, out.String())
				}
			}
		}
	}
}
