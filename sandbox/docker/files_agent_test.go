package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/sandbox"
)

// TestAgentFileOps: with the agent running, a bulk write lands and a file
// is read through its file operations, with no engine call; a write that
// fills the sandbox's tmpfs is ErrNotWritable naming the lack of space,
// lands nothing and leaves nothing; a file the sandbox user cannot read
// is an error.
func TestAgentFileOps(t *testing.T) {
	s := newFixture(t)
	sb := s.provision(t, sandbox.Spec{SessionID: "agent-files", Hardening: sandbox.Hardening{EphemeralStorageBytes: 8 << 20, ReadOnlyRootfs: true}})
	waitAgent(t, s.p, sb)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var files []sandbox.FileWrite
	for i := 0; i < 200; i++ {
		files = append(files, sandbox.FileWrite{Path: fmt.Sprintf("/workspace/af/d%d/f%d", i%5, i), Data: []byte(fmt.Sprint(i))})
	}
	before := s.calls.n.Load()
	if err := sb.WriteFiles(ctx, files); err != nil {
		t.Fatal(err)
	}
	got, err := sb.ReadFile(ctx, "/workspace/af/d3/f123")
	if err != nil || string(got) != "123" {
		t.Errorf("ReadFile = %q, %v; want 123", got, err)
	}
	if _, err := sb.ReadFile(ctx, "/workspace/af/missing"); !errors.Is(err, sandbox.ErrFileNotExist) {
		t.Errorf("ReadFile(missing) = %v; want ErrFileNotExist", err)
	}
	if calls := s.calls.n.Load() - before; calls != 0 {
		t.Errorf("WriteFiles and ReadFile through the agent made %d engine calls; want 0", calls)
	}

	// 5 MiB into /workspace's 4 MiB: ENOSPC while staging.
	if err := sb.WriteFile(ctx, "/workspace/af/keep", []byte("old")); err != nil {
		t.Fatal(err)
	}
	err = sb.WriteFiles(ctx, []sandbox.FileWrite{{Path: "/workspace/af/first", Data: []byte("1")}, {Path: "/workspace/af/keep", Data: bytes.Repeat([]byte("x"), 5<<20)}})
	var pe *sandbox.PathNotWritableError
	if !errors.As(err, &pe) || pe.Path != "/workspace/af/keep" || !strings.Contains(err.Error(), "cannot stage the new file") || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("WriteFiles past the tmpfs = %v; want a PathNotWritableError for /workspace/af/keep naming the lack of space, from the agent's one-step write", err)
	}
	res := execIn(t, sb, "cat /workspace/af/keep; [ -e /workspace/af/first ] && echo first landed; find /workspace -name '"+sandbox.TempPrefix+"*'")
	if res.Stdout != "old" {
		t.Errorf("after the full tmpfs: %q; want the old file, nothing landed, no temporaries", res.Stdout)
	}

	// Readable by root only: the agent (the sandbox user) refuses, and so
	// does the script it falls back to, run as the same user: never the
	// engine as root (issue 23, item 8).
	if r, err := sb.(*box).engineExec(ctx, container.ExecSpec{Argv: []string{"/bin/sh", "-c", "echo secret > /tmp/rootonly && chmod 600 /tmp/rootonly"},
		User: "0:0", AsRoot: true, Timeout: time.Minute}); err != nil || r.ExitCode != 0 {
		t.Fatalf("making a root-only file: %+v, %v", r, err)
	}
	if got, err := sb.ReadFile(ctx, "/tmp/rootonly"); err == nil || strings.Contains(string(got), "secret") {
		t.Errorf("ReadFile(root-only) = %q, %v; want an error: the sandbox user cannot read it", got, err)
	}
}

// TestAgentStoppedFileOps: the session stops its agent (SIGSTOP); a bulk
// write and a read still succeed, through the scripts (as the user),
// once the host has taken the agent for hung (no acknowledgement within
// agentAckGrace), dropped and killed it; nothing staged is left.
func TestAgentStoppedFileOps(t *testing.T) {
	c := enginetest.Client(t)
	p, _ := newProvider(t, enginetest.Owner(t))
	sb := provisionT(t, p, testImage(t, c), "agent-stopped-files")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, op := range []string{"write", "read"} {
		t.Run(op, func(t *testing.T) {
			conn := waitAgent(t, p, sb)
			killAgent(t, p, sb, "STOP")
			switch op {
			case "write":
				files := []sandbox.FileWrite{{Path: "/workspace/st/a", Data: []byte("a")}, {Path: "/workspace/st/d/b", Data: []byte("b")}}
				if err := sb.WriteFiles(ctx, files); err != nil {
					t.Fatalf("WriteFiles with the agent stopped = %v", err)
				}
			case "read":
				if got, err := sb.ReadFile(ctx, "/workspace/st/d/b"); err != nil || string(got) != "b" {
					t.Errorf("ReadFile with the agent stopped = %q, %v; want b", got, err)
				}
			}
			select {
			case <-conn.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("the stopped agent's channel was not dropped")
			}
			// Hold the background relaunch off while the stopped agent's
			// end is checked: under load its delay (1 s) can pass before
			// the check, and a fresh agent is not the stopped one.
			s := p.agentSlotFor(sb.(*box).id)
			s.mu.Lock()
			s.retryAt = time.Now().Add(time.Hour)
			s.mu.Unlock()
			var out string
			var err error
			for deadline := time.Now().Add(15 * time.Second); ; {
				out, err = execEngine(ctx, p, sb, "cat /workspace/st/a /workspace/st/d/b; find /workspace -name '"+sandbox.TempPrefix+"*'; ps -o args | grep -c '^/.stockade/stockade-agent' || true")
				if err != nil || out == "ab0\n" || time.Now().After(deadline) {
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
			if err != nil || out != "ab0\n" {
				t.Errorf("after the %s: %q, %v; want the files, no temporaries, no agent", op, out, err)
			}
			s.mu.Lock()
			s.retryAt = time.Time{} // past the relaunch delay
			s.mu.Unlock()
		})
	}
}
