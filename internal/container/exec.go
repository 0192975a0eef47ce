package container

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/stockade/stockade/internal/defaults"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// The scripts of the exec engine. They run under the container's /bin/sh.
var (
	//go:embed scripts/oom.sh
	oomLib string
	//go:embed scripts/exec.sh
	execBody string
	//go:embed scripts/kill.sh
	killScript string
	//go:embed scripts/oomcount.sh
	oomCountBody string

	execScript     = oomLib + execBody
	oomCountScript = oomLib + oomCountBody
)

// OOMLine is the last line of stderr of a command the kernel killed for
// memory (exit status 137 while the memory cgroup's oom_kill counter moved).
const OOMLine = "stockade: killed: out of memory"

// NotStartedLine is the last line of stderr of a wrapper that could not
// fork its command (exit status 2): Exec returns ErrNotStarted for it.
const NotStartedLine = "stockade: exec: the command could not be started"

// ExitEngineNotStarted is the status Docker gives an exec whose process
// its runtime could not start (Podman gives exitPodmanNotStarted); its
// ExecInspect then has Pid 0. Engines that cannot tell (a resident agent's
// transport, pods/exec) report Pid -1.
const (
	ExitEngineNotStarted = 126
	exitPodmanNotStarted = 125
	runtimeNotStarted    = "unable to start container process"
)

// Exit codes of kill.sh.
const (
	killDone     = 0 // nothing of the command is left
	killNoTarget = 3 // no wrapper with the marker runs (yet, or any more)
)

// Budgets of the exec engine's own steps. Each runs on a context detached
// from the caller's, so cancellation cannot skip them.
const (
	// DefaultExecCreateBudget bounds the exec create call.
	DefaultExecCreateBudget = 30 * time.Second
	// ExitGrace is how long a command may still run after its output stream
	// ended (it closed its descriptors) before it is killed as lost.
	ExitGrace = 10 * time.Second
	// KillerBudget bounds the killer's attempts together: a killer that
	// cannot start in it (every pid taken, the engine swamped) will not
	// start later either.
	KillerBudget = 6 * time.Second
	// StreamGrace is how long the output stream may take to end after a
	// kill before the next, harder step.
	StreamGrace = 5 * time.Second
	// BackstopBudget bounds the KillTree backstop (a container restart).
	BackstopBudget = 30 * time.Second
)

// Errors of Exec. A command's own failure (exit status, timeout, OOM,
// truncation) is never one of them: it is data in the Result.
var (
	// ErrNotRunning reports an exec into a container that is stopped or gone.
	ErrNotRunning = errors.New("container: not running")
	// ErrExecLost reports a command whose output stream ended (or broke)
	// while it kept running; it was killed by the policy.
	ErrExecLost = errors.New("container: exec lost")
	// ErrNotStarted is what an ExecEngine's ExecCreate or ExecStart wraps
	// when it knows the command never started and never will (a resident
	// agent that was gone before it got the command): Exec returns it at
	// once, with nothing to kill, and the caller may run the command
	// another way. Exec returns it too when the wrapper could not fork the
	// command (NotStartedLine: the pids limit was reached).
	ErrNotStarted = errors.New("container: command not started")
)

// Policy is how Exec ends a command at its timeout, when ctx ends, or when
// its output stream breaks or ends while it still runs.
type Policy int

const (
	// KillContainer kills the whole container: nothing the command started
	// can outlive it. The zero value, and the policy of containers that run
	// one job (the toolchain's).
	KillContainer Policy = iota
	// KillTree kills the command's process tree (the killer exec, kill.sh)
	// and keeps the container and its other commands; when the killer cannot
	// (a fork bomb holds every pid) or the output stream is still open after
	// it (something escaped the tree), ExecSpec.Backstop runs. Sessions use
	// it.
	KillTree
)

// ExecEngine is the part of the engine client Exec uses.
type ExecEngine interface {
	ExecCreate(ctx context.Context, containerID string, cfg dockerapi.ExecConfig) (string, error)
	ExecStart(ctx context.Context, execID string, stdout, stderr io.Writer) error
	ExecInspect(ctx context.Context, execID string) (dockerapi.ExecInspect, error)
	ContainerKill(ctx context.Context, id, signal string) error
}

