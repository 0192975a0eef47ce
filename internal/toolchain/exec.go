package toolchain

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// ErrContainerEnded reports an Exec on a long-lived container that is gone:
// closed, past its lifetime, or killed because an earlier step timed out or
// its context ended.
var ErrContainerEnded = errors.New("toolchain: long-lived container has ended")

// Container is a long-lived container: of the execute profile for one
// validation, or of the acquire profile for a run's module commands. Its
// steps (build, vet, test; or go mod download and the version listing) run
// as execs in it, each under its own in-container timeout with its own
// exit code and capped output. An execute container's steps share its
// fresh build cache, /tmp and, when it has a source, its throwaway working
// tree; no other validation ever uses any of them. An acquire container
// has the profile's mounts and network, as its one-shot containers would
// (the snapshot read-only, the run's module cache and module build cache,
// the run's egress gate). Close removes it and its working tree. A step that times out, or whose context ends, kills the whole
// container, so nothing a step left running can outlive it; later Execs
// return ErrContainerEnded.
type Container struct {
	r          *Runner
	job        Job // as checked, with the run's caches filled in
	id, name   string
	buildCache string
	workTree   string    // host directory of the working tree; "" without a source
	deadline   time.Time // when the in-container timeout ends the main process

	created, started time.Duration // engine phases, for Result.Phases
	copied           time.Duration // filling the working tree

	mu     sync.Mutex
	ended  bool
	closed bool
}

// Start creates and starts a long-lived container for job, which must be an
// Execute or Acquire job without Cmd. The container's main process is `sleep` for its
// lifetime, job.Timeout, under the in-container timeout; zero means three
// times Config.Timeout (a build, a vet and a test), at most MaxTimeout;
// with a source, WorkTreeTimeout more for copying it. job.BuildCache, if
// set, must be a fresh cache from NewBuildCache not given
// to another Start; empty means Start makes a fresh one (BuildCache says
// which).
//
// With a job.Source (job.WorkTree must be empty), Start makes a fresh
// working tree in the run directory, mounts it writable at SourceDir and
// the snapshot read-only at SnapshotDir, and, before Start returns, copies
// the snapshot into it inside the container as the container user (so the
// files are the tests' own, as a developer's checkout is theirs). The
// repository's tests may write anywhere in their tree, as at home; the
// snapshot stays as it was, and Close removes the working tree.
//
// An Acquire job mounts job.Source read-only at SourceDir and the run's
// module and module build caches (Run's defaults), and is behind the run's
// egress gate when it has network: its Execs are exactly the one-shot
// acquire containers' commands, without a container each. It takes no
// build cache of its own and makes no working tree.
func (r *Runner) Start(ctx context.Context, job Job) (*Container, error) {
	if job.Profile != Execute && job.Profile != Acquire {
		return nil, jobErr("Profile", "long-lived containers are for execute and acquire, not %q", job.Profile)
	}
	if len(job.Cmd) != 0 {
		return nil, jobErr("Cmd", "Start supplies the command; run steps with Exec")
	}
	if job.WorkTree != "" {
		return nil, jobErr("WorkTree", "Start makes the working tree")
	}
	if job.Profile == Acquire {
		lifetime := job.Timeout
		if lifetime == 0 {
			lifetime = min(2*timeoutOf(r.cfg, Job{}), MaxTimeout)
		}
		job.Timeout = 0
		return r.start(ctx, job, lifetime)
	}
	if job.BuildCache == "" {
		bc, err := r.NewBuildCache()
		if err != nil {
			return nil, err
		}
		job.BuildCache = bc
	}
	lifetime := job.Timeout
	if lifetime == 0 {
		lifetime = min(3*timeoutOf(r.cfg, Job{}), MaxTimeout)
	}
	r.mu.Lock()
	if r.used[job.BuildCache] {
		r.mu.Unlock()
		return nil, weak(jobErr("BuildCache", "%s already served another validation", job.BuildCache))
	}
	r.used[job.BuildCache] = true
	r.mu.Unlock()
	job.Timeout = 0 // steps take Config.Timeout unless they say
	if job.Source == "" {
		return r.start(ctx, job, lifetime)
	}
	// The source must be the run's snapshot before anything is made for it.
	if err := r.claimDirs(&job); err != nil {
		return nil, err
	}
	lifetime = min(lifetime+WorkTreeTimeout, MaxTimeout)
	wt, err := r.mkdir("worktree", kindWorkTree)
	if err != nil {
		return nil, err
	}
	job.WorkTree = wt
	c, err := r.start(ctx, job, lifetime)
	if err != nil {
		if ferr := r.forget(ctx, wt); ferr != nil {
			r.log.Warn("removing a working tree failed", "dir", wt, "err", ferr)
		}
		return nil, err
	}
	c.workTree = wt
	if err := c.fillWorkTree(ctx); err != nil {
		c.Close(ctx)
		return nil, err
	}
	return c, nil
}

