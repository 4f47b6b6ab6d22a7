// Command simccl simulates NCCL-style collective communication from a machine's topology.
//
// Each subcommand lives in its own file and registers itself in init(); see `simccl help`.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	if len(args) >= 2 && args[0] == "help" {
		// simccl help CMD [SUB]: that command's help, as CMD --help gives it.
		if _, ok := commands[args[1]]; ok {
			return mainRun(append(append([]string(nil), args[1:]...), "--help"), stdout, stderr)
		}
	}
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
	if asksHelp(args[1:]) {
		// Help is what was asked for: it goes to stdout (so that `simccl run --help | less` shows
		// it), like the top-level help; errors stay on stderr.
		if err := c.run(args[1:], stdout, stdout); err != nil && !errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stderr, "simccl %s: %v\n", c.name, err)
			return 2
		}
		return 0
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

// asksHelp reports whether args ask for help (-h or --help before any "--").
func asksHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "--help":
			return true
		}
	}
	return false
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
