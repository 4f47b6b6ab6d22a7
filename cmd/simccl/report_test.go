package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var out, errb bytes.Buffer
	args := []string{"report", "--topo", "../../testdata/nccl/h200x2/real_topo.xml", "--measured", "../../testdata/nccl/h200x2/nccl_perf.csv",
		"-c", "allreduce,allgather", "-b", "1K", "-e", "16M", "-f", "4", "-o", page, "--json"}
	if rc := mainRun(args, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var v struct {
		Machine struct {
			Ranks int `json:"ranks"`
		} `json:"machine"`
		BusBW []struct {
			Name   string `json:"name"`
			Points []any  `json:"points"`
		} `json:"busbw"`
		Compare []any `json:"compare"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
	if v.Machine.Ranks != 2 || len(v.BusBW) != 4 || len(v.BusBW[0].Points) != 8 || len(v.Compare) != 2*(8+4+3) || len(v.BusBW[2].Points) != 15 {
		t.Errorf("report JSON: %+v", v)
	}
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<svg id="topo"`, `<svg id="tuner"`, `<svg id="busbw"`, `<table id="compare"`, `<svg id="heat"`, `<svg id="timeline"`, `<svg id="memory"`, "measured all_reduce"} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("page lacks %q", want)
		}
	}

	// nccl-tests' own text output.
	text := filepath.Join(dir, "ar.txt")
	os.WriteFile(text, []byte("#  Rank  0 Group  0 Pid 1 on h device 0\n#  Rank  1 Group  0 Pid 2 on h device 1\n     1024   256  float  sum  -1  12.0  0.09  0.09  0  11.0  0.09  0.09  0\n"), 0o644)
	out.Reset()
	errb.Reset()
	if rc := mainRun([]string{"report", "--topo", "../../testdata/nccl/h200x2/real_topo.xml", "--measured", text, "-b", "1K", "-e", "4K", "-o", page}, &out, &errb); rc != 0 {
		t.Fatalf("nccl-tests text: rc %d: %s", rc, errb.String())
	}
	if !strings.Contains(out.String(), "wrote") {
		t.Errorf("stdout %q", out.String())
	}
}

func TestReportUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		rc   int
		want string
	}{
		{[]string{"report"}, 2, "-o report.html"},
		{[]string{"report", "-o", filepath.Join(dir, "a.html"), "-c", "nope"}, 2, "-c"},
		{[]string{"report", "-o", filepath.Join(dir, "a.html"), "-b", "x"}, 2, "-b"},
		{[]string{"report", "-o", filepath.Join(dir, "a.html"), "--nodes", "0"}, 2, "--nodes"},
		{[]string{"report", "-o", filepath.Join(dir, "a.html"), "--measured", filepath.Join(dir, "missing.csv")}, 1, "missing.csv"},
		{[]string{"report", "-o", filepath.Join(dir, "a.html"), "--measured", "../../testdata/nccl/h200x2/nccl_perf.csv", "-b", "1K", "-e", "1K"}, 1, "ranks"},
		{[]string{"report", "-o", filepath.Join(dir, "a.html"), "--focus-size", "zz"}, 2, "--focus-size"},
	} {
		var out, errb bytes.Buffer
		rc := mainRun(tc.args, &out, &errb)
		if rc != tc.rc || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: rc %d, stderr %q; want rc %d naming %q", tc.args, rc, errb.String(), tc.rc, tc.want)
		}
	}
}
