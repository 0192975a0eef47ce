package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
	"github.com/stockade/stockade/sandbox/internal/backend"
)

// kubeletEnv is what the kubelet adds to every container's environment for
// the API server's service (the "kubernetes" service of the default
// namespace, port 443), even with service links off. Commands run without
// it: env -u removes each (a name the Spec sets is kept).
var kubeletEnv = []string{
	"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_PORT_HTTPS",
	"KUBERNETES_PORT", "KUBERNETES_PORT_443_TCP", "KUBERNETES_PORT_443_TCP_PROTO",
	"KUBERNETES_PORT_443_TCP_PORT", "KUBERNETES_PORT_443_TCP_ADDR",
}

// box is one sandbox: a running pod of this provider. Its Exec and file
// methods are the kit's (backend.Box), over this backend's moves.
type box struct {
	backend.Box
	p       *Provider
	pod     string
	uid     types.UID
	session domain.ID
	workdir string
	user    int64
	roots   []string
	unset   []string // env -u arguments
}

var _ sandbox.Sandbox = (*box)(nil)

func (p *Provider) box(pod *corev1.Pod, id domain.ID) *box {
	b := &box{p: p, pod: pod.Name, uid: pod.UID, session: id}
	for _, c := range pod.Spec.Containers {
		if c.Name != sandboxContainer {
			continue
		}
		b.workdir = c.WorkingDir
		if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			b.user = *c.SecurityContext.RunAsUser
		}
		set := map[string]bool{}
		for _, e := range c.Env {
			set[e.Name] = true
		}
		for _, n := range kubeletEnv {
			if !set[n] {
				b.unset = append(b.unset, "-u", n)
			}
		}
	}
	b.roots = sandbox.WritablePaths(b.workdir)
	b.Box = backend.Box{Backend: "kubernetes", Name: b.pod, Session: id, User: b.userString(), Roots: b.roots, Log: p.log.With("pod", b.pod),
		Ops: backend.Ops{Run: b.exec, Gone: b.gone, OOMKilled: b.oomKilled, Put: b.put}}
	return b
}

// ID returns the pod's UID.
func (b *box) ID() string { return string(b.uid) }

func (b *box) userString() string {
	return strconv.FormatInt(b.user, 10) + ":" + strconv.FormatInt(b.user, 10)
}

// oomKilled asks the sandbox container's memory cgroup whether an
// out-of-memory kill happened since the last one this provider
// attributed (container.OOMRecord: the answer is the check's exit code).
// pods/exec runs it as the sandbox user, the only user the pod has: a
// session that traces or signals the check can spoil its answer for its
// own commands, which plain writes of the OOM line cannot. A pod
// that is gone is ErrNotFound.
func (b *box) oomKilled(ctx context.Context) (bool, error) {
	res, err := b.exec(ctx, container.ExecSpec{Argv: b.p.oom.Argv(string(b.uid)), Timeout: backend.OOMCheckBudget, OutputCap: 4 << 10})
	if errors.Is(err, sandbox.ErrNotFound) {
		return false, err
	}
	if err == nil && !res.TimedOut {
		if oom, ok := b.p.oom.Verdict(string(b.uid), res.ExitCode); ok {
			return oom, nil
		}
	}
	// No answer: a pod being deleted (its deletion is recorded before its
	// processes die) explains it.
	if b.gone(ctx) {
		return false, fmt.Errorf("kubernetes: session %s: %w: the pod went under the command", b.session, sandbox.ErrNotFound)
	}
	b.p.log.Warn("out-of-memory check got no answer", "pod", b.pod, "exit", res.ExitCode, "err", err)
	return false, nil
}

// gone reports whether b's pod is gone, being deleted, or another of its
// name.
func (b *box) gone(ctx context.Context) bool {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	b.p.count()
	pod, err := b.p.cs.CoreV1().Pods(b.p.ns).Get(gctx, b.pod, metavGet)
	return apierrors.IsNotFound(err) || err == nil && (pod.UID != b.uid || pod.DeletionTimestamp != nil)
}

