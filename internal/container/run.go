package container

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/stockade/stockade/sandbox/dockerapi"
)

// Default budgets of the phases of Run. Each phase after the command gets its
// own, started when the phase starts, so a command that ran longer than any
// one of them still has its logs read and its container removed.
const (
	DefaultCreateBudget = 30 * time.Second
	DefaultStartBudget  = 30 * time.Second
	DefaultKillBudget   = 10 * time.Second
	DefaultLogsBudget   = 60 * time.Second
	DefaultRemoveBudget = 30 * time.Second
	// DefaultOutputCap is how much of each of stdout and stderr Run keeps, in
	// bytes, when RunOptions.OutputCap is zero.
	DefaultOutputCap = 4 << 20
)

// oomSettle is how long Run waits for the engine to record an OOM kill
// after a SIGKILL exit (exit code 137) that does not carry it yet.
const oomSettle = time.Second

// Budgets bound each engine phase of Run; a zero field takes its default.
type Budgets struct {
	Create, Start, Kill, Logs, Remove time.Duration
}

// OrDefaults returns b with each zero field set to its default.
func (b Budgets) OrDefaults() Budgets {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&b.Create, DefaultCreateBudget)
	def(&b.Start, DefaultStartBudget)
	def(&b.Kill, DefaultKillBudget)
	def(&b.Logs, DefaultLogsBudget)
	def(&b.Remove, DefaultRemoveBudget)
	return b
}

// RunOptions configure Run.
type RunOptions struct {
	// Name is the container's name; empty means RandomName("run").
	Name string
	// Timeout bounds the command's run time, from start to exit; at it the
	// container is killed and the result says TimedOut. Zero means no bound
	// other than ctx.
	Timeout time.Duration
	// OutputCap is how many bytes of each stream to keep; the rest is
	// counted and flagged as truncated. Zero means DefaultOutputCap.
	OutputCap int64
	Budgets   Budgets
	// Keep leaves the container in place after the run (tests use it to
	// simulate a crashed process). Normally false: Run always removes.
	Keep   bool
	Logger *slog.Logger // nil discards
}

// Result is what the command did. Everything here is data about the
// untrusted code, never a failure of Stockade's.
type Result struct {
	ContainerID     string
	ExitCode        int  // the command's exit status; 137 when killed
	TimedOut        bool // killed at RunOptions.Timeout
	OOMKilled       bool // the kernel killed it for memory
	Stdout, Stderr  []byte
	StdoutBytes     int64 // bytes written, kept or not
	StderrBytes     int64
	StdoutTruncated bool
	StderrTruncated bool
	Phases          Phases
}

// Truncated reports whether either stream passed the cap.
func (r Result) Truncated() bool { return r.StdoutTruncated || r.StderrTruncated }

// Phases are the wall-clock durations of Run's phases.
type Phases struct {
	Create, Start, Wait, Logs, Remove time.Duration
}

// Engine is the part of the engine client Run uses.
type Engine interface {
	ContainerCreate(ctx context.Context, name string, cfg dockerapi.ContainerConfig) (string, error)
	ContainerStart(ctx context.Context, id string) error
	ContainerWait(ctx context.Context, id, condition string) (dockerapi.WaitResult, error)
	ContainerKill(ctx context.Context, id, signal string) error
	ContainerInspect(ctx context.Context, id string) (dockerapi.ContainerJSON, error)
	ContainerAttach(ctx context.Context, id string) (io.ReadCloser, error)
	ContainerRemove(ctx context.Context, id string, opts dockerapi.RemoveOptions) error
}