// WorkTreeTimeout bounds copying the snapshot into a working tree: at
// most MaxSnapshotBytes from one local disk to another. Start adds it to
// the container's lifetime; a caller bounding Start and the steps with one
// context adds it there too.
const WorkTreeTimeout = 5 * time.Minute

// fillWorkTreeArgv copies the snapshot into the working tree: recursively,
// symlinks as symlinks (never followed), modes kept, owned by whoever runs
// it. Its parts are the toolchain's and busybox's, never the repository's.
var fillWorkTreeArgv = []string{"cp", "-dR", SnapshotDir + "/.", SourceDir + "/"}

// fillWorkTree copies the snapshot into the working tree as the first step
// in the container. A copy that fails is Stockade's failure, not the
// repository's: the snapshot is within the bounds the run accepted.
func (c *Container) fillWorkTree(ctx context.Context) error {
	t := time.Now()
	res, err := c.Exec(ctx, fillWorkTreeArgv, ExecOptions{Dir: TmpDir, Timeout: WorkTreeTimeout, OutputCap: 64 << 10})
	c.copied = time.Since(t)
	switch {
	case err != nil:
		return fmt.Errorf("toolchain: filling the working tree: %w", err)
	case res.TimedOut:
		return fmt.Errorf("toolchain: filling the working tree timed out after %v", WorkTreeTimeout)
	case res.ExitCode != 0:
		return fmt.Errorf("toolchain: filling the working tree: cp exited %d: %s", res.ExitCode, res.Stderr)
	}
	c.r.log.Debug("working tree filled", "container", c.name, "dur", c.copied)
	return nil
}

// start checks job (its Cmd is replaced) and starts its container, whose
// main process sleeps for lifetime under the in-container timeout.
func (r *Runner) start(ctx context.Context, job Job, lifetime time.Duration) (*Container, error) {
	secs := int64((lifetime + time.Second - 1) / time.Second)
	job.Cmd = []string{"sleep", strconv.FormatInt(secs, 10)}
	if err := r.claimDirs(&job); err != nil {
		return nil, err
	}
	if err := r.gate(ctx, &job); err != nil {
		return nil, err
	}
	main := job
	main.Timeout = lifetime // the in-container timeout of the sleep
	main.anyCmd = true      // the sleep; the steps are checked as the profile's
	spec, err := NewSpec(r.cfg, main)
	if err != nil {
		return nil, err
	}
	b := r.budgets.OrDefaults()
	c := &Container{r: r, job: job, name: container.RandomName("tc-" + string(job.Profile)), buildCache: job.BuildCache}
	t := time.Now()
	c.id, err = container.Create(ctx, r.eng, spec, c.name, b, r.log)
	c.created = time.Since(t)
	if err != nil {
		return nil, fmt.Errorf("toolchain: %w", err)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		c.remove(ctx)
		return nil, ErrClosed
	}
	r.live[c] = true
	r.mu.Unlock()
	t = time.Now()
	sctx, cancel := context.WithTimeout(ctx, b.Start)
	err = r.eng.ContainerStart(sctx, c.id)
	cancel()
	c.started = time.Since(t)
	c.deadline = time.Now().Add(lifetime)
	if err != nil {
		c.Close(ctx)
		return nil, fmt.Errorf("toolchain: start %s: %w", c.name, err)
	}
	r.log.Debug("started", "container", c.name, "profile", string(job.Profile))
	return c, nil
}

// ID returns the container's engine ID.
func (c *Container) ID() string { return c.id }

