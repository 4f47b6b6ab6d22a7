package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
)

// SIMCCL_CPUPROFILE=PREFIX writes a Go CPU profile of the library's host side to PREFIX.PID from
// the first communicator made in the process until the last one is destroyed or aborted (what
// `go tool pprof` reads, with the library's unstripped build for symbols): where a call's host
// time goes in a program that loads the library.
var profile struct {
	sync.Mutex
	f    *os.File
	done bool
}

// profileStart starts the profile at the first communicator (once per process).
func profileStart() {
	prefix := os.Getenv("SIMCCL_CPUPROFILE")
	if prefix == "" {
		return
	}
	profile.Lock()
	defer profile.Unlock()
	if profile.f != nil || profile.done {
		return
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", prefix, os.Getpid()))
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "simccl libnccl: SIMCCL_CPUPROFILE: %v\n", err)
		profile.done = true
		return
	}
	profile.f = f
}

// profileStop ends the profile once no communicator is left.
func profileStop() {
	profile.Lock()
	defer profile.Unlock()
	if profile.f == nil {
		return
	}
	handles.RLock()
	left := len(handles.m)
	handles.RUnlock()
	if left > 0 {
		return
	}
	pprof.StopCPUProfile()
	profile.f.Close()
	profile.f, profile.done = nil, true
}
