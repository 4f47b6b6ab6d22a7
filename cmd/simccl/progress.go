package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/simccl/simccl/internal/cli"
	"github.com/simccl/simccl/simnet"
)

// showProgress reads a --progress value: "on" draws the bar, "off" does not, "auto" draws it when
// stderr is a terminal (isTerminal).
func showProgress(mode string, stderr io.Writer) (bool, error) {
	return cli.ShowProgress(mode, func() bool { return isTerminal(stderr) })
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

// liveBar is a progress bar that also moves within a long call: a goroutine redraws it every
// half second with the events simulated so far (simnet.EventsSimulated), so that a size that
// takes minutes shows its pace. Its methods are safe for concurrent use.
type liveBar struct {
	mu          sync.Mutex
	w           io.Writer
	done, total int
	what        string
	start       time.Time
	ev0         uint64
	stop        chan struct{}
	stopped     sync.WaitGroup
}

// startBar draws a bar for total calls on w and starts redrawing it.
func startBar(w io.Writer, total int) *liveBar {
	b := &liveBar{w: w, total: total, start: time.Now(), ev0: simnet.EventsSimulated(), stop: make(chan struct{})}
	b.stopped.Add(1)
	go func() {
		defer b.stopped.Done()
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-t.C:
				b.mu.Lock()
				b.draw()
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// set records that done calls have ended and what runs now, and redraws.
func (b *liveBar) set(done int, what string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done, b.what = done, what
	b.draw()
}

// above runs write (which writes a line to stdout, on the same terminal) with the bar's line
// cleared, and draws the bar again below it.
func (b *liveBar) above(write func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprint(b.w, "\r\033[K")
	write()
	b.draw()
}

// finish stops the redrawing and draws the bar once more, every call done, with its line ended.
func (b *liveBar) finish() {
	close(b.stop)
	b.stopped.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done, b.what = b.total, "done"
	b.draw()
	fmt.Fprintln(b.w)
}

func (b *liveBar) draw() {
	what := b.what
	if ev := simnet.EventsSimulated() - b.ev0; ev > 0 && b.what != "done" {
		what += " " + formatEvents(ev)
		if p, ok := simnet.ReplayProgress(); ok {
			what += " " + formatReplay(p)
		}
	}
	drawBar(b.w, b.done, b.total, what, time.Since(b.start))
}

// formatReplay writes how far a long replay has gone: one of every rank in simulated time against
// the time its call is expected to take (the symmetric replay's), "sim 31% of ~5.8ms", whose
// share can pass 100% (the expectation is the model's, which such a replay corrects); a large
// schedule replayed whole in its steps, "steps 42% of 5.3M".
func formatReplay(p simnet.Progress) string {
	if p.Steps {
		return fmt.Sprintf("steps %.0f%% of %s", 100*float64(p.Done)/float64(p.Expect), formatCount(uint64(p.Expect)))
	}
	return fmt.Sprintf("sim %.0f%% of ~%s", 100*float64(p.Done)/float64(p.Expect), shortTime(simnet.Time(p.Expect)))
}

// shortTime writes t with two significant decimals at most: 5.8ms, 480us, 12ns.
func shortTime(t simnet.Time) string {
	switch {
	case t >= simnet.Millisecond:
		return fmt.Sprintf("%.3gms", float64(t)/float64(simnet.Millisecond))
	case t >= simnet.Microsecond:
		return fmt.Sprintf("%.3gus", float64(t)/float64(simnet.Microsecond))
	}
	return fmt.Sprintf("%.3gns", float64(t)/float64(simnet.Nanosecond))
}

// formatEvents writes an event count briefly: 655K ev, 12.3M ev, 1.2G ev.
func formatEvents(n uint64) string { return formatCount(n) + " ev" }

// formatCount writes a count briefly: 512, 655K, 12.3M, 1.2G.
func formatCount(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fG", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
