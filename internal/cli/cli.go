// Package cli is the command layer that simccl and runccl share: a cobra root with help on
// stdout, `help CMD`, shell completion and usage errors; one exit-status rule (0, 1 on a failure,
// 2 on bad usage); and the flags both binaries take (flags.go), defined, described and parsed here
// only, so that the same word means the same thing in every command of both.
//
// Why cobra (docs/cli.md says more): it is built on pflag, which both commands used already, so
// every flag kept its syntax; it gives each command the same help, `help CMD` at any depth,
// suggestions for mistyped commands, and bash/zsh/fish/PowerShell completion that knows every
// command, flag and (through RegisterCompletions) their values.
//
//	root := cli.NewRoot("simccl", "short", "long")
//	root.AddCommand(&cobra.Command{Use: "run", RunE: …})
//	os.Exit(cli.Execute(root, os.Args[1:], os.Stdout, os.Stderr))
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// ErrUsage marks an error caused by bad flags or arguments: exit status 2.
var ErrUsage = errors.New("usage")

// Usagef is a usage error (exit status 2).
func Usagef(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUsage}, a...)...)
}

// Exit statuses, as every command of simccl and runccl returns them.
const (
	ExitOK      = 0
	ExitFailure = 1 // the work failed (a file, a simulation, wrong elements)
	ExitUsage   = 2 // bad flags or arguments
)

// ExitCode is err's exit status: 0 for nil (and a request for help), 2 for a usage error, 1
// otherwise.
func ExitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
		return ExitOK
	case errors.Is(err, ErrUsage):
		return ExitUsage
	}
	return ExitFailure
}

// NewRoot returns a root command: errors come back from Execute (printed once, there), a flag
// error is a usage error, and help goes to stdout. With no subcommand named, the root prints its
// help; a word that names no subcommand is a usage error with suggestions.
func NewRoot(use, short, long string) *cobra.Command {
	root := &cobra.Command{
		Use:                        use,
		Short:                      short,
		Long:                       long,
		SilenceErrors:              true,
		SilenceUsage:               true,
		DisableAutoGenTag:          true,
		SuggestionsMinimumDistance: 2,
		Args:                       unknownCommand,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return Usagef("%v", err) })
	root.SetGlobalNormalizationFunc(Normalize)
	root.Flags().SortFlags = false
	root.SetHelpCommand(helpCommand())
	return root
}

// helpCommand is `help [COMMAND…]`: the help of the command named, on stdout, as COMMAND --help
// prints it; a name that is no command is a usage error (cobra's own help command printed the
// root's usage and exited 0).
func helpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "help about any command",
		Args:  cobra.ArbitraryArgs,
		ValidArgsFunction: func(c *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() {
					names = append(names, s.Name())
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			root := c.Root()
			cmd, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				return Usagef("help %s: no such command (%s help lists them)", strings.Join(args, " "), root.Name())
			}
			cmd.InitDefaultHelpFlag()
			return cmd.Help()
		},
	}
}

// unknownCommand refuses positional arguments of a root with subcommands: the first names no
// subcommand.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q (%s help lists them)", args[0], cmd.Root().Name())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return fmt.Errorf("%w: %s", ErrUsage, msg)
}

// Command returns a subcommand with the settings every command shares: flags in the order they
// are defined, flag errors as usage errors (inherited from the root), and positional arguments
// refused unless args says otherwise (nil: none).
func Command(use, short, long string, args cobra.PositionalArgs, run func(cmd *cobra.Command, args []string) error) *cobra.Command {
	if args == nil {
		args = NoArgs
	}
	c := &cobra.Command{Use: use, Short: short, Long: long, Args: args, RunE: run}
	c.Flags().SortFlags = false
	return c
}

// NoArgs refuses any positional argument as a usage error naming it.
func NoArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return Usagef("unexpected argument %q", args[0])
	}
	return nil
}

// Execute runs root on args and returns the exit status. Output goes to stdout, help included;
// an error is printed on stderr as one line, prefixed with the command's path ("simccl run: …").
func Execute(root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if err == nil {
		return ExitOK
	}
	if cmd == nil {
		cmd = root
	}
	fmt.Fprintf(stderr, "%s: %s\n", cmd.CommandPath(), oneLine(err.Error()))
	return ExitCode(err)
}

// oneLine joins a multi-line message into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// aliases are former or alternative long names of shared flags, read as the flag they name.
var aliases = map[string]string{
	"coll":   "collective",  // runccl's and plan's name before --collective
	"nnodes": "nodes",       // the name a few commands used before --nodes
	"scale":  "scale-ranks", // runccl replay's name before it took simccl replay's
}

// Normalize reads an alias as the flag it names, where the flag set has that flag. Roots made by
// NewRoot apply it to every command; a flag set parsed without cobra sets it itself.
func Normalize(fs *pflag.FlagSet, name string) pflag.NormalizedName {
	if a, ok := aliases[name]; ok && fs.Lookup(a) != nil {
		name = a
	}
	return pflag.NormalizedName(name)
}

// SharedViolations lists the flags of root's commands (and their subcommands) that share a name
// with a flag of Shared but not its shorthand or help (a command may add words after the shared
// help, Explain). except names "command path --flag" entries allowed another shorthand.
func SharedViolations(root *cobra.Command, except map[string]bool) []string {
	var out []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			sh, ok := Shared[f.Name]
			if !ok {
				return
			}
			where := c.CommandPath() + " --" + f.Name
			if f.Shorthand != sh.Short && !except[where] {
				out = append(out, fmt.Sprintf("%s: shorthand %q, shared %q", where, f.Shorthand, sh.Short))
			}
			if !strings.HasPrefix(f.Usage, sh.Usage) {
				out = append(out, fmt.Sprintf("%s: help %q is not the shared %q", where, f.Usage, sh.Usage))
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	return out
}
