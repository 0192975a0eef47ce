package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/stockade/stockade/internal/agent"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/defaults"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/internal/programs"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// The resident agent (internal/agent) in this backend. Placement: one
// disk-backed volume per owner and agent build, "stockade-agent-" + the
// owner's hash + "-" + 12 hex digits of the binary's sha256, labelled with
// the owner and Role=agent, filled once per provider through the archive
// API of a created, never started container of the session's image (the
// archive API writes into a volume mount point even under a read-only
// root; the image needs no shell), and mounted read-only at agentDir in
// every sandbox. Channel: one engine exec per sandbox running the agent
// as the sandbox user, its stdin and stdout the channel (a hijacked
// connection). Commands of the sandbox user go through it (agentExec, an
// ExecEngine for the one exec engine, container.Exec); the killer and the
// backstop stay the engine's. Bulk writes and reads use the agent's file
// operations (protocol version 2, files.go: land, readAgent), done in its
// process; the scripts and the archive API when it is gone, older, hung
// or refusing.

// Where the agent is in every sandbox.
const (
	agentDir  = "/.stockade"
	agentPath = agentDir + "/stockade-agent"
)

// Budgets and bounds of the agent's host side.
const (
	// agentFillBudget bounds making and filling the agent's volume.
	agentFillBudget = 60 * time.Second
	// agentLaunchBudget bounds starting the agent and reading its hello.
	agentLaunchBudget = 10 * time.Second
	// agentRelaunchDelay is the first wait after an agent failed before
	// another is launched in the same sandbox; it doubles with each
	// failure in a row up to agentRelaunchMax. Commands in between go
	// through the engine.
	agentRelaunchDelay = time.Second
	agentRelaunchMax   = time.Minute
	// agentCancelGrace is how long an agent has to answer a cancel of a
	// command it has not said it started; one that does not is dropped
	// (and killed), which is what makes "not started" certain.
	agentCancelGrace = 2 * time.Second
	// agentAckGrace is how long an agent has to say it starts a command
	// (it says so before the fork, on reading the request); one that does
	// not is taken for hung, dropped and killed, and the command goes
	// through the engine.
	agentAckGrace = 3 * time.Second
	// agentLaunchWait is how long a command waits for a launch in flight
	// (a new sandbox's first command) before it goes through the engine:
	// a launch's end is nearer than an engine exec's cost (create, start,
	// inspect) when it started before the command, so waiting is faster;
	// a launch that takes longer is not waited for.
	agentLaunchWait = 100 * time.Millisecond
	// agentStderrBytes caps the agent's own diagnostics kept.
	agentStderrBytes = 4 << 10
)

// agentState is a provider's agent: its binary, its volume, and the
// channel to each sandbox's agent.
type agentState struct {
	off bool // Config.NoAgent

	mu   sync.Mutex // guards bin, arch, vol and their making
	arch bool       // the engine's architecture was looked up
	bin  []byte     // nil: none for this engine
	vol  string     // the filled volume's name; "" until filled

	slotsMu sync.Mutex
	slots   map[string]*agentSlot // by container ID
}

// agentSlot is the agent of one sandbox container.
type agentSlot struct {
	mu        sync.Mutex
	conn      *agent.Conn
	launching bool
	launched  chan struct{} // closed when the launch in flight ends
	failures  int           // launches or channels that failed in a row
	retryAt   time.Time     // no launch before
}

// agentVolumeName is the name of the owner's volume holding bin.
func (p *Provider) agentVolumeName(bin []byte) string {
	return p.objectName("agent", programs.Digest(bin)[:12])
}

// agentLabels are what the agent's volume and filler carry.
func (p *Provider) agentLabels() map[string]string {
	l := label.Base(p.owner, label.KindSession)
	l[label.Role] = label.RoleAgent
	return l
}

