package cuda

import "syscall"

// gettid names the OS thread, which carries the current context (the emulated driver keeps it
// per thread, as CUDA does).
func gettid() int { return syscall.Gettid() }
