package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/toolchain"
)

func TestInspect_Usage(t *testing.T) {
	t.Setenv("STOCKADE_VULNDB", "")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // on stderr
	}{
		{"no directory", []string{"inspect"}, exitUnsupported, "usage: stockade inspect"},
		{"two directories", []string{"inspect", "a", "b"}, exitUnsupported, "usage: stockade inspect"},
		{"both proxies", []string{"inspect", "-proxy", "https://proxy.golang.org", "-fixture-proxy", "x", "d"}, exitUnsupported, "cannot be used together"},
		{"bad flag", []string{"inspect", "-nope", "d"}, exitUnsupported, "flag provided but not defined"},
		{"zero timeout", []string{"inspect", "-timeout", "0s", "d"}, exitUnsupported, "must be positive"},
		{"zero deadline", []string{"inspect", "-deadline", "0s", "d"}, exitUnsupported, "must be positive"},
		{"reap with args", []string{"reap", "x"}, exitUnsupported, "usage: stockade reap"},
		{"scan without a database", []string{"scan", "."}, exitUnsupported, "no vulnerability database"},
		{"scan with no database there", []string{"scan", "-vulndb", "/nonexistent/vulndb", "."}, exitUnsupported, "not a Go vulnerability database"},
		{"inspect with no database there", []string{"inspect", "-vulndb", "/nonexistent/vulndb", "."}, exitUnsupported, "not a Go vulnerability database"},
		{"scan without a directory", []string{"scan", "-vulndb", "/nonexistent/vulndb"}, exitUnsupported, "usage: stockade scan"},
		{"prefer-fixes without a database", []string{"maintain", "-prefer-fixes", "."}, exitUnsupported, "needs a vulnerability database"},
		{"vulndb without fetch", []string{"vulndb", "x"}, exitUnsupported, "want a subcommand: fetch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr); code != tc.code {
				t.Errorf("stockade %q = exit %d; want %d", tc.args, code, tc.code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q; want it to mention %q", stderr.String(), tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("a usage error printed %q on stdout", stdout.String())
			}
		})
	}
}

func TestInspect_HelpHasExamples(t *testing.T) {
	for _, cmd := range []string{"inspect", "reap", "scan"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{cmd, "-h"}, &stdout, &stderr); code != exitOK {
			t.Errorf("stockade %s -h = exit %d", cmd, code)
		}
		man := stderr.String() + stdout.String()
		if !strings.Contains(man, "Examples:") || !strings.Contains(man, "-data-dir") {
			t.Errorf("stockade %s -h printed no manual with examples and flags:\n%s", cmd, man)
		}
	}
}

// TestInspect_RefusalExitsTwoWithoutEngine runs the command on refused
// fixtures with no reachable engine: the refusal needs none.
func TestInspect_RefusalExitsTwoWithoutEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	dir := filepath.Join("..", "..", "testdata", "repos", "workspace")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"inspect", "-json", "-data-dir", t.TempDir(), dir}, &stdout, &stderr); code != exitUnsupported {
		t.Fatalf("stockade inspect %s = exit %d; want %d\nstderr: %s", dir, code, exitUnsupported, stderr.String())
	}
	var rep report.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("-json printed %q: %v", stdout.String(), err)
	}
	if rep.Verdict != report.Unsupported || rep.Refusal == nil || rep.Refusal.Kind != "workspace" {
		t.Errorf("report %+v; want unsupported (workspace)", rep)
	}
	if stderr.Len() != 0 {
		t.Errorf("off a terminal inspect printed %q on stderr", stderr.String())
	}
}

func TestFixtureProxyDir_GeneratesFromSources(t *testing.T) {
	data := t.TempDir()
	dir, cleanup, err := fixtureProxyDir("inspect", filepath.Join("..", "..", "testdata", "modules"), data)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := filepath.EvalSymlinks(data); !strings.HasPrefix(dir, d+string(filepath.Separator)) {
		t.Errorf("generated proxy %s is outside the data directory %s", dir, data)
	}
	if _, err := os.Stat(filepath.Join(dir, "stockade.test", "greet", "@v", "list")); err != nil {
		t.Errorf("generated proxy lacks greet's version list: %v", err)
	}
	cleanup()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cleanup left %s: %v", dir, err)
	}
	// A directory that is not module sources is used as it is.
	other := t.TempDir()
	if got, _, err := fixtureProxyDir("inspect", other, data); err != nil || got != other {
		t.Errorf("fixtureProxyDir(%s) = %q, %v; want it unchanged", other, got, err)
	}
}

// TestInspect_LockTimeout holds the data directory's lock as another run
// would: inspect says it waits, then gives up after -lock-timeout with
// exit 1 and no report.
func TestInspect_LockTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the engine for image selection")
	}
	enginetest.Client(t)
	dataDir, err := toolchain.PrepareDataDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lock, err := toolchain.LockDataDir(context.Background(), dataDir, 0, "run=other", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"inspect", "-data-dir", dataDir, "-lock-timeout", "500ms",
		"-fixture-proxy", filepath.Join("..", "..", "testdata", "modules"), filepath.Join("..", "..", "testdata", "repos", "clean")}, &stdout, &stderr)
	if code != exitFailure {
		t.Errorf("inspect with the lock held = exit %d; want %d\nstderr: %s", code, exitFailure, stderr.String())
	}
	if !strings.Contains(stderr.String(), "waiting up to") || !strings.Contains(stderr.String(), "locked by another run") {
		t.Errorf("stderr %q; want the wait announced, then the refusal", stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("printed %q; want no report", stdout.String())
	}
}

// TestInspect_RefusesForeignDataDir: a -data-dir that is not empty and
// not marked as Stockade's is a usage error, and nothing in it changes.
func TestInspect_RefusesForeignDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the engine for image selection")
	}
	enginetest.Client(t)
	dataDir := t.TempDir()
	os.Chmod(dataDir, 0o755)
	if err := os.WriteFile(filepath.Join(dataDir, "lock"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dataDir, "run-x"), 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"inspect", "-data-dir", dataDir,
		"-fixture-proxy", filepath.Join("..", "..", "testdata", "modules"), filepath.Join("..", "..", "testdata", "repos", "clean")}, &stdout, &stderr)
	if code != exitUnsupported || !strings.Contains(stderr.String(), "not a Stockade data directory") {
		t.Errorf("inspect -data-dir (foreign) = exit %d, stderr %q; want %d naming the directory as not Stockade's", code, stderr.String(), exitUnsupported)
	}
	fi, _ := os.Stat(dataDir)
	b, _ := os.ReadFile(filepath.Join(dataDir, "lock"))
	if _, err := os.Stat(filepath.Join(dataDir, "run-x")); err != nil || fi.Mode().Perm() != 0o755 || string(b) != "mine\n" {
		t.Errorf("the directory changed: mode %v, lock %q, run-x %v", fi.Mode().Perm(), b, err)
	}
}
