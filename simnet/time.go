package simnet

import (
	"fmt"
	"math"
)

// Time is simulated time in integer picoseconds. It is never accumulated as a float: durations
// computed from bytes and rates are rounded up to the next picosecond once, at the point where
// an event is scheduled.
type Time int64

// Units of simulated time.
const (
	Picosecond  Time = 1
	Nanosecond  Time = 1000
	Microsecond Time = 1000 * Nanosecond
	Millisecond Time = 1000 * Microsecond
	Second      Time = 1000 * Millisecond
)

// Micros returns t in microseconds (the unit of nccl-tests' time column).
func (t Time) Micros() float64 { return float64(t) / float64(Microsecond) }

// Seconds returns t in seconds.
func (t Time) Seconds() float64 { return float64(t) / float64(Second) }

func (t Time) String() string {
	switch {
	case t >= Millisecond || t <= -Millisecond:
		return fmt.Sprintf("%.3fms", float64(t)/float64(Millisecond))
	case t >= Microsecond || t <= -Microsecond:
		return fmt.Sprintf("%.3fus", float64(t)/float64(Microsecond))
	case t >= Nanosecond || t <= -Nanosecond:
		return fmt.Sprintf("%.3fns", float64(t)/float64(Nanosecond))
	}
	return fmt.Sprintf("%dps", int64(t))
}

// FromMicros converts a latency in microseconds (the unit of NCCL's tables) to Time, rounding to
// the nearest picosecond. It is the one place float microseconds enter the simulation.
func FromMicros(us float64) Time { return Time(math.Round(us * float64(Microsecond))) }

// Rate is a bandwidth in bytes per picosecond. 1 GB/s (1e9 B/s, NCCL's unit) is 1e-3 B/ps.
type Rate float64

// GBps converts a bandwidth in GB/s (1e9 bytes per second, the unit of NCCL's tables) to a Rate.
func GBps(gb float64) Rate { return Rate(gb * 1e-3) }

// GBps returns r in GB/s.
func (r Rate) GBps() float64 { return float64(r) * 1e3 }

// transferTime is the time to move bytes at rate r, rounded up to a whole picosecond.
func transferTime(bytes float64, r Rate) Time {
	if bytes <= 0 {
		return 0
	}
	t := math.Ceil(bytes / float64(r))
	if t > math.MaxInt64/4 {
		return math.MaxInt64 / 4
	}
	return Time(t)
}
