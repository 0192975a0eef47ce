package inspect

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/hosttest"
	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/workflow"
)

// gitRepo makes a git checkout of the clean fixture whose .gitignore
// ignores node_modules and .venv, committed.
func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := filepath.Join(t.TempDir(), "repo")
	if err := hosttest.CopyTree(filepath.Join(repos, "clean"), dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("node_modules\n.venv\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-q", "-m", "clean module"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// inspectNoTime runs Inspect with a deadline that ends before the first
// engine call: the layout check runs, then the report says the deadline
// ran out. No engine is needed (noEngine panics on any call).
func inspectNoTime(t *testing.T, dir string, worktree bool) *report.Report {
	t.Helper()
	rep, err := Inspect(context.Background(), noEngine{}, Options{Options: workflow.Options{Dir: dir, DataDir: t.TempDir(), Deadline: time.Nanosecond}, Worktree: worktree})
	if err != nil {
		t.Fatalf("Inspect = %v", err)
	}
	return rep
}

// TestInspect_ChecksTheValidatedTree: the layout check reads the tree that
// is validated, the committed one, so ignored symlinks leaving the
// repository (node_modules, .venv) refuse nothing; and a working tree
// with uncommitted changes is said to have them, in text and JSON.
func TestInspect_ChecksTheValidatedTree(t *testing.T) {
	dir := gitRepo(t)
	for _, l := range []struct{ name, target string }{{"node_modules", "/usr/lib/node_modules"}, {".venv", "../../.."}} {
		if err := os.Symlink(l.target, filepath.Join(dir, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for _, worktree := range []bool{false, true} {
		if rep, refused, _ := Refuse(ctx, dir, worktree, t.TempDir()); refused {
			t.Errorf("Refuse(worktree=%v) refused %+v: ignored files are not validated", worktree, rep.Refusal)
		}
		rep := inspectNoTime(t, dir, worktree)
		if rep.Refusal != nil {
			t.Errorf("Inspect(worktree=%v) refused %+v", worktree, rep.Refusal)
		}
		if rep.Source == nil || rep.Source.Uncommitted {
			t.Errorf("Inspect(worktree=%v): source %+v; want no uncommitted changes (ignored files do not count)", worktree, rep.Source)
		}
	}

	// A committed symlink that leaves the repository is still refused.
	esc := gitRepo(t)
	os.Symlink("/etc", filepath.Join(esc, "etc"))
	if rep, refused, _ := Refuse(ctx, esc, true, t.TempDir()); !refused || rep.Refusal.Kind != "symlink_escape" {
		t.Errorf("Refuse(worktree, untracked escaping symlink) = %+v, %v; want symlink_escape", rep, refused)
	}

	// An uncommitted change: the committed tree is validated, and the
	// report says the working tree differs.
	if err := os.WriteFile(filepath.Join(dir, "extra.go"), []byte("package clean\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := inspectNoTime(t, dir, false)
	if rep.Source == nil || rep.Source.Kind != "commit" || !rep.Source.Uncommitted {
		t.Fatalf("source %+v; want the committed tree, with uncommitted changes", rep.Source)
	}
	var text, js bytes.Buffer
	report.WriteText(&text, rep)
	report.WriteJSON(&js, rep)
	if !strings.Contains(text.String(), "uncommitted changes") {
		t.Errorf("text report does not mention the uncommitted changes:\n%s", text.String())
	}
	if !strings.Contains(js.String(), `"uncommitted_changes": true`) {
		t.Errorf("JSON report lacks uncommitted_changes:\n%s", js.String())
	}
	if rep := inspectNoTime(t, dir, true); rep.Source == nil || rep.Source.Kind != "worktree" || rep.Source.Uncommitted {
		t.Errorf("-worktree: source %+v; want the working tree, nothing left out", rep.Source)
	}
}

// TestInspect_DeadlineRunsOut: a deadline too short for the first engine
// phase ends inspect at once with an inconclusive report naming the phase,
// not an error and not a hang.
func TestInspect_DeadlineRunsOut(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join(repos, "clean"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep := inspectNoTime(t, dir, false)
	if rep.Verdict != report.Inconclusive || rep.ExitCode != report.ExitFindings || rep.TimedOut != "image" {
		t.Errorf("verdict %s, exit %d, timed out in %q; want inconclusive, %d, image", rep.Verdict, rep.ExitCode, rep.TimedOut, report.ExitFindings)
	}
	if len(rep.Checks) != 0 || rep.Image != nil {
		t.Errorf("checks %v, image %v; want none", rep.Checks, rep.Image)
	}
	// The report says which bound ran out: here the -deadline, not
	// -timeout (the validation's, which never started).
	var text bytes.Buffer
	report.WriteText(&text, rep)
	if rep.TimedOutBy != "the -deadline (1ns)" || !strings.Contains(text.String(), "timed out: the -deadline (1ns) ran out during image") {
		t.Errorf("timed out by %q; text:\n%s\nwant the -deadline named", rep.TimedOutBy, text.String())
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestCheckTree_ScratchInDataDir: the layout check's copy of a checkout's
// tree is made in the data directory (toolchain.Scratch, reaped if the
// process dies), not in $TMPDIR: it works with $TMPDIR pointing nowhere,
// and leaves nothing behind.
func TestCheckTree_ScratchInDataDir(t *testing.T) {
	dir := gitRepo(t)
	data := t.TempDir()
	t.Setenv("TMPDIR", "/nonexistent/tmp")
	rep, refused, err := Refuse(context.Background(), dir, false, data)
	if err != nil || refused {
		t.Fatalf("Refuse = %+v, %v, %v; want no refusal, no error", rep, refused, err)
	}
	ents, err := os.ReadDir(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "scratch-") {
			t.Errorf("the check left %s in the data directory", e.Name())
		}
	}
}

// TestRefuse_ReleasesOfTheDataDir: a release `stockade image build -go R
// -data-dir X` fetched into X serves a `go R` module inspected with
// -data-dir X: the layout check looks at X's releases, not the default
// data directory's, so it does not refuse with advice to run what was
// just run.
func TestRefuse_ReleasesOfTheDataDir(t *testing.T) {
	data := t.TempDir()
	root := image.FetchedGoRoot(filepath.Join(data, toolchain.ToolchainsDir), "1.28.0")
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "VERSION"), []byte("go1.28.0\ntime 2027-02-01T00:00:00Z\n"), 0o644)
	os.WriteFile(filepath.Join(root, "bin", "go"), []byte("#!/bin/sh\n"), 0o755)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module stockade.test/go128\n\ngo 1.28\n"), 0o644)
	if rep, refused, err := Refuse(context.Background(), dir, false, data); err != nil || refused {
		t.Errorf("Refuse(go 1.28, -data-dir with go1.28.0 fetched) = %+v, %v, %v; want it accepted", rep, refused, err)
	}
	rep, refused, err := Refuse(context.Background(), dir, false, t.TempDir())
	if err != nil || !refused || rep.Refusal.Kind != "requires_newer_toolchain" {
		t.Errorf("Refuse(go 1.28, an empty data directory) = %+v, %v, %v; want requires_newer_toolchain", rep, refused, err)
	}
}
