package docker

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
	"github.com/stockade/stockade/sandbox/internal/backend"
)

// box is one sandbox: a running container of this provider. Its Exec and
// file methods are the kit's (backend.Box), over this backend's moves.
type box struct {
	backend.Box
	p       *Provider
	id      string
	name    string
	session domain.ID
	workdir string
	uid     int64
	roots   []string
	gate    bool // NetLimited: Exec heals the session's gate first
}

var _ sandbox.Sandbox = (*box)(nil)

func (p *Provider) box(id, name string, session domain.ID, workdir string, uid int64) *box {
	b := &box{p: p, id: id, name: name, session: session, workdir: workdir, uid: uid, roots: sandbox.WritablePaths(workdir)}
	b.Box = backend.Box{Backend: "docker", Name: name, Session: session, User: b.user(), Roots: b.roots, Log: p.log.With("container", name),
		Ops: backend.Ops{Run: b.exec, Command: b.command, Gone: b.gone, OOMKilled: b.oomKilled, Read: b.readAgent, Put: b.putFirst, Lander: b.lander}}
	return b
}

func (b *box) ID() string { return b.id }

func (b *box) user() string { return fmt.Sprintf("%d:%d", b.uid, b.uid) }

// start starts the container; a no-op when it runs. The writable roots get
// their modes when their volumes are created, so nothing else is needed.
func (b *box) start(ctx context.Context) error {
	if err := b.p.eng.ContainerStart(ctx, b.id); err != nil {
		return fmt.Errorf("docker: start %s: %w", b.name, err)
	}
	return nil
}

// exec runs s in the sandbox with the session policy: at the timeout or
// when ctx ends, the command's process tree is killed and the container
// kept; the restart is the backstop.
func (b *box) exec(ctx context.Context, s container.ExecSpec) (container.Result, error) {
	return b.execIn(ctx, s, nil)
}

// execIn is exec with stdin on the command's stdin. Only the agent takes
// stdin: with stdin and no running agent (or one that did not start it),
// it is container.ErrNotStarted, and nothing ran.
func (b *box) execIn(ctx context.Context, s container.ExecSpec, stdin []byte) (container.Result, error) {
	start := time.Now()
	s.Policy = container.KillTree
	s.Backstop = func(ctx context.Context) error { return b.restart(ctx, start) }
	s.Logger = b.p.log
	c := b.p.runningAgent(b)
	if stdin == nil {
		c = b.p.agentConn(ctx, b)
	}
	if c != nil {
		// The agent's transport, the engine's killer: container.Exec
		// enforces the timeout, the caps and the kill as it does for an
		// engine exec.
		as := s
		as.Killer, as.Nested = b.p.eng, true
		res, err := container.Exec(ctx, &agentExec{conn: c, eng: b.p.eng, user: b.user(), stdin: stdin}, b.id, as)
		if !errors.Is(err, container.ErrNotStarted) {
			if err != nil {
				return res, b.execErr(err)
			}
			return res, nil
		}
		b.p.log.Debug("the agent did not start the command", "container", b.name, "err", err)
		if stdin != nil {
			return res, err
		}
	}
	if stdin != nil {
		return container.Result{}, fmt.Errorf("%w: no agent runs in %s to take stdin", container.ErrNotStarted, b.name)
	}
	return b.engineExec(ctx, s)
}

// engineExec runs s through an engine exec, never the agent, with the
// session policy (as exec does).
func (b *box) engineExec(ctx context.Context, s container.ExecSpec) (container.Result, error) {
	start := time.Now()
	s.Policy = container.KillTree
	s.Backstop = func(ctx context.Context) error { return b.restart(ctx, start) }
	s.Logger = b.p.log
	res, err := container.Exec(ctx, b.p.eng, b.id, s)
	if err != nil {
		return res, b.execErr(err)
	}
	return res, nil
}

// execErr turns an exec error about a stopped or removed container into
// ErrNotFound, and a command the wrapper could not fork into
// ErrCommandNotStarted.
func (b *box) execErr(err error) error {
	switch {
	case errors.Is(err, container.ErrNotRunning):
		return fmt.Errorf("docker: session %s: %w: %v", b.session, sandbox.ErrNotFound, err)
	case errors.Is(err, container.ErrNotStarted):
		return fmt.Errorf("docker: exec in %s: %w: %v", b.name, sandbox.ErrCommandNotStarted, err)
	}
	return fmt.Errorf("docker: exec in %s: %w", b.name, err)
}

