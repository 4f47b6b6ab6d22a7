package engine

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/simccl/simccl/cuda"
)

// launchTogether launches a process-wide group (GroupStart/GroupEnd around one goroutine's calls)
// that holds calls for every rank of one clique, all on the calling goroutine: the launch is
// prepared at once (no rendezvous), and one OS thread enqueues every rank's part, making each
// device's context current in turn and interleaving the ranks' programs round robin, each step
// once its peers' steps are enqueued (rule 1 makes some step always ready). There is no hand-off
// to the devices' threads and no rank waits on the host for another — what the per-rank path
// pays at every launch. It reports false, having done nothing, for any other group (a clique's
// ranks in several groups, a rank with no call or a failed communicator, ranks whose launch
// counts differ), which then takes the per-rank path.
func launchTogether(comms []*Comm, calls map[*Comm][]*call) (bool, error) {
	if len(comms) == 0 {
		return false, nil
	}
	cl := comms[0].cl
	if len(comms) != cl.n {
		return false, nil
	}
	byRank := make([]*Comm, cl.n)
	for _, c := range comms {
		if c.cl != cl || byRank[c.rank] != nil || len(calls[c]) == 0 {
			return false, nil
		}
		for _, k := range calls[c][1:] {
			if k.stream != calls[c][0].stream {
				return false, nil // the per-rank path reports it
			}
		}
		byRank[c.rank] = c
	}
	for _, c := range byRank {
		c.mu.Lock()
	}
	unlock := func() {
		for _, c := range byRank {
			c.mu.Unlock()
		}
	}
	gen := byRank[0].gen
	for _, c := range byRank {
		if c.gen != gen || c.err != nil {
			unlock()
			return false, nil
		}
	}
	cl.mu.Lock()
	if _, busy := cl.pending[gen]; busy {
		cl.mu.Unlock()
		unlock()
		return false, nil
	}
	L := &launch{cl: cl, calls: make([][]*call, cl.n), n: cl.n}
	L.cond = sync.NewCond(&L.mu)
	for r, c := range byRank {
		L.calls[r] = calls[c]
	}
	L.err = L.prepare()
	L.ready = true
	cl.mu.Unlock()
	for _, c := range byRank {
		c.gen++
	}
	unlock()
	togetherLaunches.Add(1)
	fail := func(err error) error {
		L.abort(err)
		for _, c := range byRank {
			c.fail(err)
		}
		return err
	}
	if L.err != nil {
		return true, fail(L.err)
	}
	if L.pl == nil {
		return true, nil
	}
	err := cuda.Borrow(func(use func(*cuda.Device) (*cuda.Ctx, error)) error {
		x, err := use(byRank[0].dev)
		if err != nil {
			return err
		}
		// Relaxed capture mode on this thread, as run does on a device thread.
		prev, err := x.ExchangeCaptureMode(cuda.CaptureRelaxed)
		if err != nil {
			return err
		}
		defer x.ExchangeCaptureMode(prev)
		execs := make([]*exec, cl.n)
		for r, c := range byRank {
			x, err := use(c.dev)
			if err != nil {
				return fmt.Errorf("rank %d: %w", r, err)
			}
			if execs[r], err = c.begin(x, L, calls[c][0].stream); err != nil {
				return fmt.Errorf("rank %d: %w", r, err)
			}
		}
		for {
			pending, moved := false, false
			for r, e := range execs {
				m, err := e.pass(func() error { _, err := use(e.c.dev); return err })
				if err != nil {
					return fmt.Errorf("rank %d: %w", r, err)
				}
				moved = moved || m
				pending = pending || e.left > 0
			}
			if !pending {
				break
			}
			if !moved {
				return fmt.Errorf("engine: the launch cannot progress: no rank has a step whose peers' steps are enqueued")
			}
		}
		for _, e := range execs {
			e.done()
		}
		for r, e := range execs {
			if _, err := use(e.c.dev); err != nil {
				return fmt.Errorf("rank %d: %w", r, err)
			}
			if err := e.join(); err != nil {
				return fmt.Errorf("rank %d: %w", r, err)
			}
		}
		return nil
	})
	if err != nil {
		return true, fail(err)
	}
	return true, nil
}

// togetherLaunches counts the launches launchTogether took (for tests).
var togetherLaunches atomic.Int64
