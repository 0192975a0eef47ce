package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/vulndb"
)

// Exit codes: each means the same for every command (exitCodesHelp).
const (
	exitOK          = 0 // clean, or the command did its job
	exitFailure     = 1 // Stockade itself failed (engine, filesystem, bug)
	exitUnsupported = 2 // the input cannot be used: usage, layout, snapshot
	exitFindings    = 3 // the module fails or cannot be trusted
	// exitAcquisition: what is needed could not be had (the modules, the
	// database), or maintain's explained non-result.
	exitAcquisition = 4
)

// exitCodesHelp is the one table of exit codes, at the end of `stockade
// help` and of every command's manual. exitCode, and the reports' own
// codes (report.Verdict.ExitCode, maintain.Outcome.ExitCode), follow it.
const exitCodesHelp = `Exit codes (the same for every command):
	0  done: inspect clean; scan found no called vulnerability; maintain
	   prepared a proposal (with -each: at least one, none inconclusive);
	   image, reap and vulndb did their job
	1  Stockade itself failed: the engine, the host's filesystem, a lock
	   timeout, a failure inside a maintain attempt, a bug; no report,
	   stderr says what
	2  the input cannot be used: a usage error; a layout inspect refuses
	   (the report says why); a directory that is missing or cannot be
	   read, a git checkout without a commit (-worktree takes its working
	   tree); a -data-dir that is not Stockade's; a file that is not a
	   vulnerability database; vulndb fetch into a DIR that is not empty;
	   maintain: DIR not in a git checkout, tracked files of the module
	   with uncommitted changes, a policy that cannot be applied (-allow major,
	   a -module that is not a direct requirement, of a class -allow
	   leaves out or at a version that is not a listed release, an
	   existing -branch)
	3  the module fails or cannot be trusted: a check fails or is
	   inconclusive (a timeout, truncated output, the -deadline ran out);
	   a go.mod that does not parse (the go command fails on it at home
	   too); a called vulnerability (scan, and inspect -vulndb whose checks
	   pass); a scan that is inconclusive; maintain: the baseline fails or
	   is inconclusive, or an upgraded tree's validation is inconclusive
	4  what is needed could not be had: the modules go.mod requires could
	   not be downloaded (inspect, scan); the database could not be
	   downloaded (vulndb fetch); maintain: an explained non-result (no
	   candidate, admission or normalization refused, regressed, requires
	   a newer toolchain, acquisition failed)
`

// command is one subcommand. Each lives in its own file and registers itself
// in an init function.
type command struct {
	name    string
	summary string
	usage   string // the manual: synopsis, flags are appended, then examples
	// flags adds the command's flags to fs and returns the function that
	// runs it on the remaining arguments. Its error decides the exit code
	// (exitCode): nil is success.
	flags func(fs *flag.FlagSet) func(ctx context.Context, env *cmdEnv, args []string) error
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

// usageError reports a bad invocation: exit 2, like the go command's usage
// errors, with a pointer to the command's manual.
type usageError struct {
	cmd string // the command, such as "inspect"; "" for stockade itself
	msg string
}

func (e *usageError) Error() string { return e.msg }

// usagef returns a *usageError of command cmd.
func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// exitError ends a command with an exit code other than 0 and 1: a report
// whose verdict has its own code, or a refusal. A nil err prints nothing
// (the report said it all).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exitCode is the one place a command's error becomes an exit code: nil is
// exitOK, a usage error or a refused input exitUnsupported, an *exitError
// its code, anything else Stockade's own failure.
func exitCode(err error) int {
	var ue *usageError
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return exitUnsupported
	case errors.Is(err, image.ErrInvalidTag), errors.Is(err, image.ErrNothingToBuild), errors.Is(err, toolchain.ErrNotDataDir),
		errors.Is(err, toolchain.ErrSnapshot), errors.Is(err, vulndb.ErrInvalid), errors.Is(err, vulndb.ErrNotEmpty):
		// What the user asked for cannot be done: the input is wrong,
		// not Stockade.
		return exitUnsupported
	case errors.Is(err, vulndb.ErrFetch):
		return exitAcquisition // the database could not be downloaded
	}
	return exitFailure
}

// printErr prints err for the user: a usage error with a pointer to the
// manual, anything else prefixed with the command's name.
func printErr(w io.Writer, name string, err error) {
	var ue *usageError
	var ee *exitError
	switch {
	case err == nil:
	case errors.As(err, &ue):
		fmt.Fprintln(w, ue.msg)
		if ue.cmd != "" {
			fmt.Fprintf(w, "Run 'stockade help %s' for usage.\n", ue.cmd)
		} else {
			fmt.Fprintln(w, "Run 'stockade help' for usage.")
		}
	case errors.As(err, &ee) && ee.err == nil:
	default:
		fmt.Fprintf(w, "%s: %v\n", name, err)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	name, err := dispatch(ctx, args, &cmdEnv{stdout: stdout, stderr: stderr})
	printErr(stderr, name, err)
	return exitCode(err)
}

// dispatch runs the command args name; it returns the name errors are
// prefixed with and the command's error.
func dispatch(ctx context.Context, args []string, env *cmdEnv) (string, error) {
	if len(args) == 0 {
		printHelp(env.stdout)
		return "stockade", &exitError{code: exitUnsupported}
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		switch len(args) {
		case 1:
			printHelp(env.stdout)
			return "stockade", nil
		case 2:
			c, ok := commands[args[1]]
			if !ok {
				return "stockade help", usagef("", "stockade help: unknown command %q", args[1])
			}
			fs := newFlagSet(c, env.stdout)
			c.flags(fs)
			fs.Usage()
			return "stockade help", nil
		}
		return "stockade help", usagef("", "usage: stockade help [command]")
	}
	c, ok := commands[args[0]]
	if !ok {
		return "stockade", usagef("", "stockade: unknown command %q", args[0])
	}
	name := "stockade " + c.name
	fs := newFlagSet(c, env.stderr)
	runFn := c.flags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return name, nil
		}
		// The flag package printed the problem and the manual.
		return name, &exitError{code: exitUnsupported}
	}
	return name, runFn(ctx, env, fs.Args())
}

func newFlagSet(c *command, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("stockade "+c.name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "%s\n\n%s\nFlags:\n", strings.TrimSpace(c.usage), exitCodesHelp)
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
	fmt.Fprint(w, "\n"+exitCodesHelp+`
Run 'stockade help <command>' for a command's manual.
`)
}

// writeAtomic writes the file name through write: into a new file beside
// it, renamed over name only when write and the close succeed, so a
// failure leaves no partial file and name as it was. The file is 0644.
func writeAtomic(name string, write func(w io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(name), ".stockade-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // a no-op once renamed
	err = f.Chmod(0o644)
	if err == nil {
		err = write(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	return err
}
