package ncclxml

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestParseInt(t *testing.T) {
	good := map[string]int64{
		"0": 0, "1": 1, "-1": -1, "+7": 7, "42": 42,
		"0x1": 1, "0X1F": 31, "0xff": 255, "-0x10": -16,
		"0x100000000000000": 1 << 56, "0x7fffffffffffffff": math.MaxInt64,
		"-9223372036854775808": math.MinInt64,
		"010":                  8, // NCCL reads attributes with strtol base 0: a leading 0 is octal
	}
	for in, want := range good {
		got, err := ParseInt(in)
		if err != nil || got != want {
			t.Errorf("ParseInt(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-", "0x", "x1", "1.5", "12abc", " 1", "1 ", "08", "0xg", "1_000",
		"0x8000000000000000", "9223372036854775808", "-9223372036854775809", "99999999999999999999"} {
		if v, err := ParseInt(in); err == nil {
			t.Errorf("ParseInt(%q) = %d, want an error", in, v)
		}
	}
}

func TestParseFloat(t *testing.T) {
	good := map[string]float64{"0": 0, "0.000000": 0, "20.6": 20.6, "-1.5": -1.5, "1e3": 1000, " 12 ": 12}
	for in, want := range good {
		if got, err := ParseFloat(in); err != nil || got != want {
			t.Errorf("ParseFloat(%q) = %g, %v; want %g", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "nan", "NaN", "inf", "-Inf", "1e400", "0x1p3", "0X1P3", "1_0", "1.5x"} {
		if v, err := ParseFloat(in); err == nil {
			t.Errorf("ParseFloat(%q) = %g, want an error", in, v)
		}
	}
}

func TestParseBusID(t *testing.T) {
	good := map[string]int64{
		"0000:1b:00.0":    0x1b000,
		"0000:1B:00.0":    0x1b000,
		"0008:06:00.0":    0x806000,
		"0019:04:00.1":    0x1904001,
		SentinelBusID:     SentinelBusIDValue,
		"fffffff:ffff:ff": 0xfffffffffffff, // the sentinel as topo/discover spells it (nvlinkSentinel)
		"1b:00.0":         0x1b000,
		"0":               0,
	}
	for in, want := range good {
		if got, err := ParseBusID(in); err != nil || got != want {
			t.Errorf("ParseBusID(%q) = %#x, %v; want %#x", in, got, err, want)
		}
	}
	for _, in := range []string{"", ":.", "0000:1g:00.0", "0000-1b-00.0", " 0000:1b:00.0", "0x1b000", "11112222:33334444:5"} {
		if v, err := ParseBusID(in); err == nil {
			t.Errorf("ParseBusID(%q) = %#x, want an error", in, v)
		}
	}
	if s, err := NormalizeBusID("0000:AB:00.0"); err != nil || s != "0000:ab:00.0" {
		t.Errorf("NormalizeBusID = %q, %v", s, err)
	}
	if _, err := NormalizeBusID("pci0000:00"); err == nil {
		t.Error("NormalizeBusID accepted a sysfs name")
	}
}

func TestAttrHelpers(t *testing.T) {
	in := "<system version=\"1\">\n" +
		"<cpu numaid=\"-1\" familyid=\"0x6\" bad=\"six\" f=\"20.6\" nf=\"fast\">\n" +
		"<pci busid=\"0000:1B:00.0\" wrong=\"0000:zz:00.0\"/>\n" +
		"</cpu></system>"
	doc, err := ParseBytes([]byte(in), "attrs.xml")
	if err != nil {
		t.Fatal(err)
	}
	cpu := doc.Root().SelectElement("cpu")
	pci := cpu.SelectElement("pci")

	if v, ok, err := doc.AttrInt(cpu, "numaid"); v != -1 || !ok || err != nil {
		t.Errorf("numaid: %d %v %v", v, ok, err)
	}
	if v, err := doc.RequireInt(cpu, "familyid"); v != 6 || err != nil {
		t.Errorf("familyid: %d %v", v, err)
	}
	if _, ok, err := doc.AttrInt(cpu, "modelid"); ok || err != nil {
		t.Errorf("absent modelid: %v %v", ok, err)
	}
	if v, err := doc.RequireFloat(cpu, "f"); v != 20.6 || err != nil {
		t.Errorf("f: %g %v", v, err)
	}
	if v, err := doc.RequireBusID(pci, "busid"); v != 0x1b000 || err != nil {
		t.Errorf("busid: %#x %v", v, err)
	}
	if s, err := doc.RequireAttr(pci, "busid"); s != "0000:1B:00.0" || err != nil {
		t.Errorf("RequireAttr: %q %v", s, err)
	}
	errs := []struct {
		err  error
		want string
	}{
		{func() error { _, _, err := doc.AttrInt(cpu, "bad"); return err }(), `attrs.xml:2: <cpu bad>: "six" is not an integer`},
		{func() error { _, err := doc.RequireInt(cpu, "modelid"); return err }(), `attrs.xml:2: <cpu> without modelid`},
		{func() error { _, err := doc.RequireFloat(cpu, "nf"); return err }(), `attrs.xml:2: <cpu nf>: "fast" is not a number`},
		{func() error { _, err := doc.RequireFloat(cpu, "g"); return err }(), `attrs.xml:2: <cpu> without g`},
		{func() error { _, err := doc.RequireBusID(pci, "wrong"); return err }(), `attrs.xml:3: <pci wrong>: "0000:zz:00.0" is not a PCI bus id`},
		{func() error { _, err := doc.RequireBusID(pci, "target"); return err }(), `attrs.xml:3: <pci> without target`},
		{func() error { _, err := doc.RequireAttr(pci, "class"); return err }(), `attrs.xml:3: <pci> without class`},
	}
	for _, e := range errs {
		if e.err == nil || !strings.HasPrefix(e.err.Error(), e.want) {
			t.Errorf("got %v, want %s", e.err, e.want)
		}
	}
	if _, ok, err := doc.AttrBusID(pci, "target"); ok || err != nil {
		t.Errorf("absent target: %v %v", ok, err)
	}
	if _, ok, err := doc.AttrFloat(cpu, "g"); ok || err != nil {
		t.Errorf("absent float: %v %v", ok, err)
	}
}

// TestQuote: short values are quoted as %q quotes them; long ones are cut at a rune boundary and
// their length given, so that an error about a 100 kB attribute stays short.
func TestQuote(t *testing.T) {
	for _, s := range []string{"", "0000:zz:00.0", "a\"b\n", strings.Repeat("f", MaxQuoted)} {
		if got, want := Quote(s), fmt.Sprintf("%q", s); got != want {
			t.Errorf("Quote(%q) = %s, want %s", s, got, want)
		}
	}
	long := strings.Repeat("f", MaxQuoted-1) + "é" + strings.Repeat("f", 100<<10)
	got := Quote(long)
	if want := fmt.Sprintf("%q... (%d bytes)", strings.Repeat("f", MaxQuoted-1), len(long)); got != want {
		t.Errorf("Quote(long) = %s, want %s", got, want)
	}
	// Through the parser: a 100 kB bad value gives a short one-line error.
	in := "<system version=\"1\">\n<cpu numaid=\"" + strings.Repeat("9x", 50<<10) + "\"/></system>"
	doc, err := ParseBytes([]byte(in), "long.xml")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = doc.AttrInt(doc.Root().SelectElement("cpu"), "numaid")
	if err == nil || len(err.Error()) > 200 || !strings.HasPrefix(err.Error(), "long.xml:2: ") || !strings.Contains(err.Error(), "(102400 bytes)") {
		t.Errorf("100 kB numaid: error %q (%d bytes)", err, len(err.Error()))
	}
}
