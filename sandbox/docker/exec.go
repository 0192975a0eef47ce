package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// box is one sandbox: a running container of this provider.
type box struct {
	p       *Provider
	id      string
	name    string
	session domain.ID
	workdir string
	uid     int64
	roots   []string
}

var _ sandbox.Sandbox = (*box)(nil)

func (p *Provider) box(id, name string, session domain.ID, workdir string, uid int64) *box {
	return &box{p: p, id: id, name: name, session: session, workdir: workdir, uid: uid, roots: sandbox.WritablePaths(workdir)}
}

func (b *box) ID() string { return b.id }

func (b *box) user() string { return fmt.Sprintf("%d:%d", b.uid, b.uid) }

// Fresh volumes belong to root with mode 0755, so the sandbox user could not
// write its own workdir. setupShell fixes that once, run as uid 0 with every
// capability dropped (the container's bounding set is empty): enough to
// chmod what root owns, nothing more. Its result is recognisable by the
// roots' modes (0777, and 01777 for /tmp, which a fresh volume never has),
// so an archive stat (a few milliseconds on a running container) tells
// whether it is needed. Arguments are the writable roots.
//
// An archive upload of a "../<base>/" directory entry into each root would
// also do (the engine applies it to the root itself), without a process in
// the container; it is not used because it relies on a quirk of the
// engine's path cleaning, and because each upload runs the engine's chroot
// helper and costs as much as the exec.
const setupShell = `for d; do
	if [ "$d" = /tmp ]; then chmod 1777 /tmp; else chmod 0777 -- "$d"; fi || exit 1
done`

// rootMode is the mode setupShell gives a writable root.
func rootMode(root string) os.FileMode {
	if root == "/tmp" {
		return 0o777 | os.ModeSticky
	}
	return 0o777
}

// volumesReady reports whether setupShell already ran.
func (b *box) volumesReady(ctx context.Context) bool {
	for _, r := range b.roots {
		st, err := b.p.eng.ArchiveStat(ctx, b.id, r)
		if err != nil || !st.Mode.IsDir() || st.Mode&(os.ModePerm|os.ModeSticky) != rootMode(r) {
			return false
		}
	}
	return true
}

// start starts the container (a no-op when it runs) and prepares the
// writable roots if needed.
func (b *box) start(ctx context.Context) error {
	if err := b.p.eng.ContainerStart(ctx, b.id); err != nil {
		return fmt.Errorf("docker: start %s: %w", b.name, err)
	}
	if b.volumesReady(ctx) {
		return nil
	}
	res, err := b.script(ctx, "0:0", setupShell, b.roots...)
	if err != nil {
		return fmt.Errorf("docker: prepare %s: %w", b.name, err)
	}
	if res.code != 0 {
		return fmt.Errorf("docker: prepare %s: exit %d: %s", b.name, res.code, strings.TrimSpace(res.stderr))
	}
	return nil
}

// scriptResult is the outcome of one of the backend's own scripts.
type scriptResult struct {
	code           int
	stdout, stderr string
}

// maxScriptOutput caps what the backend keeps of its own scripts' output.
const maxScriptOutput = 1 << 20

// script runs one of the backend's scripts to completion as user.
func (b *box) script(ctx context.Context, user, script string, args ...string) (scriptResult, error) {
	cmd := append([]string{"/bin/sh", "-c", script, "stockade"}, args...)
	id, err := b.p.eng.ExecCreate(ctx, b.id, dockerapi.ExecConfig{Cmd: cmd, User: user, WorkingDir: "/", AttachStdout: true, AttachStderr: true})
	if err != nil {
		return scriptResult{}, b.execErr(err)
	}
	out, errb := dockerapi.NewBuffer(maxScriptOutput), dockerapi.NewBuffer(maxScriptOutput)
	if err := b.p.eng.ExecStart(ctx, id, out, errb); err != nil {
		return scriptResult{}, b.execErr(err)
	}
	code, err := b.exitCode(ctx, id)
	if err != nil {
		return scriptResult{}, err
	}
	return scriptResult{code: code, stdout: out.String(), stderr: errb.String()}, nil
}

// execErr turns an exec error about a stopped or removed container into
// ErrNotFound.
func (b *box) execErr(err error) error {
	if errors.Is(err, dockerapi.ErrNotRunning) || errors.Is(err, dockerapi.ErrNotFound) {
		return fmt.Errorf("docker: session %s: %w: %v", b.session, sandbox.ErrNotFound, err)
	}
	return fmt.Errorf("docker: exec in %s: %w", b.name, err)
}

