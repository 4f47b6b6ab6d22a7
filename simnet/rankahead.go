package simnet

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
)

// errCancelled stops a replay whose result is no longer wanted (rankAhead.cancel).
var errCancelled = errors.New("simnet: replay cancelled")

// rankAhead is a tree all-reduce's replay of every rank started on a goroutine of its own while
// the ECMP mean model's replay of a quotient with little symmetry runs within treeWork
// (SimulateTreeDetail): where that replay is stopped at treeWork, the replay of every rank is the
// row, and it has had the second core since the start; where it ends within treeWork, the replay
// of every rank is cancelled unread. It runs with what it would have run with after the mean
// model's replay: farWork, and the probe first where its chunks allow (the stopped replay's visits,
// at least treeWork, put replay's guess past treeWork), so the row is the same whatever
// GOMAXPROCS is. With one core it does not start early: wait runs it then.
type rankAhead struct {
	run  func(fresh func() (*Engine, *treeQuotient)) (*treeRun, error)
	copy func() *Engine
	// start is every copy's clock at its start (the engine the copies are taken from: read-only
	// while the goroutine runs).
	start Time

	done    chan struct{}
	out     *treeRun
	err     error
	stopped atomic.Bool

	mu      sync.Mutex // guards what follows: the bar's engine and expectation
	cur     *Engine
	expect  Time
	untrack func()
}

// newRankAhead returns the replay run(fresh) of copies of e (copy), started on a goroutine where
// more than one goroutine can run at once.
func newRankAhead(e *Engine, run func(fresh func() (*Engine, *treeQuotient)) (*treeRun, error), copy func() *Engine) *rankAhead {
	a := &rankAhead{run: run, copy: copy, start: e.Now(), untrack: func() {}}
	if runtime.GOMAXPROCS(0) > 1 {
		a.done = make(chan struct{})
		go func() {
			defer close(a.done)
			a.out, a.err = a.run(a.fresh)
		}()
	}
	return a
}

// fresh is a copy for the replay (its probe, then the longer replay where that runs), asking
// stopped every block of events, followed by the progress bar once an expectation is known.
func (a *rankAhead) fresh() (*Engine, *treeQuotient) {
	c := a.copy()
	c.abort = func() error {
		if a.stopped.Load() {
			return errCancelled
		}
		return nil
	}
	a.mu.Lock()
	a.untrack()
	a.cur = c
	a.untrack = c.trackProgressFrom(a.start, a.expect)
	a.mu.Unlock()
	return c, nil
}

// wait returns the replay's result, the progress bar following it against expect from now on
// (0: none), and ends the bar.
func (a *rankAhead) wait(expect Time) (*treeRun, error) {
	a.mu.Lock()
	a.expect = expect
	if a.cur != nil {
		a.untrack()
		a.untrack = a.cur.trackProgressFrom(a.start, expect)
	}
	a.mu.Unlock()
	if a.done == nil {
		a.out, a.err = a.run(a.fresh)
	} else {
		<-a.done
	}
	a.endBar()
	return a.out, a.err
}

// cancel stops the replay and waits for its goroutine to end (the engine the copies come from
// is then the caller's alone again).
func (a *rankAhead) cancel() {
	if a.done == nil {
		return
	}
	a.stopped.Store(true)
	<-a.done
	a.endBar()
}

// endBar gives up the progress bar once the replay has ended.
func (a *rankAhead) endBar() {
	a.mu.Lock()
	a.untrack()
	a.untrack = func() {}
	a.mu.Unlock()
}
