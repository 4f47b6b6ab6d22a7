package discover

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// buildTree materialises a fake /sys and /proc under a temporary directory from a tree spec
// (testdata/<case>/tree.txt). The spec keeps colons and symlinks out of the repository. One
// statement a line; '#' starts a comment; values with blanks are double-quoted, with \n and \t:
//
//	pci  PATH k=v…             a PCI device directory: files k (v + "\n"), the link
//	                           /sys/bus/pci/devices/<base> → PATH and PATH/subsystem → /sys/bus/pci
//	dev  PATH [subsystem=S] k=v…  any device directory; subsystem links PATH/subsystem → /sys/bus/S
//	file PATH VALUE            a file holding VALUE + "\n"
//	link PATH TARGET           a relative symlink to the absolute (root-relative) TARGET
//	dir  PATH                  a directory
func buildTree(t *testing.T, spec string) string {
	t.Helper()
	root := t.TempDir()
	f, err := os.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s:%d: %s", spec, line, fmt.Sprintf(format, args...))
	}
	mkdir := func(p string) {
		if err := os.MkdirAll(root+p, 0o755); err != nil {
			fail("%v", err)
		}
	}
	write := func(p, v string) {
		mkdir(path.Dir(p))
		if err := os.WriteFile(root+p, []byte(v+"\n"), 0o644); err != nil {
			fail("%v", err)
		}
	}
	link := func(p, target string) {
		mkdir(path.Dir(p))
		rel, err := filepath.Rel(path.Dir(p), target)
		if err != nil {
			fail("%v", err)
		}
		if err := os.Symlink(rel, root+p); err != nil {
			fail("%v", err)
		}
	}
	for sc.Scan() {
		line++
		toks, err := splitSpec(sc.Text())
		if err != nil {
			fail("%v", err)
		}
		if len(toks) == 0 {
			continue
		}
		if len(toks) < 2 || !strings.HasPrefix(toks[1], "/") {
			fail("want VERB /PATH …, got %q", sc.Text())
		}
		verb, p, rest := toks[0], toks[1], toks[2:]
		switch verb {
		case "pci", "dev":
			mkdir(p)
			for _, kv := range rest {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					fail("attribute %q: want key=value", kv)
				}
				if k == "subsystem" {
					mkdir("/sys/bus/" + v)
					link(p+"/subsystem", "/sys/bus/"+v)
					continue
				}
				write(p+"/"+k, v)
			}
			if verb == "pci" {
				mkdir("/sys/bus/pci")
				link("/sys/bus/pci/devices/"+path.Base(p), p)
				link(p+"/subsystem", "/sys/bus/pci")
			}
		case "file":
			if len(rest) != 1 {
				fail("file wants one value")
			}
			write(p, rest[0])
		case "link":
			if len(rest) != 1 || !strings.HasPrefix(rest[0], "/") {
				fail("link wants one absolute target")
			}
			link(p, rest[0])
		case "dir":
			mkdir(p)
		default:
			fail("unknown verb %q", verb)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return root
}

// splitSpec splits a spec line into blank-separated tokens; "…" quotes (inside a token too, as in
// k="a b"), with \n, \t, \" and \\ escapes; '#' outside quotes ends the line.
func splitSpec(s string) ([]string, error) {
	var toks []string
	var cur strings.Builder
	in, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				cur.WriteByte('\n')
			case 't':
				cur.WriteByte('\t')
			default:
				cur.WriteByte(s[i])
			}
		case c == '"':
			quoted = !quoted
			in = true
		case quoted:
			cur.WriteByte(c)
		case c == '#':
			i = len(s)
		case c == ' ' || c == '\t':
			if in {
				toks = append(toks, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote")
	}
	if in {
		toks = append(toks, cur.String())
	}
	return toks, nil
}
