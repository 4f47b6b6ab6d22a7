package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An interrupted run still leaves its CPU profile: the test runs simccl (this test binary,
// re-executed) with its topology read from a pipe the test never writes to, so that it is still
// running, profile started, when the test interrupts it; it finds a gzipped profile and the
// shell's exit status for SIGINT.
func TestProfileOnInterrupt(t *testing.T) {
	if path := os.Getenv("SIMCCL_TEST_PROFILE_CHILD"); path != "" {
		os.Exit(mainRun([]string{"run", "--topo", "/dev/stdin", "--progress", "off", "--cpuprofile", path},
			io.Discard, os.Stderr))
	}
	path := filepath.Join(t.TempDir(), "cpu.prof")
	cmd := exec.Command(os.Args[0], "-test.run=^TestProfileOnInterrupt$")
	cmd.Env = append(os.Environ(), "SIMCCL_TEST_PROFILE_CHILD="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe() // never written: the run waits for its topology
	require.NoError(t, err)
	defer stdin.Close()
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "no profile file after 30 s")
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // the profile and the handler start just after the file
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err = cmd.Wait()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "want an exit status, got %v (%s)", err, stderr.String())
	require.Equal(t, 130, exit.ExitCode(), stderr.String())
	require.Contains(t, stderr.String(), "the CPU profile so far is in "+path)
	prof, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(prof), 2)
	require.Equal(t, []byte{0x1f, 0x8b}, prof[:2], "a pprof profile is gzipped")
}
