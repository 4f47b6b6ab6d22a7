package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func noenv(string) string { return "" }

func TestRunTableAndJSON(t *testing.T) {
	var out, errb bytes.Buffer
	code := mainRun([]string{"-c", "all", "-b", "8", "-e", "64K", "-f", "16", "-g", "3", "--check", "-n", "2"}, &out, &errb, noenv)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s := out.String()
	for _, want := range []string{"# Collective: allreduce", "# Collective: sendrecv", "# Out of bounds values : 0 OK", "# Avg bus bandwidth"} {
		if !strings.Contains(s, want) {
			t.Fatalf("output lacks %q:\n%s", want, s)
		}
	}
	out.Reset()
	code = mainRun([]string{"-c", "allreduce", "-b", "1K", "-e", "4K", "-g", "2", "--json", "--check", "-d", "bf16", "-o", "avg"}, &out, &errb, noenv)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Rows []struct {
			Coll   string  `json:"coll"`
			Bytes  int64   `json:"bytes"`
			TimeUs float64 `json:"time_us"`
			AlgBW  float64 `json:"algbw"`
			BusBW  float64 `json:"busbw"`
			Wrong  int64   `json:"wrong"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(res.Rows) != 6 || res.Rows[0].Coll != "allreduce" || res.Rows[0].Bytes != 1024 || res.Rows[5].Bytes != 4096 || res.Rows[0].TimeUs <= 0 {
		t.Fatalf("rows %+v", res.Rows)
	}
}

func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-c", "allscatter"}, {"-b", "lots"}, {"-b", "1M", "-e", "1K"}, {"-d", "complex"}, {"-o", "xor"},
		{"-g", "0"}, {"--backend", "gpu"}, {"extra"}, {"--nosuchflag"},
	} {
		var out, errb bytes.Buffer
		if code := mainRun(args, &out, &errb, noenv); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		} else if errb.Len() == 0 {
			t.Errorf("%v: no message", args)
		}
	}
	var out, errb bytes.Buffer
	env := func(k string) string { return map[string]string{"RANK": "0", "WORLD_SIZE": "2"}[k] }
	if code := mainRun([]string{"-b", "8", "-e", "8"}, &out, &errb, env); code != 1 || !strings.Contains(errb.String(), "SIMCCL_COMM_ID") {
		t.Errorf("torchrun env without an address: exit %d, %s", code, errb.String())
	}
}
