package toolchain

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// hostRunner is a Runner for tests of its host-side parts: no engine.
func hostRunner(t *testing.T) *Runner {
	t.Helper()
	return &Runner{runDir: t.TempDir(), dirs: map[string]dirKind{}, used: map[string]bool{}, live: map[*Container]bool{}, extra: map[string]bool{}, log: slog.New(slog.DiscardHandler)}
}

func run(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
}

func write(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// tree lists a directory as "name mode [content|-> target]" lines.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, _ := d.Info()
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			tgt, _ := os.Readlink(p)
			out = append(out, rel+" -> "+tgt)
		case d.IsDir():
			out = append(out, rel+"/ "+fi.Mode().Perm().String())
		default:
			b, _ := os.ReadFile(p)
			out = append(out, rel+" "+fi.Mode().Perm().String()+" "+string(b))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

func gitFixture(t *testing.T) (dir, pwned string) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir = t.TempDir()
	pwned = filepath.Join(t.TempDir(), "pwned")
	run(t, dir, "git", "init", "-q")
	write(t, filepath.Join(dir, "go.mod"), "module m\n", 0o644)
	write(t, filepath.Join(dir, "a.go"), "package m // committed\n", 0o600)
	write(t, filepath.Join(dir, "bin", "run.sh"), "#!/bin/sh\n", 0o700)
	write(t, filepath.Join(dir, ".gitignore"), "*.out\n", 0o644)
	write(t, filepath.Join(dir, ".gitattributes"), "*.go filter=evil\n", 0o644)
	os.Symlink("../../etc/passwd", filepath.Join(dir, "link"))
	run(t, dir, "git", "add", ".")
	run(t, dir, "git", "commit", "-q", "-m", "c")
	// The repository's own configuration tries to run programs when read.
	run(t, dir, "git", "config", "filter.evil.smudge", "touch "+pwned+"; cat")
	run(t, dir, "git", "config", "core.fsmonitor", "touch "+pwned+"; true")
	write(t, filepath.Join(dir, "a.go"), "package m // changed\n", 0o600)
	write(t, filepath.Join(dir, "b.go"), "package m // untracked\n", 0o644)
	write(t, filepath.Join(dir, "x.out"), "ignored\n", 0o644)
	os.Remove(filepath.Join(dir, "bin", "run.sh"))
	return dir, pwned
}

// TestSnapshot_GitCommittedTree: a git checkout's snapshot is HEAD's tree,
// read without running anything the repository configures.
func TestSnapshot_GitCommittedTree(t *testing.T) {
	dir, pwned := gitFixture(t)
	before := tree(t, dir)
	r := hostRunner(t)
	s, err := r.Snapshot(context.Background(), dir, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		".gitattributes -rw-r--r-- *.go filter=evil\n",
		".gitignore -rw-r--r-- *.out\n",
		"a.go -rw-r--r-- package m // committed\n",
		"bin/ -rwxr-xr-x",
		"bin/run.sh -rwxr-xr-x #!/bin/sh\n",
		"go.mod -rw-r--r-- module m\n",
		"link -> ../../etc/passwd",
	}
	if got := tree(t, s.Dir); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("snapshot =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !s.Git || len(s.Commit) < 40 || s.Worktree || s.Files != 5 {
		t.Errorf("snapshot = %+v", s)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Error("the repository's filter or fsmonitor ran")
	}
	if after := tree(t, dir); strings.Join(after, "|") != strings.Join(before, "|") {
		t.Error("the user's checkout changed")
	}
}

// TestSnapshot_GitWorktree: -worktree takes uncommitted and untracked
// changes, not ignored files or .git.
func TestSnapshot_GitWorktree(t *testing.T) {
	dir, pwned := gitFixture(t)
	r := hostRunner(t)
	s, err := r.Snapshot(context.Background(), dir, SnapshotOptions{Worktree: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		".gitattributes -rw-r--r-- *.go filter=evil\n",
		".gitignore -rw-r--r-- *.out\n",
		"a.go -rw-r--r-- package m // changed\n",
		"b.go -rw-r--r-- package m // untracked\n",
		"go.mod -rw-r--r-- module m\n",
		"link -> ../../etc/passwd",
	}
	if got := tree(t, s.Dir); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("snapshot =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Error("the repository's filter or fsmonitor ran")
	}
}

// TestSnapshot_PlainDir copies a directory that is not a git checkout.
func TestSnapshot_PlainDir(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "go.mod"), "module m\n", 0o600)
	write(t, filepath.Join(dir, "p", "x.go"), "package p\n", 0o644)
	write(t, filepath.Join(dir, "sub", ".git", "config"), "x", 0o644)
	os.Symlink("/etc", filepath.Join(dir, "etc"))
	r := hostRunner(t)
	s, err := r.Snapshot(context.Background(), dir, SnapshotOptions{Worktree: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"etc -> /etc", "go.mod -rw-r--r-- module m\n", "p/ -rwxr-xr-x", "p/x.go -rw-r--r-- package p\n", "sub/ -rwxr-xr-x"}
	if got := tree(t, s.Dir); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("snapshot =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s.Git {
		t.Error("plain directory reported as git")
	}
	s2, err := r.Snapshot(context.Background(), dir, SnapshotOptions{})
	if err != nil || s2.Dir == s.Dir {
		t.Errorf("second snapshot %q (%v); want a new, uniquely named directory", s2.Dir, err)
	}
	if _, err := r.Snapshot(context.Background(), filepath.Join(dir, "missing"), SnapshotOptions{}); !errors.Is(err, ErrSnapshot) {
		t.Errorf("missing source = %v; want ErrSnapshot", err)
	}
}