// exec runs s in the sandbox container through the one exec engine, with
// the killer in the keeper and the backstop below.
func (b *box) exec(ctx context.Context, s container.ExecSpec) (container.Result, error) {
	start := time.Now()
	s.User = b.userString()
	s.Policy = container.KillTree
	s.KillerID = keeperContainer
	s.Backstop = func(ctx context.Context) error { return b.restart(ctx, start) }
	s.Logger = b.p.log
	res, err := container.Exec(ctx, &execEngine{b: b}, sandboxContainer, s)
	switch {
	case errors.Is(err, container.ErrNotRunning):
		return res, fmt.Errorf("kubernetes: session %s: %w: %v", b.session, sandbox.ErrNotFound, err)
	case errors.Is(err, container.ErrNotStarted):
		return res, fmt.Errorf("kubernetes: exec in %s: %w: %v", b.pod, sandbox.ErrCommandNotStarted, err)
	case err != nil:
		return res, fmt.Errorf("kubernetes: exec in %s: %w", b.pod, err)
	}
	return res, nil
}

// restart is the KillTree backstop: from the keeper it SIGKILLs every
// process it may signal (kill(2) with pid -1: every process of the
// session's uid in the pod but itself and PID 1), the containers' main
// processes included, then waits until the kubelet has restarted both. The
// emptyDirs, and so the files, stay. A restart after since already ended
// the command, so it is not repeated.
func (b *box) restart(ctx context.Context, since time.Time) error {
	defer b.p.restarts.Lock(string(b.uid))()
	log := b.p.log.With("pod", b.pod, "phase", "restart")
	pod, err := b.p.cs.CoreV1().Pods(b.p.ns).Get(ctx, b.pod, metavGet)
	if err != nil {
		return fmt.Errorf("kubernetes: get pod %s: %w", b.pod, err)
	}
	before := restarts(pod)
	if startedAfter(pod, since) {
		log.Debug("already restarted since the command started")
		return nil
	}
	log.Warn("killing every process of the sandbox to end a command the killer could not")
	// The keeper's own main process dies too, and with it this exec's
	// stream: its error says nothing; the restart counts do.
	if err := b.stream(ctx, keeperContainer, []string{"/bin/sh", "-c", "kill -KILL -1"}, nil, io.Discard, io.Discard); err != nil {
		log.Debug("kill -1", "err", err)
	}
	for {
		pod, err := b.p.cs.CoreV1().Pods(b.p.ns).Get(ctx, b.pod, metavGet)
		if err != nil {
			return fmt.Errorf("kubernetes: get pod %s: %w", b.pod, err)
		}
		if ok, _ := running(pod); ok && restarts(pod) > before {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubernetes: waiting for %s to restart: %w", b.pod, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// restarts is the sandbox container's restart count.
func restarts(pod *corev1.Pod) int32 {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == sandboxContainer {
			return cs.RestartCount
		}
	}
	return 0
}

// startedAfter reports whether the sandbox container runs and started
// after t.
func startedAfter(pod *corev1.Pod, t time.Time) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == sandboxContainer && cs.State.Running != nil {
			return cs.State.Running.StartedAt.After(t)
		}
	}
	return false
}

// Destroy implements sandbox.Sandbox.
func (b *box) Destroy(ctx context.Context) error {
	return b.p.remove(ctx, b.session)
}

