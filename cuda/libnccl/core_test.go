package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/simccl/simccl/cuda/engine"
)

// TestFailResults: the engine's errors map to the ncclResult_t NCCL gives for the same situation
// (a capture the engine does not implement is ncclInvalidUsage, as NCCL's refusals of a usage).
func TestFailResults(t *testing.T) {
	for _, c := range []struct {
		err  error
		want result
	}{
		{nil, ncclSuccess},
		{fmt.Errorf("rank 1: %w: capture", engine.ErrNotSupported), ncclInvalidUsage},
		{fmt.Errorf("%w: rank 0 exited", engine.ErrPeerGone), ncclRemoteError},
		{fmt.Errorf("%w: count", engine.ErrInvalidArgument), ncclInvalidArgument},
		{fmt.Errorf("%w: counts differ", engine.ErrMismatch), ncclInvalidUsage},
		{fmt.Errorf("%w: waited", engine.ErrTimeout), ncclSystemError},
		{errors.New("something else"), ncclInternalError},
	} {
		if got := fail(c.err); got != c.want {
			t.Errorf("fail(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
