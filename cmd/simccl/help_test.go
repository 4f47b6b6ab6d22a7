package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A command's help is what was asked for: it goes to stdout, for `CMD --help`, `CMD -h` and
// `simccl help CMD` alike, with exit status 0; `simccl help` alone lists the commands.
func TestHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--help"}, {"run", "-h"}, {"help", "run"}, {"tune", "--help"}, {"help", "tune"},
		{"report", "--help"}, {"mem", "--help"}, {"plan", "--help"}, {"search", "--help"},
		{"replay", "--help"}, {"topo", "--help"}, {"help", "topo", "dump"},
	} {
		var out, errb bytes.Buffer
		rc := mainRun(args, &out, &errb)
		require.Equal(t, 0, rc, "%v: stderr %q", args, errb.String())
		require.Empty(t, errb.String(), "%v wrote to stderr", args)
		require.Contains(t, out.String(), "Usage", "%v", args)
		path := strings.Join(args[:len(args)-1], " ")
		if args[0] == "help" {
			path = strings.Join(args[1:], " ")
		}
		require.Contains(t, out.String(), "Usage:\n  simccl "+path+" [flags]", "%v: not its own help", args)
		require.NotContains(t, out.String(), "completion", "%v printed the top-level help", args)
	}
	var out, errb bytes.Buffer
	require.Equal(t, 0, mainRun([]string{"help"}, &out, &errb))
	require.Contains(t, out.String(), "Commands:")
	require.Contains(t, out.String(), "completion")
}

// simccl run checks its output paths before simulating: a --plot, --trace or --ops in a missing
// folder fails at once (exit 1, one line naming the flag), not after the sweep (which, at 2,048
// nodes from 1 to 8 GiB, would take minutes: the bound below only tells the two apart).
func TestRunChecksOutputsFirst(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no", "such")
	for _, flag := range []string{"--plot", "--trace", "--ops"} {
		var out, errb bytes.Buffer
		start := time.Now()
		rc := mainRun([]string{"run", "--nodes", "2048", "-b", "1G", "-e", "8G", "--progress", "off", flag, filepath.Join(missing, "f.svg")}, &out, &errb)
		require.Equal(t, 1, rc, "%s: stderr %q", flag, errb.String())
		require.Contains(t, errb.String(), flag)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(errb.String()), "\n")+1, "one line: %q", errb.String())
		require.Empty(t, out.String(), "%s: the table was printed before the check", flag)
		require.Less(t, time.Since(start), time.Minute, "%s: checked late", flag)
	}
}

// The bar redraws itself while a call runs (not only when a call ends), and says how many events
// have been simulated.
func TestLiveBarMoves(t *testing.T) {
	var buf safeBuffer
	b := startBar(&buf, 3)
	b.set(1, "all_reduce 1G")
	time.Sleep(1200 * time.Millisecond) // the ticker redraws every 500 ms
	b.finish()
	out := buf.String()
	require.GreaterOrEqual(t, strings.Count(out, "\r["), 3, "set, at least one tick, finish: %q", out)
	require.Contains(t, out, "1/3 all_reduce 1G")
	require.True(t, strings.HasSuffix(out, "\n"), "finish ends the line")
	for _, c := range []struct {
		n    uint64
		want string
	}{{512, "512 ev"}, {65536, "66K ev"}, {12_300_000, "12.3M ev"}, {1_200_000_000, "1.2G ev"}} {
		require.Equal(t, c.want, formatEvents(c.n))
	}
}

// safeBuffer is a bytes.Buffer for a writer and a reader on different goroutines.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