// BuildCache returns the host path of the container's build cache.
func (c *Container) BuildCache() string { return c.buildCache }

// WorkTree returns the host path of the container's working tree, "" when
// it has no source. Close removes it.
func (c *Container) WorkTree() string { return c.workTree }

// WorkTreeTime is how long copying the snapshot into the working tree
// took; zero without a source.
func (c *Container) WorkTreeTime() time.Duration { return c.copied }

// ExecOptions configure one step.
type ExecOptions struct {
	// Dir is the working directory; empty means the container's (SourceDir
	// when there is a source, else TmpDir).
	Dir string
	// Env adds variables from Job.Env's allowlist.
	Env map[string]string
	// Timeout bounds the step in the container; zero means Config.Timeout.
	Timeout time.Duration
	// OutputCap is how many bytes of each stream to keep; zero means
	// Config.OutputCap.
	OutputCap int64
}

// Exec runs argv as one step in the container as the container user,
// through the one exec engine (container.Exec, policy KillContainer), and
// returns its exit code and capped output. The step's timeout is o.Timeout
// (or Config.Timeout), cut to what is left of the container's lifetime. A
// step that times out, whose context ends, or whose stream breaks ends the
// whole container, so nothing it started lives on; later Execs return
// ErrContainerEnded.
func (c *Container) Exec(ctx context.Context, argv []string, o ExecOptions) (Result, error) {
	var res Result
	c.mu.Lock()
	ended := c.ended || c.closed
	c.mu.Unlock()
	if ended {
		return res, ErrContainerEnded
	}
	r := c.r
	// Check the step as a Job of the profile would be checked.
	step := c.job
	step.Cmd, step.Dir, step.Env, step.Timeout = argv, o.Dir, o.Env, o.Timeout
	if err := checkJob(r.cfg, step); err != nil {
		return res, err
	}
	timeout := timeoutOf(r.cfg, step)
	// A step cannot outlive its container: end it by its own timeout, and
	// so report TimedOut, before the container's lifetime ends it.
	if left := time.Until(c.deadline) - time.Second; left < timeout {
		if left < time.Second {
			c.markEnded()
			return res, ErrContainerEnded
		}
		timeout = left
	}
	capBytes := o.OutputCap
	if capBytes == 0 {
		capBytes = r.cfg.OutputCap
	}
	if capBytes <= 0 {
		capBytes = DefaultOutputCap
	}
	res, err := container.Exec(ctx, r.eng, c.id, container.ExecSpec{
		Argv: argv, User: ContainerUser, Dir: o.Dir, Env: o.Env,
		Timeout: timeout, OutputCap: capBytes, Policy: container.KillContainer,
		Logger: r.log.With("profile", string(c.job.Profile)),
	})
	if err != nil || res.TimedOut {
		// The policy killed the container, or it was gone.
		c.markEnded()
	}
	if errors.Is(err, container.ErrNotRunning) {
		return res, fmt.Errorf("%w: %v", ErrContainerEnded, err)
	}
	if err != nil {
		return res, fmt.Errorf("toolchain: exec in %s: %w", c.name, err)
	}
	return res, nil
}

func (c *Container) markEnded() {
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
}

func (c *Container) remove(ctx context.Context) error {
	b := c.r.budgets.OrDefaults()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.Remove)
	defer cancel()
	err := c.r.eng.ContainerRemove(rctx, c.id, dockerapi.RemoveOptions{Force: true, Volumes: true})
	if err != nil && !errors.Is(err, dockerapi.ErrNotFound) {
		return fmt.Errorf("toolchain: remove %s: %w", c.name, err)
	}
	return nil
}

// Close force-removes the container and then its working tree (through a
// container when the host user cannot remove what the tests wrote), on
// their own budgets, even when ctx has ended. It is safe to call more than
// once. The build cache stays until the Runner closes. Should the process
// die first, the next run on the data directory removes both (Reap and
// the crashed run's directory).
func (c *Container) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed, c.ended = true, true
	c.mu.Unlock()
	err := c.remove(ctx)
	c.r.mu.Lock()
	delete(c.r.live, c)
	c.r.mu.Unlock()
	if c.workTree != "" && err == nil {
		err = c.r.forget(ctx, c.workTree)
	}
	return err
}
