// Package backend is the kit the session backends (sandbox/docker,
// sandbox/kubernetes) are built from: what a sandbox does the same way on
// every backend, over the few moves each makes its own way (Ops). A
// backend's sandbox embeds a Box and so implements sandbox.Sandbox's Exec
// and file methods with it; the backend adds ID, Destroy and the moves.
//
// What the kit does in the sandbox it does through Ops.Run, the backend's
// one way in (the one exec engine, container.Exec, with the session
// policy), as the sandbox user: the kit adds no privilege and no path of
// its own.
//
// A new sandbox operation that both backends do the same way is a method
// of Box over Script (or Run); where a backend has a faster way (the
// Docker backend's agent), it is an optional field of Ops, tried first, as
// Read is.
package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/sandbox"
)

// Box is one sandbox as the kit sees it. Its fields are set when the
// backend makes its sandbox value and not changed after.
type Box struct {
	Backend string    // the backend's name, the prefix of its errors: "docker"
	Name    string    // the container's or pod's name, in errors
	Session domain.ID // the sandbox's session
	User    string    // the sandbox user, "uid:gid": the kit's scripts run as it
	Roots   []string  // sandbox.WritablePaths of the sandbox's workdir
	// Log is the provider's logger with the container or pod named; nil
	// discards.
	Log *slog.Logger
	Ops
}

// Ops are the moves a backend makes its own way for one sandbox. Run,
// Gone, OOMKilled and Put are required; the others may be nil.
type Ops struct {
	// Run runs s in the sandbox to its end through the one exec engine
	// with the session policy (the command's process tree killed at the
	// timeout, the backend's restart as backstop). A sandbox that is gone
	// is sandbox.ErrNotFound, a command that could not be started
	// sandbox.ErrCommandNotStarted; errors carry the backend's prefix.
	Run func(ctx context.Context, s container.ExecSpec) (container.Result, error)
	// Command is Run for a caller's command (Exec): what the backend does
	// first (heal a gate) and the user and directory it runs in. Nil: Run.
	Command func(ctx context.Context, s container.ExecSpec) (container.Result, error)
	// Gone reports whether the sandbox no longer exists or no longer runs,
	// on a budget of its own (it is asked after ctx may have ended).
	Gone func(ctx context.Context) bool
	// OOMKilled reports whether the kernel killed a process of the sandbox
	// for memory since the last kill it reported; a sandbox that is gone
	// is sandbox.ErrNotFound.
	OOMKilled func(ctx context.Context) (bool, error)
	// Read, when set, reads a file faster than sandbox.ReadFileShell can
	// (the Docker backend's agent), as the sandbox user, holding at most
	// maxBytes. ok false means it did not answer for the file and the
	// script reads it; with ok true, body and err are the answer.
	Read func(ctx context.Context, p string, maxBytes int64) (body []byte, ok bool, err error)
	// Put is sandbox.BulkOps.Put: it extracts the tar write produces in
	// dir as the sandbox user, for a write whose first file is target
	// (named in a PathNotWritableError). It returns only after write has
	// ended.
	Put func(ctx context.Context, dir string, write func(io.Writer) error, target string) error
	// Lander, when set, returns the one-step lander (sandbox.BulkOps.Land)
	// for the next bulk write, or nil when none can now.
	Lander func() func(ctx context.Context, bw *sandbox.BulkWrite) (code int, stderr string, err error)
}

// Budgets of the kit's scripts.
const (
	MaxScriptOutput = 1 << 20          // bytes of each stream kept
	ScriptTimeout   = 10 * time.Minute // a bulk write of MaxFileBytes files included
	// OOMCheckBudget bounds the out-of-memory check after a command
	// ended with status 137.
	OOMCheckBudget = 30 * time.Second
	// DiscardBudget bounds removing what a failed write left, on a budget
	// of its own (the caller's may have ended).
	DiscardBudget = 30 * time.Second
)

// ScriptResult is the outcome of one of the kit's or the backend's
// scripts.
type ScriptResult struct {
	Code           int
	Stdout, Stderr string
}

// Script runs script (a /bin/sh script, with args as its $1…) to its end
// as the sandbox user through Run. outputCap bounds stdout in bytes (0:
// MaxScriptOutput); a script that wrote more, or ran past ScriptTimeout,
// is an error.
func (b *Box) Script(ctx context.Context, outputCap int64, script string, args ...string) (ScriptResult, error) {
	if outputCap <= 0 {
		outputCap = MaxScriptOutput
	}
	argv := append([]string{"/bin/sh", "-c", script, "stockade"}, args...)
	res, err := b.Run(ctx, container.ExecSpec{Argv: argv, User: b.User, Timeout: ScriptTimeout, OutputCap: outputCap})
	if err != nil {
		return ScriptResult{}, err
	}
	if res.TimedOut {
		return ScriptResult{}, fmt.Errorf("%s: script in %s timed out after %v", b.Backend, b.Name, ScriptTimeout)
	}
	if res.StdoutTruncated {
		return ScriptResult{}, fmt.Errorf("%s: script in %s wrote more than %d bytes", b.Backend, b.Name, outputCap)
	}
	return ScriptResult{Code: res.ExitCode, Stdout: string(res.Stdout), Stderr: string(res.Stderr)}, nil
}

// Exec implements sandbox.Sandbox: the command through Command, a failure
// of a sandbox that went under it sandbox.ErrNotFound, and a kill (status
// 137 before the timeout) checked for an out-of-memory kill, which the
// result's Stderr then says (container.OOMStderr).
func (b *Box) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := sandbox.CheckCommand(req.Command); err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("%s: %w", b.Backend, err)
	}
	run := b.Command
	if run == nil {
		run = b.Run
	}
	res, err := run(ctx, container.ExecSpec{Argv: []string{"/bin/sh", "-c", req.Command}, Timeout: req.Timeout, OutputCap: sandbox.MaxOutputBytes})
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, sandbox.ErrNotFound) && b.Gone(ctx) {
			// A Reap (or a stop) cut the command: the sandbox, not the
			// command, is what failed.
			return sandbox.ExecResult{}, fmt.Errorf("%s: session %s: %w: %v", b.Backend, b.Session, sandbox.ErrNotFound, err)
		}
		return sandbox.ExecResult{}, err
	}
	oom := false
	if res.ExitCode == 137 && !res.TimedOut {
		// Killed: by the kernel for memory, by the session itself, or by
		// a Reap; the backend's check says which.
		if oom, err = b.OOMKilled(ctx); err != nil {
			return sandbox.ExecResult{}, err
		}
	}
	return sandbox.ExecResult{
		ExitCode:  res.ExitCode,
		Stdout:    string(res.Stdout),
		Stderr:    container.OOMStderr(res.Stderr, oom),
		TimedOut:  res.TimedOut,
		Truncated: res.Truncated(),
	}, nil
}

// log is Log, or a logger that discards.
func (b *Box) log() *slog.Logger {
	if b.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return b.Log
}
