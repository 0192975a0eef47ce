// Package gitcmd runs the git command against a user's checkout so that
// nothing the user or the repository configures plays a part: the
// environment is built from scratch (no system or global configuration,
// HOME a directory without one, no prompts, no optional locks, so nothing
// refreshes the index), and the repository's fsmonitor, hooks, quoting,
// line-ending conversion and signing are overridden on the command line.
// Snapshots (internal/toolchain) and proposals (internal/maintain) both run
// git through it.
package gitcmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// stderrCap is how much of git's stderr an error keeps, in bytes.
const stderrCap = 64 << 10

// Options are the parts of a git run a caller may set. The zero value reads
// nothing from stdin, discards stdout, and sets HOME to /nonexistent.
type Options struct {
	Stdin  io.Reader
	Stdout io.Writer
	// Env adds variables (GIT_AUTHOR_NAME=…, HOME=…); a name given here
	// replaces the default.
	Env []string
}

// Run runs git -C dir args… and returns an error holding git's stderr
// (capped) when it fails.
func Run(ctx context.Context, dir string, o Options, args ...string) error {
	full := append([]string{"-C", dir,
		"-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
		"-c", "safe.directory=*", "-c", "core.quotePath=false",
		"-c", "core.autocrlf=false", "-c", "i18n.commitEncoding=UTF-8",
		"-c", "commit.gpgSign=false"}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	// exec.Cmd keeps the last value of a name given twice: o.Env wins.
	// GIT_CEILING_DIRECTORIES is the user's own: where git stops looking
	// for a repository above a directory (a module in a subdirectory of
	// a checkout is that repository's); it changes nothing else.
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent", "LC_ALL=C", "TZ=UTC",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0",
		"GIT_CEILING_DIRECTORIES=" + os.Getenv("GIT_CEILING_DIRECTORIES")}, o.Env...)
	var stderr limited
	stderr.n = stderrCap
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Stdin, o.Stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(stderr.b.String()))
	}
	return nil
}

// limited keeps the first n bytes written and drops the rest.
type limited struct {
	b bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
