package units

import "testing"

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"8", 8, false}, {"64K", 65536, false}, {"1M", 1 << 20, false}, {"1G", 1 << 30, false},
		{"4GB", 4 << 30, false}, {"512KiB", 512 << 10, false}, {"", 0, true}, {"-1", 0, true},
		{"1X", 0, true}, {"99999999999T", 0, true},
	} {
		got, err := ParseSize(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, bad=%v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestSweep(t *testing.T) {
	s, err := Sweep(8, 64, 2)
	if err != nil || len(s) != 4 || s[3] != 64 {
		t.Fatalf("Sweep(8,64,2) = %v, %v", s, err)
	}
	if _, err := Sweep(8, 64, 1); err == nil {
		t.Fatal("factor 1 accepted")
	}
	if s, _ := Sweep(1<<30, 1<<30, 2); len(s) != 1 {
		t.Fatalf("single size sweep = %v", s)
	}
}

func TestCheckSize(t *testing.T) {
	if err := CheckSize("-e", MaxSize); err != nil {
		t.Errorf("MaxSize refused: %v", err)
	}
	if err := CheckSize("-e", MaxSize+1); err == nil || err.Error() != "-e: 1099511627777 bytes, more than 1 TiB (the largest size simccl simulates)" {
		t.Errorf("MaxSize+1: %v", err)
	}
}
