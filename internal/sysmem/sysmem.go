// Package sysmem reads how much memory this process may still use: the host's available memory
// and the limit of the process's memory cgroup, whichever is lower. Commands check a run's buffers
// against it before allocating them, so that too large a request is one line of error and not an
// out-of-memory kill or a runtime crash.
package sysmem

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Available returns the bytes of memory this process may still allocate, and false where it cannot
// tell (not Linux, no /proc).
func Available() (int64, bool) {
	avail, ok := memAvailable("/proc/meminfo")
	if lim, used, ok2 := cgroupLimit(); ok2 {
		free := max(lim-used, 0)
		if !ok || free < avail {
			avail, ok = free, true
		}
	}
	return avail, ok
}

// memAvailable reads MemAvailable (the kernel's estimate of memory available without swapping).
func memAvailable(path string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, false
			}
			return kb << 10, true
		}
	}
	return 0, false
}

// cgroupLimit returns the memory limit and usage of this process's cgroup (v2, else v1), false when
// there is no limit.
func cgroupLimit() (limit, used int64, ok bool) {
	num := func(path string) (int64, bool) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
		return v, err == nil
	}
	// The cgroup's directory where it is visible (the host's view), else the mount's root (a
	// container's view).
	v2, v1 := "/sys/fs/cgroup", "/sys/fs/cgroup/memory"
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(line, "0::"); ok && p != "/" {
				if _, err := os.Stat(v2 + p + "/memory.max"); err == nil {
					v2 += p
				}
			}
			if _, p, ok := strings.Cut(line, ":memory:"); ok && p != "/" {
				if _, err := os.Stat(v1 + p + "/memory.limit_in_bytes"); err == nil {
					v1 += p
				}
			}
		}
	}
	if lim, ok := num(v2 + "/memory.max"); ok { // "max" (no limit) does not parse
		used, _ := num(v2 + "/memory.current")
		return lim, used, true
	}
	if lim, ok := num(v1 + "/memory.limit_in_bytes"); ok && lim < 1<<60 { // v1 says "no limit" with a huge number
		used, _ := num(v1 + "/memory.usage_in_bytes")
		return lim, used, true
	}
	return 0, 0, false
}
