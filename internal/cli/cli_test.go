package cli

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/coll"
)

// The exit statuses of both binaries: 0, 1 on a failure, 2 on bad usage (help is not an error).
func TestExitCode(t *testing.T) {
	require.Equal(t, 0, ExitCode(nil))
	require.Equal(t, 2, ExitCode(Usagef("-b %q", "x")))
	require.Equal(t, 2, ExitCode(fmt.Errorf("wrapped: %w", Usagef("x"))))
	require.Equal(t, 1, ExitCode(errors.New("file not found")))
}

// A toy root: flag errors, unknown commands and unknown help topics are usage errors (2) printed
// once on stderr; help and completion go to stdout.
func TestRoot(t *testing.T) {
	build := func() *cobra.Command {
		root := NewRoot("toy", "a toy", "")
		var n *int
		c := Command("work", "do work", "", nil, func(cmd *cobra.Command, _ []string) error {
			if *n < 0 {
				return errors.New("negative")
			}
			fmt.Fprintln(cmd.OutOrStdout(), "worked", *n)
			return nil
		})
		n = AddNodes(c.Flags())
		root.AddCommand(c)
		return root
	}
	for _, tc := range []struct {
		args       []string
		code       int
		out, errIn string
	}{
		{[]string{"work", "--nodes", "3"}, 0, "worked 3", ""},
		{[]string{"work", "--nnodes", "4"}, 0, "worked 4", ""}, // the alias
		{[]string{"work", "--nodes", "-1"}, 1, "", "toy work: negative"},
		{[]string{"work", "--bogus"}, 2, "", "toy work: usage: unknown flag: --bogus"},
		{[]string{"work", "extra"}, 2, "", `toy work: usage: unexpected argument "extra"`},
		{[]string{"wrok"}, 2, "", `toy: usage: unknown command "wrok" (toy help lists them); did you mean work?`},
		{[]string{"help", "nosuch"}, 2, "", "toy help: usage: help nosuch: no such command"},
		{[]string{"help", "work"}, 0, "Usage:\n  toy work [flags]", ""},
		{[]string{"work", "-h"}, 0, "Usage:\n  toy work [flags]", ""},
		{[]string{}, 0, "Available Commands:", ""},
		{[]string{"completion", "bash"}, 0, "__start_toy", ""},
	} {
		var out, errb bytes.Buffer
		code := Execute(build(), tc.args, &out, &errb)
		require.Equal(t, tc.code, code, "%v: stderr %q", tc.args, errb.String())
		require.Contains(t, out.String(), tc.out, "%v", tc.args)
		if tc.errIn == "" {
			require.Empty(t, errb.String(), "%v", tc.args)
		} else {
			require.Contains(t, errb.String(), tc.errIn, "%v", tc.args)
			require.Equal(t, 1, bytes.Count(errb.Bytes(), []byte("\n")), "%v: one line", tc.args)
		}
	}
}

// Sizes as nccl-tests reads them (K, M, G powers of 1024, fractions) and the forms units takes.
func TestParseSize(t *testing.T) {
	for s, want := range map[string]int64{"8": 8, "64K": 64 << 10, "1.5M": 3 << 19, "1G": 1 << 30, "1GiB": 1 << 30, "2T": 2 << 40, "0.5k": 512} {
		got, err := ParseSize("-b", s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{"lots", "-1", "1e400", "NaN", "1Q"} {
		_, err := ParseSize("-b", s)
		require.ErrorIs(t, err, ErrUsage, s)
	}
}

func TestSweep(t *testing.T) {
	s, err := Sweep(8, 128, 2, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{8, 16, 32, 64, 128}, s)
	s, err = Sweep(1, 10, 1, 4) // nccl-tests' -i
	require.NoError(t, err)
	require.Equal(t, []int64{1, 5, 9}, s)
	s, err = Sweep(8, 8, 1, 0) // -b alone
	require.NoError(t, err)
	require.Equal(t, []int64{8}, s)
	_, err = Sweep(8, 16, 1, 0)
	require.ErrorIs(t, err, ErrUsage)
	_, err = Sweep(1, 1<<30, 1, 1)
	require.ErrorContains(t, err, "more than 100000 sizes")
}

// -c takes a name, nccl-tests' binary names, lists and all, everywhere.
func TestParseColls(t *testing.T) {
	all := []coll.Func{coll.AllReduce, coll.AllGather}
	for s, want := range map[string][]coll.Func{
		"allreduce": {coll.AllReduce}, "all_reduce": {coll.AllReduce}, "all_reduce_perf": {coll.AllReduce},
		"AllGather,sendrecv": {coll.AllGather, coll.SendRecv}, "all": all, "alltoall_perf": {coll.AllToAll},
		// Each once, where first named.
		"all,all": all, "allgather,all,allreduce": {coll.AllGather, coll.AllReduce},
	} {
		got, err := ParseColls(s, all)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	_, err := ParseColls("allreduce,bogus", all)
	require.ErrorIs(t, err, ErrUsage)
	require.ErrorContains(t, err, `--collective: unknown collective "bogus"`)
}

// -d all and -o all (mulsum) only where the command takes them.
func TestTypesAndOps(t *testing.T) {
	d, err := ParseDataTypes("all", true)
	require.NoError(t, err)
	require.Len(t, d, int(coll.NumDataTypes))
	_, err = ParseDataTypes("all", false)
	require.ErrorIs(t, err, ErrUsage)
	o, err := ParseOps("all", true)
	require.NoError(t, err)
	require.Equal(t, AllOps, o)
	_, err = ParseOps("mulsum", false)
	require.ErrorIs(t, err, ErrUsage)
	o, err = ParseOps("max", false)
	require.NoError(t, err)
	require.Equal(t, []coll.RedOp{coll.Max}, o)
}

// SharedViolations finds a flag that takes a shared name with another shorthand or help.
func TestSharedViolations(t *testing.T) {
	root := NewRoot("toy", "", "")
	good := Command("good", "", "", nil, nil)
	AddCollective(good.Flags(), "c", "allreduce")
	AddJSON(good.Flags(), "{…}")
	bad := Command("bad", "", "", nil, nil)
	bad.Flags().StringP("collective", "k", "", "which one")
	root.AddCommand(good, bad)
	v := SharedViolations(root, nil)
	require.Len(t, v, 2, "%q", v)
	require.Contains(t, v[0], "toy bad --collective: shorthand")
	require.Len(t, SharedViolations(root, map[string]bool{"toy bad --collective": true}), 1)
}