// stream runs argv in container c of the pod through pods/exec, WebSocket
// first and SPDY when the server cannot upgrade, and returns when the
// command has ended and its output is read. A command's non-zero exit is a
// utilexec.ExitError.
func (b *box) stream(ctx context.Context, c string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	b.p.count()
	req := b.p.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(b.p.ns).Name(b.pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: c, Command: argv, Stdin: stdin != nil, Stdout: stdout != nil, Stderr: stderr != nil}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(b.p.rest, http.MethodGet, req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(b.p.rest, http.MethodPost, req.URL())
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// execEngine is container.ExecEngine over pods/exec for one pod: the one
// exec engine (wrapper, killer, caps) runs unchanged. An exec is created
// here and run by ExecStart; ExecInspect reports what its stream said.
type execEngine struct {
	b     *box
	mu    sync.Mutex
	execs []*execState
}

type execState struct {
	container string
	cfg       dockerapi.ExecConfig
	started   bool
	done      bool
	code      *int
}

func (e *execEngine) get(id string) (*execState, error) {
	n, err := strconv.Atoi(id)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil || n < 0 || n >= len(e.execs) {
		return nil, fmt.Errorf("kubernetes: no exec %q", id)
	}
	return e.execs[n], nil
}

// ExecCreate records the exec; nothing reaches the cluster until
// ExecStart. Commands run as the container's user: another is refused.
func (e *execEngine) ExecCreate(ctx context.Context, c string, cfg dockerapi.ExecConfig) (string, error) {
	if cfg.User != "" && cfg.User != e.b.userString() {
		return "", fmt.Errorf("kubernetes: exec as %s: pods/exec runs as the container's user %s", cfg.User, e.b.userString())
	}
	// One GET, so that an exec into a pod that is gone (or was made anew
	// under the name) is ErrNotRunning before any stream.
	e.b.p.count()
	pod, err := e.b.p.cs.CoreV1().Pods(e.b.p.ns).Get(ctx, e.b.pod, metavGet)
	switch {
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("%w: pod %s is gone", dockerapi.ErrNotRunning, e.b.pod)
	case err != nil:
		return "", err
	case pod.UID != e.b.uid || pod.DeletionTimestamp != nil:
		return "", fmt.Errorf("%w: pod %s was removed", dockerapi.ErrNotRunning, e.b.pod)
	case c == sandboxContainer && gated(pod):
		// A sandbox command runs only with its gate up: one that died
		// is restarted by the kubelet, and this waits for that.
		if err := e.b.p.healGate(ctx, pod); err != nil {
			return "", err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.execs = append(e.execs, &execState{container: c, cfg: cfg})
	return strconv.Itoa(len(e.execs) - 1), nil
}

// ExecStart runs the exec to its end. The command runs under env(1), which
// adds the exec's environment and removes the kubelet's service variables
// without forking (so the killer still runs at its container's pids limit).
func (e *execEngine) ExecStart(ctx context.Context, id string, stdout, stderr io.Writer) error {
	x, err := e.get(id)
	if err != nil {
		return err
	}
	argv := append([]string{"env"}, e.b.unset...)
	argv = append(argv, x.cfg.Env...)
	argv = append(argv, x.cfg.Cmd...)
	e.mu.Lock()
	x.started = true
	e.mu.Unlock()
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	err = e.b.stream(ctx, x.container, argv, nil, stdout, stderr)
	code := 0
	var ee utilexec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code, err = ee.ExitStatus(), nil
	case apierrors.IsNotFound(err) || isNotRunning(err):
		err = fmt.Errorf("%w: %v", dockerapi.ErrNotRunning, err)
	}
	e.mu.Lock()
	x.done = true
	if err == nil {
		x.code = &code
	}
	e.mu.Unlock()
	return err
}

// isNotRunning reports an exec refused because the pod or container does
// not run (the API server answers 400 "container not found" or "pod does
// not exist").
func isNotRunning(err error) bool {
	if apierrors.IsBadRequest(err) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "not found") || strings.Contains(s, "does not exist") || strings.Contains(s, "is not running")
}

// ExecInspect reports the exec as running between ExecStart's call and the
// end of its stream, then with the exit code the stream gave (none when it
// broke); its Pid is -1 (pods/exec does not say).
func (e *execEngine) ExecInspect(ctx context.Context, id string) (dockerapi.ExecInspect, error) {
	x, err := e.get(id)
	if err != nil {
		return dockerapi.ExecInspect{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return dockerapi.ExecInspect{Running: x.started && !x.done, ExitCode: x.code, Pid: -1}, nil
}

// ContainerKill is not available through the API; the KillTree policy,
// the only one this backend uses, never calls it.
func (e *execEngine) ContainerKill(ctx context.Context, id, signal string) error {
	return fmt.Errorf("kubernetes: killing a container is not an API call")
}
