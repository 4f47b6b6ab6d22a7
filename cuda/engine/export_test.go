package engine

// LLSteps is the number of LL steps enqueued so far in this process (tests check that the LL
// path ran).
func LLSteps() int64 { return llSteps.Load() }

// LL128Steps is the number of LL128 steps enqueued so far in this process.
func LL128Steps() int64 { return ll128Steps.Load() }

// FlagArea is the rank's device-flag area (flags.go); 0 outside InitRank.
func (c *Comm) FlagArea() uintptr { return uintptr(c.flags) }

// SetJoinHook sets a function join runs once every rank has enqueued, before it reads the peers'
// events (nil: none). Not for parallel tests.
func SetJoinHook(f func(c *Comm)) { joinHook = f }
