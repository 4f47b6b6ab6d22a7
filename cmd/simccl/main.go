// Command simccl simulates NCCL-style collective communication from a machine's topology.
//
// Each subcommand lives in its own file and registers itself in init(); see `simccl help`.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/spf13/pflag"

	"github.com/simccl/simccl/internal/buildinfo"
)

// versionString is set at build time: go build -ldflags "-X main.versionString=v0.9.0". When it is
// empty, version() reads the module version and VCS revision Go records in the binary.
var versionString string

// version is simccl's version (buildinfo.Version), as runccl's: `simccl --version` prints it, and
// the headers of simccl run's table and JSON carry it.
func version() string { return buildinfo.Version(versionString) }

// command is one subcommand of simccl.
type command struct {
	name  string
	short string // one line for `simccl help`
	// run parses args (without the subcommand name) and does the work, writing to stdout/stderr.
	run func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("simccl: duplicate command " + c.name)
	}
	commands[c.name] = c
}

// errUsage marks an error caused by bad flags or arguments (exit status 2).
var errUsage = errors.New("usage")

func usage(w io.Writer) {
	fmt.Fprintln(w, "simccl — simulate NCCL collectives from a topology (NCCL topo.xml or an embedded default)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: simccl <command> [flags]    (simccl <command> --help for the flags of one command; simccl --version)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].short)
	}
}

func main() {
	os.Exit(mainRun(os.Args[1:], os.Stdout, os.Stderr))
}

// mainRun is main without the process exit, so that tests can drive the whole CLI.
func mainRun(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	if args[0] == "--version" || args[0] == "version" {
		fmt.Fprintln(stdout, "simccl", version())
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "simccl: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	err := c.run(args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "simccl %s: %v\n", c.name, err)
		return 2
	default:
		fmt.Fprintf(stderr, "simccl %s: %v\n", c.name, err)
		return 1
	}
}

// newFlags returns a flag set for one subcommand whose errors come back as errUsage.
func newFlags(name string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("simccl "+name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	return fs
}

// parseFlags parses args and wraps flag errors as usage errors.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}