// agentMount returns the read-only mount of the agent's volume for a
// sandbox of image, making and filling the volume on the provider's first
// need; ok is false when sandboxes go without an agent (Config.NoAgent, no
// agent for the engine's architecture, or the volume could not be made:
// logged, and tried again by the next Provision).
func (p *Provider) agentMount(ctx context.Context, image string) (m container.Mount, ok bool) {
	a := &p.agent
	if a.off {
		return m, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.arch {
		info, err := p.eng.Info(ctx)
		if err != nil {
			p.log.Warn("no agent: engine info", "err", err)
			return m, false
		}
		a.arch = true
		if a.bin, err = programs.Agent.For(info.Architecture); err != nil {
			p.log.Info("no agent for this engine; commands go through the engine", "arch", info.Architecture, "err", err)
		}
	}
	if a.bin == nil {
		return m, false
	}
	if a.vol != "" && !p.agentVolumeThere(ctx, a.vol) {
		// Another provider of the owner removed it with the owner's last
		// session: mounting the name would have the engine make an empty,
		// unlabelled volume of it.
		a.vol = ""
	}
	if a.vol == "" {
		fctx, cancel := context.WithTimeout(ctx, agentFillBudget)
		defer cancel()
		start := time.Now()
		name := p.agentVolumeName(a.bin)
		if err := p.fillAgentVolume(fctx, name, image, a.bin); err != nil {
			p.log.Warn("no agent: placing it", "volume", name, "err", err)
			return m, false
		}
		p.log.Debug("agent placed", "volume", name, "phase", "agent-fill", "dur", time.Since(start))
		a.vol = name
	}
	return container.Mount{Type: container.Volume, Source: a.vol, Target: agentDir}, true
}

// agentVolumeThere reports whether the agent's volume name still exists
// with the owner's agent labels (one list call per Provision: the window
// in which another process's removal can still race this Provision is
// that call to the container's create).
func (p *Provider) agentVolumeThere(ctx context.Context, name string) bool {
	vs, err := p.eng.VolumeList(ctx, dockerapi.Filters{"name": {name}})
	if err != nil {
		return false
	}
	for _, v := range vs {
		if v.Name == name && label.Has(v.Labels, p.agentLabels()) {
			return true
		}
	}
	return false
}

// fillAgentVolume makes volume name (or finds it, ours) and writes bin into
// it unless it holds a file of bin's size already.
func (p *Provider) fillAgentVolume(ctx context.Context, name, image string, bin []byte) error {
	v, err := p.createVolume(ctx, dockerapi.VolumeCreate{Name: name, Driver: "local", Labels: p.agentLabels()})
	if err != nil {
		return fmt.Errorf("create volume: %w", err)
	}
	if !label.Has(v.Labels, p.agentLabels()) {
		return fmt.Errorf("volume %s exists without this owner's agent labels; not using it", name)
	}
	spec := container.Spec{Image: image, Cmd: []string{agentPath}, User: defaults.NobodyUser, Labels: p.agentLabels(),
		Mounts: []container.Mount{{Type: container.Volume, Source: name, Target: agentDir, Writable: true}}}
	cfg, err := spec.Config()
	if err != nil {
		return err
	}
	id, err := p.eng.ContainerCreate(ctx, container.RandomName("agentfill"), cfg)
	if err != nil {
		return fmt.Errorf("create the filler: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeBudget)
		defer cancel()
		if err := p.removeContainer(rctx, id); err != nil {
			p.log.Warn("removing the agent's filler", "err", err)
		}
	}()
	if st, err := p.eng.ArchiveStat(ctx, id, agentPath); err == nil && st.Size == int64(len(bin)) {
		return nil
	}
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	if err := tw.WriteHeader(&tar.Header{Name: "stockade-agent", Mode: 0o555, Size: int64(len(bin)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	tw.Write(bin)
	if err := tw.Close(); err != nil {
		return err
	}
	if err := p.eng.ArchivePut(ctx, id, agentDir, &tb, dockerapi.PutOptions{}); err != nil {
		return fmt.Errorf("write the agent: %w", err)
	}
	return nil
}

// removeAgentIfUnused removes the owner's agent volumes, and fillers a
// crash left, once the owner has no session container left (as the
// owner's network). A Provision of another process that made sure of the
// volume just before would then create its sandbox with an empty volume
// of that name, which the engine makes without labels: that sandbox's
// agent cannot start and its commands go through the engine.
func (p *Provider) removeAgentIfUnused(ctx context.Context) error {
	cs, err := p.sessionContainers(ctx)
	if err != nil || len(cs) > 0 {
		return err
	}
	p.agent.mu.Lock()
	defer p.agent.mu.Unlock()
	want := p.agentLabels()
	vs, err := p.eng.VolumeList(ctx, dockerapi.LabelsFilter(want))
	if err != nil {
		return fmt.Errorf("docker: list agent volumes: %w", err)
	}
	for _, v := range vs {
		if !label.Has(v.Labels, want) {
			continue
		}
		for attempt := 0; ; attempt++ {
			// Fillers first: one a crashed process had in flight may
			// appear only now.
			if err := p.removeAgentFillers(ctx); err != nil {
				return err
			}
			err := p.eng.VolumeRemove(ctx, v.Name, false)
			if err == nil || errors.Is(err, dockerapi.ErrNotFound) {
				break
			}
			if !errors.Is(err, dockerapi.ErrConflict) {
				return fmt.Errorf("docker: remove volume %s: %w", v.Name, err)
			}
			// In use: by a filler the engine is still creating, or by a
			// sandbox a concurrent Provision made, whose it is then.
			if cs, err := p.sessionContainers(ctx); err != nil || len(cs) > 0 || attempt == maxAgentRemoveAttempts {
				return err
			}
			if err := container.Sleep(ctx, 100*time.Millisecond); err != nil {
				return fmt.Errorf("docker: remove volume %s: %w", v.Name, err)
			}
		}
		if v.Name == p.agent.vol {
			p.agent.vol = ""
		}
	}
	return p.removeAgentFillers(ctx)
}

// maxAgentRemoveAttempts bounds the retries of removing the agent's volume
// while a filler holds it (about 5 s).
const maxAgentRemoveAttempts = 50

// removeAgentFillers removes the owner's agent fillers.
func (p *Provider) removeAgentFillers(ctx context.Context) error {
	want := p.agentLabels()
	fillers, err := p.eng.ContainerList(ctx, dockerapi.ListOptions{All: true, Filters: dockerapi.LabelsFilter(want)})
	if err != nil {
		return fmt.Errorf("docker: list agent fillers: %w", err)
	}
	for _, c := range fillers {
		if label.Has(c.Labels, want) {
			if err := p.removeContainer(ctx, c.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// agentSlotFor returns container id's slot.
func (p *Provider) agentSlotFor(id string) *agentSlot {
	a := &p.agent
	a.slotsMu.Lock()
	defer a.slotsMu.Unlock()
	if a.slots == nil {
		a.slots = map[string]*agentSlot{}
	}
	s := a.slots[id]
	if s == nil {
		s = &agentSlot{}
		a.slots[id] = s
	}
	return s
}

// forgetAgent drops container id's agent (the container is removed).
func (p *Provider) forgetAgent(id string) {
	a := &p.agent
	a.slotsMu.Lock()
	s := a.slots[id]
	delete(a.slots, id)
	a.slotsMu.Unlock()
	if s != nil {
		s.mu.Lock()
		c := s.conn
		s.conn = nil
		s.mu.Unlock()
		if c != nil {
			c.Fail(fmt.Errorf("%w: the sandbox is removed", agent.ErrGone))
		}
	}
}

// runningAgent returns b's agent channel when one runs, launching none.
func (p *Provider) runningAgent(b *box) *agent.Conn {
	if p.agent.off {
		return nil
	}
	s := p.agentSlotFor(b.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.conn.Err() == nil {
		return s.conn
	}
	return nil
}

// agentConn returns b's running agent channel; nil means this command
// goes through the engine. When none runs, and none is being launched or
// waited for after a failure, it launches one in the background (never in
// the caller's time: an Exec's timeout does not cover a launch).
func (p *Provider) agentConn(ctx context.Context, b *box) *agent.Conn {
	if p.agent.off {
		return nil
	}
	s := p.agentSlotFor(b.id)
	s.mu.Lock()
	if s.conn != nil && s.conn.Err() == nil {
		c := s.conn
		s.mu.Unlock()
		return c
	}
	if s.conn != nil {
		// It ended since the last command: count it, wait before the next.
		s.conn = nil
		s.fail()
	}
	if s.launching {
		launched := s.launched
		s.mu.Unlock()
		return p.awaitAgent(ctx, s, launched)
	}
	if time.Now().Before(s.retryAt) {
		s.mu.Unlock()
		return nil
	}
	s.launching, s.launched = true, make(chan struct{})
	s.mu.Unlock()
	go p.launchAgent(context.WithoutCancel(ctx), b, s)
	return nil
}

// awaitAgent waits up to agentLaunchWait for the launch in flight (launched
// closes at its end) and returns its channel, nil if it failed or did not
// end in time.
func (p *Provider) awaitAgent(ctx context.Context, s *agentSlot, launched chan struct{}) *agent.Conn {
	t := time.NewTimer(agentLaunchWait)
	defer t.Stop()
	select {
	case <-launched:
	case <-t.C:
		return nil
	case <-ctx.Done():
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.conn.Err() == nil {
		return s.conn
	}
	return nil
}

// fail records one failure of the slot's agent; s.mu is held.
func (s *agentSlot) fail() {
	s.failures++
	d := agentRelaunchDelay << min(s.failures-1, 6)
	s.retryAt = time.Now().Add(min(d, agentRelaunchMax))
}

// launchAgent starts b's agent and records it in s.
func (p *Provider) launchAgent(ctx context.Context, b *box, s *agentSlot) {
	c, err := p.startAgent(ctx, b)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.launching = false
	close(s.launched)
	if err != nil {
		s.fail()
		p.log.Debug("agent not started; commands go through the engine", "container", b.name, "err", err, "retry_in", time.Until(s.retryAt))
		return
	}
	s.conn, s.failures = c, 0
}

// startAgent runs the agent in b as b's user through one engine exec and
// opens its channel.
func (p *Provider) startAgent(ctx context.Context, b *box) (*agent.Conn, error) {
	lctx, cancel := context.WithTimeout(ctx, agentLaunchBudget)
	defer cancel()
	marker := container.RandomHex(8)
	user := b.user()
	drop := func(cause error) error {
		p.log.Debug("agent channel ended", "container", b.name, "cause", cause)
		return container.KillMarked(context.WithoutCancel(ctx), p.eng, b.id, user, marker)
	}
	id, err := p.eng.ExecCreate(lctx, b.id, dockerapi.ExecConfig{Cmd: []string{agentPath, "serve", container.MarkerArg(marker)}, User: user,
		AttachStdin: true, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return nil, err
	}
	rw, err := p.eng.ExecAttach(lctx, id)
	if err != nil {
		return nil, err
	}
	frames, fw := io.Pipe()
	diag := dockerapi.NewBuffer(agentStderrBytes)
	go func() { fw.CloseWithError(dockerapi.Demux(rw, fw, diag)) }()
	c, err := agent.Open(lctx, frames, rw, rw, drop)
	if err != nil {
		// Whatever answered may still run: it goes like a dropped agent.
		if kerr := drop(err); kerr != nil {
			p.log.Warn("ending an agent that did not start", "container", b.name, "err", kerr)
		}
		return nil, fmt.Errorf("%w (agent stderr: %q)", err, diag.String())
	}
	p.log.Debug("agent started", "container", b.name, "pid", c.Hello().PID)
	return c, nil
}

// agentExec runs one command of a sandbox through its agent, as an
// ExecEngine for container.Exec: ExecStart sends it and copies its output,
// ExecInspect reports its end. It is the one exec engine's transport, not a
// second exec engine: the wrapper, the caps, the timer, the killer (through
// the engine: ExecSpec.Killer) and the backstop are container.Exec's.
type agentExec struct {
	conn *agent.Conn
	eng  engine // the engine: ContainerKill, and the insurance kill
	user string // the agent's user: commands of another user go through the engine

	stdin  []byte // the command's stdin; nil: empty
	req    agent.Request
	cid    string
	marker string // the wrapper's marker, from its argv

	mu        sync.Mutex
	call      *agent.Call
	abandoned bool // inspected before it was sent: never send it
}

var _ container.ExecEngine = (*agentExec)(nil)

func (a *agentExec) ExecCreate(ctx context.Context, cid string, cfg dockerapi.ExecConfig) (string, error) {
	if cfg.User != a.user || cfg.AttachStdin || cfg.Privileged || cfg.Tty {
		return "", fmt.Errorf("%w: the agent runs commands as %s only", container.ErrNotStarted, a.user)
	}
	// The wrapper's argv: /bin/sh -c script stockade-exec MARKER argv...
	if len(cfg.Cmd) > 4 && cfg.Cmd[3] == "stockade-exec" {
		a.marker = cfg.Cmd[4]
	}
	a.req, a.cid = agent.Request{Argv: cfg.Cmd, Env: cfg.Env, Dir: cfg.WorkingDir, Stdin: a.stdin}, cid
	return "agent", nil
}

func (a *agentExec) ExecStart(ctx context.Context, _ string, stdout, stderr io.Writer) error {
	a.mu.Lock()
	if a.abandoned {
		a.mu.Unlock()
		return fmt.Errorf("%w: ended before it was sent", container.ErrNotStarted)
	}
	k, err := a.conn.Run(a.req, stdout, stderr)
	if err != nil {
		a.mu.Unlock()
		return fmt.Errorf("%w: %v", container.ErrNotStarted, err)
	}
	a.call = k
	a.mu.Unlock()
	t := time.NewTimer(agentAckGrace)
	select {
	case <-k.Acked():
	case <-k.Done():
	case <-t.C:
		a.conn.Fail(fmt.Errorf("%w: no start within %v", agent.ErrGone, agentAckGrace))
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
	t.Stop()
	select {
	case <-k.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	_, err = k.Result()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, agent.ErrNotStarted):
		if a.conn.Started(k) && a.marker != "" {
			// It said it started, then that it did not: make sure.
			if kerr := container.KillNested(ctx, a.eng, a.cid, a.user, a.marker); kerr != nil {
				return fmt.Errorf("agent: %v; and the command may run: %v", err, kerr)
			}
		}
		return fmt.Errorf("%w: %v", container.ErrNotStarted, err)
	}
	return err
}

// ExecInspect reports the command's state; its Pid is -1 (unknown: the
// agent forks the wrapper itself, and says so when it cannot).
func (a *agentExec) ExecInspect(ctx context.Context, _ string) (dockerapi.ExecInspect, error) {
	killed := 137
	a.mu.Lock()
	k := a.call
	if k == nil {
		a.abandoned = true
		a.mu.Unlock()
		return dockerapi.ExecInspect{ExitCode: &killed, Pid: -1}, nil
	}
	a.mu.Unlock()
	for cancelled := false; ; {
		select {
		case <-k.Done():
			if code, err := k.Result(); err == nil {
				return dockerapi.ExecInspect{ExitCode: &code, Pid: -1}, nil
			}
			return dockerapi.ExecInspect{ExitCode: &killed, Pid: -1}, nil
		default:
		}
		if a.conn.Started(k) {
			return dockerapi.ExecInspect{Running: true, Pid: -1}, nil
		}
		if cancelled {
			// It neither started nor answered: drop it, which kills the
			// agent through the engine; then nothing of it can start.
			a.conn.Fail(fmt.Errorf("%w: no answer to a cancel", agent.ErrGone))
			select {
			case <-k.Done():
				continue
			case <-ctx.Done():
				return dockerapi.ExecInspect{}, ctx.Err()
			}
		}
		// Not started as far as the host knows: ask the agent not to.
		a.conn.Cancel(k)
		cancelled = true
		t := time.NewTimer(agentCancelGrace)
		select {
		case <-k.Done():
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return dockerapi.ExecInspect{}, ctx.Err()
		}
		t.Stop()
	}
}

func (a *agentExec) ContainerKill(ctx context.Context, id, signal string) error {
	return a.eng.ContainerKill(ctx, id, signal)
}
