package intercept

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseLogH200(t *testing.T) {
	files, _ := filepath.Glob("../testdata/nccl/h200x2/coll.*.log")
	if len(files) != 2 {
		t.Fatalf("want the two COLL logs of NCCL 2.28.9, found %v", files)
	}
	for _, f := range files {
		recs, st, err := ParseLogFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Calls != 145 || len(recs) != 145 {
			t.Fatalf("%s: %d calls (stats %+v), want 145 (29 sizes of 5 collectives)", f, len(recs), st)
		}
		r := recs[0]
		if r.Op != OpAllReduce || r.Count != 2 || r.Dtype != "float" || r.RedOp != "sum" || r.NRanks != 2 || r.Comm == "" || r.Stream != "" {
			t.Errorf("%s: first record %+v", f, r)
		}
		last := recs[len(recs)-1]
		if last.Op != OpReduceScatter || last.Count != 134217728 {
			t.Errorf("%s: last record %+v", f, last)
		}
		if st.Version != "2.28.9" {
			t.Errorf("%s: version %q, want 2.28.9 (the log's \"NCCL version 2.28.9+cuda13.0\")", f, st.Version)
		}
	}
}

// TestParseLogVersion: the first version line names the release; a log without one, a line that
// only mentions a version, or one too long to be NCCL's, names none.
func TestParseLogVersion(t *testing.T) {
	call := "vm:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 2 datatype 7 op 0 root 0 comm 0x3 [nranks=2] stream 0x4\n"
	for _, c := range []struct{ log, want string }{
		{"vm:1:1 [0] NCCL INFO NCCL version 2.22.3+cuda12.1\n" + call + "vm:1:1 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n", "2.22.3"},
		{call, ""},
		{"NCCL version 2.28.9 (not NCCL's line)\n" + call, ""},
		{"vm:1:1 [0] NCCL INFO NCCL version 2.28.9" + strings.Repeat("x", maxLogLine) + "\n" + call, ""},
	} {
		_, st, err := ParseLog(strings.NewReader(c.log), "t.log")
		if err != nil || st.Calls != 1 {
			t.Fatalf("%q: %v, %d calls", c.log[:40], err, st.Calls)
		}
		if st.Version != c.want {
			t.Errorf("%q: version %q, want %q", c.log[:40], st.Version, c.want)
		}
	}
}

func TestParseLogCorpus(t *testing.T) {
	files, _ := filepath.Glob("../testdata/topos/*.log")
	calls := 0
	for _, f := range files {
		recs, _, err := ParseLogFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
		for _, r := range recs {
			if r.NRanks != 2 || r.Op != OpAllReduce {
				t.Errorf("%s: %+v", f, r)
				break
			}
		}
		calls += len(recs)
	}
	if calls == 0 {
		t.Error("no COLL line found in the corpus logs (two of them have some)")
	}
}

func TestParseLogErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 2 datatype 7 op 0 root 0 comm 0x5 stream 0x7\n", "no [nranks"},
		{"h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 garbage\n", "unrecognised COLL line"},
		{"x\nh:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 2 datatype 99 op 0 root 0 comm 0x5 [nranks=2] stream 0x7\n", "in.log:2"},
		{"h:1:1 [0] NCCL INFO Send: opCount 0 sendbuff 0x1 recvbuff 0x1 count 2 datatype 7 op 0 root 5 comm 0x5 [nranks=2] stream 0x7\n", "peer 5"},
	} {
		_, _, err := ParseLog(strings.NewReader(c.in), "in.log")
		if err == nil || !errors.Is(err, ErrTrace) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.in, err, c.want)
		}
	}
}

func FuzzParseLog(f *testing.F) {
	f.Add("h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 2 datatype 7 op 0 root 0 comm 0x5 [nranks=2] stream 0x7\n")
	f.Add("h:1:1 [0] NCCL INFO comm 0x5 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 1000 commId 0xabc - Init COMPLETE\n")
	f.Fuzz(func(t *testing.T, s string) {
		recs, _, err := ParseLog(strings.NewReader(s), "fuzz")
		if err != nil {
			return
		}
		for _, r := range recs {
			if err := checkRecord(&r); err != nil {
				t.Fatalf("accepted a bad record %+v: %v", r, err)
			}
		}
	})
}

// A single-process program on two GPUs without INIT lines: the two communicator handles of one
// communicator line up by device and order.
func TestParseLogSingleProcess(t *testing.T) {
	in := `h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 8 datatype 7 op 0 root 0 comm 0xa0 [nranks=2] stream 0x7
h:1:1 [1] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 8 datatype 7 op 0 root 0 comm 0xb0 [nranks=2] stream 0x8
`
	recs, _, err := ParseLog(strings.NewReader(in), "single.log")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Comm != recs[1].Comm || recs[0].Rank != 0 || recs[1].Rank != 1 {
		t.Fatalf("%+v", recs)
	}
	ls, err := Launches(recs)
	if err != nil || len(ls) != 1 {
		t.Fatalf("launches %+v, %v", ls, err)
	}
}

// The corpus logs have INIT lines with NCCL's commId: ranks and the communicator come from them.
func TestParseLogCommId(t *testing.T) {
	recs, _, err := ParseLogFile("../testdata/topos/a100pcie-2gpu-nvlink-bridge-dump-normal-nccl-info.log")
	if err != nil {
		t.Fatal(err)
	}
	ranks := map[int]int{}
	for _, r := range recs {
		if r.Comm != "commId:0x54fe282d32a87d85" {
			t.Fatalf("comm %q, want NCCL's commId", r.Comm)
		}
		ranks[r.Rank]++
	}
	if ranks[0] != ranks[1] || ranks[0] == 0 {
		t.Errorf("calls per rank %v, want equal", ranks)
	}
}
