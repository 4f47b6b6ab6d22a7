package intercept

import (
	"path/filepath"
	"testing"

	"github.com/simccl/simccl/comm"
)

func TestRealReplayH200(t *testing.T) {
	paths, _ := filepath.Glob("../testdata/intercept/h200x2/trace/*.jsonl")
	var ts []RankTrace
	for _, p := range paths {
		rt, err := ReadRankTrace(p)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, rt)
	}
	prog, err := PlanReal(ts)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := RunRealInProcess(prog, &comm.Config{Transport: "inproc"}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("launches %d total %.0f us wall %.0f us checked %d wrong %d %s", len(rep.Launches), rep.TotalUs, rep.WallUs, rep.Checked, rep.Wrong, rep.FirstBad)
	for _, o := range rep.ByOp {
		t.Logf("%+v", o)
	}
}
