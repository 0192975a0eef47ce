package validate

import (
	"context"
	"log/slog"
	"time"

	"github.com/stockade/stockade/internal/cacheseed"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/toolchain"
)

const (
	// HostGrace is how much longer the host waits for work that runs in
	// containers than that work's in-container timeouts: creating,
	// starting, collecting output and removing.
	HostGrace = 2 * time.Minute
	// MinStep is the least time a step needs to start: in-container
	// timeouts have a resolution of one second.
	MinStep = time.Second
	// containerSlack is how much longer the validation's container lives
	// than the validation's timeout: its own exec overhead.
	containerSlack = 2 * time.Minute
)

// SeedSettings are the settings validations run with, as the build-cache
// seed must know them (cacheseed.Config.Settings): the execute profile's
// GOFLAGS and every default.
var SeedSettings = cacheseed.Settings{GOFLAGS: "-mod=mod"}

// ValidateSnapshot runs the validation (Run) of the snapshot at snapDir in
// one execute container with a fresh build cache and a throwaway working
// tree of its own (toolchain.Runner.Start), for at most timeout, and
// removes the container and the working tree. Copying the snapshot into
// the working tree is the phase "validate/worktree".
func ValidateSnapshot(ctx context.Context, r *toolchain.Runner, snapDir string, timeout time.Duration, seed cacheseed.Seed, modulePath string, log *slog.Logger) (Result, error) {
	c, err := StartValidation(ctx, r, snapDir, timeout, seed)
	if err != nil {
		return Result{}, err
	}
	return ValidateIn(ctx, c, timeout, modulePath, log)
}

// StartValidation starts the validation's execute container for the
// snapshot at snapDir, with a fresh build cache over seed and its working
// tree filled (toolchain.Runner.Start), living lifetime plus its own exec
// overhead; lifetime must cover what runs before the validation in it and
// the validation's timeout. Nothing of the repository runs yet:
// ValidateIn runs the steps and removes it.
func StartValidation(ctx context.Context, r *toolchain.Runner, snapDir string, lifetime time.Duration, seed cacheseed.Seed) (*toolchain.Container, error) {
	sctx, cancel := context.WithTimeout(ctx, HostGrace+toolchain.WorkTreeTimeout)
	defer cancel()
	return r.Start(sctx, toolchain.Job{
		Profile: toolchain.Execute, Source: snapDir, Timeout: lifetime + containerSlack,
		ReadOnly: seed.Mounts(), Env: seed.Env(),
	})
}

// ValidateIn runs the validation (Run) for at most timeout in c, a
// container from StartValidation, and removes it and its working tree,
// whatever happened.
func ValidateIn(ctx context.Context, c *toolchain.Container, timeout time.Duration, modulePath string, log *slog.Logger) (Result, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	vctx, cancel := context.WithTimeout(ctx, timeout+containerSlack+HostGrace)
	defer cancel()
	res, err := Run(vctx, NewExecExecer(c), Options{Timeout: timeout, ModulePath: modulePath, Logger: log})
	res.Phases = append([]report.Phase{{Name: "validate/worktree", MS: c.WorkTreeTime().Milliseconds()}}, res.Phases...)
	if cerr := c.Close(context.WithoutCancel(ctx)); cerr != nil {
		log.Warn("removing the validation container failed", "err", cerr)
	}
	return res, err
}

// NewExecExecer runs commands as execs in c, a long-lived container
// (toolchain.Runner.Start).
func NewExecExecer(c *toolchain.Container) Execer { return execExecer{c: c} }

// execExecer runs commands as execs in one long-lived container.
type execExecer struct{ c *toolchain.Container }

func (e execExecer) Exec(ctx context.Context, argv []string, timeout time.Duration) (Output, error) {
	res, err := e.c.Exec(ctx, argv, toolchain.ExecOptions{Timeout: timeout})
	return OutputOf(res), err
}

// OutputOf is what a toolchain command did, as an Output.
func OutputOf(r toolchain.Result) Output {
	return Output{
		ExitCode:  r.ExitCode,
		Stdout:    r.Stdout,
		Stderr:    r.Stderr,
		Truncated: r.Truncated(),
		TimedOut:  r.TimedOut,
		OOMKilled: r.OOMKilled,
	}
}
