package maintain

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stockade/stockade/internal/workflow"
)

func TestMaintain_Uncommitted(t *testing.T) {
	dir := fixtureRepo(t, "maintain-patch")
	g := newGitRepo(dir, "", t.TempDir())
	ctx := context.Background()
	head := strings.TrimSpace(gitT(t, dir, nil, "rev-parse", "HEAD"))
	if got, err := g.uncommitted(ctx, head); err != nil || len(got) != 0 {
		t.Fatalf("uncommitted(clean) = %v, %v; want none", got, err)
	}
	// Untracked files and an unchanged rewrite do not count.
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine\n"), 0o644)
	b, _ := os.ReadFile(filepath.Join(dir, "go.sum"))
	os.WriteFile(filepath.Join(dir, "go.sum"), b, 0o644)
	if got, err := g.uncommitted(ctx, head); err != nil || len(got) != 0 {
		t.Fatalf("uncommitted(untracked file, same content) = %v, %v; want none", got, err)
	}
	os.WriteFile(filepath.Join(dir, "hello.go"), []byte("package hello\n"), 0o644)
	os.Chmod(filepath.Join(dir, "hello_test.go"), 0o755)
	os.Remove(filepath.Join(dir, "go.sum"))
	os.WriteFile(filepath.Join(dir, "staged.go"), []byte("package hello\n"), 0o644)
	gitT(t, dir, nil, "add", "staged.go")
	got, err := g.uncommitted(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	if want := "go.sum hello.go hello_test.go staged.go"; strings.Join(got, " ") != want {
		t.Errorf("uncommitted = %v; want %s", got, want)
	}
}

// TestMaintain_ProposalCommitIsARecipe makes the proposal commit in two
// copies of one repository, one with a hostile configuration (another
// identity, a commit encoding, signing with a failing program, hooks that
// fail) and another HOME, time zone and git identity in the environment:
// the commit ID is the same, and only the proposal ref (and the asked-for
// branch) appears.
func TestMaintain_ProposalCommitIsARecipe(t *testing.T) {
	ctx := context.Background()
	plain, hostile := fixtureRepo(t, "maintain-patch"), fixtureRepo(t, "maintain-patch")
	for _, kv := range [][2]string{{"user.name", "Someone Else"}, {"user.email", "else@example.com"},
		{"i18n.commitEncoding", "ISO-8859-1"}, {"commit.gpgSign", "true"}, {"gpg.program", "/bin/false"}, {"core.hooksPath", "hooks"}} {
		gitT(t, hostile, nil, "config", kv[0], kv[1])
	}
	os.MkdirAll(filepath.Join(hostile, "hooks"), 0o755)
	for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "reference-transaction"} {
		os.WriteFile(filepath.Join(hostile, "hooks", h), []byte("#!/bin/sh\nexit 1\n"), 0o755)
	}
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = Home User\n[commit]\n\tgpgSign = true\n"), 0o644)
	head := strings.TrimSpace(gitT(t, plain, nil, "rev-parse", "HEAD"))
	if h := strings.TrimSpace(gitT(t, hostile, nil, "rev-parse", "HEAD")); h != head {
		t.Fatalf("the fixture commits differ: %s and %s", head, h)
	}
	r := recipe{parent: head, goMod: []byte("module stockade.test/repo/maintain-patch\n\ngo 1.24\n"), goSum: nil, who: DefaultIdentity, message: "deps: test\n"}

	c1, tree1, err := newGitRepo(plain, "", t.TempDir()).commit(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("TZ", "Pacific/Kiritimati")
	t.Setenv("GIT_AUTHOR_NAME", "Env Author")
	t.Setenv("GIT_COMMITTER_DATE", "2001-01-01T00:00:00Z")
	before := state(t, hostile)
	g := newGitRepo(hostile, "", t.TempDir())
	c2, tree2, err := g.commit(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if want, err := newGitRepo(plain, "", t.TempDir()).validatedTree(ctx, head, r.goMod, r.goSum); err != nil || want != tree1 {
		t.Errorf("validatedTree = %s, %v; want git mktree's %s", want, err, tree1)
	}
	if c1 != c2 || tree1 != tree2 {
		t.Fatalf("commits %s (tree %s) and %s (tree %s); want the same", c1, tree1, c2, tree2)
	}
	ref, err := g.store(ctx, c2[:proposalIDLen], c2, "deps/proposal")
	if err != nil {
		t.Fatal(err)
	}
	if ref2, err := g.store(ctx, c2[:proposalIDLen], c2, ""); err != nil || ref2 != ref {
		t.Errorf("storing the same proposal again = %q, %v; want it left as it is", ref2, err)
	}
	if _, err := g.store(ctx, c2[:proposalIDLen], c2, "deps/proposal"); !errors.Is(err, ErrBranchExists) {
		t.Errorf("storing onto an existing branch = %v; want ErrBranchExists", err)
	}
	after := state(t, hostile)
	delete(after, filepath.Join(".git", "refs", "heads", "deps"))
	delete(after, filepath.Join(".git", "refs", "heads", "deps", "proposal"))
	delete(after, filepath.Join(".git", "logs", "refs", "heads", "deps"))
	delete(after, filepath.Join(".git", "logs", "refs", "heads", "deps", "proposal"))
	// The new branch is in rev-list's objects; compare without it.
	after["<objects>"] = before["<objects>"]
	sameState(t, before, after)
	show := gitT(t, hostile, nil, "cat-file", "commit", ref)
	for _, want := range []string{"parent " + head, "author Stockade <stockade@localhost>", "committer Stockade <stockade@localhost>"} {
		if !strings.Contains(show, want) {
			t.Errorf("the commit lacks %q:\n%s", want, show)
		}
	}
	if strings.Contains(show, "encoding") || strings.Contains(show, "gpgsig") {
		t.Errorf("the repository's configuration reached the commit:\n%s", show)
	}
	if diff := gitT(t, hostile, nil, "diff", "--name-only", head, ref); strings.TrimSpace(diff) != "go.mod\ngo.sum" {
		t.Errorf("the proposal changes %q; want go.mod and go.sum", diff)
	}
	if err := g.checkBranch(ctx, "deps/proposal"); !errors.Is(err, ErrBranchExists) {
		t.Errorf("checkBranch(existing) = %v; want ErrBranchExists", err)
	}
	if err := g.checkBranch(ctx, "bad..name"); !errors.Is(err, ErrPolicy) {
		t.Errorf("checkBranch(bad..name) = %v; want ErrPolicy", err)
	}
}

// TestMaintain_ValidatedTreeIsGits computes the validated tree of a
// repository with directories (whose sort order differs from files') and
// without a go.sum, as git mktree would.
func TestMaintain_ValidatedTreeIsGits(t *testing.T) {
	ctx := context.Background()
	dir := fixtureRepo(t, "clean")
	g := newGitRepo(dir, "", t.TempDir())
	head := strings.TrimSpace(gitT(t, dir, nil, "rev-parse", "HEAD"))
	for _, sum := range [][]byte{nil, []byte("example.com/m v1.0.0 h1:x=\n")} {
		r := recipe{parent: head, goMod: []byte("module stockade.test/repo/clean\n"), goSum: sum}
		want, err := g.proposalTree(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := g.validatedTree(ctx, head, r.goMod, r.goSum); err != nil || got != want {
			t.Errorf("validatedTree = %s, %v; want %s", got, err, want)
		}
	}
}

// TestMaintain_RefusesBeforeAnyContainer: a directory that is not a git
// checkout, and a checkout with uncommitted changes to tracked files, are
// refused (exit 2, naming the files) without an engine; the checkout is
// left as it was.
func TestMaintain_RefusesBeforeAnyContainer(t *testing.T) {
	plain := t.TempDir()
	os.WriteFile(filepath.Join(plain, "go.mod"), []byte("module example.com/m\n\ngo 1.24\n"), 0o644)
	r, err := Maintain(context.Background(), nil, Options{Options: workflow.Options{Dir: plain, DataDir: t.TempDir()}})
	if err != nil || r.Outcome != Unsupported || r.ExitCode != ExitUnsupported || !strings.Contains(r.Reason, "not in a git checkout") {
		t.Errorf("Maintain(not a checkout) = %+v, %v; want unsupported", r, err)
	}

	dir := fixtureRepo(t, "maintain-patch")
	os.WriteFile(filepath.Join(dir, "hello.go"), []byte("package hello\n"), 0o644)
	before := state(t, dir)
	r, err = Maintain(context.Background(), nil, Options{Options: workflow.Options{Dir: dir, DataDir: t.TempDir()}})
	if err != nil || r.Outcome != Unsupported || r.ExitCode != ExitUnsupported || strings.Join(r.Uncommitted, " ") != "hello.go" {
		t.Errorf("Maintain(uncommitted hello.go) = %+v, %v; want unsupported naming hello.go", r, err)
	}
	sameState(t, before, state(t, dir))

	if _, err := Maintain(context.Background(), nil, Options{Options: workflow.Options{Dir: dir, DataDir: t.TempDir()}, Each: true, Branch: "x"}); !errors.Is(err, ErrPolicy) {
		t.Errorf("Maintain(-each -branch) = %v; want ErrPolicy", err)
	}
}

// TestMaintain_MalformedGoModIsAFailingBaseline: a go.mod that does not
// parse is a baseline that fails (exit 3), as the go command fails on it
// at home, not an unsupported layout; decided without an engine, and
// with nothing in $TMPDIR (git's home is a scratch directory of the data
// directory).
func TestMaintain_MalformedGoModIsAFailingBaseline(t *testing.T) {
	dir := fixtureRepo(t, "maintain-patch")
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module stockade.test/repo/maintain-patch\n\nrequire (\n"), 0o644)
	gitT(t, dir, nil, "commit", "-q", "-am", "break go.mod")
	data := t.TempDir()
	t.Setenv("TMPDIR", "/nonexistent/tmp")
	r, err := Maintain(context.Background(), nil, Options{Options: workflow.Options{Dir: dir, DataDir: data}})
	if err != nil || r.Outcome != BaselineFailing || r.ExitCode != ExitInconclusive || r.Refusal == nil || r.Refusal.Kind != "malformed_go_mod" {
		t.Fatalf("Maintain(malformed go.mod) = %+v, %v; want baseline_failing (exit 3) with the malformed go.mod named", r, err)
	}
}
