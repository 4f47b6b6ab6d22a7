package main

import "testing"

func TestCheck(t *testing.T) {
	p := func(b int64, us float64) row {
		return row{Bytes: b, TimeUs: us, Algo: "P2P", Proto: "Simple", NChannels: 1}
	}
	const M = 1 << 20
	for _, c := range []struct {
		name string
		rows []row
		want []string // kinds, in order
	}{
		{"linear", []row{p(64*M, 100), p(128*M, 199), p(256*M, 398)}, nil},
		// stop 57's cell: 16 GB200 racks, send/recv, 128 -> 256 MiB under one plan.
		{"superlinear", []row{p(128*M, 5407.6), p(256*M, 12851.5)}, []string{"superlinear"}},
		{"below min-bytes", []row{p(4*M, 10), p(8*M, 30)}, nil},
		{"falls", []row{p(64*M, 100), p(128*M, 90)}, []string{"falls"}},
		{"plan changes", []row{p(64*M, 100), {Bytes: 128 * M, TimeUs: 300, Algo: "Ring", Proto: "Simple", NChannels: 16}}, nil},
		{"host-bound", []row{{Bytes: 64 * M, TimeUs: 100, Algo: "P2P", Proto: "Simple", NChannels: 1, HostBound: true}, p(128*M, 300)}, nil},
		{"not a doubling", []row{p(64*M, 100), p(256*M, 400)}, nil},
	} {
		got := check(c.rows, 2.08, 16*M)
		if len(got) != len(c.want) {
			t.Errorf("%s: %d findings %+v, want %v", c.name, len(got), got, c.want)
			continue
		}
		for i, f := range got {
			if f.Kind != c.want[i] {
				t.Errorf("%s: finding %d is %q, want %q", c.name, i, f.Kind, c.want[i])
			}
		}
	}
}