func TestNewStaging(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "go.mod"), "module m\n", 0o644)
	write(t, filepath.Join(dir, "go.sum"), "sum\n", 0o644)
	r := hostRunner(t)
	s, err := r.Snapshot(context.Background(), dir, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.NewStaging(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"go.mod -rw-rw-rw- module m\n", "go.sum -rw-rw-rw- sum\n"}
	if got := tree(t, st); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("staging = %q; want %q", got, want)
	}
	if fi, _ := os.Stat(st); fi.Mode().Perm() != CacheDirMode {
		t.Errorf("staging mode %v; want %v", fi.Mode().Perm(), fs.FileMode(CacheDirMode))
	}
	if _, err := r.NewStaging(Snapshot{Dir: dir}); !errors.Is(err, ErrNotOwned) {
		t.Errorf("staging of a user's directory = %v; want ErrNotOwned", err)
	}
}

func TestSafeRel(t *testing.T) {
	for name, want := range map[string]bool{"a/b": true, "a/../b": true, "../a": false, "/a": false, ".git/config": false, "x/.git/y": false, ".": false, "": false} {
		if _, ok := safeRel(name); ok != want {
			t.Errorf("safeRel(%q) = %v; want %v", name, ok, want)
		}
	}
}

// TestSnapshot_Uncommitted: the snapshot of a committed tree says whether
// the working tree differs from it in what git would commit; ignored
// files do not count, and nothing the repository configures runs.
func TestSnapshot_Uncommitted(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, tc := range []struct {
		name   string
		change func(dir string)
		want   bool
	}{
		{"clean", func(string) {}, false},
		{"ignored files", func(dir string) {
			write(t, filepath.Join(dir, "x.out"), "ignored\n", 0o644)
			os.Symlink("/", filepath.Join(dir, "node_modules"))
		}, false},
		{"same content rewritten", func(dir string) { write(t, filepath.Join(dir, "a.go"), "package m\n", 0o644) }, false},
		{"changed file", func(dir string) { write(t, filepath.Join(dir, "a.go"), "package m // changed\n", 0o644) }, true},
		{"untracked file", func(dir string) { write(t, filepath.Join(dir, "b.go"), "package m\n", 0o644) }, true},
		{"deleted file", func(dir string) { os.Remove(filepath.Join(dir, "sub", "c.go")) }, true},
		{"mode change", func(dir string) { os.Chmod(filepath.Join(dir, "a.go"), 0o755) }, true},
		{"symlink retargeted", func(dir string) {
			os.Remove(filepath.Join(dir, "link"))
			os.Symlink("sub", filepath.Join(dir, "link"))
		}, true},
		{"file became a symlink", func(dir string) {
			os.Remove(filepath.Join(dir, "a.go"))
			os.Symlink("sub/c.go", filepath.Join(dir, "a.go"))
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pwned := filepath.Join(t.TempDir(), "pwned")
			run(t, dir, "git", "init", "-q")
			write(t, filepath.Join(dir, "go.mod"), "module m\n", 0o644)
			write(t, filepath.Join(dir, "a.go"), "package m\n", 0o644)
			write(t, filepath.Join(dir, "sub", "c.go"), "package sub\n", 0o644)
			write(t, filepath.Join(dir, ".gitignore"), "*.out\nnode_modules\n", 0o644)
			write(t, filepath.Join(dir, ".gitattributes"), "*.go filter=evil\n", 0o644)
			os.Symlink("go.mod", filepath.Join(dir, "link"))
			run(t, dir, "git", "add", ".")
			run(t, dir, "git", "commit", "-q", "-m", "c")
			run(t, dir, "git", "config", "filter.evil.clean", "touch "+pwned+"; cat")
			run(t, dir, "git", "config", "core.fsmonitor", "touch "+pwned+"; true")
			tc.change(dir)
			s, err := SnapshotTo(context.Background(), dir, t.TempDir(), SnapshotOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if s.Uncommitted != tc.want {
				t.Errorf("Uncommitted = %v; want %v", s.Uncommitted, tc.want)
			}
			if _, err := os.Stat(pwned); err == nil {
				t.Error("the repository's filter or fsmonitor ran")
			}
			if w, err := SnapshotTo(context.Background(), dir, t.TempDir(), SnapshotOptions{Worktree: true}); err != nil || w.Uncommitted {
				t.Errorf("worktree snapshot: Uncommitted %v, %v; want false: the working tree is what is validated", w.Uncommitted, err)
			}
		})
	}
}

// TestSnapshot_InputErrors: what is wrong with the source matches
// ErrSnapshot (a checkout without a commit also ErrNoCommit; its working
// tree can still be taken); a failure to write the snapshot does not: it
// is Stockade's.
func TestSnapshot_InputErrors(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ctx := context.Background()
	dir := t.TempDir()
	run(t, dir, "git", "init", "-q")
	write(t, filepath.Join(dir, "go.mod"), "module m\n", 0o644)
	_, err := SnapshotTo(ctx, dir, t.TempDir(), SnapshotOptions{})
	if !errors.Is(err, ErrSnapshot) || !errors.Is(err, ErrNoCommit) {
		t.Errorf("committed tree of a checkout without a commit: %v; want ErrSnapshot and ErrNoCommit", err)
	}
	dst := t.TempDir()
	s, err := SnapshotTo(ctx, dir, dst, SnapshotOptions{Worktree: true})
	if err != nil || !s.Git || s.Commit != "" || !slices.Equal(tree(t, dst), []string{"go.mod -rw-r--r-- module m\n"}) {
		t.Errorf("working tree of a checkout without a commit: %+v, %v, %q; want go.mod, no commit", s, err, tree(t, dst))
	}
	if _, err := SnapshotTo(ctx, filepath.Join(dir, "missing"), t.TempDir(), SnapshotOptions{}); !errors.Is(err, ErrSnapshot) {
		t.Errorf("a missing source: %v; want ErrSnapshot", err)
	}
	// The destination is a file: the snapshot cannot be written.
	file := filepath.Join(t.TempDir(), "file")
	write(t, file, "x", 0o644)
	if _, err := SnapshotTo(ctx, t.TempDir(), file, SnapshotOptions{}); err == nil || errors.Is(err, ErrSnapshot) {
		t.Errorf("an unwritable destination: %v; want an error that is not ErrSnapshot", err)
	}
}

// TestSnapshot_Subdirectory: a directory below a checkout's top (a module
// of a monorepo) is snapshotted as its tree in HEAD's commit, as the top
// is: uncommitted changes below it are left out and reported, the rest of
// the repository is not copied, gitlinks below it are named; -worktree
// takes its working tree; a directory the commit lacks cannot be had.
func TestSnapshot_Subdirectory(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ctx := context.Background()
	dir := t.TempDir()
	run(t, dir, "git", "init", "-q")
	write(t, filepath.Join(dir, "README"), "top\n", 0o644)
	write(t, filepath.Join(dir, "svc", "go.mod"), "module m\n", 0o644)
	write(t, filepath.Join(dir, "svc", "a.go"), "package m // committed\n", 0o644)
	write(t, filepath.Join(dir, "other", "go.mod"), "module o\n", 0o644)
	run(t, dir, "git", "add", ".")
	run(t, dir, "git", "update-index", "--add", "--cacheinfo", "160000,0123456789abcdef0123456789abcdef01234567,svc/lib")
	run(t, dir, "git", "commit", "-q", "-m", "c")
	write(t, filepath.Join(dir, "svc", "a.go"), "package m // changed\n", 0o644)
	write(t, filepath.Join(dir, "new", "go.mod"), "module n\n", 0o644)

	dst := t.TempDir()
	s, err := SnapshotTo(ctx, filepath.Join(dir, "svc"), dst, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a.go -rw-r--r-- package m // committed\n", "go.mod -rw-r--r-- module m\n"}
	if got := tree(t, dst); !slices.Equal(got, want) || !s.Git || s.Subdir != "svc" || len(s.Commit) != 40 || !s.Uncommitted || !slices.Equal(s.Submodules, []string{"lib"}) {
		t.Errorf("snapshot %+v of svc: %q; want the committed svc (%q), uncommitted, gitlink lib", s, got, want)
	}
	dst = t.TempDir()
	if s, err := SnapshotTo(ctx, filepath.Join(dir, "svc"), dst, SnapshotOptions{Worktree: true}); err != nil || s.Subdir != "svc" || !slices.Contains(tree(t, dst), "a.go -rw-r--r-- package m // changed\n") {
		t.Errorf("working tree of svc: %+v, %v, %q; want the changed a.go", s, err, tree(t, dst))
	}
	if _, err := SnapshotTo(ctx, filepath.Join(dir, "new"), t.TempDir(), SnapshotOptions{}); !errors.Is(err, ErrSnapshot) {
		t.Errorf("a directory the commit lacks: %v; want ErrSnapshot", err)
	}
	if top, sub, ok := GitWorkTree(ctx, filepath.Join(dir, "svc")); !ok || sub != "svc" || top != dir && !strings.HasSuffix(top, filepath.Base(dir)) {
		t.Errorf("GitWorkTree(svc) = %q, %q, %v; want the top and svc", top, sub, ok)
	}
	if IsGitCheckout(ctx, filepath.Join(dir, "svc")) || !IsGitCheckout(ctx, dir) {
		t.Error("IsGitCheckout is true for the top only")
	}
}
