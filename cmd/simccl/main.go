// Command simccl simulates NCCL-style collective communication from a machine's topology.
//
// Each subcommand lives in its own file and registers itself in init(); newRoot makes them a
// cobra command tree (internal/cli, shared with runccl). See `simccl help`.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/simccl/simccl/internal/buildinfo"
	"github.com/simccl/simccl/internal/cli"
)

// versionString is set at build time: go build -ldflags "-X main.versionString=v0.9.0". When it is
// empty, version() reads the module version and VCS revision Go records in the binary.
var versionString string

// version is simccl's version (buildinfo.Version), as runccl's: `simccl --version` prints it, and
// the headers of simccl run's table and JSON carry it.
func version() string { return buildinfo.Version(versionString) }

// command is one subcommand of simccl, made into a cobra command by newRoot.
type command struct {
	name  string
	short string // one line for `simccl help`
	long  string // what `simccl help CMD` says above the flags ("" : short)
	// args checks the positional arguments (nil: none are taken).
	args cobra.PositionalArgs
	// define defines the command's flags on fs and returns the function that does the work once
	// cobra has parsed them (fs.Args() holds the positional arguments).
	define func(fs *pflag.FlagSet) runFunc
	subs   []*command // subcommands (topo dump)
	hidden bool
}

// runFunc does a command's work, writing to stdout and stderr.
type runFunc func(stdout, stderr io.Writer) error

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("simccl: duplicate command " + c.name)
	}
	commands[c.name] = c
}

// errUsage marks an error caused by bad flags or arguments (exit status 2): cli.ErrUsage, which
// runccl's usage errors carry too.
var errUsage = cli.ErrUsage

const rootLong = `simccl — simulate NCCL collectives from a topology (NCCL topo.xml or an embedded default)

simccl CMD --help (or simccl help CMD) gives the flags of one command; simccl --version the
version; simccl completion bash|zsh|fish a shell's completion script. Exit status: 0, 1 on a
failure, 2 on bad usage.`

// newRoot builds simccl's command tree, afresh for each run (the flags' values live in it).
func newRoot() *cobra.Command {
	root := cli.NewRoot("simccl", "simulate NCCL collectives from a topology", rootLong)
	showVersion := root.Flags().Bool("version", false, "print simccl's version and exit")
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		if *showVersion {
			fmt.Fprintln(cmd.OutOrStdout(), "simccl", version())
			return nil
		}
		return cmd.Help()
	}
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		root.AddCommand(commands[n].cobra())
	}
	root.AddCommand(cli.Command("version", "print simccl's version", "", nil, func(cmd *cobra.Command, _ []string) error {
		fmt.Fprintln(cmd.OutOrStdout(), "simccl", version())
		return nil
	}))
	return root
}

// cobra makes c a cobra command.
func (c *command) cobra() *cobra.Command {
	long := c.long
	if long == "" {
		long = c.short
	}
	cmd := cli.Command(c.name, c.short, long, c.args, nil)
	cmd.Hidden = c.hidden
	if c.define != nil {
		run := c.define(cmd.Flags())
		cmd.RunE = func(cmd *cobra.Command, _ []string) error {
			return run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		}
	}
	for _, s := range c.subs {
		cmd.AddCommand(s.cobra())
	}
	cli.RegisterCompletions(cmd)
	return cmd
}

func main() {
	deferGC()
	os.Exit(mainRun(os.Args[1:], os.Stdout, os.Stderr))
}

// mainRun is main without the process exit, so that tests can drive the whole CLI: the exit
// status is 0, 1 on a failure, 2 on bad usage (cli.ExitCode).
func mainRun(args []string, stdout, stderr io.Writer) int {
	return cli.Execute(newRoot(), args, stdout, stderr)
}

// checkWritable fails at once when path, given by flag, cannot be written: its folder is missing
// or not a folder, or a file cannot be created there (tried with a temporary file, removed), or
// path is a folder. Commands run it before their long work, so that a bad output path costs
// nothing.
func checkWritable(flag, path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%w: %s %s: a folder", errUsage, flag, path)
	} else if err == nil {
		f, err := os.OpenFile(path, os.O_WRONLY, 0) // no truncation: the page replaces it at the end
		if err != nil {
			return fmt.Errorf("%s %s: %w", flag, path, err)
		}
		return f.Close()
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil {
		return fmt.Errorf("%s %s: %w", flag, path, err)
	} else if !fi.IsDir() {
		return fmt.Errorf("%s %s: %s is not a folder", flag, path, dir)
	}
	f, err := os.CreateTemp(dir, ".simccl-*")
	if err != nil {
		return fmt.Errorf("%s %s: cannot write in %s: %w", flag, path, dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
