package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/report"
)

// TestRun_ExitCodes: every command's outcome becomes an exit code in one
// place; bad invocations are usage errors (2) with a pointer to the manual.
func TestRun_ExitCodes(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	t.Setenv("STOCKADE_VULNDB", "")
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string // a part of stderr; "" wants it empty
		stdout string // a part of stdout; "" wants it empty
	}{
		{"no arguments", nil, exitUnsupported, "", "Usage:"},
		{"help", []string{"help"}, exitOK, "", "Usage:"},
		{"help inspect", []string{"help", "inspect"}, exitOK, "", "usage: stockade inspect"},
		{"help nosuch", []string{"help", "nosuch"}, exitUnsupported, `unknown command "nosuch"`, ""},
		{"help with two topics", []string{"help", "inspect", "reap"}, exitUnsupported, "usage: stockade help", ""},
		{"unknown command", []string{"nosuch"}, exitUnsupported, `unknown command "nosuch"`, ""},
		{"inspect -h", []string{"inspect", "-h"}, exitOK, "usage: stockade inspect", ""},
		{"inspect a missing directory", []string{"inspect", "/nonexistent"}, exitUnsupported, "Run 'stockade help inspect'", ""},
		{"inspect a file", []string{"inspect", file}, exitUnsupported, "not a directory", ""},
		{"inspect with a missing fixture proxy", []string{"inspect", "-fixture-proxy", "/nonexistent", t.TempDir()}, exitUnsupported, "-fixture-proxy", ""},
		{"maintain with a missing fixture proxy", []string{"maintain", "-fixture-proxy", "/nonexistent", t.TempDir()}, exitUnsupported, "stockade maintain: -fixture-proxy", ""},
		{"maintain -pull without -image", []string{"maintain", "-pull", t.TempDir()}, exitUnsupported, "stockade maintain: -pull applies to -image only", ""},
		{"maintain with both proxies", []string{"maintain", "-fixture-proxy", "x", "-proxy", "y", t.TempDir()}, exitUnsupported, "cannot be used together", ""},
		{"inspect with a bad private range", []string{"inspect", "-gate-allow-private", "10.0.0.1/8", t.TempDir()}, exitUnsupported, "-gate-allow-private: \"10.0.0.1/8\" is not a masked CIDR", ""},
		{"inspect with a gate and a fixture proxy", []string{"inspect", "-fixture-proxy", "x", "-gate-network", "n", t.TempDir()}, exitUnsupported, "-gate-network and -gate-allow-private do not apply", ""},
		{"maintain with a bad private range", []string{"maintain", "-gate-allow-private", "bogus", t.TempDir()}, exitUnsupported, "stockade maintain: -gate-allow-private", ""},
		{"maintain two directories", []string{"maintain", "a", "b"}, exitUnsupported, "usage: stockade maintain", ""},
		{"reap with arguments", []string{"reap", "x"}, exitUnsupported, "usage: stockade reap", ""},
		{"inspect -openvex without a database", []string{"inspect", "-openvex", filepath.Join(t.TempDir(), "v.json"), t.TempDir()}, exitUnsupported, "-openvex needs a vulnerability database", ""},
		{"scan -openvex into a missing directory", []string{"scan", "-vulndb", "/db", "-openvex", "/nonexistent/v.json", t.TempDir()}, exitUnsupported, "its directory does not exist", ""},
		{"scan -openvex naming a directory", []string{"scan", "-vulndb", "/db", "-openvex", t.TempDir(), t.TempDir()}, exitUnsupported, "is not a regular file", ""},
		{"inspect with a malformed runtime", []string{"inspect", "-runtime", "runsc --debug", t.TempDir()}, exitUnsupported, "stockade inspect: -runtime", ""},
		{"maintain with a malformed runtime", []string{"maintain", "-runtime", "../runc", t.TempDir()}, exitUnsupported, "stockade maintain: -runtime", ""},
		{"scan with a malformed runtime", []string{"scan", "-vulndb", "/db", "-runtime", "a/b", t.TempDir()}, exitUnsupported, "stockade scan: -runtime", ""},
		{"maintain -sarif into a missing directory", []string{"maintain", "-sarif", "/nonexistent/m.sarif", t.TempDir()}, exitUnsupported, "-sarif /nonexistent/m.sarif: its directory does not exist", ""},
		{"maintain -each with -group", []string{"maintain", "-each", "-group", t.TempDir()}, exitUnsupported, "-group proposes them together", ""},
		{"maintain -min-age negative", []string{"maintain", "-min-age", "-1h", t.TempDir()}, exitUnsupported, "-min-age must not be negative", ""},
		{"scan has no -min-age", []string{"scan", "-vulndb", "/db", "-min-age", "1h", t.TempDir()}, exitUnsupported, "flag provided but not defined: -min-age", ""},
		{"maintain has no -openvex", []string{"maintain", "-openvex", "v.json", t.TempDir()}, exitUnsupported, "flag provided but not defined: -openvex", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr); code != tc.code {
				t.Errorf("stockade %q = exit %d; want %d\nstderr: %s", tc.args, code, tc.code, stderr.String())
			}
			for _, c := range []struct {
				name      string
				got, want string
			}{{"stderr", stderr.String(), tc.stderr}, {"stdout", stdout.String(), tc.stdout}} {
				if c.want == "" && c.got != "" || !strings.Contains(c.got, c.want) {
					t.Errorf("%s = %q; want %q", c.name, c.got, c.want)
				}
			}
		})
	}
}

