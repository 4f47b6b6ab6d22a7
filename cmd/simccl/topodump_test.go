package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simccl/simccl/topo/discover"
	"github.com/simccl/simccl/topo/ncclxml"
)

// Without an NVIDIA driver (this machine, CI): one line on stderr, exit 1.
func TestTopoDumpNoDriver(t *testing.T) {
	if lib, err := discover.OpenNVML(); err == nil {
		lib.Close()
		t.Skip("an NVIDIA driver is present here")
	}
	var out, errb bytes.Buffer
	if rc := mainRun([]string{"topo", "dump"}, &out, &errb); rc != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", rc, errb.String())
	}
	msg := errb.String()
	if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "NVML unavailable") {
		t.Errorf("stderr = %q, want one line saying NVML is unavailable", msg)
	}
	if out.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", out.String())
	}
}

// With a described NVML and an empty sysfs: the GPUs hang off an unknown CPU, and the file
// written with -o reads back as an NCCL topology.
func TestTopoDumpFakeNVML(t *testing.T) {
	dir := t.TempDir()
	nv := filepath.Join(dir, "nvml.json")
	if err := os.WriteFile(nv, []byte(`{"gpus": [{"busid": "00000000:0A:00.0", "sm": 90, "gdr": true,
		"links": [{"p2p": true, "active": true, "remote": "fffffff:ff:ff.0", "repeat": 18}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(dir, "topo.xml")
	var out, errb bytes.Buffer
	rc := mainRun([]string{"topo", "dump", "--sysfs", dir, "--nvml-json", nv, "-o", outFile}, &out, &errb)
	if rc != 0 {
		t.Fatalf("exit %d: %s", rc, errb.String())
	}
	doc, err := ncclxml.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	gpu := doc.Root().FindElement("//pci[@busid='0000:0a:00.0']/gpu")
	if gpu == nil || gpu.SelectAttrValue("sm", "") != "90" || gpu.SelectAttrValue("gdr", "") != "1" {
		t.Errorf("no <gpu sm=90 gdr=1> under pci 0000:0a:00.0 in\n%s", must(doc.Bytes()))
	}
	if nvl := doc.Root().FindElement("//nvlink"); nvl == nil || nvl.SelectAttrValue("count", "") != "18" {
		t.Errorf("want one <nvlink count=18>")
	}
}

func TestTopoDumpBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"topo", "dump", "--gpu-link", "cuda"},
		{"topo", "dump", "--sysfs", "/does/not/exist"},
		{"topo", "dump", "extra"},
	} {
		var out, errb bytes.Buffer
		if rc := mainRun(args, &out, &errb); rc != 2 {
			t.Errorf("%v: exit %d, want 2 (usage); stderr %q", args, rc, errb.String())
		}
	}
}

func must(b []byte, err error) string {
	if err != nil {
		return err.Error()
	}
	return string(b)
}
