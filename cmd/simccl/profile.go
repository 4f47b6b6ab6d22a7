package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

// profileOnInterrupt writes the CPU profile being recorded to path and exits when the process is
// interrupted (SIGINT, SIGTERM: Ctrl-C, timeout(1)): a run that had to be stopped is the one
// whose profile is wanted, and without this it would be left empty. The exit status is the
// shell's for the signal (130, 143). The returned function stops watching (the command's end).
func profileOnInterrupt(stderr io.Writer, path string) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			pprof.StopCPUProfile()
			fmt.Fprintf(stderr, "simccl: %v: stopped; the CPU profile so far is in %s\n", s, path)
			code := 130
			if s == syscall.SIGTERM {
				code = 143
			}
			os.Exit(code)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}
