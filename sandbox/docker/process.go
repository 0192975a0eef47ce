package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stockade/stockade/internal/agent"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// Interactive processes in this backend (sandbox.Processes): the process
// daemon of the agent (internal/agent, process.go), reached through one
// engine exec per sandbox and provider running `stockade-agent attach`
// as the sandbox user, whose stdin and stdout are the channel. The daemon
// owns the processes, so they outlive the channel, the caller's context
// and the provider; a provider of another process opens its own channel
// and finds them. Without the agent (Config.NoAgent, or none for the
// engine's architecture) Start, Attach and List are
// sandbox.ErrUnsupported: an engine exec cannot keep a process for a
// later caller.

var _ sandbox.Processes = (*box)(nil)

// procOpenBudget bounds opening a sandbox's process channel: the exec, the
// relay, starting the daemon, its hello.
const procOpenBudget = 10 * time.Second

// procSlot is a sandbox's process channel in one provider.
type procSlot struct {
	mu   sync.Mutex
	conn *agent.ProcConn
}

// procSlots are the process channels, by provider and container ID; an
// entry goes when its channel ends.
var procSlots sync.Map // procKey -> *procSlot

type procKey struct {
	p  *Provider
	id string
}

// procConn returns b's process channel, opening one when none runs.
func (b *box) procConn(ctx context.Context) (*agent.ProcConn, error) {
	p := b.p
	if p.agent.off {
		return nil, fmt.Errorf("docker: %w: interactive processes need the resident agent (Config.NoAgent is set)", sandbox.ErrUnsupported)
	}
	key := procKey{p, b.id}
	v, _ := procSlots.LoadOrStore(key, &procSlot{})
	s := v.(*procSlot)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.conn.Err() == nil {
		return s.conn, nil
	}
	c, err := b.openProcs(ctx)
	if err != nil {
		return nil, err
	}
	s.conn = c
	go func() {
		<-c.Done()
		procSlots.CompareAndDelete(key, s)
	}()
	return c, nil
}

// forgetProcs closes container id's process channel (the container is
// removed); its processes went with it.
func (p *Provider) forgetProcs(id string) {
	if v, ok := procSlots.LoadAndDelete(procKey{p, id}); ok {
		s := v.(*procSlot)
		s.mu.Lock()
		c := s.conn
		s.mu.Unlock()
		if c != nil {
			c.Close()
		}
	}
}

