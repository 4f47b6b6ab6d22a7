package engine

// LLSteps is the number of LL steps enqueued so far in this process (tests check that the LL
// path ran).
func LLSteps() int64 { return llSteps.Load() }
