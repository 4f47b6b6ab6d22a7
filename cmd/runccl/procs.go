package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/simccl/simccl/comm"
)

// The processes of --procs (runccl and runccl replay) belong to the runccl that started them:
//
//   - a child dies with its parent, even when the parent is killed with SIGKILL (the kernel's parent
//     death signal, Pdeathsig): no rank outlives the run;
//   - SIGINT, SIGTERM and SIGHUP sent to the parent are passed on to the children;
//   - when one child fails (an error, a signal), the others are sent SIGTERM and, those still there
//     after killGrace, SIGKILL: a stopped or hung child cannot hold the run, which ends with the
//     first child's error;
//   - abort (the parent's bootstrap root failing, for example) stops them the same way.
//
// A child that stops without failing (SIGSTOP) makes the other ranks fail after --timeout without
// progress, and then the rule above ends it.

// killGrace is how long children have to exit after SIGTERM before SIGKILL.
const killGrace = 3 * time.Second

// ownChild makes cmd die with this process.
func ownChild(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// forwarded are the signals passed on to the children (and that make a rank process abort).
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// runOwned starts cmds, owns them as described above and waits until every one has exited. name(i)
// names child i in errors. It returns the first child's failure (or the abort's error, or the
// signal that interrupted the run), nil when all succeed.
func runOwned(cmds []*exec.Cmd, name func(int) string, abort <-chan error) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	type exit struct {
		i   int
		err error
	}
	exited := make(chan exit, len(cmds))
	var mu sync.Mutex
	running := map[int]*exec.Cmd{}
	signalAll := func(s os.Signal) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range running {
			c.Process.Signal(s) // os.Process signals by pidfd: never another process that reused the pid
		}
	}
	defer signalAll(syscall.SIGKILL) // whatever happens here, no child is left behind
	var cause error
	var grace <-chan time.Time
	stop := func(err error, s os.Signal) {
		if cause == nil {
			cause = err
		}
		signalAll(s)
		if grace == nil {
			grace = time.After(killGrace)
		}
	}
	for i, c := range cmds {
		ownChild(c)
		if err := c.Start(); err != nil {
			stop(fmt.Errorf("%s: %w", name(i), err), syscall.SIGKILL)
			break
		}
		mu.Lock()
		running[i] = c
		mu.Unlock()
		go func() { exited <- exit{i, c.Wait()} }()
	}
	for {
		mu.Lock()
		left := len(running)
		mu.Unlock()
		if left == 0 {
			return cause
		}
		select {
		case e := <-exited:
			mu.Lock()
			delete(running, e.i)
			mu.Unlock()
			if e.err != nil {
				stop(fmt.Errorf("%s (process %d): %w", name(e.i), cmds[e.i].Process.Pid, e.err), syscall.SIGTERM)
			}
		case s := <-sigs:
			stop(fmt.Errorf("interrupted by %v", s), s)
		case err := <-abort:
			abort = nil
			stop(err, syscall.SIGTERM)
		case <-grace:
			signalAll(syscall.SIGKILL)
		}
	}
}

// abortOnSignal makes SIGINT, SIGTERM and SIGHUP abort the communicators of a rank process (the
// peers see their connections go at once, shared-memory files are removed) instead of killing it
// outright; a second signal exits at once. The returned function stops the watch and reports the
// signal that came, if any.
func abortOnSignal(cs []*comm.Comm) (stop func() error) {
	w := watchSignals(cs)
	return w.stop
}

// signalWatch is abortOnSignal's watch: interrupted reports, without stopping it, the signal that
// came so far (nil if none), so that a run's output can name it as the cause of the error the
// abort made.
type signalWatch struct {
	stop        func() error
	interrupted func() error
}

func watchSignals(cs []*comm.Comm) signalWatch {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, forwarded...)
	done := make(chan struct{})
	var got os.Signal
	var mu sync.Mutex
	go func() {
		select {
		case s := <-sigs:
			mu.Lock()
			got = s
			mu.Unlock()
			for _, c := range cs {
				c.Abort()
			}
			select {
			case s := <-sigs:
				os.Exit(128 + int(s.(syscall.Signal)))
			case <-done:
			}
		case <-done:
		}
	}()
	interrupted := func() error {
		mu.Lock()
		defer mu.Unlock()
		if got != nil {
			return fmt.Errorf("interrupted by %v", got)
		}
		return nil
	}
	return signalWatch{
		stop: func() error {
			signal.Stop(sigs)
			close(done)
			return interrupted()
		},
		interrupted: interrupted,
	}
}
