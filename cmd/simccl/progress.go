package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// showProgress reads a --progress value: "on" draws the bar, "off" does not, "auto" draws it when
// stderr is a terminal (isTerminal).
func showProgress(mode string, stderr io.Writer) (bool, error) {
	switch mode {
	case "on":
		return true, nil
	case "off":
		return false, nil
	case "auto":
		return isTerminal(stderr), nil
	}
	return false, fmt.Errorf("%w: --progress %q: want on, off or auto", errUsage, mode)
}

// isTerminal reports whether w is a terminal: a file the terminal ioctl answers (isTTY; TCGETS on
// Linux). A character device is not enough: /dev/null is one, and a bar redrawn into it, or into
// a log through it, is of no use.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return false
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	return isTTY(f)
}

// drawBar redraws a one-line progress bar: done of total calls, what is being simulated, the
// elapsed time, the rate (calls/s) and the time left at that rate (ETA; "?" before the first call
// ends).
func drawBar(w io.Writer, done, total int, what string, elapsed time.Duration) {
	const width = 30
	fill := 0
	if total > 0 {
		fill = min(done, total) * width / total
	}
	bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
	rate, eta := barRate(done, total, elapsed)
	fmt.Fprintf(w, "\r[%s] %d/%d %-28s %6.1fs %8s  ETA %-7s", bar, done, total, what, elapsed.Seconds(), rate, eta)
}

// barRate is the rate of a bar ("12.3/s", calls per second since the start) and its ETA ("1m05s",
// the calls left at that rate), "?" for both before a call has ended.
func barRate(done, total int, elapsed time.Duration) (rate, eta string) {
	if done <= 0 || elapsed <= 0 {
		return "?/s", "?"
	}
	r := float64(done) / elapsed.Seconds()
	switch {
	case r >= 100:
		rate = fmt.Sprintf("%.0f/s", r)
	case r >= 10:
		rate = fmt.Sprintf("%.1f/s", r)
	default:
		rate = fmt.Sprintf("%.2f/s", r)
	}
	left := time.Duration(float64(max(total-done, 0)) / r * float64(time.Second))
	return rate, formatETA(left)
}

// formatETA writes d as 4.2s below 10 s, 42s below a minute, 3m07s below an hour, 2h05m above.
func formatETA(d time.Duration) string {
	switch s := d.Seconds(); {
	case s < 10:
		return fmt.Sprintf("%.1fs", s)
	case s < 60:
		return fmt.Sprintf("%.0fs", s)
	case s < 3600:
		m := int(s+0.5) / 60
		return fmt.Sprintf("%dm%02ds", m, int(s+0.5)-60*m)
	default:
		m := int(s/60 + 0.5)
		return fmt.Sprintf("%dh%02dm", m/60, m%60)
	}
}
