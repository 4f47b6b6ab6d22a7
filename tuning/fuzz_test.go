package tuning

import (
	"strings"
	"testing"

	"github.com/simccl/simccl/coll"
)

// FuzzParseOverrides: any input gives rules or an error naming a line, never a panic.
func FuzzParseOverrides(f *testing.F) {
	f.Add("allreduce,0,64K,ring,ll,4\n*,,,*,simple,\n")
	f.Add("# c\ncollective,minBytes,maxBytes,algorithm,protocol,channels\nallgather,1K,1G,pat,simple,*")
	f.Fuzz(func(t *testing.T, s string) {
		ov, err := ParseOverrides("f.csv", strings.NewReader(s))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.csv:") {
				t.Fatalf("error without location: %v", err)
			}
			return
		}
		for _, o := range ov {
			if o.Line < 1 || o.Channels < 0 || o.Channels > MaxChannels || (o.MaxBytes >= 0 && o.MaxBytes < o.MinBytes) {
				t.Fatalf("bad rule %+v", o)
			}
		}
	})
}

// FuzzEnableList: NCCL_ALGO / NCCL_PROTO strings parse or fail cleanly; a parsed list selects.
func FuzzEnableList(f *testing.F) {
	f.Add("ring,tree;allgather:^pat")
	f.Add("^LL128")
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := parseEnableList("NCCL_ALGO", s, algoNames[:]); err != nil && !strings.Contains(err.Error(), "NCCL_ALGO") {
			t.Fatalf("error does not name the variable: %v", err)
		}
		tb, err := Model(workedExample(), &Config{Algo: s})
		if err != nil {
			return
		}
		_, _ = tb.SelectBytes(coll.AllReduce, 1<<20) // may find nothing enabled: an error, not a panic
	})
}
