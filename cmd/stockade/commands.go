package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Exit codes, documented in the manual.
const (
	exitOK          = 0 // the check passed (or the command did its job)
	exitFailure     = 1 // Stockade itself failed (engine, filesystem, bug)
	exitUnsupported = 2 // usage error, or a repository layout we refuse
	exitFindings    = 3 // the baseline fails or is inconclusive
)

// command is one subcommand. Each lives in its own file and registers itself
// in an init function.
type command struct {
	name    string
	summary string
	usage   string // the manual: synopsis, flags are appended, then examples
	// run parses args with fs (already holding the command's flags) and runs.
	flags func(fs *flag.FlagSet) func(ctx context.Context, env *cmdEnv, args []string) int
}

// cmdEnv is what a command may touch: no os.Stdout, os.Args or os.Exit.
type cmdEnv struct {
	stdout, stderr io.Writer
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("duplicate command " + c.name)
	}
	commands[c.name] = c
}

// usageError reports a bad invocation; it exits with exitUnsupported like the
// go command's usage errors.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	env := &cmdEnv{stdout: stdout, stderr: stderr}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				fs := newFlagSet(c, stdout)
				c.flags(fs)
				fs.Usage()
				return exitOK
			}
		}
		printHelp(stdout)
		if len(args) == 0 {
			return exitUnsupported
		}
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "stockade: unknown command %q\nRun 'stockade help' for usage.\n", args[0])
		return exitUnsupported
	}
	fs := newFlagSet(c, stderr)
	runFn := c.flags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUnsupported
	}
	return runFn(ctx, env, fs.Args())
}

func newFlagSet(c *command, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("stockade "+c.name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "%s\n\nFlags:\n", strings.TrimSpace(c.usage))
		fs.PrintDefaults()
	}
	return fs
}

func printHelp(w io.Writer) {
	fmt.Fprint(w, `Stockade runs the Go toolchain against untrusted repositories in hardened containers.

Usage:

	stockade <command> [flags] [arguments]

Commands:

`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "\t%-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprint(w, `
Exit codes: 0 clean, 1 Stockade's own failure, 2 usage error or unsupported
layout, 3 baseline failing or inconclusive.

Run 'stockade help <command>' for a command's manual.
`)
}
