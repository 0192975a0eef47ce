package docker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/sandbox"
)

// session provisions one running sandbox for a test, destroyed at its end.
func session(t *testing.T) (context.Context, *box) {
	t.Helper()
	c := enginetest.Client(t)
	p, _ := newProvider(t, enginetest.Owner(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	sb, err := p.Provision(ctx, sandbox.Spec{SessionID: domain.ID("files"), Image: testImage(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return ctx, sb.(*box)
}

// sh runs a command in the sandbox and fails t unless it exits 0.
func sh(t *testing.T, ctx context.Context, b *box, cmd string) string {
	t.Helper()
	res, err := b.Exec(ctx, sandbox.ExecRequest{Command: cmd})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec(%q) = %+v, %v", cmd, res, err)
	}
	return res.Stdout
}

// TestWriteFilesKeepsOrder checks that a failure stops every later file,
// also those in a writable place before the failing one's.
func TestWriteFilesKeepsOrder(t *testing.T) {
	ctx, b := session(t)
	sh(t, ctx, b, "mkdir -p /tmp/x")
	err := b.WriteFiles(ctx, []sandbox.FileWrite{
		{Path: "/workspace/a", Data: []byte("a")},
		{Path: "/tmp/x", Data: []byte("x")},
		{Path: "/workspace/b", Data: []byte("b")},
	})
	if !errors.Is(err, sandbox.ErrIsDirectory) {
		t.Errorf("WriteFiles = %v; want ErrIsDirectory", err)
	}
	if got := sh(t, ctx, b, "cat /workspace/a; [ -e /workspace/b ] && echo b landed; [ -d /tmp/x ] || echo x replaced; true"); got != "a" {
		t.Errorf("after WriteFiles: %q; want only /workspace/a landed", got)
	}
}
