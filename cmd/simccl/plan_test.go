package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestPlanCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := mainRun([]string{"plan", "-c", "allreduce", "-n", "8", "--count", "1M", "--nchannels", "2", "--summary"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	// 4 MiB all-reduce over 8 ranks: every rank sends 2·7/8 × 4 MiB.
	if !strings.Contains(out.String(), "7340032") {
		t.Errorf("summary lacks the 2(n−1)/n byte count:\n%s", out.String())
	}
	out.Reset()
	if rc := mainRun([]string{"plan", "-c", "reducescatter", "-n", "4", "--nnodes", "2", "--count", "1000", "--proto", "LL", "--json"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var v struct {
		Schedule struct {
			NRanks int `json:"nranks"`
		} `json:"schedule"`
		Summary struct {
			Total struct {
				SentBytes int64 `json:"sent_bytes"`
			} `json:"total"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if v.Schedule.NRanks != 4 || v.Summary.Total.SentBytes != 4*3*1000*4 {
		t.Errorf("json: %+v", v)
	}
	for _, bad := range [][]string{{"plan", "--algo", "Bogus"}, {"plan", "-n", "6", "--nnodes", "4"}, {"plan", "--count", "x"}, {"plan", "--ranks", "9"}, {"plan", "--ranks", "x"}} {
		errb.Reset()
		if rc := mainRun(bad, &out, &errb); rc != 2 {
			t.Errorf("%v: rc %d, want 2 (%s)", bad, rc, errb.String())
		}
	}
	out.Reset()
	topo := "../../testdata/topos/azure-ncv4-a100pcie.xml"
	if rc := mainRun([]string{"plan", "--topo", topo, "-c", "allreduce", "--count", "4M", "--summary"}, &out, &errb); rc != 0 {
		t.Fatalf("--topo: rc %d: %s", rc, errb.String())
	}
	if !strings.Contains(out.String(), "# tuned for") || !strings.Contains(out.String(), "op 0: AllReduce") {
		t.Errorf("--topo output:\n%s", out.String())
	}
	errb.Reset()
	if rc := mainRun([]string{"plan", "--topo", topo, "-n", "3"}, &out, &errb); rc != 2 {
		t.Errorf("--topo with a wrong -n: rc %d (%s)", rc, errb.String())
	}
	errb.Reset()
	if rc := mainRun([]string{"plan", "--algo", "CollNetDirect"}, &out, &errb); rc != 1 || !strings.Contains(errb.String(), "unsupported") {
		t.Errorf("CollNetDirect: rc %d, %s", rc, errb.String())
	}
}
