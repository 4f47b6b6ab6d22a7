package group

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNesting(t *testing.T) {
	var g Group[string, int]
	require.False(t, g.Hold("a", 1), "no group open: the caller launches")
	_, _, ok := g.End()
	require.False(t, ok, "End without Start")

	g.Start()
	g.Start()
	require.True(t, g.Hold("b", 1))
	require.True(t, g.Hold("a", 2))
	require.True(t, g.Hold("b", 3))
	keys, calls, ok := g.End()
	require.True(t, ok)
	require.Empty(t, keys, "an inner End hands nothing over")
	require.Nil(t, calls)
	keys, calls, ok = g.End()
	require.True(t, ok)
	require.Equal(t, []string{"b", "a"}, keys, "communicators in first-call order")
	require.Equal(t, map[string][]int{"b": {1, 3}, "a": {2}}, calls)

	require.False(t, g.Hold("a", 4), "closed again")
	g.Start()
	keys, calls, ok = g.End()
	require.True(t, ok)
	require.Empty(t, keys, "an empty group")
	require.Empty(t, calls)
}

func TestConcurrentHold(t *testing.T) {
	var g Group[int, int]
	g.Start()
	var wg sync.WaitGroup
	for k := 0; k < 8; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				require.True(t, g.Hold(k, i))
			}
		}()
	}
	wg.Wait()
	keys, calls, ok := g.End()
	require.True(t, ok)
	require.Len(t, keys, 8)
	for _, k := range keys {
		require.Len(t, calls[k], 100)
		for i, c := range calls[k] {
			require.Equal(t, i, c, "a communicator's calls keep their order")
		}
	}
}

func TestRecycle(t *testing.T) {
	var g Group[string, int]
	g.Start()
	require.True(t, g.Hold("a", 1))
	require.True(t, g.Hold("b", 2))
	keys, calls, ok := g.End()
	require.True(t, ok)
	require.Equal(t, []string{"a", "b"}, keys)
	g.Recycle(keys, calls)
	g.Start()
	require.True(t, g.Hold("b", 3))
	require.True(t, g.Hold("b", 4))
	keys, calls, ok = g.End()
	require.True(t, ok)
	require.Equal(t, []string{"b"}, keys, "a, not called this time, is not handed over")
	require.Equal(t, map[string][]int{"b": {3, 4}}, calls)
	g.Recycle(keys, calls)
	g.Start()
	keys, calls, ok = g.End()
	require.True(t, ok)
	require.Empty(t, keys, "an empty group after recycling")
	require.Empty(t, calls)
	g.Start()
	require.True(t, g.Hold("a", 5))
	keys, calls, ok = g.End()
	require.True(t, ok)
	require.Equal(t, []string{"a"}, keys)
	require.Equal(t, map[string][]int{"a": {5}}, calls, "b, kept from the recycled storage, is dropped")
	g.Recycle(keys, calls)
	g.Recycle([]string{"x"}, map[string][]int{"x": {1}, "y": nil}) // keys and map disagree: not kept
	g.Start()
	require.True(t, g.Hold("c", 6))
	keys, calls, ok = g.End()
	require.True(t, ok)
	require.Equal(t, []string{"c"}, keys)
	require.Equal(t, map[string][]int{"c": {6}}, calls)
	g.Recycle(keys, calls)
	n := testing.AllocsPerRun(100, func() {
		g.Start()
		g.Hold("a", 1)
		k, c, _ := g.End()
		g.Recycle(k, c)
	})
	require.Zero(t, n, "a recycled group of one call allocates nothing")
}
