// Package units parses and formats the sizes, bandwidths and times that both command lines
// (simccl and runccl) accept and print, the way nccl-tests spells them: plain bytes or a K/M/G
// suffix (powers of 1024).
package units

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxSize bounds every call size simccl takes (its -b/-e/--count flags, trace counts, measured
// rows): 1 TiB, several times the memory of any GPU, and small enough that a call's bytes times
// the ranks of the largest communicator, or its time in picoseconds on the slowest link a fabric
// may have, stays within int64.
const MaxSize = 1 << 40

// CheckSize refuses a size over MaxSize; what names it in the error ("-e", "count 3 × float").
func CheckSize(what string, n int64) error {
	if n > MaxSize {
		return fmt.Errorf("%s: %d bytes, more than 1 TiB (the largest size simccl simulates)", what, n)
	}
	return nil
}

// ParseSize reads "8", "64K", "1M", "1G", "4GB", "512KiB" (K/M/G/T are powers of 1024, as in nccl-tests).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty size")
	}
	u := strings.ToUpper(t)
	u = strings.TrimSuffix(u, "IB")
	u = strings.TrimSuffix(u, "B")
	mult := int64(1)
	if n := len(u); n > 0 {
		switch u[n-1] {
		case 'K':
			mult, u = 1<<10, u[:n-1]
		case 'M':
			mult, u = 1<<20, u[:n-1]
		case 'G':
			mult, u = 1<<30, u[:n-1]
		case 'T':
			mult, u = 1<<40, u[:n-1]
		}
	}
	v, err := strconv.ParseInt(strings.TrimSpace(u), 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bad size %q (want bytes or a K/M/G suffix, e.g. 8, 64K, 1G)", s)
	}
	if v > (1<<62)/mult {
		return 0, fmt.Errorf("size %q too large", s)
	}
	return v * mult, nil
}

// Sweep returns the sizes min, min*factor, ... <= max (nccl-tests -b/-e/-f). factor must be >= 2
// unless min == max.
func Sweep(min, max int64, factor int64) ([]int64, error) {
	if min <= 0 || max < min {
		return nil, fmt.Errorf("bad size range %d..%d", min, max)
	}
	if min == max {
		return []int64{min}, nil
	}
	if factor < 2 {
		return nil, fmt.Errorf("bad factor %d (want >= 2)", factor)
	}
	var out []int64
	for s := min; s <= max; s *= factor {
		out = append(out, s)
		if s > max/factor {
			break
		}
	}
	return out, nil
}

// FormatSize prints bytes compactly (1024 -> "1K", 1048576 -> "1M"), exact values only.
func FormatSize(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dG", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%dM", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%dK", b>>10)
	}
	return strconv.FormatInt(b, 10)
}
