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
	"github.com/stockade/stockade/internal/maintain"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/vulndb/vulndbtest"
)

// firstUseWait bounds one command of TestFirstUse (maintain validates two
// trees; on a loaded machine that takes minutes).
const firstUseWait = 10 * time.Minute

// A user's module, as a new user of Stockade has it: its own path, a
// dependency from the public module proxy one minor release behind (so
// that maintain has an upgrade to propose), a test, a committed go.sum,
// and a call to strings.ToUpper, which the fixture vulnerability database
// declares vulnerable in the image's Go (so the scan finds something).
var firstUseRepo = map[string]string{
	"go.mod": "module example.com/firstuse\n\ngo 1.22\n\nrequire github.com/google/uuid v1.5.0\n",
	"go.sum": "github.com/google/uuid v1.5.0 h1:1p67kYwdtXjb0gL0BPiP1Av9wiZPo5A8z2cWkTZ+eyU=\n" +
		"github.com/google/uuid v1.5.0/go.mod h1:TIyPZe4MgqvfeYDBFedMoGGpEw/LqOeaOT+nhxU+yHo=\n",
	"id.go": "// Package firstuse names things.\npackage firstuse\n\nimport (\n\t\"strings\"\n\n\t\"github.com/google/uuid\"\n)\n\n" +
		"// Name returns a new name with prefix p, upper-cased.\nfunc Name(p string) string { return strings.ToUpper(p) + \"-\" + uuid.NewString() }\n",
	"id_test.go": "package firstuse\n\nimport (\n\t\"strings\"\n\t\"testing\"\n)\n\n" +
		"func TestName(t *testing.T) {\n\tif n := Name(\"a\"); !strings.HasPrefix(n, \"A-\") || len(n) != 38 {\n\t\tt.Fatalf(\"Name = %q\", n)\n\t}\n}\n",
}

