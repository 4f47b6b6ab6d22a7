package chromium

import (
	"errors"
	"reflect"
	"testing"
)

func TestPre(t *testing.T) {
	dom := `<html><body><pre id="other">x</pre><pre id="selfcheck">{"a":"&lt;b&gt; &amp; c"}</pre></body></html>`
	for _, c := range []struct {
		id   string
		want string
		ok   bool
	}{
		{"selfcheck", `{"a":"<b> & c"}`, true},
		{"other", "x", true},
		{"missing", "", false},
	} {
		got, ok := Pre(dom, c.id)
		if got != c.want || ok != c.ok {
			t.Errorf("Pre(%q) = %q, %v; want %q, %v", c.id, got, ok, c.want, c.ok)
		}
	}
}

func TestConsoleErrors(t *testing.T) {
	log := "[1:2:INFO:CONSOLE(12)] \"boom\", source: file:///p.html (12)\nharmless line\nUncaught TypeError: x is undefined\n"
	want := []string{`[1:2:INFO:CONSOLE(12)] "boom", source: file:///p.html (12)`, "Uncaught TypeError: x is undefined"}
	if got := ConsoleErrors(log); !reflect.DeepEqual(got, want) {
		t.Errorf("ConsoleErrors = %q, want %q", got, want)
	}
	if got := ConsoleErrors("nothing\nto see\n"); got != nil {
		t.Errorf("ConsoleErrors of a clean log = %q", got)
	}
}

func TestFindNamedBinary(t *testing.T) {
	t.Setenv("SIMCCL_CHROMIUM", "/opt/my/chrome")
	if p, err := Find(); p != "/opt/my/chrome" || err != nil {
		t.Errorf("Find with SIMCCL_CHROMIUM = %q, %v", p, err)
	}
	t.Setenv("SIMCCL_CHROMIUM", "")
	t.Setenv("PATH", t.TempDir())
	if _, err := Find(); !errors.Is(err, ErrNotFound) {
		t.Errorf("Find on an empty PATH: %v, want ErrNotFound", err)
	}
}

func TestTail(t *testing.T) {
	if got := Tail("abcdef", 3); got != "def" {
		t.Errorf("Tail = %q", got)
	}
	if got := Tail("ab", 3); got != "ab" {
		t.Errorf("Tail = %q", got)
	}
}
