package discover

import (
	"testing"
)

// FuzzParseFakeNVML: any input gives a FakeNVML or an error naming the input, never a panic; an
// accepted one can be discovered from (an empty sysfs root) without a panic.
func FuzzParseFakeNVML(f *testing.F) {
	f.Add([]byte(`{"gpus": [{"busid": "00000000:0A:00.0", "sm": 90, "links": [{"p2p": true, "active": true, "remote": "0000:0b:00.0", "repeat": 18}], "c2c": [{"up": true, "bw": 40000}]}]}`))
	f.Add([]byte(`{"gpus": [{"busid": "0000:0a:00.0", "sm": 80, "links": [{"p2p": true, "active": true, "remote": "\u0001"}]}]}`))
	f.Add([]byte(`{"gpus": []}`))
	f.Add([]byte(`{`))
	root := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		lib, err := ParseFakeNVML(data, "fuzz.json")
		if err != nil {
			return
		}
		res, err := Discover(Options{Root: root, NVML: lib, GOARCH: "amd64"})
		if err != nil {
			return
		}
		if _, err := res.Doc.Bytes(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzParseBusID: parseBusID never panics, and what it accepts prints back in NCCL's form,
// which it accepts again unchanged.
func FuzzParseBusID(f *testing.F) {
	for _, s := range []string{"0000:0f:00.0", "00000000:0F:00.0", "fffffff:ff:ff.0", "", "1:2:3.4", "0000:00:1f.7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseBusID(s)
		if err != nil {
			return
		}
		b, err := parseBusID(a.String())
		if err != nil || b != a {
			t.Fatalf("%q → %q → %v, %v", s, a.String(), b, err)
		}
		_ = isBDF(a.String())
		_ = nvlinkTarget(s)
		_ = strtol(s)
		_ = gts(s)
		_ = rateMbps(s)
		_ = ibGUID(s)
	})
}
