package coll

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckTree(t *testing.T) {
	for _, c := range []struct {
		name string
		tree ChannelTree
		want string // "" when valid
	}{
		{"chain", ChannelTree{Up: []int{-1, 0, 1}, Down: [][]int{{1}, {2}, nil}}, ""},
		{"binary", ChannelTree{Up: []int{-1, 0, 0}, Down: [][]int{{1, 2}, nil, nil}}, ""},
		{"two roots", ChannelTree{Up: []int{-1, -1}, Down: [][]int{nil, nil}}, "2 roots"},
		{"cycle away from the root", ChannelTree{Up: []int{-1, 2, 1}, Down: [][]int{nil, {2}, {1}}}, "ranks [1 2] form a cycle"},
		{"parent not listing the child", ChannelTree{Up: []int{-1, 0}, Down: [][]int{nil, nil}}, "does not list it"},
		{"own parent", ChannelTree{Up: []int{-1, 1}, Down: [][]int{nil, {1}}}, "bad parent"},
		{"too many children", ChannelTree{Up: []int{-1, 0, 0, 0, 0}, Down: [][]int{{1, 2, 3, 4}, nil, nil, nil, nil}}, "4 children"},
		{"lengths", ChannelTree{Up: []int{-1}, Down: nil}, "down lists"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckTree(c.tree)
			if c.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, c.want)
		})
	}
	// Every tree BuildTrees makes is valid.
	trees, err := BuildTrees([][]int{{0, 1, 2, 3}, {3, 2, 1, 0}}, 5, 4, PatternBalancedTree)
	require.NoError(t, err)
	for _, tr := range trees {
		require.NoError(t, CheckTree(tr))
	}
}
