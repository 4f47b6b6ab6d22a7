package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/simccl/simccl/simnet"
	"github.com/stretchr/testify/require"
)

// TestIsTerminalNotDevNull: /dev/null is a character device but not a terminal; nor are a pipe,
// a regular file or a buffer. --progress auto draws no bar into any of them.
func TestIsTerminalNotDevNull(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer null.Close()
	st, err := null.Stat()
	require.NoError(t, err)
	require.NotZero(t, st.Mode()&os.ModeCharDevice, "the test wants /dev/null to be a character device")
	require.False(t, isTerminal(null))

	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	require.False(t, isTerminal(w))

	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer f.Close()
	require.False(t, isTerminal(f))
	require.False(t, isTerminal(&bytes.Buffer{}))
	require.False(t, isTerminal((*os.File)(nil)))

	for _, w := range []any{null, f} {
		show, err := showProgress("auto", w.(*os.File))
		require.NoError(t, err)
		require.False(t, show)
	}
	show, err := showProgress("on", null)
	require.NoError(t, err)
	require.True(t, show)
	_, err = showProgress("yes", null)
	require.ErrorIs(t, err, errUsage)

	var out, errb bytes.Buffer
	require.Equal(t, 2, mainRun([]string{"run", "--progress", "yes"}, &out, &errb))
	require.Contains(t, errb.String(), `--progress "yes": want on, off or auto`)
}

// TestDrawBar: the bar shows done/total, what runs, the elapsed time, the rate and the ETA.
func TestDrawBar(t *testing.T) {
	var b bytes.Buffer
	drawBar(&b, 5, 20, "all_reduce 1MB", 10*time.Second)
	require.Equal(t, "\r[=======                       ] 5/20 all_reduce 1MB                 10.0s   0.50/s  ETA 30s    ", b.String())
	b.Reset()
	drawBar(&b, 0, 20, "all_reduce 8B", 0)
	require.Contains(t, b.String(), " 0/20 ")
	require.Contains(t, b.String(), "?/s  ETA ?")
	b.Reset()
	drawBar(&b, 20, 20, "done", 2*time.Second)
	require.Contains(t, b.String(), "[==============================] 20/20 done")
	require.Contains(t, b.String(), "10.0/s  ETA 0.0s")

	for d, want := range map[time.Duration]string{
		4200 * time.Millisecond: "4.2s", 42 * time.Second: "42s", 187 * time.Second: "3m07s", 7500 * time.Second: "2h05m",
	} {
		require.Equal(t, want, formatETA(d))
	}
	rate, eta := barRate(300, 400, time.Second)
	require.Equal(t, "300/s", rate)
	require.Equal(t, "0.3s", eta)
}

// A long replay's share of its expected simulated time, or of a schedule's steps, as the bar
// shows it.
func TestFormatReplay(t *testing.T) {
	us := int64(simnet.Microsecond)
	for _, c := range []struct {
		p    simnet.Progress
		want string
	}{
		{simnet.Progress{Done: 0, Expect: 5950 * us}, "sim 0% of ~5.95ms"},
		{simnet.Progress{Done: 2975 * us, Expect: 5950 * us}, "sim 50% of ~5.95ms"},
		{simnet.Progress{Done: 600 * us, Expect: 480 * us}, "sim 125% of ~480us"},
		{simnet.Progress{Done: 1, Expect: int64(12 * simnet.Nanosecond)}, "sim 0% of ~12ns"},
		{simnet.Progress{Done: 2_226_000, Expect: 5_300_000, Steps: true}, "steps 42% of 5.3M"},
		{simnet.Progress{Done: 0, Expect: 1_000_000, Steps: true}, "steps 0% of 1.0M"},
		{simnet.Progress{Done: 870_000, Expect: 870_000, Steps: true}, "steps 100% of 870K"},
	} {
		require.Equal(t, c.want, formatReplay(c.p))
	}
}
