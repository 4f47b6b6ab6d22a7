package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestMemCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := mainRun([]string{"mem", "-c", "allreduce,sendrecv", "-b", "1K", "-e", "1G", "-f", "4", "--json"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	type rep struct {
		Mode      string                           `json:"mode"`
		Ranks     int                              `json:"ranks"`
		Connected []string                         `json:"connected"`
		GPU       struct{ Min, Median, Max int64 } `json:"gpu_bytes"`
		PerRank   []struct {
			GPU   int64 `json:"gpu_bytes"`
			Conns int   `json:"connections"`
		} `json:"per_rank"`
		ByKind []struct {
			Kind  string `json:"kind"`
			Conns int    `json:"connections"`
		} `json:"by_kind"`
	}
	var v struct {
		Selected string `json:"selected"`
		Lazy     rep    `json:"lazy"`
		Eager    rep    `json:"eager"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
	if v.Selected != "lazy" || v.Lazy.Mode != "lazy" || v.Eager.Mode != "eager" || v.Lazy.Ranks != 8 || len(v.Lazy.PerRank) != 8 {
		t.Fatalf("%+v", v)
	}
	if v.Lazy.GPU.Median <= 0 || v.Lazy.GPU.Median > v.Eager.GPU.Median {
		t.Errorf("lazy median %d, eager %d", v.Lazy.GPU.Median, v.Eager.GPU.Median)
	}
	if !strings.Contains(strings.Join(v.Lazy.Connected, " "), "SendRecv") {
		t.Errorf("lazy connects %v", v.Lazy.Connected)
	}
	// The default topology (DGX H100) has an NVSwitch: eager connects NVLS.
	if !strings.Contains(strings.Join(v.Eager.Connected, " "), "NVLS") {
		t.Errorf("eager connects %v", v.Eager.Connected)
	}

	out.Reset()
	if rc := mainRun([]string{"mem", "--nodes", "2", "--eager", "--per-rank"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	for _, s := range []string{"eager (NCCL_RUNTIME_CONNECT=0)", "lazy (NCCL_RUNTIME_CONNECT=1", "by connection type", "NET", "P2P", "    15 "} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}

	// NCCL_BUFFSIZE is read from the environment as NCCL reads it: a smaller Simple buffer.
	t.Setenv("NCCL_BUFFSIZE", "1048576")
	out.Reset()
	if rc := mainRun([]string{"mem", "-b", "1G", "-e", "1G", "--json"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var small struct {
		Lazy struct {
			Buffers struct {
				Simple int64 `json:"simple"`
			} `json:"buffers"`
		} `json:"lazy"`
	}
	if err := json.Unmarshal(out.Bytes(), &small); err != nil || small.Lazy.Buffers.Simple != 1<<20 {
		t.Errorf("NCCL_BUFFSIZE: %v %+v", err, small)
	}

	for _, bad := range [][]string{
		{"mem", "-c", "nope"},
		{"mem", "--nodes", "0"},
		{"mem", "-b", "1x"},
		{"mem", "extra"},
	} {
		errb.Reset()
		if rc := mainRun(bad, &out, &errb); rc != 2 {
			t.Errorf("%v: rc %d, want 2 (%s)", bad, rc, errb.String())
		}
	}
	if rc := mainRun([]string{"mem", "--topo", "/nonexistent.xml"}, &out, &errb); rc != 1 {
		t.Errorf("missing topology: rc %d", rc)
	}
}
