// Package chromium runs a page in headless Chromium and reads back its DOM: what report's
// browser tests and bench/report share. It installs nothing; Find says how to get a browser.
package chromium

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// ErrNotFound is returned by Find when no browser is on the PATH.
var ErrNotFound = errors.New("no Chromium found: apt-get install -y chromium (or run `make test-browser` once), or set SIMCCL_CHROMIUM")

// Find returns the browser to run: $SIMCCL_CHROMIUM, else the first of chromium,
// chromium-browser, google-chrome and google-chrome-stable on the PATH.
func Find() (string, error) {
	if p := os.Getenv("SIMCCL_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNotFound
}

// Args are the flags of a headless run (as root in a container too) with the given fresh profile
// directory, logging the console to stderr; the caller appends the action (--dump-dom,
// --screenshot=…) and the URL.
func Args(profile string) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--no-first-run", "--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0"}
}

// Run is one browser run of DumpDOM.
type Run struct {
	DOM    string        // the DOM after the page's scripts ran
	Stderr string        // Chromium's log, console messages included
	Wall   time.Duration // the whole browser run, start-up included
}

// DumpDOM loads url in bin with a fresh profile (a temporary directory under dir, removed after)
// and returns the DOM after the page's load-time scripts ran.
func DumpDOM(ctx context.Context, bin, dir, url string) (Run, error) {
	profile, err := os.MkdirTemp(dir, "chromium-profile")
	if err != nil {
		return Run{}, err
	}
	defer os.RemoveAll(profile)
	cmd := exec.CommandContext(ctx, bin, append(Args(profile), "--dump-dom", url)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err = cmd.Run()
	r := Run{DOM: out.String(), Stderr: errb.String(), Wall: time.Since(start)}
	if err != nil {
		return r, fmt.Errorf("%s: %v\n%s", bin, err, Tail(r.Stderr, 3000))
	}
	return r, nil
}

// ConsoleErrors lists the console messages and uncaught exceptions in Chromium's log.
func ConsoleErrors(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, ":CONSOLE(") || strings.Contains(l, "Uncaught") {
			out = append(out, l)
		}
	}
	return out
}

var preRe = regexp.MustCompile(`(?s)<pre id="([^"]*)">(.*?)</pre>`)

// Pre returns the text of the <pre id="id"> element of a dumped DOM, unescaped, and whether there
// is one.
func Pre(dom, id string) (string, bool) {
	for _, m := range preRe.FindAllStringSubmatch(dom, -1) {
		if m[1] == id {
			return html.UnescapeString(m[2]), true
		}
	}
	return "", false
}

// Tail returns the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