// StdinEngine is an ExecEngine that can also feed a command's standard
// input (ExecSpec.Stdin): *dockerapi.Client, through a hijacked exec.
type StdinEngine interface {
	ExecEngine
	ExecStartStdin(ctx context.Context, execID string, stdin io.Reader, stdout, stderr io.Writer) error
}

// ExecSpec is one command to run in a running container.
type ExecSpec struct {
	Argv []string // the command; required; no NUL bytes
	User string   // "uid:gid"; empty means defaults.NobodyUser; never root unless AsRoot
	// AsRoot allows uid 0 (with the container's empty capability set): the
	// backend's own setup, never a caller's command.
	AsRoot bool
	Dir    string            // working directory; empty means the container's
	Env    map[string]string // added to the container's environment
	// Stdin, when set, is copied to the command's standard input until it
	// ends or the command does; the engine must be a StdinEngine. The
	// engine cannot end the input without ending the exec: the command
	// must stop reading by itself (head -c, say). Nil gives the command
	// an empty input.
	Stdin io.Reader
	// Timeout bounds the command from the exec's start; zero means only ctx.
	Timeout time.Duration
	// OutputCap is how many bytes of each stream to keep; the rest is
	// counted and flagged. Zero means DefaultOutputCap.
	OutputCap int64
	Policy    Policy
	// Backstop ends every process of the container when KillTree cannot end
	// the command (it restarts the container, say). Required with KillTree.
	// It runs on a context detached from the caller's, bounded by
	// BackstopBudget, and must be safe to call from several Execs at once.
	Backstop func(ctx context.Context) error
	// KillerID is the container the KillTree killer runs in; empty means
	// the command's own. A backend whose containers share a PID namespace
	// (a Kubernetes pod) runs it in a sibling with a pids limit of its own,
	// so a command holding every pid of its container cannot stop it.
	KillerID string
	// Killer is the engine the KillTree killer runs through; nil means the
	// command's. A command run by a resident agent (an ExecEngine over the
	// agent's channel) is killed through the engine itself: the agent is
	// never trusted to end what it started.
	Killer ExecEngine
	// Nested says the wrapper is not an exec root but a resident agent's
	// child, so the killer takes every process carrying the command's
	// marker for the wrapper (kill.sh's "nested" mode).
	Nested bool
	Logger *slog.Logger // nil discards
}

