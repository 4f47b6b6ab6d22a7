package main

import (
	"bytes"
	"strings"
	"testing"
)

// Sizes whose buffers cannot fit are one line of error before anything is allocated (before: a
// runtime out-of-memory crash), and a launcher size beyond the bootstrap's bound is named as such.
func TestMemoryAndRankBounds(t *testing.T) {
	for _, args := range [][]string{
		{"-b", "512G", "-e", "512G", "-g", "4"}, // 4 TiB of buffers against the default bound (the memory available): beyond any host
		{"-b", "1M", "-e", "1M", "-g", "4", "--max-memory", "4M"},
		{"-b", "1M", "-e", "1M", "-g", "4", "--procs", "--max-memory", "4M"},
	} {
		var out, errb bytes.Buffer
		code := mainRun(args, &out, &errb, noenv)
		if msg := errb.String(); code != 2 || !strings.Contains(msg, "needs") || strings.Count(msg, "\n") != 1 {
			t.Errorf("%v: exit %d, %q", args, code, msg)
		}
	}
	var out, errb bytes.Buffer
	env := map[string]string{"RANK": "0", "WORLD_SIZE": "2000000", "SIMCCL_COMM_ID": "127.0.0.1:1#s"}
	if code := mainRun([]string{"-b", "8", "-e", "8"}, &out, &errb, func(k string) string { return env[k] }); code != 1 || !strings.Contains(errb.String(), "at most 1048576") {
		t.Errorf("WORLD_SIZE=2000000: exit %d, %s", code, errb.String())
	}
}