// exitCode inspects a finished exec, waiting briefly for the engine to
// record the exit (it may lag the end of the stream).
func (b *box) exitCode(ctx context.Context, execID string) (int, error) {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inspectBudget)
	defer cancel()
	for {
		in, err := b.p.eng.ExecInspect(ictx, execID)
		if err != nil {
			return -1, fmt.Errorf("docker: inspect exec in %s: %w", b.name, err)
		}
		if !in.Running && in.ExitCode != nil {
			return *in.ExitCode, nil
		}
		if err := sleep(ictx, 10*time.Millisecond, false); err != nil {
			return -1, fmt.Errorf("docker: exec in %s did not end: %w", b.name, err)
		}
	}
}

// execShell wraps every command: argv is stockade-exec MARKER COMMAND. The
// marker in the wrapper's argv is how the killer finds it; the wrapper stays
// the command's parent so that it keeps that argv. It reports an OOM kill
// (see the package documentation).
const execShell = `sx_oom() {
	sx_n=0
	for sx_f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
		[ -r "$sx_f" ] || continue
		while read -r sx_k sx_v; do [ "$sx_k" = oom_kill ] && sx_n=$sx_v; done <"$sx_f"
		break
	done
}
sx_oom; sx_before=$sx_n
/bin/sh -c "$2"
sx_r=$?
if [ "$sx_r" -eq 137 ]; then
	sx_oom
	[ "$sx_n" != "$sx_before" ] && echo "` + oomLine + `" >&2
fi
exit "$sx_r"
`

// killShell kills what the exec with marker $1 started; it never forks, so
// it can run when the pids limit leaves room for one process. It finds the
// wrapper R by "stockade-exec" followed by the marker in its argv (the NULs
// between arguments are dropped by read) among the exec roots (parent 0),
// then, up to 100 rounds, stops and
// kills every live process whose ancestry reaches R, or reaches PID 1
// through an orphan that started no earlier than R (a double-forked or
// setsid child). It exits 0 when a round finds nothing to kill (or R is
// gone), 1 when the rounds run out.
const killShell = `pat="stockade-exec$1"; me=$$; R=
st() {
	{ read -r s_l <"/proc/$1/stat"; } 2>/dev/null || return 1
	set -- ${s_l##*) }
	s_state=$1; s_pp=$2; s_st=${20}
	[ "$s_state" != Z ] && [ "$s_state" != X ]
}
for d in /proc/[0-9]*; do
	p=${d#/proc/}
	[ "$p" = "$me" ] && continue
	while IFS= read -r l || [ -n "$l" ]; do
		case $l in *"$pat"*) R=$p; break;; esac
		l=
	done <"$d/cmdline" 2>/dev/null
	# Only an exec root (no parent in the container) can be the wrapper:
	# a process that copied the marker into its own argv is not.
	if [ -n "$R" ] && st "$R" && [ "$s_pp" = 0 ]; then break; fi
	R=
done
[ -n "$R" ] || exit 0
st "$R" || exit 0
T0=$s_st
k=0
while [ "$k" -lt 100 ]; do
	ps=
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		case $p in 1|"$me") continue;; esac
		st "$p" || continue
		eval "pp_$p=$s_pp st_$p=$s_st"
		ps="$ps $p"
	done
	list=
	for p in $ps; do
		q=$p; n=0; hit=
		while [ "$n" -lt 4096 ]; do
			if [ "$q" = "$R" ]; then hit=1; break; fi
			eval "qp=\${pp_$q:-}"
			[ -n "$qp" ] && [ "$qp" != 0 ] || break
			if [ "$qp" = 1 ]; then
				eval "qs=\${st_$q}"
				[ "$qs" -ge "$T0" ] && hit=1
				break
			fi
			q=$qp; n=$((n+1))
		done
		[ -n "$hit" ] && list="$list $p"
	done
	for p in $ps; do unset "pp_$p" "st_$p"; done
	[ -n "$list" ] || exit 0
	kill -STOP $list 2>/dev/null
	kill -KILL $list 2>/dev/null
	k=$((k+1))
done
exit 1
`

// oomLine is how the wrapper marks an out-of-memory kill (documented in
// package sandbox).
const oomLine = "stockade: killed: out of memory"

