package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/agent"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/sandbox"
)

// waitAgent waits until b's container has a running agent and returns it.
func waitAgent(t testing.TB, p *Provider, b sandbox.Sandbox) *agent.Conn {
	t.Helper()
	id := b.(*box).id
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s := p.agentSlotFor(id)
		s.mu.Lock()
		c := s.conn
		s.mu.Unlock()
		if c != nil && c.Err() == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent did not start within 60s")
		}
		// An Exec launches one when none runs.
		p.agentConn(context.Background(), b.(*box))
	}
}

// killAgent kills the sandbox's agent from inside the session: a command of
// the sandbox user, run by an engine exec (not by the agent it kills),
// signals the agent's process, found by its argv; then it waits until the
// host has seen the channel end.
func killAgent(t testing.TB, p *Provider, b sandbox.Sandbox, signal string) {
	t.Helper()
	c := waitAgent(t, p, b)
	bx := b.(*box)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := container.Exec(ctx, p.eng, bx.id, container.ExecSpec{
		Argv: []string{"/bin/sh", "-c", fmt.Sprintf("kill -%s %d", signal, c.Hello().PID)}, User: bx.user(),
		Policy: container.KillTree, Backstop: func(context.Context) error { return nil }})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("kill -%s of the agent: %v, exit %d, %s", signal, err, res.ExitCode, res.Stderr)
	}
	if signal != "STOP" {
		select {
		case <-c.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("the host did not see the killed agent's channel end")
		}
	}
}

func provisionT(t *testing.T, p *Provider, img, name string) sandbox.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := p.Provision(ctx, sandbox.Spec{SessionID: domain.ID(name), Image: img})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Destroy(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return sb
}

// TestAgentRunsCommands: once the agent runs, a command costs no engine
// call, and its result is what an engine exec gives.
func TestAgentRunsCommands(t *testing.T) {
	c := enginetest.Client(t)
	img := testImage(t, c)
	owner := enginetest.Owner(t)
	p, counter := newProvider(t, owner)
	sb := provisionT(t, p, img, "agent-runs")
	waitAgent(t, p, sb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := counter.n.Load()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "echo out; echo err >&2; id -u; pwd; exit 7"})
	if err != nil {
		t.Fatal(err)
	}
	if calls := counter.n.Load() - before; calls != 0 {
		t.Errorf("Exec through the agent made %d engine calls; want 0", calls)
	}
	if res.ExitCode != 7 || res.Stdout != "out\n65534\n/workspace\n" || res.Stderr != "err\n" || res.TimedOut || res.Truncated {
		t.Errorf("Exec = %+v; want exit 7, out/uid/workdir, err", res)
	}
	// A write goes through it too: scripts and the upload, no engine call.
	before = counter.n.Load()
	data := bytes.Repeat([]byte("z"), 1<<20)
	if err := sb.WriteFile(ctx, "/workspace/d/big", data); err != nil {
		t.Fatal(err)
	}
	if calls := counter.n.Load() - before; calls != 0 {
		t.Errorf("WriteFile through the agent made %d engine calls; want 0", calls)
	}
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Command: "stat -c '%u %a %s' /workspace/d/big; stat -c '%u %a' /workspace/d"})
	if err != nil || res.Stdout != "65534 644 1048576\n65534 755\n" {
		t.Errorf("written file and parent: %q, %v; want the user's, 0644, 1 MiB", res.Stdout, err)
	}
}

// TestAgentKilledMidCommand: the session kills its agent while a command
// runs through it: that Exec returns container.ErrExecLost with its command
// dead, the next ones go through the engine, and an agent is back later.
func TestAgentKilledMidCommand(t *testing.T) {
	c := enginetest.Client(t)
	img := testImage(t, c)
	p, _ := newProvider(t, enginetest.Owner(t))
	sb := provisionT(t, p, img, "agent-killed")
	waitAgent(t, p, sb)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "sleep 1234", Timeout: 2 * time.Minute})
		done <- err
	}()
	for {
		res, err := execEngine(ctx, p, sb, "ps -o args | grep -c '^sleep 1234'")
		if err == nil && strings.TrimSpace(res) == "1" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	killAgent(t, p, sb, "KILL")
	select {
	case err := <-done:
		if !errors.Is(err, container.ErrExecLost) {
			t.Errorf("Exec whose agent died = %v; want ErrExecLost", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Exec did not return after its agent died")
	}
	if out, err := execEngine(ctx, p, sb, "ps -o args | grep -c '^sleep 1234' || true"); err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("sleeps left after the lost Exec: %q, %v; want 0", out, err)
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "echo after"})
	if err != nil || res.Stdout != "after\n" {
		t.Errorf("Exec after the agent died = %+v, %v", res, err)
	}
	waitAgent(t, p, sb)
}

// TestAgentStopped: the session stops its agent (SIGSTOP): an Exec without
// a timeout still ends, through the engine, after agentAckGrace; one with
// a short timeout times out as today; the stopped agent is killed.
func TestAgentStopped(t *testing.T) {
	c := enginetest.Client(t)
	img := testImage(t, c)
	p, _ := newProvider(t, enginetest.Owner(t))
	sb := provisionT(t, p, img, "agent-stopped")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		want    sandbox.ExecResult
	}{
		{"no timeout", 0, sandbox.ExecResult{Stdout: "ran\n"}},
		{"short timeout", 200 * time.Millisecond, sandbox.ExecResult{ExitCode: 137, TimedOut: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := waitAgent(t, p, sb)
			killAgent(t, p, sb, "STOP")
			res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "echo ran", Timeout: tc.timeout})
			if err != nil || res != tc.want {
				t.Errorf("Exec with the agent stopped = %+v, %v; want %+v", res, err, tc.want)
			}
			select {
			case <-conn.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("the stopped agent's channel was not dropped")
			}
			if out, err := execEngine(ctx, p, sb, "ps -o args | grep -c '^/.stockade/stockade-agent' || true"); err != nil || strings.TrimSpace(out) != "0" {
				t.Errorf("agents running after the drop: %q, %v; want 0", out, err)
			}
			// Past the relaunch delay, an agent runs again.
			p.agentSlotFor(sb.(*box).id).mu.Lock()
			p.agentSlotFor(sb.(*box).id).retryAt = time.Time{}
			p.agentSlotFor(sb.(*box).id).mu.Unlock()
		})
	}
}

// execEngine runs command in sb through an engine exec as the sandbox user
// and returns its stdout.
func execEngine(ctx context.Context, p *Provider, sb sandbox.Sandbox, command string) (string, error) {
	bx := sb.(*box)
	res, err := container.Exec(ctx, p.eng, bx.id, container.ExecSpec{Argv: []string{"/bin/sh", "-c", command}, User: bx.user(),
		Policy: container.KillTree, Backstop: func(context.Context) error { return nil }, Timeout: time.Minute})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("%q: exit %d: %s", command, res.ExitCode, res.Stderr)
	}
	return string(res.Stdout), nil
}
