package ncclxml

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/beevik/etree"
)

// Attribute helpers. Each reads one attribute of an element and returns an *Error located at
// the element when the value is malformed. They only decode numbers and bus ids; what the values
// mean (bandwidths, path types) is package graph's business.

// MaxQuoted is how many bytes of a value an error or warning quotes: a longer value (a 100 kB
// attribute, say) is cut there and its length given, so that the message stays one readable line.
const MaxQuoted = 64

// Quote returns s quoted as fmt's %q does; a value longer than MaxQuoted bytes is cut at a rune
// boundary and followed by its length ("\"ffff…\"... (102400 bytes)").
func Quote(s string) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(s)
	}
	n := MaxQuoted
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:n]), len(s))
}

// SentinelBusID is the bus id NCCL writes as an <nvlink target> when the remote end of a link is
// invisible from the node (an NVSwitch in another tray, or in a VM): NCCL 2.28 treats such a
// target as an NVSwitch (ncclTopoAddNvLinks).
const SentinelBusID = "fffffff:ff:ff.0"

// SentinelBusIDValue is SentinelBusID as ParseBusID returns it.
const SentinelBusIDValue int64 = 0xfffffffffff0

// ParseInt reads an integer the way NCCL's XML reader does (strtol with base 0, NCCL 2.28
// xmlGetAttrInt/xmlGetAttrLong): an optional sign, then "0x"/"0X" and hex digits, or a leading
// "0" and octal digits, or decimal digits. Unlike strtol it rejects trailing junk, empty strings
// and values that overflow int64, so that typos are reported rather than read as 0.
func ParseInt(s string) (int64, error) {
	t := s
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	base := 10
	switch {
	case len(t) > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X'):
		base, t = 16, t[2:]
	case len(t) > 1 && t[0] == '0':
		base, t = 8, t[1:]
	}
	if t == "" {
		return 0, fmt.Errorf("%s is not an integer", Quote(s))
	}
	for i := 0; i < len(t); i++ {
		if digitVal(t[i]) >= base {
			return 0, fmt.Errorf("%s is not an integer", Quote(s))
		}
	}
	u, err := strconv.ParseUint(t, base, 64)
	if err != nil || (!neg && u > math.MaxInt64) || (neg && u > 1<<63) {
		return 0, fmt.Errorf("%s is out of range for a 64-bit integer", Quote(s))
	}
	if neg {
		return int64(-u), nil // -(1<<63) wraps to MinInt64, which is what we want
	}
	return int64(u), nil
}

func digitVal(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return 99
}

// ParseFloat reads a finite decimal number ("20.6", "0.000000", "1e3"). NaN and infinities are
// rejected: no NCCL attribute holds them.
func ParseFloat(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || strings.ContainsRune(s, '_') ||
		strings.HasPrefix(strings.ToLower(strings.TrimLeft(strings.TrimSpace(s), "+-")), "0x") {
		return 0, fmt.Errorf("%s is not a number", Quote(s))
	}
	return v, nil
}

// NormalizeBusID returns a PCI bus id in the lower-case form NCCL compares ("0000:1B:00.0" →
// "0000:1b:00.0"), after checking it is one: hex digits separated by ':' and '.'.
func NormalizeBusID(s string) (string, error) {
	if _, err := ParseBusID(s); err != nil {
		return "", err
	}
	return strings.ToLower(s), nil
}

// ParseBusID converts a PCI bus id to the int64 NCCL uses as the node id of PCI devices: the
// ':' and '.' separators are dropped and the remaining hex digits read as one number
// ("0000:1b:00.0" → 0x1b000; the sentinel "fffffff:ff:ff.0" → 0xfffffffffff0). This is the rule
// of NCCL 2.28 busIdToInt64 (misc/utils.cc), except that anything other than hex
// digits and separators, an empty id, or more than 16 digits is an error instead of being
// silently cut short.
func ParseBusID(s string) (int64, error) {
	var v uint64
	digits := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ':' || c == '.' {
			continue
		}
		d := digitVal(c)
		if d >= 16 {
			return 0, fmt.Errorf("%s is not a PCI bus id (want dddd:bb:dd.f)", Quote(s))
		}
		digits++
		if digits > 16 {
			return 0, fmt.Errorf("%s is not a PCI bus id (more than 16 hex digits)", Quote(s))
		}
		v = v<<4 | uint64(d)
	}
	if digits == 0 {
		return 0, fmt.Errorf("%s is not a PCI bus id (want dddd:bb:dd.f)", Quote(s))
	}
	return int64(v), nil
}

// Attr returns the value of e's attribute key and whether it is present.
func Attr(e *etree.Element, key string) (string, bool) {
	a := e.SelectAttr(key)
	if a == nil {
		return "", false
	}
	return a.Value, true
}

// RequireAttr returns the value of a mandatory attribute, or an error naming the element.
func (d *Document) RequireAttr(e *etree.Element, key string) (string, error) {
	v, ok := Attr(e, key)
	if !ok {
		return "", d.Errorf(e, "<%s> without %s", e.Tag, key)
	}
	return v, nil
}

// AttrInt reads an optional integer attribute (see ParseInt); ok is false when it is absent.
func (d *Document) AttrInt(e *etree.Element, key string) (v int64, ok bool, err error) {
	s, ok := Attr(e, key)
	if !ok {
		return 0, false, nil
	}
	v, err = ParseInt(s)
	if err != nil {
		return 0, true, d.Errorf(e, "<%s %s>: %v", e.Tag, key, err)
	}
	return v, true, nil
}

// RequireInt reads a mandatory integer attribute.
func (d *Document) RequireInt(e *etree.Element, key string) (int64, error) {
	v, ok, err := d.AttrInt(e, key)
	if err == nil && !ok {
		err = d.Errorf(e, "<%s> without %s", e.Tag, key)
	}
	return v, err
}

// AttrFloat reads an optional number attribute (see ParseFloat).
func (d *Document) AttrFloat(e *etree.Element, key string) (v float64, ok bool, err error) {
	s, ok := Attr(e, key)
	if !ok {
		return 0, false, nil
	}
	v, err = ParseFloat(s)
	if err != nil {
		return 0, true, d.Errorf(e, "<%s %s>: %v", e.Tag, key, err)
	}
	return v, true, nil
}

// RequireFloat reads a mandatory number attribute.
func (d *Document) RequireFloat(e *etree.Element, key string) (float64, error) {
	v, ok, err := d.AttrFloat(e, key)
	if err == nil && !ok {
		err = d.Errorf(e, "<%s> without %s", e.Tag, key)
	}
	return v, err
}

// AttrBusID reads an optional bus-id attribute (busid, target) as NCCL's int64 (see ParseBusID).
func (d *Document) AttrBusID(e *etree.Element, key string) (v int64, ok bool, err error) {
	s, ok := Attr(e, key)
	if !ok {
		return 0, false, nil
	}
	v, err = ParseBusID(s)
	if err != nil {
		return 0, true, d.Errorf(e, "<%s %s>: %v", e.Tag, key, err)
	}
	return v, true, nil
}

// RequireBusID reads a mandatory bus-id attribute.
func (d *Document) RequireBusID(e *etree.Element, key string) (int64, error) {
	v, ok, err := d.AttrBusID(e, key)
	if err == nil && !ok {
		err = d.Errorf(e, "<%s> without %s", e.Tag, key)
	}
	return v, err
}
