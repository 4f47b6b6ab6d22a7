package coll

import (
	"errors"
	"fmt"
)

// ErrBadSchedule reports a schedule that breaks the contract (see schedule.go).
var ErrBadSchedule = errors.New("coll: bad schedule")

func badStep(p *Program, i int, format string, args ...any) error {
	return fmt.Errorf("%w: rank %d channel %d step %d: %s", ErrBadSchedule, p.Rank, p.Channel, i, fmt.Sprintf(format, args...))
}

// Validate checks that a schedule keeps the contract: programs in place, steps well formed,
// dependencies pointing backwards, buffer ranges inside the operation's buffers, and every message
// sent exactly once and received exactly once with the same size. Executors call it before running
// a schedule they did not compile themselves (one read from JSON, say).
func Validate(s *Schedule) error {
	_, err := NewIndex(s)
	return err
}
