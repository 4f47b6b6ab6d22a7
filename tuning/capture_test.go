package tuning

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/simccl/simccl/coll"
)

// TestNCCL228Groups replays what tuning/testdata/capture.sh asked NCCL 2.28.9 on the 2×H200 machine
// (graphs of testdata/nccl/h200x2/real.677.log) and compares every choice line: grouped calls
// (aggregation within 4×, numPipeOps, one shared channel schedule per plan), half/int8 data types,
// and NCCL_PROTO=^LL, NCCL_ALGO=allreduce:tree;broadcast:ring, NCCL_MAX_NCHANNELS=4, NCCL_NTHREADS=256
// (whose TUNING table is compared too).
func TestNCCL228Groups(t *testing.T) {
	base, err := parseNCCLLog(filepath.Join("..", "testdata", "nccl", "h200x2", "real.677.log"))
	if err != nil {
		t.Fatal(err)
	}
	comm, err := commFromLog(base)
	if err != nil {
		t.Fatal(err)
	}
	dtypes := map[string]struct{ size, id int }{"float": {4, 7}, "half": {2, 6}, "bfloat16": {2, 9}, "int8": {1, 0}, "double": {8, 8}}
	cases := []struct {
		name string
		cfg  Config
	}{
		{"groups", Config{}},
		{"dtypes", Config{}},
		{"env", Config{Proto: "^LL", Algo: "allreduce:tree;broadcast:ring", MaxNChannels: 4, NThreads: 256}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "nccl228")
			l, err := parseNCCLLog(filepath.Join(dir, c.name+".log"))
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join(dir, c.name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var groups [][][3]any
			if err := json.Unmarshal(data, &groups); err != nil {
				t.Fatal(err)
			}
			cfg := c.cfg
			cfg.Version = "2.28"
			tb, err := Model(comm, &cfg)
			if err != nil {
				t.Fatal(err)
			}
			if l.tableRows > 0 {
				got := tb.Lines()
				for i := range got {
					if i >= len(l.tableLinesRaw) || got[i] != l.tableLinesRaw[i] {
						t.Errorf("table line %d:\n ours %q\n NCCL %q", i+1, got[i], l.tableLinesRaw[min(i, len(l.tableLinesRaw)-1)])
					}
				}
			}
			next, bad, total := 0, 0, 0
			for gi, g := range groups {
				calls := make([]Call, len(g))
				for i, e := range g {
					f, err := coll.ParseFunc(e[0].(string))
					if err != nil {
						t.Fatal(err)
					}
					dt := dtypes[e[2].(string)]
					calls[i] = Call{Func: f, Count: int64(e[1].(float64)), ElemSize: dt.size, DataType: dt.id}
				}
				chs, err := tb.SelectGroup(calls)
				if err != nil {
					t.Fatal(err)
				}
				sort.Slice(chs, func(i, j int) bool { return chs[i].PlanIndex < chs[j].PlanIndex })
				for _, ch := range chs {
					if next >= len(l.choices) {
						t.Fatalf("group %d: NCCL logged only %d choices", gi, len(l.choices))
					}
					lc := l.choices[next]
					next++
					total++
					if ch.Func != lc.f || ch.Bytes != lc.bytes || ch.Algo.LogName() != lc.algo || ch.Proto.LogName() != lc.proto || ch.ChannelLo != lc.lo || ch.ChannelHi != lc.hi {
						bad++
						t.Errorf("group %d (%d calls), log line %d:\n ours %s\n NCCL %v: %d Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}",
							gi, len(calls), lc.line, ch.Line(), lc.f, lc.bytes, lc.algo, lc.proto, lc.lo, lc.hi)
					}
				}
			}
			if next != len(l.choices) {
				t.Errorf("compared %d choices, NCCL logged %d", next, len(l.choices))
			}
			t.Logf("%d/%d choices equal", total-bad, total)
		})
	}
}
