package engine

import (
	"fmt"

	"github.com/simccl/simccl/cuda"
)

// Capture records the calls fn makes into one CUDA graph and instantiates it. streams[r] is the
// stream rank r's calls use, on comms[r]'s device. The ranks' launches wait on each other's
// events, so all their streams must be in one capture sequence: Capture begins it on streams[0]
// in mode, forks the other streams from it by an event, runs fn (which makes every rank's calls:
// one goroutine per rank, or GroupStart/GroupEnd around them), joins the other streams back into
// streams[0] and ends the capture — also when fn fails or exits its goroutine. Nothing runs while
// captured. Replay the graph with cuda.Ctx.LaunchGraph on streams[0] from comms[0]'s device; a
// replay ends when every rank's part has. The caller destroys it (cuda.Ctx.DestroyGraphExec).
func Capture(comms []*Comm, streams []cuda.Stream, mode cuda.CaptureMode, fn func() error) (exec cuda.GraphExec, err error) {
	n := len(comms)
	if n == 0 || len(streams) != n {
		return 0, fmt.Errorf("%w: Capture of %d communicators with %d streams", ErrInvalidArgument, n, len(streams))
	}
	d0, s0 := comms[0].dev, streams[0]
	events := make([]cuda.Event, n) // [0]: the fork; [r > 0]: rank r's join
	defer func() {
		for r, c := range comms {
			if events[r] != 0 {
				_ = c.dev.Do(func(x *cuda.Ctx) error { return x.DestroyEvent(events[r]) })
			}
		}
	}()
	for r, c := range comms {
		if err := c.dev.Do(func(x *cuda.Ctx) error {
			var err error
			events[r], err = x.NewEvent(false)
			return err
		}); err != nil {
			return 0, fmt.Errorf("engine: Capture: rank %d: %w", r, err)
		}
	}
	if err := d0.Do(func(x *cuda.Ctx) error {
		if err := x.BeginCapture(s0, mode); err != nil {
			return err
		}
		return x.Record(events[0], s0)
	}); err != nil {
		return 0, fmt.Errorf("engine: Capture: %w", err)
	}
	// End the capture however fn leaves (an error, a panic, runtime.Goexit).
	ended := false
	defer func() {
		if !ended {
			_ = d0.Do(func(x *cuda.Ctx) error {
				if g, err := x.EndCapture(s0); err == nil {
					_ = x.DestroyGraph(g)
				}
				return nil
			})
		}
	}()
	graphErr := func() error {
		for r := 1; r < n; r++ {
			if err := comms[r].dev.Do(func(x *cuda.Ctx) error { return x.StreamWait(streams[r], events[0]) }); err != nil {
				return fmt.Errorf("rank %d joins the capture: %w", r, err)
			}
		}
		if err := fn(); err != nil {
			return err
		}
		for r := 1; r < n; r++ {
			if err := comms[r].dev.Do(func(x *cuda.Ctx) error { return x.Record(events[r], streams[r]) }); err != nil {
				return err
			}
		}
		return d0.Do(func(x *cuda.Ctx) error {
			for r := 1; r < n; r++ {
				if err := x.StreamWait(s0, events[r]); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	err = d0.Do(func(x *cuda.Ctx) error {
		g, err := x.EndCapture(s0) // ends the capture after a failure above too
		ended = true
		if graphErr != nil {
			if err == nil {
				_ = x.DestroyGraph(g)
			}
			return graphErr
		}
		if err != nil {
			return err
		}
		defer x.DestroyGraph(g)
		exec, err = x.Instantiate(g)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("engine: Capture: %w", err)
	}
	return exec, nil
}
