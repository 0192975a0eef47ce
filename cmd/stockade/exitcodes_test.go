package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/vulndb"
)

// TestExitCode_InputProblems: each input problem has the code of the one
// table (exitCodesHelp), whatever command met it.
func TestExitCode_InputProblems(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("x: %w: %w", toolchain.ErrSnapshot, toolchain.ErrNoCommit), exitUnsupported},
		{fmt.Errorf("x: %w", toolchain.ErrSnapshot), exitUnsupported},
		{fmt.Errorf("toolchain: snapshot: %w", os.ErrPermission), exitFailure}, // writing the snapshot: ours
		{fmt.Errorf("x: %w", vulndb.ErrInvalid), exitUnsupported},
		{fmt.Errorf("x: %w", vulndb.ErrNotEmpty), exitUnsupported},
		{fmt.Errorf("x: %w", vulndb.ErrFetch), exitAcquisition},
		{&exitError{code: exitAcquisition, err: vulndb.ErrInvalid}, exitAcquisition},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d; want %d", tc.err, got, tc.want)
		}
	}
}

// TestHelp_OneExitCodeTable: `stockade help` and every command's manual
// end with the same table of exit codes.
func TestHelp_OneExitCodeTable(t *testing.T) {
	args := [][]string{{"help"}}
	for name := range commands {
		args = append(args, []string{"help", name})
	}
	for _, a := range args {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), a, &stdout, &stderr); code != exitOK {
			t.Fatalf("stockade %q = exit %d", a, code)
		}
		if !strings.Contains(stdout.String(), exitCodesHelp) {
			t.Errorf("stockade %q lacks the table of exit codes", a)
		}
		if n := strings.Count(stdout.String(), "Exit codes"); n != 1 {
			t.Errorf("stockade %q has %d tables of exit codes; want the one", a, n)
		}
	}
}

// TestInspect_NoCommitExitsTwo: a git checkout without a commit has no
// committed tree: the input cannot be used (2), even with no engine, and
// stderr says what to do; -worktree takes its working tree.
func TestInspect_NoCommitExitsTwo(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	dir := t.TempDir()
	cmd := exec.Command("git", "init", "-q")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("git init: %v %s", err, out)
	}
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module m\n\ngo 1.24\n"), 0o644)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"inspect", "-data-dir", t.TempDir(), dir}, &stdout, &stderr)
	if code != exitUnsupported || !strings.Contains(stderr.String(), "without a commit") {
		t.Errorf("inspect of a checkout without a commit = exit %d, stderr %q; want %d naming the missing commit", code, stderr.String(), exitUnsupported)
	}
}

// TestVulndbFetch_ExitCodes: a database that cannot be had is 4, an
// input that cannot be used 2.
func TestVulndbFetch_ExitCodes(t *testing.T) {
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("not a zip")) }))
	defer garbage.Close()
	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "keep"), []byte("x"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"offline", []string{"-url", "http://127.0.0.1:9/vulndb.zip", filepath.Join(t.TempDir(), "db")}, exitAcquisition},
		{"not found", []string{"-url", missing.URL + "/vulndb.zip", filepath.Join(t.TempDir(), "db")}, exitAcquisition},
		{"not a database", []string{"-url", garbage.URL + "/vulndb.zip", filepath.Join(t.TempDir(), "db")}, exitAcquisition},
		{"a directory that is not empty", []string{"-url", garbage.URL + "/vulndb.zip", full}, exitUnsupported},
		{"not an http URL", []string{"-url", "ftp://example.com/vulndb.zip", filepath.Join(t.TempDir(), "db")}, exitUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), append([]string{"vulndb", "fetch"}, tc.args...), &stdout, &stderr); code != tc.code {
				t.Errorf("vulndb fetch %q = exit %d; want %d\nstderr: %s", tc.args, code, tc.code, stderr.String())
			}
		})
	}
	if _, err := os.Stat(filepath.Join(full, "keep")); err != nil || errors.Is(err, os.ErrNotExist) {
		t.Errorf("the non-empty directory changed: %v", err)
	}
}

// TestPrivateFlags: credentials are refused in -proxy, where every
// container would see them, and taken from -netrc or -auth-helper
// files; a missing file, or credentials for a fixture proxy, are usage
// errors before any engine call.
func TestPrivateFlags(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"credentials in -proxy", []string{"inspect", "-proxy", "https://u:secret@goproxy.corp.example", dir}, "give them with -netrc"},
		{"a missing netrc", []string{"inspect", "-netrc", filepath.Join(dir, "nope"), dir}, "-netrc"},
		{"a helper that is a directory", []string{"maintain", "-auth-helper", dir, dir}, "-auth-helper"},
		{"credentials for a fixture proxy", []string{"scan", "-vulndb", "/db", "-fixture-proxy", dir, "-netrc", "/etc/hostname", dir}, "do not apply"},
		{"a bad private pattern", []string{"inspect", "-private", "corp.example/[", dir}, "patterns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			if code != exitUnsupported || !strings.Contains(stderr.String(), tc.stderr) || strings.Contains(stderr.String(), "secret") {
				t.Errorf("stockade %q = exit %d, stderr %q; want %d naming %q, no password", tc.args, code, stderr.String(), exitUnsupported, tc.stderr)
			}
		})
	}
}
