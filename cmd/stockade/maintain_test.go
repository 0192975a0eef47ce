package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/internal/maintain"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

func TestMaintain_Usage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // on stderr
	}{
		{"no directory", []string{"maintain"}, "usage: stockade maintain"},
		{"major", []string{"maintain", "-allow", "patch,major", "d"}, "major upgrades change the import path"},
		{"unknown class", []string{"maintain", "-allow", "huge", "d"}, "is not patch, minor or major"},
		{"bad module", []string{"maintain", "-module", "example.com/m@1.0", "d"}, "not a canonical version"},
		{"bad author", []string{"maintain", "-author", "nobody", "d"}, "is not \"Name <email>\""},
		{"bad date", []string{"maintain", "-date", "yesterday", "d"}, "-date"},
		{"both proxies", []string{"maintain", "-proxy", "https://proxy.golang.org", "-fixture-proxy", "x", "d"}, "cannot be used together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr); code != exitUnsupported {
				t.Errorf("stockade %q = exit %d; want %d", tc.args, code, exitUnsupported)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q; want it to mention %q", stderr.String(), tc.want)
			}
		})
	}
}

func TestMaintain_HelpDocumentsExitCodes(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"help", "maintain"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("stockade help maintain = exit %d", code)
	}
	man := stdout.String()
	for _, want := range []string{"Examples:", exitCodesHelp, "proposal_prepared 0", "the explained non-results\n4", "-each", "-branch", "refs/stockade/proposals/"} {
		if !strings.Contains(man, want) {
			t.Errorf("the manual lacks %q", want)
		}
	}
}

// maintainRepo copies a fixture repository into a new git repository with
// one commit of fixed identity and date.
func maintainRepo(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "testdata", "repos", name))); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "fixture"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=Fixture", "GIT_AUTHOR_EMAIL=fixture@example.com", "GIT_AUTHOR_DATE=2026-01-02T03:04:05Z",
			"GIT_COMMITTER_NAME=Fixture", "GIT_COMMITTER_EMAIL=fixture@example.com", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// maintainRepoState is what of a repository must not change: every file under the
// work tree and .git, byte for byte and with its mode, except the object
// store and refs/stockade (the proposal), plus the objects reachable from
// the user's refs, which must stay fsck-clean.
func maintainRepoState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == filepath.Join(".git", "objects") || rel == filepath.Join(".git", "refs", "stockade") {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[rel] = fi.Mode().String()
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] += " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		b, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	out["<objects>"] = git("rev-list", "--objects", "--branches", "--tags", "HEAD")
	git("fsck", "--strict", "--no-dangling")
	return out
}

// TestMaintain_KillNineLeavesTheRepository kills stockade maintain with
// SIGKILL at several points of its run: the repository stays as it was
// (a proposal ref may appear only complete), and the next run reaps what
// the killed ones left, finishes, and leaves no container behind.
func TestMaintain_KillNineLeavesTheRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("runs maintain against the engine")
	}
	eng := enginetest.Client(t)
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(cache, "stockade-test", "validate")
	bin := filepath.Join(t.TempDir(), "stockade")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	proxy, err := filepath.Abs(filepath.Join("..", "..", "testdata", "modules"))
	if err != nil {
		t.Fatal(err)
	}
	dir := maintainRepo(t, "maintain-patch")
	before := maintainRepoState(t, dir)
	for _, delay := range []time.Duration{300 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second, 6 * time.Second} {
		cmd := exec.Command(bin, "maintain", "-data-dir", dataDir, "-fixture-proxy", proxy, dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		cmd.Process.Kill()
		cmd.Wait()
		after := maintainRepoState(t, dir)
		for k, v := range before {
			if after[k] != v {
				t.Errorf("killed after %v: %s changed", delay, k)
			}
		}
		for k := range after {
			if _, ok := before[k]; !ok {
				t.Errorf("killed after %v: %s appeared", delay, k)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "maintain", "-json", "-data-dir", dataDir, "-fixture-proxy", proxy, dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the run after the kills: %v\n%s", err, stderr.String())
	}
	var rep maintain.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || rep.Outcome != maintain.ProposalPrepared {
		t.Fatalf("the run after the kills = %s, %v; want a proposal", rep.Outcome, err)
	}
	resolved, err := filepath.EvalSymlinks(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	id := toolchain.DataDirID(resolved)
	left, err := eng.ContainerList(context.Background(), dockerapi.ListOptions{All: true, Filters: dockerapi.Filters{"label": {label.DataDir + "=" + id, label.Owner + "=" + toolchain.DefaultOwner}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range left {
		t.Errorf("container %s (run %s, %s) is left", c.ID, c.Labels[label.Run], c.State)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "refs", "heads", "main")); err != nil {
		t.Errorf("the branch is gone: %v", err)
	}
}