// Exec runs s.Argv in the running container id under the wrapper
// (scripts/exec.sh) and returns its exit code and capped output. At the
// timeout, or when ctx ends, or when the stream breaks or ends while the
// command still runs, the command is ended by s.Policy before Exec returns:
// Exec never leaves a command running behind a returned error.
//
// Result.TimedOut says the timeout fired, Result.OOMKilled that the wrapper
// saw the kernel kill the command for memory. An error wraps ErrNotRunning
// (the container is stopped or gone), ErrExecLost, ctx.Err(), or the
// engine's error.
func Exec(ctx context.Context, eng ExecEngine, id string, s ExecSpec) (res Result, err error) {
	if len(s.Argv) == 0 {
		return res, fmt.Errorf("%w: exec without a command", ErrInvalidSpec)
	}
	for _, a := range s.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return res, fmt.Errorf("%w: command argument holds a NUL byte", ErrInvalidSpec)
		}
	}
	if s.Policy == KillTree && s.Backstop == nil {
		return res, fmt.Errorf("%w: KillTree needs a Backstop", ErrInvalidSpec)
	}
	user := s.User
	if user == "" {
		user = defaults.NobodyUser
	}
	if uid, _, _ := strings.Cut(user, ":"); (uid == "0" || uid == "root") && !s.AsRoot {
		return res, fmt.Errorf("%w: commands never run as root", ErrInvalidSpec)
	}
	env, err := envList(s.Env)
	if err != nil {
		return res, err
	}
	capBytes := s.OutputCap
	if capBytes <= 0 {
		capBytes = DefaultOutputCap
	}
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	x := &execution{eng: eng, id: id, s: s, user: user, marker: RandomHex(8), log: log.With("container", id)}
	res.ContainerID = id

	argv := append([]string{"/bin/sh", "-c", execScript, "stockade-exec", x.marker}, s.Argv...)
	t := time.Now()
	cctx, cancel := context.WithTimeout(ctx, DefaultExecCreateBudget)
	var se StdinEngine
	if s.Stdin != nil {
		var ok bool
		if se, ok = eng.(StdinEngine); !ok {
			cancel()
			return res, fmt.Errorf("%w: the engine cannot feed a command's stdin", ErrInvalidSpec)
		}
	}
	x.execID, err = eng.ExecCreate(cctx, id, dockerapi.ExecConfig{Cmd: argv, Env: env, User: user, WorkingDir: s.Dir, AttachStdin: se != nil, AttachStdout: true, AttachStderr: true})
	cancel()
	res.Phases.Create = time.Since(t)
	if err != nil {
		if errors.Is(err, dockerapi.ErrNotRunning) || errors.Is(err, dockerapi.ErrNotFound) {
			return res, fmt.Errorf("%w: %s: %v", ErrNotRunning, id, err)
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("container: exec in %s: %w", id, ctx.Err())
		}
		return res, fmt.Errorf("container: exec create in %s: %w", id, err)
	}

	// The stream runs on its own context: ending it early would leave the
	// command running unseen, so it ends only after a kill.
	stdout, stderr := dockerapi.NewBuffer(capBytes), &tailBuffer{Buffer: dockerapi.NewBuffer(capBytes)}
	sctx, cancelStream := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelStream()
	x.done = make(chan error, 1)
	t = time.Now()
	go func() {
		if se != nil {
			x.done <- se.ExecStartStdin(sctx, x.execID, s.Stdin, stdout, stderr)
			return
		}
		x.done <- eng.ExecStart(sctx, x.execID, stdout, stderr)
	}()
	var deadline <-chan time.Time
	if s.Timeout > 0 {
		tm := time.NewTimer(s.Timeout)
		defer tm.Stop()
		deadline = tm.C
	}
	var timedOut, cancelled bool
	var serr error
	select {
	case serr = <-x.done:
		x.finished = true
	case <-deadline:
		timedOut = true
	case <-ctx.Done():
		cancelled = true
	}
	var code int
	switch {
	case timedOut || cancelled:
		x.end(ctx, cancelStream)
		code = x.exitCode(ctx, 137)
	case errors.Is(serr, ErrNotStarted):
		// The engine knows the command never started: nothing to end.
		return res, serr
	case serr != nil:
		// The stream broke: the command may still run unseen.
		x.end(ctx, cancelStream)
		err = fmt.Errorf("%w: output stream of %s broke: %v", ErrExecLost, id, serr)
	default:
		var running bool
		code, running, err = x.waitExit(ctx)
		if running {
			// It closed its output and kept going: it cannot be waited
			// for, so it is ended like a timed-out command.
			x.end(ctx, cancelStream)
			err = fmt.Errorf("%w: %s still ran %v after its output ended", ErrExecLost, id, ExitGrace)
		}
	}
	res.Phases.Wait = time.Since(t)
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	res.StdoutBytes, res.StderrBytes = stdout.Total(), stderr.Total()
	res.StdoutTruncated, res.StderrTruncated = stdout.Truncated(), stderr.Truncated()
	res.ExitCode, res.TimedOut = code, timedOut
	res.OOMKilled = code == 137 && stderr.endsWith(OOMLine+"\n")
	if cancelled {
		return res, fmt.Errorf("container: exec in %s: %w", id, ctx.Err())
	}
	if err != nil {
		return res, err
	}
	switch {
	case code == 2 && !timedOut && stderr.endsWith(NotStartedLine+"\n"):
		return res, fmt.Errorf("%w: the wrapper in %s could not fork the command (pids limit reached)", ErrNotStarted, id)
	case x.finished && x.pid == 0 && (code == ExitEngineNotStarted ||
		code == exitPodmanNotStarted && bytes.Contains(append(stdout.Bytes(), stderr.Bytes()...), []byte(runtimeNotStarted))):
		// The engine's answer when its runtime could not start the exec's
		// process at all (no pid was free for it): status 126 and no pid
		// (Docker, which gives every started exec its pid), or 125 and
		// the runtime's message (Podman, which gives none a pid; a
		// command of the session that printed it and exited 125 is
		// taken for not started, which only its own result shows).
		return res, fmt.Errorf("%w: the engine could not start the exec in %s: %s", ErrNotStarted, id, strings.TrimSpace(stdout.String()+stderr.String()))
	}
	log.Debug("exec done", "exit", code, "timedout", timedOut, "oom", res.OOMKilled, "dur", res.Phases.Wait)
	return res, nil
}

