package maintain

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

func TestMain(m *testing.M) {
	code := m.Run()
	enginetest.RemoveToolchain()
	os.Exit(code)
}

// engine returns the shared engine client, fixture proxy and data
// directory (enginetest.Toolchain).
func engine(t *testing.T) (eng *dockerapi.Client, proxy, dataDir string) {
	t.Helper()
	return enginetest.Toolchain(t, filepath.Join("..", "..", "testdata", "modules"))
}

// fixtureRepo copies testdata/repos/<name> into a new git repository with
// one commit made with a fixed identity and date, and returns its
// directory.
func fixtureRepo(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("..", "..", "testdata", "repos", name)
	dir := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, nil, "init", "-q", "-b", "main")
	gitT(t, dir, nil, "add", "-A")
	gitT(t, dir, []string{"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z"}, "commit", "-q", "-m", "fixture "+name)
	return dir
}

// gitT runs git in dir as a user would, with a throwaway identity.
func gitT(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Fixture", "GIT_AUTHOR_EMAIL=fixture@example.com",
		"GIT_COMMITTER_NAME=Fixture", "GIT_COMMITTER_EMAIL=fixture@example.com")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// state is everything of a repository that must not change: every file
// under .git and in the work tree, except the proposal refs (and the
// objects reachable only from them), byte for byte.
func state(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.HasPrefix(rel, filepath.Join(".git", "objects")) || strings.HasPrefix(rel, filepath.Join(".git", "refs", "stockade")) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fi.Mode().String() + " " + string(b)
		} else {
			out[rel] = fi.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The objects reachable from the user's refs, and fsck's verdict.
	out["<objects>"] = gitT(t, dir, nil, "rev-list", "--objects", "--branches", "--tags", "HEAD")
	gitT(t, dir, nil, "fsck", "--no-dangling", "--strict")
	return out
}

func sameState(t *testing.T, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("the repository changed: %s", k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("the repository gained %s", k)
		}
	}
}

// noContainers fails if any container labelled with owner is left.
func noContainers(t *testing.T, eng *dockerapi.Client, owner string) {
	t.Helper()
	list, err := eng.ContainerList(context.Background(), dockerapi.ListOptions{All: true, Filters: dockerapi.Filters{"label": {label.Owner + "=" + owner}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) > 0 {
		t.Errorf("%d containers of %s left", len(list), owner)
	}
}

// maintainFixture runs Maintain on a fresh repository of fixture name.
func maintainFixture(t *testing.T, name string, o Options) (*Report, string) {
	t.Helper()
	eng, proxy, dataDir := engine(t)
	dir := fixtureRepo(t, name)
	before := state(t, dir)
	o.Dir, o.DataDir, o.LockTimeout = dir, dataDir, 10*time.Minute
	if o.Proxy == "" {
		o.FixtureProxy = proxy
	}
	if o.Owner == "" {
		o.Owner = enginetest.Owner(t)
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	// 40 minutes: with -vulndb the first run in a data directory also
	// builds the scanner.
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	start := time.Now()
	rep, err := Maintain(ctx, eng, o)
	if err != nil {
		t.Fatalf("Maintain(%s) = %v", name, err)
	}
	var text bytes.Buffer
	WriteText(&text, rep)
	t.Logf("%s in %v:\n%s", name, time.Since(start).Round(time.Millisecond), text.String())
	sameState(t, before, state(t, dir))
	noContainers(t, eng, o.Owner)
	return rep, dir
}