// Run creates a container from s, runs it to completion (or to its timeout
// or ctx's end), collects its capped output and removes it. Kill, log
// collection and removal run on contexts detached from ctx with their own
// budgets, so cancellation cannot skip the cleanup.
//
// A command that failed, timed out, ran out of memory or flooded its output
// is a Result; an error means the engine or Stockade failed, or ctx ended
// (then the error wraps ctx.Err()).
func Run(ctx context.Context, eng Engine, s Spec, o RunOptions) (res Result, err error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := o.Budgets.OrDefaults()
	capBytes := o.OutputCap
	if capBytes <= 0 {
		capBytes = DefaultOutputCap
	}
	name := o.Name
	if name == "" {
		name = RandomName("run")
	}
	t := time.Now()
	id, err := Create(ctx, eng, s, name, b, log)
	res.Phases.Create = time.Since(t)
	if err != nil {
		return res, err
	}
	res.ContainerID = id
	log = log.With("container", name, "image", s.Image)
	if !o.Keep {
		// A named result, so the remove phase's time reaches the caller.
		defer func() {
			t := time.Now()
			removeDetached(ctx, eng, id, b.Remove, log)
			res.Phases.Remove = time.Since(t)
		}()
	}

	// Attach before start so no output is missed. The output streams
	// straight into capped buffers while the command runs: it never lands on
	// the host's disk (Config sets the log driver to none), and what passes
	// the cap is counted and dropped, so the container never blocks on us.
	stdout, stderr := dockerapi.NewBuffer(capBytes), dockerapi.NewBuffer(capBytes)
	actx, acancel := context.WithCancel(context.WithoutCancel(ctx))
	defer acancel()
	t = time.Now()
	// The stream lives on actx (cancelled when Run returns); only the
	// attaching itself is bounded by the start budget.
	timer := time.AfterFunc(b.Start, acancel)
	stream, err := eng.ContainerAttach(actx, id)
	attached := timer.Stop()
	if err == nil && !attached {
		stream.Close()
		err = fmt.Errorf("attach took longer than %v", b.Start)
	}
	if err != nil {
		return res, fmt.Errorf("container: attach %s: %w", name, err)
	}
	copied := make(chan error, 1)
	go func() {
		defer stream.Close()
		copied <- dockerapi.Demux(stream, stdout, stderr)
	}()
	context.AfterFunc(actx, func() { stream.Close() })
	sctx, cancel := context.WithTimeout(ctx, b.Start)
	err = eng.ContainerStart(sctx, id)
	cancel()
	res.Phases.Start = time.Since(t)
	if err != nil {
		return res, fmt.Errorf("container: start %s: %w", name, err)
	}

	t = time.Now()
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if o.Timeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, o.Timeout)
	}
	_, werr := eng.ContainerWait(wctx, id, dockerapi.WaitNotRunning)
	timedOut := werr != nil && errors.Is(wctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	cancel()
	res.Phases.Wait = time.Since(t)
	if werr != nil {
		// Timeout, cancellation or a broken wait: kill, then wait for the
		// exit on a detached context so the logs are complete.
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), b.Kill)
		if err := eng.ContainerKill(kctx, id, "KILL"); err != nil && !errors.Is(err, dockerapi.ErrNotRunning) {
			log.Warn("kill failed", "err", err)
		}
		if _, err := eng.ContainerWait(kctx, id, dockerapi.WaitNotRunning); err != nil {
			log.Warn("wait after kill failed", "err", err)
		}
		kcancel()
		if !timedOut {
			if ctx.Err() != nil {
				return res, fmt.Errorf("container: run %s: %w", name, ctx.Err())
			}
			return res, fmt.Errorf("container: wait %s: %w", name, werr)
		}
		res.TimedOut = true
	}

	// Inspect for the exit code and the OOM flag: the wait answer does not
	// carry OOMKilled.
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.Kill)
	st, err := eng.ContainerInspect(ictx, id)
	cancel()
	if err != nil {
		return res, fmt.Errorf("container: inspect %s: %w", name, err)
	}
	// The engine sets OOMKilled when the runtime's OOM event arrives, which
	// can be after the exit it caused: a SIGKILL exit without the flag is
	// asked about again for up to oomSettle before it counts as a plain kill.
	for settle := time.Now(); !timedOut && st.State.ExitCode == 137 && !st.State.OOMKilled && time.Since(settle) < oomSettle; {
		time.Sleep(oomSettle / 5)
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.Kill)
		again, err := eng.ContainerInspect(ictx, id)
		cancel()
		if err != nil {
			break
		}
		st = again
	}
	res.ExitCode = st.State.ExitCode
	res.OOMKilled = st.State.OOMKilled

	// The stream ends when the container stops; finish reading it within the
	// logs budget.
	t = time.Now()
	var cerr error
	select {
	case cerr = <-copied:
	case <-time.After(b.Logs):
		acancel()
		cerr = fmt.Errorf("output still streaming after %v", b.Logs)
	}
	res.Phases.Logs = time.Since(t)
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	res.StdoutBytes, res.StderrBytes = stdout.Total(), stderr.Total()
	res.StdoutTruncated, res.StderrTruncated = stdout.Truncated(), stderr.Truncated()
	if cerr != nil {
		return res, fmt.Errorf("container: output of %s: %w", name, cerr)
	}
	log.Debug("container done", "exit", res.ExitCode, "timedout", res.TimedOut, "oom", res.OOMKilled, "dur", res.Phases.Wait)
	return res, nil
}

// Creator is the part of the engine client Create uses.
type Creator interface {
	ContainerCreate(ctx context.Context, name string, cfg dockerapi.ContainerConfig) (string, error)
	ContainerRemove(ctx context.Context, id string, opts dockerapi.RemoveOptions) error
}

// Create creates the container of s named name (which must be random: see
// RandomName) within b.Create and returns its ID. A create the engine
// finished after the deadline, or whose answer was lost, leaves a container
// behind: it is removed by name on its own budget. An answer from the engine
// means nothing was created, and the name may then be someone else's.
func Create(ctx context.Context, eng Creator, s Spec, name string, b Budgets, log *slog.Logger) (string, error) {
	cfg, err := s.Config()
	if err != nil {
		return "", err
	}
	b = b.OrDefaults()
	cctx, cancel := context.WithTimeout(ctx, b.Create)
	id, err := eng.ContainerCreate(cctx, name, cfg)
	cancel()
	if err != nil {
		var apiErr *dockerapi.Error
		if !errors.As(err, &apiErr) {
			if log == nil {
				log = slog.New(slog.DiscardHandler)
			}
			removeDetached(ctx, eng, name, b.Remove, log)
		}
		return "", fmt.Errorf("container: create %s: %w", name, err)
	}
	return id, nil
}

// removeDetached force-removes id (and its anonymous volumes) with its own
// budget, whatever state ctx is in. A container already gone is fine.
func removeDetached(ctx context.Context, eng Creator, id string, budget time.Duration, log *slog.Logger) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	defer cancel()
	if err := eng.ContainerRemove(rctx, id, dockerapi.RemoveOptions{Force: true, Volumes: true}); err != nil && !errors.Is(err, dockerapi.ErrNotFound) {
		log.Warn("remove failed", "container", id, "err", err)
	}
}

// Sleep waits d, or until ctx ends (its error then): the one wait between
// retries of an engine call.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