// openProcs runs the relay in b and opens the channel through it.
func (b *box) openProcs(ctx context.Context) (*agent.ProcConn, error) {
	lctx, cancel := context.WithTimeout(ctx, procOpenBudget)
	defer cancel()
	id, err := b.p.eng.ExecCreate(lctx, b.id, dockerapi.ExecConfig{Cmd: []string{agentPath, "attach", container.MarkerArg(container.RandomHex(8))},
		User: b.user(), WorkingDir: "/", AttachStdin: true, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return nil, b.execErr(err)
	}
	rw, err := b.p.eng.ExecAttach(lctx, id)
	if err != nil {
		return nil, b.execErr(err)
	}
	frames, fw := io.Pipe()
	diag := dockerapi.NewBuffer(agentStderrBytes)
	go func() { fw.CloseWithError(dockerapi.Demux(rw, fw, diag)) }()
	c, err := agent.OpenProcs(lctx, frames, rw, closeBoth{rw, frames})
	if err != nil {
		if b.gone(ctx) {
			return nil, fmt.Errorf("docker: session %s: %w", b.session, sandbox.ErrNotFound)
		}
		return nil, fmt.Errorf("docker: %w: the process daemon did not answer in %s: %v (stderr %q)", sandbox.ErrUnsupported, b.name, err, diag.String())
	}
	return c, nil
}

// closeBoth closes a hijacked connection and the pipe its frames go
// through.
type closeBoth struct {
	rw io.Closer
	pr *io.PipeReader
}

func (c closeBoth) Close() error {
	c.pr.Close()
	return c.rw.Close()
}

// Start implements sandbox.Processes.
func (b *box) Start(ctx context.Context, req sandbox.ProcessRequest) (sandbox.Process, error) {
	if err := sandbox.CheckProcessRequest(req); err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if b.gate {
		if err := b.p.healGate(ctx, b.session); err != nil {
			return nil, err
		}
	}
	c, err := b.procConn(ctx)
	if err != nil {
		return nil, err
	}
	sr := agent.StartRequest{Argv: req.Argv, Dir: req.Dir, Stdin: req.Stdin, TimeoutMillis: req.Timeout.Milliseconds(),
		OutputCap: req.OutputCap, Name: req.Name, BufferBytes: req.BufferBytes}
	if req.Command != "" {
		sr.Argv = []string{"/bin/sh", "-c", req.Command}
	}
	if sr.Dir == "" {
		sr.Dir = b.workdir
	}
	if req.Timeout > 0 && sr.TimeoutMillis == 0 {
		sr.TimeoutMillis = 1
	}
	if req.Terminal != nil {
		sr.Terminal = &agent.Terminal{Rows: req.Terminal.Rows, Cols: req.Terminal.Cols}
	}
	for k, v := range req.Env {
		sr.Env = append(sr.Env, k+"="+v)
	}
	sort.Strings(sr.Env)
	h, err := c.Start(ctx, sr)
	if err != nil {
		return nil, b.procErr(err)
	}
	return &process{b: b, h: h}, nil
}

// Attach implements sandbox.Processes.
func (b *box) Attach(ctx context.Context, req sandbox.AttachRequest) (sandbox.Process, error) {
	if req.ID == "" && req.Name == "" {
		return nil, fmt.Errorf("docker: %w: attach needs an ID or a name", sandbox.ErrProcessNotFound)
	}
	c, err := b.procConn(ctx)
	if err != nil {
		return nil, err
	}
	h, err := c.Attach(ctx, agent.AttachRequest{ID: req.ID, Name: req.Name, From: req.From})
	if err != nil {
		return nil, b.procErr(err)
	}
	return &process{b: b, h: h}, nil
}

// List implements sandbox.Processes.
func (b *box) List(ctx context.Context) ([]sandbox.ProcessInfo, error) {
	c, err := b.procConn(ctx)
	if err != nil {
		return nil, err
	}
	ps, err := c.List(ctx)
	if err != nil {
		return nil, b.procErr(err)
	}
	out := make([]sandbox.ProcessInfo, len(ps))
	for i, p := range ps {
		out[i] = processInfo(p)
	}
	return out, nil
}

func processInfo(p agent.ProcessInfo) sandbox.ProcessInfo {
	i := sandbox.ProcessInfo{ID: p.ID, Name: p.Name, Argv: p.Argv, Started: p.Started, State: sandbox.ProcessState(p.State),
		Terminal: p.Terminal, Output: p.Output}
	if p.End != nil {
		r := processResult(*p.End)
		i.Result = &r
	}
	return i
}

func processResult(e agent.EndInfo) sandbox.ProcessResult {
	r := sandbox.ProcessResult{ExitCode: e.ExitCode, Cause: sandbox.EndCause(e.Cause), Truncated: e.Truncated, Output: e.Output, Dropped: e.Dropped}
	if e.Detached {
		r.Cause = sandbox.CauseDetached
	}
	r.TimedOut = r.Cause == sandbox.CauseTimeout
	return r
}

// procErr maps the channel's errors to the sandbox package's.
func (b *box) procErr(err error) error {
	switch {
	case errors.Is(err, agent.ErrNoProcess):
		return fmt.Errorf("docker: %s: %w", b.name, sandbox.ErrProcessNotFound)
	case errors.Is(err, agent.ErrEnded):
		return fmt.Errorf("docker: %s: %w", b.name, sandbox.ErrProcessEnded)
	case errors.Is(err, agent.ErrRefused) && strings.Contains(err.Error(), "in use"):
		return fmt.Errorf("docker: %s: %w: %v", b.name, sandbox.ErrProcessNameInUse, err)
	case errors.Is(err, agent.ErrRefused):
		return fmt.Errorf("docker: %s: %w: %v", b.name, sandbox.ErrCommandNotStarted, err)
	case errors.Is(err, agent.ErrGone), errors.Is(err, agent.ErrProtocol):
		return fmt.Errorf("docker: %s: %w: %v", b.name, sandbox.ErrProcessGone, err)
	}
	return fmt.Errorf("docker: %s: %w", b.name, err)
}

// process is a sandbox.Process over the channel's handle.
type process struct {
	b *box
	h *agent.Proc

	mu     sync.Mutex
	result *sandbox.ProcessResult // once Next returned the end
}

func (p *process) Info() sandbox.ProcessInfo { return processInfo(p.h.Info()) }

func (p *process) Next(ctx context.Context) (sandbox.ProcessEvent, error) {
	ev, err := p.h.Next(ctx)
	if err == io.EOF {
		return sandbox.ProcessEvent{}, io.EOF
	}
	if err != nil {
		if ctx.Err() != nil {
			return sandbox.ProcessEvent{}, err
		}
		return sandbox.ProcessEvent{}, p.b.procErr(err)
	}
	out := sandbox.ProcessEvent{Data: ev.Data, Offset: ev.Offset, Dropped: ev.Dropped}
	switch ev.Type {
	case agent.TypeStdout:
		out.Type = sandbox.EventStdout
	case agent.TypeStderr:
		out.Type = sandbox.EventStderr
	case agent.TypeDropped:
		out.Type = sandbox.EventDropped
	case agent.TypeEnd:
		out.Type = sandbox.EventEnd
		r := processResult(*ev.End)
		out.Result = &r
		p.mu.Lock()
		p.result = &r
		p.mu.Unlock()
	}
	return out, nil
}

func (p *process) Write(ctx context.Context, b []byte) (int, error) {
	n, err := p.h.Write(ctx, b)
	if err != nil && ctx.Err() == nil {
		err = p.b.procErr(err)
	}
	return n, err
}

func (p *process) CloseStdin(ctx context.Context) error {
	return p.err(ctx, p.h.CloseStdin(ctx))
}

func (p *process) Signal(ctx context.Context, sig sandbox.Signal) error {
	switch sig {
	case sandbox.SignalHUP, sandbox.SignalINT, sandbox.SignalKILL, sandbox.SignalTERM:
	default:
		return fmt.Errorf("docker: %w: signal %d", sandbox.ErrUnsupported, sig)
	}
	return p.err(ctx, p.h.Signal(ctx, syscall.Signal(sig)))
}

func (p *process) Resize(ctx context.Context, size sandbox.TerminalSize) error {
	if !p.h.Info().Terminal {
		return fmt.Errorf("docker: %w: resize of a process without a terminal", sandbox.ErrUnsupported)
	}
	if size.Rows == 0 || size.Cols == 0 {
		return errors.New("docker: a terminal needs rows and columns")
	}
	return p.err(ctx, p.h.Resize(ctx, agent.Terminal{Rows: size.Rows, Cols: size.Cols}))
}

func (p *process) Detach(ctx context.Context) error {
	return p.err(ctx, p.h.Detach(ctx))
}

func (p *process) Wait(ctx context.Context) (sandbox.ProcessResult, error) {
	for {
		ev, err := p.Next(ctx)
		if err == io.EOF {
			p.mu.Lock()
			defer p.mu.Unlock()
			return *p.result, nil
		}
		if err != nil {
			return sandbox.ProcessResult{}, err
		}
		if ev.Type == sandbox.EventEnd {
			return *ev.Result, nil
		}
	}
}

func (p *process) err(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	return p.b.procErr(err)
}
