package intercept

import (
	"errors"
	"testing"
)

// TestExecuteH200Trace runs the small calls of the recorded torchrun trace for real (goroutine
// ranks, host memory) and checks the results that have a one-line definition.
func TestExecuteH200Trace(t *testing.T) {
	ls, err := Launches(readAll(t, h200+"trace/*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Execute(ls, ExecOptions{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Launches)+rep.Skipped != len(ls) || len(rep.Launches) < 50 || rep.Skipped == 0 {
		t.Fatalf("%d run, %d skipped of %d", len(rep.Launches), rep.Skipped, len(ls))
	}
	if rep.Wrong != 0 || rep.TotalUs <= 0 {
		t.Errorf("wrong %d, total %.1f us", rep.Wrong, rep.TotalUs)
	}
	kinds := map[string]bool{}
	for _, l := range rep.Launches {
		kinds[l.Ops] = true
	}
	for _, k := range []string{"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "SendRecv"} {
		if !kinds[k] {
			t.Errorf("no %s launch ran (kinds %v)", k, kinds)
		}
	}
	if _, err := Execute(nil, ExecOptions{}); !errors.Is(err, ErrReplay) {
		t.Errorf("empty: %v", err)
	}
}
