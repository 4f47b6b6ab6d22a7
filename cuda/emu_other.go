//go:build !linux

package cuda

// gettid: without thread ids the emulated driver has one current context for the process
// (enough for one device).
func gettid() int { return 0 }