// TestFirstUse runs Stockade as a new user does: the binary built with
// `go build -o` into a directory of its own, run from the user's own
// repository outside this source tree (a git checkout of a module of its
// own), with no GOFLAGS or GOWORK, over the public module proxy: inspect,
// maintain, and scan with a database, in text and -json, with -branch and
// -openvex. Then the same three again with no go command on PATH, now that
// the images exist. Nothing it runs may depend on the working directory,
// on this source tree or on the host's Go. The workflows themselves are
// proven in internal/inspect and internal/maintain; this proves the
// command a user runs.
func TestFirstUse(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stockade and runs it against the engine and the module proxy")
	}
	enginetest.Client(t)
	dataDir, err := enginetest.SharedDataDir()
	if err != nil {
		t.Fatal(err)
	}
	goVersion := hostGo(t)
	db := vulndbtest.Write(t, goVersion)

	bin := filepath.Join(t.TempDir(), "stockade")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -o: %v\n%s", err, out)
	}

	repo := filepath.Join(t.TempDir(), "firstuse")
	for name, content := range firstUseRepo {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"init", "-q"}, {"add", "-A"},
		{"-c", "user.name=User", "-c", "user.email=user@example.com", "commit", "-qm", "first"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}

	// The user's environment, without what points into this tree.
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "GOFLAGS" && k != "GOWORK" && k != "PWD" {
			env = append(env, kv)
		}
	}
	stockade := func(t *testing.T, env []string, wantCode int, want string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), firstUseWait)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(args[:1:1], append([]string{"-data-dir", dataDir}, args[1:]...)...)...)
		cmd.Dir, cmd.Env = repo, append(env, "PWD="+repo)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := cmd.ProcessState.ExitCode()
		if err != nil && code < 0 {
			t.Fatalf("stockade %v: %v", args, err)
		}
		if code != wantCode || !strings.Contains(stdout.String()+stderr.String(), want) {
			t.Fatalf("stockade %v = exit %d; want %d and %q\nstdout:\n%s\nstderr:\n%s", args, code, wantCode, want, stdout.String(), stderr.String())
		}
		t.Logf("stockade %v: exit %d\n%s", args, code, stdout.String())
		return stdout.String()
	}
	// The text reports with go on PATH; -json, -branch and -openvex too.
	t.Run("WithGo", func(t *testing.T) {
		stockade(t, env, exitOK, "example.com/firstuse: CLEAN", "inspect", ".")
		msarif := filepath.Join(t.TempDir(), "maintain.sarif")
		stockade(t, env, exitOK, "example.com/firstuse: PROPOSAL_PREPARED", "maintain", "-sarif", msarif, "-branch", "deps/uuid", ".")
		var mlog report.SARIFLog
		if b, err := os.ReadFile(msarif); err != nil || json.Unmarshal(b, &mlog) != nil || len(mlog.Runs) != 1 || !mlog.Runs[0].Invocations[0].ExecutionSuccessful || len(mlog.Runs[0].Results) != 0 {
			t.Errorf("maintain -sarif wrote %q, %v; want a successful run without results (the baseline is clean)", b, err)
		}
		if out, err := exec.Command("git", "-C", repo, "log", "-1", "--format=%s", "refs/heads/deps/uuid").Output(); err != nil || !strings.Contains(string(out), "github.com/google/uuid") {
			t.Errorf("branch deps/uuid: %q, %v; want the proposal's commit", out, err)
		}
		stockade(t, env, exitUnsupported, "already exists", "maintain", "-branch", "deps/uuid", ".")
		vex := filepath.Join(t.TempDir(), "firstuse.openvex.json")
		sarif := filepath.Join(t.TempDir(), "firstuse.sarif")
		var rep report.Report
		if err := json.Unmarshal([]byte(stockade(t, env, exitFindings, vulndbtest.Stdlib, "scan", "-json", "-openvex", vex, "-sarif", sarif, "-vulndb", db, ".")), &rep); err != nil {
			t.Fatalf("scan -json: %v", err)
		}
		if rep.Verdict != report.Vulnerable || rep.Vulns == nil || len(rep.Vulns.Called()) != 1 || rep.Vulns.Called()[0].ID != vulndbtest.Stdlib {
			t.Errorf("scan -json: verdict %s, vulns %+v; want vulnerable, %s called", rep.Verdict, rep.Vulns, vulndbtest.Stdlib)
		}
		doc, err := report.OpenVEX(&rep)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		report.WriteOpenVEX(&want, doc)
		if got, err := os.ReadFile(vex); err != nil || !bytes.Equal(got, want.Bytes()) || !strings.Contains(string(got), `"status": "affected"`) {
			t.Errorf("-openvex wrote %q, %v; want the scan's document, %s affected", got, err, vulndbtest.Stdlib)
		}
		var wantSARIF bytes.Buffer
		report.WriteSARIF(&wantSARIF, rep.SARIF("scan"))
		if got, err := os.ReadFile(sarif); err != nil || !bytes.Equal(got, wantSARIF.Bytes()) || !strings.Contains(string(got), `"ruleId": "`+vulndbtest.Stdlib+`"`) {
			t.Errorf("-sarif wrote %q, %v; want the scan's log, a result of %s", got, err, vulndbtest.Stdlib)
		}
	})
	// The same runs with no go command on PATH, now that the images exist.
	session := func(t *testing.T, env []string) {
		var rep report.Report
		if err := json.Unmarshal([]byte(stockade(t, env, exitOK, `"verdict"`, "inspect", "-json", ".")), &rep); err != nil || rep.Verdict != report.Clean {
			t.Errorf("inspect -json: %v, verdict %s; want clean", err, rep.Verdict)
		}
		var mrep maintain.Report
		if err := json.Unmarshal([]byte(stockade(t, env, exitOK, `"outcome"`, "maintain", "-json", ".")), &mrep); err != nil || mrep.Outcome != maintain.ProposalPrepared {
			t.Errorf("maintain -json: %v, outcome %s; want %s", err, mrep.Outcome, maintain.ProposalPrepared)
		}
		stockade(t, env, exitFindings, vulndbtest.Stdlib, "scan", "-vulndb", db, ".")
	}

	var noGo []string
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == "PATH" {
			var keep []string
			for _, d := range filepath.SplitList(v) {
				if _, err := os.Stat(filepath.Join(d, "go")); err != nil {
					keep = append(keep, d)
				}
			}
			kv = "PATH=" + strings.Join(keep, string(filepath.ListSeparator))
		}
		noGo = append(noGo, kv)
	}
	t.Run("WithoutGo", func(t *testing.T) { session(t, noGo) })
}