// execution is one Exec's state for ending it.
type execution struct {
	eng          ExecEngine
	id           string
	s            ExecSpec
	user, marker string
	execID       string
	pid          int        // the ended exec's Pid, as ExecInspect gave it
	done         chan error // the stream's end
	finished     bool       // done was received
	log          *slog.Logger
}

// waitDone waits up to d for the stream's end.
func (x *execution) waitDone(d time.Duration) bool {
	if x.finished {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-x.done:
		x.finished = true
		return true
	case <-t.C:
		return false
	}
}

// end ends the command by the policy and waits for its stream to close;
// the stream is cut as the last resort.
func (x *execution) end(ctx context.Context, cancelStream context.CancelFunc) {
	switch x.s.Policy {
	case KillTree:
		if !x.killTree(ctx) || !x.waitDone(StreamGrace) {
			// The killer could not run, or the stream is still open after
			// it (the command tampered with the wrapper, say): the
			// backstop makes the timeout a guarantee.
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), BackstopBudget)
			x.log.Warn("the killer could not end a command; running the backstop")
			if err := x.s.Backstop(bctx); err != nil {
				x.log.Error("backstop failed", "err", err)
			}
			cancel()
		}
	default:
		x.killContainer(ctx)
	}
	if !x.waitDone(StreamGrace) {
		cancelStream()
		x.waitDone(StreamGrace)
	}
}

// killContainer SIGKILLs the container on its own budget.
func (x *execution) killContainer(ctx context.Context) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultKillBudget)
	defer cancel()
	if err := x.eng.ContainerKill(kctx, x.id, "KILL"); err != nil && !errors.Is(err, dockerapi.ErrNotRunning) && !errors.Is(err, dockerapi.ErrNotFound) {
		x.log.Warn("kill failed", "err", err)
	}
}

// killTree runs the killer until it reports the command's tree gone, and
// reports whether it did. A wrapper that is not running yet (the timeout
// fired before the exec started) is waited for: the killer must end this
// command, not report an empty success while it starts later. The stream's
// end proves nothing here (a command can close its output and go on).
func (x *execution) killTree(ctx context.Context) bool {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), KillerBudget)
	defer cancel()
	for attempt := 0; kctx.Err() == nil; attempt++ {
		code, err := x.runKiller(kctx)
		if err == nil && code == killDone {
			return true
		}
		if err == nil && code == killNoTarget {
			in, ierr := x.eng.ExecInspect(kctx, x.execID)
			if ierr == nil && !in.Running && in.ExitCode != nil {
				return true // the wrapper has ended: nothing is left to find
			}
			// Not started yet, or between the engine's start and its exec
			// of /bin/sh: look again.
			err = fmt.Errorf("wrapper not found yet (inspect: running %v, %v)", in.Running, ierr)
		}
		x.log.Debug("killer attempt failed", "attempt", attempt, "code", code, "err", err)
		select {
		case <-time.After(20 * time.Millisecond):
		case <-kctx.Done():
		}
	}
	return false
}

// runKiller runs kill.sh for the marker as the command's user.
func (x *execution) runKiller(ctx context.Context) (int, error) {
	target := x.id
	if x.s.KillerID != "" {
		target = x.s.KillerID
	}
	eng := x.eng
	if x.s.Killer != nil {
		eng = x.s.Killer
	}
	mode := ""
	if x.s.Nested {
		mode = "nested"
	}
	return runKiller(ctx, eng, target, x.user, x.marker, mode)
}

// MarkerArg is the argument that makes a long-lived process started by an
// exec (a resident agent) findable by KillMarked: "stockade-exec" and the
// marker, as the wrapper carries them.
func MarkerArg(marker string) string { return "stockade-exec" + marker }

// KillMarked ends the process an exec started with MarkerArg(marker) in
// its argv, and its descendants (kill.sh's "tree" mode: orphans are left
// alone): how the host ends a resident agent it drops.
func KillMarked(ctx context.Context, eng ExecEngine, id, user, marker string) error {
	return killMarker(ctx, eng, id, user, marker, "tree")
}