// Exec implements sandbox.Sandbox.
func (b *box) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if strings.IndexByte(req.Command, 0) >= 0 {
		return sandbox.ExecResult{}, fmt.Errorf("docker: command holds a NUL byte")
	}
	marker := container.RandomHex(8)
	cmd := []string{"/bin/sh", "-c", execShell, "stockade-exec", marker, req.Command}
	execID, err := b.p.eng.ExecCreate(ctx, b.id, dockerapi.ExecConfig{Cmd: cmd, User: b.user(), WorkingDir: b.workdir, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return sandbox.ExecResult{}, b.execErr(err)
	}
	stdout, stderr := dockerapi.NewBuffer(sandbox.MaxOutputBytes), dockerapi.NewBuffer(sandbox.MaxOutputBytes)
	// The stream runs on its own context: ending it early would leave the
	// command running unseen, so it ends only after a kill.
	sctx, cancelStream := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelStream()
	done := make(chan error, 1)
	go func() { done <- b.p.eng.ExecStart(sctx, execID, stdout, stderr) }()
	var deadline <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		deadline = t.C
	}
	var timedOut, cancelled bool
	select {
	case err = <-done:
	case <-deadline:
		timedOut = true
	case <-ctx.Done():
		cancelled = true
	}
	if timedOut || cancelled {
		if !b.kill(ctx, marker) {
			b.restart(ctx)
		}
		// The stream ends once the wrapper is dead. If it does not, the
		// command escaped the killer (it tampered with the wrapper, say):
		// the restart is the backstop that keeps the timeout a guarantee.
		if !waitDone(done, &err, streamGrace) {
			b.restart(ctx)
			if !waitDone(done, &err, streamGrace) {
				cancelStream()
				err = <-done
			}
		}
	}
	if cancelled {
		return sandbox.ExecResult{}, fmt.Errorf("docker: exec in %s: %w", b.name, ctx.Err())
	}
	if err != nil && !timedOut {
		return sandbox.ExecResult{}, b.execErr(err)
	}
	code, ierr := b.exitCode(ctx, execID)
	if ierr != nil {
		if !timedOut {
			return sandbox.ExecResult{}, ierr
		}
		code = 137
	}
	return sandbox.ExecResult{
		ExitCode:  code,
		Stdout:    stdout.String(),
		Stderr:    stderr.String(),
		TimedOut:  timedOut,
		Truncated: stdout.Truncated() || stderr.Truncated(),
	}, nil
}

// waitDone waits up to d for the stream's end, storing its error.
func waitDone(done <-chan error, err *error, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case *err = <-done:
		return true
	case <-t.C:
		return false
	}
}

// kill runs the killer for the exec with marker, on its own budget, and
// reports whether it succeeded.
func (b *box) kill(ctx context.Context, marker string) bool {
	start := time.Now()
	log := b.p.log.With("container", b.name, "phase", "kill")
	// Attempts share one budget: a killer that cannot start in it (every
	// pid taken, the engine swamped) will not start in the next either.
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killerBudget)
	defer cancel()
	for attempt := 0; kctx.Err() == nil; attempt++ {
		res, err := b.scriptArgv(kctx, []string{"/bin/sh", "-c", killShell, "stockade-kill", marker})
		if err == nil && res.code == 0 {
			log.Debug("killed", "dur", time.Since(start))
			return true
		}
		log.Warn("killer failed", "attempt", attempt, "err", err, "code", res.code, "stderr", res.stderr)
		if sleep(kctx, 100*time.Millisecond, false) != nil {
			break
		}
	}
	return false
}

// restart kills the container and starts it again, on its own budget: the
// end of every process in it. Its volumes, and so its files, stay.
func (b *box) restart(ctx context.Context) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restartBudget)
	defer cancel()
	log := b.p.log.With("container", b.name, "phase", "restart")
	log.Warn("restarting the sandbox to end a command the killer could not")
	if err := b.p.eng.ContainerKill(kctx, b.id, "SIGKILL"); err != nil && !errors.Is(err, dockerapi.ErrNotRunning) {
		log.Error("kill container", "err", err)
	}
	if _, err := b.p.eng.ContainerWait(kctx, b.id, dockerapi.WaitNotRunning); err != nil {
		log.Error("wait container", "err", err)
	}
	if err := b.start(kctx); err != nil {
		log.Error("restart container", "err", err)
	}
}

// scriptArgv runs argv as the sandbox user and returns its result.
func (b *box) scriptArgv(ctx context.Context, argv []string) (scriptResult, error) {
	id, err := b.p.eng.ExecCreate(ctx, b.id, dockerapi.ExecConfig{Cmd: argv, User: b.user(), WorkingDir: "/", AttachStdout: true, AttachStderr: true})
	if err != nil {
		return scriptResult{code: -1}, err
	}
	errb := dockerapi.NewBuffer(4 << 10)
	if err := b.p.eng.ExecStart(ctx, id, nil, errb); err != nil {
		return scriptResult{code: -1}, err
	}
	code, err := b.exitCode(ctx, id)
	return scriptResult{code: code, stderr: errb.String()}, err
}

// Destroy implements sandbox.Sandbox: it removes the container and its
// volumes (revoking the gate token first when one is known) and is
// idempotent.
func (b *box) Destroy(ctx context.Context) error {
	return b.p.remove(ctx, b.session, true)
}
