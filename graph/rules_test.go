package graph

import "testing"

func TestParsePathType(t *testing.T) {
	for in, want := range map[string]PathType{"LOC": PathLOC, "nvl": PathNVL, "PXN": PathPXN, "SYS": PathSYS, "0": PathLOC, "1": PathPIX, "2": PathPXB, "3": PathPHB, "4": PathSYS, "5": PathSYS, "9": PathSYS} {
		if got, err := ParsePathType(in); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	if _, err := ParsePathType("-1"); err == nil {
		t.Error("-1 accepted")
	}
}

func TestMirrorBits(t *testing.T) {
	for _, c := range [][3]int{{0, 8, 0}, {1, 8, 4}, {2, 8, 2}, {3, 8, 6}, {1, 4, 2}, {1, 2, 1}, {5, 1, 0}} {
		if got := mirrorBits(c[0], c[1]); got != c[2] {
			t.Errorf("mirror(%d,%d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
}