// KillNested ends a command whose wrapper (with marker) a resident agent
// started, as KillTree's killer does for such a command (ExecSpec.Nested).
func KillNested(ctx context.Context, eng ExecEngine, id, user, marker string) error {
	return killMarker(ctx, eng, id, user, marker, "nested")
}

// killMarker runs the killer in mode through eng in container id as user
// until nothing with marker is left, within KillerBudget. A container that
// is not running has nothing left.
func killMarker(ctx context.Context, eng ExecEngine, id, user, marker, mode string) error {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), KillerBudget)
	defer cancel()
	var err error
	for kctx.Err() == nil {
		var code int
		code, err = runKiller(kctx, eng, id, user, marker, mode)
		switch {
		case err == nil && (code == killDone || code == killNoTarget):
			return nil
		case errors.Is(err, dockerapi.ErrNotRunning) || errors.Is(err, dockerapi.ErrNotFound):
			return nil
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-kctx.Done():
		}
	}
	return fmt.Errorf("container: kill %s in %s: %w", MarkerArg(marker), id, errors.Join(err, kctx.Err()))
}

// runKiller runs kill.sh for marker in mode through eng in container id.
func runKiller(ctx context.Context, eng ExecEngine, id, user, marker, mode string) (int, error) {
	xid, err := eng.ExecCreate(ctx, id, dockerapi.ExecConfig{Cmd: []string{"/bin/sh", "-c", killScript, "stockade-kill", marker, mode}, User: user, WorkingDir: "/", AttachStdout: true, AttachStderr: true})
	if err != nil {
		return -1, err
	}
	errb := dockerapi.NewBuffer(4 << 10)
	if err := eng.ExecStart(ctx, xid, nil, errb); err != nil {
		return -1, err
	}
	in, err := eng.ExecInspect(ctx, xid)
	for err == nil && in.ExitCode == nil && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
		in, err = eng.ExecInspect(ctx, xid)
	}
	if err != nil {
		return -1, err
	}
	if in.ExitCode == nil {
		return -1, ctx.Err()
	}
	if *in.ExitCode != killDone && *in.ExitCode != killNoTarget {
		return *in.ExitCode, fmt.Errorf("killer: exit %d: %s", *in.ExitCode, strings.TrimSpace(errb.String()))
	}
	return *in.ExitCode, nil
}

// waitExit inspects the finished exec for its exit code, waiting up to
// ExitGrace for the engine to record it (it may lag the stream's end);
// running reports a command still running after that.
func (x *execution) waitExit(ctx context.Context) (code int, running bool, err error) {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ExitGrace+DefaultKillBudget)
	defer cancel()
	limit := time.Now().Add(ExitGrace)
	for {
		in, err := x.eng.ExecInspect(ictx, x.execID)
		if err != nil {
			return -1, false, fmt.Errorf("container: inspect exec in %s: %w", x.id, err)
		}
		if !in.Running && in.ExitCode != nil {
			x.pid = in.Pid
			return *in.ExitCode, false, nil
		}
		if time.Now().After(limit) {
			return -1, true, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exitCode returns the killed exec's exit code, or def when the engine has
// none to give.
func (x *execution) exitCode(ctx context.Context, def int) int {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultKillBudget)
	defer cancel()
	for ictx.Err() == nil {
		in, err := x.eng.ExecInspect(ictx, x.execID)
		if err != nil {
			return def
		}
		if !in.Running {
			if in.ExitCode != nil {
				return *in.ExitCode
			}
			return def // never started, or its container is gone
		}
		time.Sleep(10 * time.Millisecond)
	}
	return def
}

// tailBuffer is a capped Buffer that also remembers the last bytes written,
// so the wrapper's OOM line is seen past the cap.
type tailBuffer struct {
	*dockerapi.Buffer
	mu   sync.Mutex
	tail []byte
}

const tailBytes = 128

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.tail = append(t.tail, p...)
	if len(t.tail) > tailBytes {
		t.tail = append(t.tail[:0:0], t.tail[len(t.tail)-tailBytes:]...)
	}
	t.mu.Unlock()
	return t.Buffer.Write(p)
}

func (t *tailBuffer) endsWith(s string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.HasSuffix(t.tail, []byte(s))
}
