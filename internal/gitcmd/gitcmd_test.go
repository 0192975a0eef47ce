package gitcmd

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// What the repository configures does not run, what the caller's global
// configuration says does not apply, and Env replaces a default.
func TestRunIgnoresConfiguration(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir, home := t.TempDir(), t.TempDir()
	ctx := context.Background()
	if err := Run(ctx, dir, Options{}, "init", "-q"); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	hook := "#!/bin/sh\ntouch " + marker + "\n"
	if err := os.WriteFile(filepath.Join(dir, ".git", "hooks", "pre-commit"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Run(ctx, dir, Options{}, "config", "core.fsmonitor", "touch "+marker); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_AUTHOR_NAME", "host")
	var out bytes.Buffer
	env := []string{"HOME=" + home, "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@x", "GIT_COMMITTER_NAME=c", "GIT_COMMITTER_EMAIL=c@x"}
	if err := Run(ctx, dir, Options{Env: env}, "commit", "-q", "--allow-empty", "-m", "m"); err != nil {
		t.Fatal(err)
	}
	if err := Run(ctx, dir, Options{Stdout: &out, Env: env}, "log", "-1", "--format=%an %ae"); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != "a a@x" {
		t.Errorf("author = %q; want the one Env gave", got)
	}
	if err := Run(ctx, dir, Options{}, "status", "--porcelain"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a hook or the fsmonitor the repository configures ran")
	}
	if err := Run(ctx, dir, Options{}, "no-such-command"); err == nil || !strings.Contains(err.Error(), "no-such-command") {
		t.Errorf("a failing git = %v; want an error naming it", err)
	}
}