// command runs a caller's command (backend.Ops.Command): with the
// session's gate healed first, as the sandbox user in its workdir.
func (b *box) command(ctx context.Context, s container.ExecSpec) (container.Result, error) {
	if b.gate {
		// A dead gate fails closed (the sandbox reaches nothing); it is
		// started again before the next command.
		if err := b.p.healGate(ctx, b.session); err != nil {
			return container.Result{}, err
		}
	}
	s.User, s.Dir = b.user(), b.workdir
	return b.exec(ctx, s)
}

// oomKilled asks the sandbox's memory cgroup, through an engine exec as
// root (container.OOMRecord: no process of the session can write into its
// answer), whether an out-of-memory kill happened since the last one this
// provider attributed. A check that gets no answer (its exec failed or was
// killed) looks at the container for goneSettle: a sandbox that is gone or
// stopped (a Reap cut the command, and the engine had not yet recorded it
// when the check started) is ErrNotFound.
func (b *box) oomKilled(ctx context.Context) (bool, error) {
	res, err := b.engineExec(ctx, container.ExecSpec{Argv: b.p.oom.Argv(b.id), User: "0:0", AsRoot: true, Dir: "/",
		Timeout: backend.OOMCheckBudget, OutputCap: 4 << 10})
	if errors.Is(err, sandbox.ErrNotFound) {
		return false, err
	}
	if err == nil && !res.TimedOut {
		if oom, ok := b.p.oom.Verdict(b.id, res.ExitCode); ok {
			return oom, nil
		}
	}
	for t := time.Now(); ; {
		if b.gone(ctx) {
			return false, fmt.Errorf("docker: session %s: %w: the sandbox stopped under the command", b.session, sandbox.ErrNotFound)
		}
		if time.Since(t) > goneSettle || ctx.Err() != nil {
			break
		}
		container.Sleep(ctx, 100*time.Millisecond)
	}
	b.p.log.Warn("out-of-memory check got no answer", "container", b.name, "exit", res.ExitCode, "err", err)
	return false, nil
}

// goneSettle is how long oomKilled looks for a container going away after
// its check got no answer: the engine records a killed container's end a
// moment after its processes died.
const goneSettle = 3 * time.Second

// gone reports whether b's container no longer exists or no longer runs.
func (b *box) gone(ctx context.Context) bool {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	c, err := b.p.eng.ContainerInspect(ictx, b.id)
	return errors.Is(err, dockerapi.ErrNotFound) || err == nil && !c.State.Running
}

// restart kills the container and starts it again: the end of every process
// in it. Its volumes, and so its files, stay. Restarts of one container are
// serialized, and a restart that happened after since (the start of the
// Exec asking) already ended that Exec's command, so it is not repeated:
// two Execs timing out together restart the sandbox once.
func (b *box) restart(ctx context.Context, since time.Time) error {
	defer b.p.restarts.Lock(b.id)()
	log := b.p.log.With("container", b.name, "phase", "restart")
	if c, err := b.p.eng.ContainerInspect(ctx, b.id); err == nil {
		if t, err := time.Parse(time.RFC3339Nano, c.State.StartedAt); err == nil && t.After(since) && c.State.Running {
			log.Debug("already restarted since the command started")
			return nil
		}
	}
	log.Warn("restarting the sandbox to end a command the killer could not")
	if err := b.p.eng.ContainerKill(ctx, b.id, "KILL"); err != nil && !errors.Is(err, dockerapi.ErrNotRunning) {
		return fmt.Errorf("docker: kill %s: %w", b.name, err)
	}
	if _, err := b.p.eng.ContainerWait(ctx, b.id, dockerapi.WaitNotRunning); err != nil {
		return fmt.Errorf("docker: wait %s: %w", b.name, err)
	}
	return b.start(ctx)
}

// Destroy implements sandbox.Sandbox: it removes the container and its
// volumes (revoking the gate token first when one is known) and is
// idempotent.
func (b *box) Destroy(ctx context.Context) error {
	return b.p.remove(ctx, b.session, true)
}