// TestExitCode pins the one mapping from a command's error to its exit
// code.
func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{errors.New("engine down"), exitFailure},
		{usagef("inspect", "bad"), exitUnsupported},
		{fmt.Errorf("wrapped: %w", usagef("inspect", "bad")), exitUnsupported},
		{&exitError{code: exitFindings}, exitFindings},
		{fmt.Errorf("wrapped: %w", &exitError{code: 4}), 4},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d; want %d", tc.err, got, tc.want)
		}
	}
}

// TestExitCodes_MatchReport: the manual's exit codes are the report's.
func TestExitCodes_MatchReport(t *testing.T) {
	for _, v := range []report.Verdict{report.Clean, report.Unsupported, report.Failing, report.Inconclusive, report.AcquisitionFailed} {
		want := map[report.Verdict]int{report.Clean: exitOK, report.Unsupported: exitUnsupported, report.Failing: exitFindings,
			report.Inconclusive: exitFindings, report.AcquisitionFailed: exitAcquisition}[v]
		if got := v.ExitCode(); got != want {
			t.Errorf("%s.ExitCode() = %d; the manual says %d", v, got, want)
		}
	}
}

// TestWriteAtomic: a write that succeeds replaces the file (0644, the new
// bytes); one that fails leaves the old file as it was and no temporary
// file beside it.
func TestWriteAtomic(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		write func(w io.Writer) error
		err   error
		want  string // the file's content after
	}{
		{"succeeds", func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }, nil, "new"},
		{"fails after writing", func(w io.Writer) error { io.WriteString(w, "partial"); return boom }, boom, "old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			name := filepath.Join(dir, "out")
			if err := os.WriteFile(name, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := writeAtomic(name, tc.write); !errors.Is(err, tc.err) {
				t.Fatalf("writeAtomic = %v; want %v", err, tc.err)
			}
			got, err := os.ReadFile(name)
			if err != nil || string(got) != tc.want {
				t.Errorf("file = %q, %v; want %q", got, err, tc.want)
			}
			if fi, _ := os.Stat(name); tc.err == nil && fi.Mode().Perm() != 0o644 {
				t.Errorf("mode %v; want 0644", fi.Mode().Perm())
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("%d files left in the directory; want only the file", len(ents))
			}
		})
	}
}

// TestEmit_OpenVEX: -openvex writes the document of a complete scan; when
// no document can be made (an inconclusive scan, or none), it writes
// nothing, says why, removes the document an earlier run left at the
// path, and the exit code is not 0 even when the report's is.
func TestEmit_OpenVEX(t *testing.T) {
	scan := func(status report.ScanStatus) *report.Report {
		r := report.New("/x")
		r.Module, r.Go = "example.com/m", "1.24"
		r.Vulns = &report.VulnScan{Status: status, Vulns: []report.Vuln{},
			DB: report.VulnDB{Modified: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), SHA256: strings.Repeat("f1", 32)}}
		if status == report.ScanInconclusive {
			r.Vulns.Reasons = []string{"the scanner timed out"}
		}
		r.FinishScan(time.Second)
		return r
	}
	noScan := report.New("/x")
	noScan.Module = "example.com/m"
	noScan.Finish(time.Second)

	complete := scan(report.ScanComplete)
	for _, tc := range []struct {
		name     string
		rep      *report.Report
		earlier  bool // a document of an earlier run is at the path
		wantCode int
		wantDoc  bool
		wantErr  []string
	}{
		{"complete", complete, true, complete.ExitCode, true, nil},
		{"inconclusive", scan(report.ScanInconclusive), true, exitFindings, false, []string{"not written", "inconclusive", "removed"}},
		{"no scan", noScan, false, exitFindings, false, []string{"not written"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vex := filepath.Join(t.TempDir(), "m.openvex.json")
			if tc.earlier {
				doc, err := report.OpenVEX(complete)
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				report.WriteOpenVEX(&b, doc)
				os.WriteFile(vex, append(b.Bytes(), ' '), 0o644) // not this run's bytes
			}
			fs := flag.NewFlagSet("scan", flag.ContinueOnError)
			f := addRunFlags(fs, "scan").withOpenVEX(fs)
			if err := fs.Parse([]string{"-json", "-openvex", vex}); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			err := f.emit(&cmdEnv{stdout: &stdout, stderr: &stderr}, tc.rep)
			if got := exitCode(err); got != tc.wantCode {
				t.Errorf("exit %d (%v); want %d", got, err, tc.wantCode)
			}
			var rep report.Report
			if json.Unmarshal(stdout.Bytes(), &rep) != nil || rep.Verdict != tc.rep.Verdict {
				t.Errorf("stdout is not the -json report: %q", stdout.String())
			}
			got, rerr := os.ReadFile(vex)
			if tc.wantDoc {
				doc, _ := report.OpenVEX(tc.rep)
				var want bytes.Buffer
				report.WriteOpenVEX(&want, doc)
				if rerr != nil || !bytes.Equal(got, want.Bytes()) {
					t.Errorf("document %q, %v; want this scan's", got, rerr)
				}
			} else if !errors.Is(rerr, os.ErrNotExist) {
				t.Errorf("a document is at %s (%v); want none", vex, rerr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q; want it to say %q", stderr.String(), w)
				}
			}
		})
	}
}
