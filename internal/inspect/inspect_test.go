package inspect

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/cacheseed"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/hosttest"
	"github.com/stockade/stockade/internal/imagetable"
	"github.com/stockade/stockade/internal/modproxy"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/validate"
	"github.com/stockade/stockade/internal/workflow"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata/")

// repos is the fixture repositories' directory.
var repos = filepath.Join("..", "..", "testdata", "repos")

// seed is the build-cache seed the fixtures' validations use, made once
// in the shared data directory (which outlives the test process, so it is
// built once per image and reused by later runs, as inspect reuses it).
var seed struct {
	once sync.Once
	err  error
}

func TestMain(m *testing.M) {
	fixturesOutsideGit()
	code := m.Run()
	enginetest.RemoveToolchain()
	os.Exit(code)
}

// fixturesOutsideGit makes git stop looking for a repository above the
// fixture repositories (GIT_CEILING_DIRECTORIES, which Stockade's git
// honours): each is a module of its own, not a subdirectory of this
// checkout, so it is validated as the directory it is, whatever this
// checkout has committed.
func fixturesOutsideGit() {
	var dirs []string
	for _, d := range []string{repos, filepath.Join("testdata", "repos")} {
		if abs, err := filepath.Abs(d); err == nil {
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				abs = real
			}
			dirs = append(dirs, abs)
		}
	}
	os.Setenv("GIT_CEILING_DIRECTORIES", strings.Join(dirs, ":"))
}

// removeTree removes dir, making what the tests made read-only writable
// first.
func removeTree(dir string) {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	os.RemoveAll(dir)
}

// engine returns the shared engine client, fixture proxy and data
// directory (enginetest.Toolchain), with the seed the fixtures'
// validations use.
func engine(t *testing.T) (eng *dockerapi.Client, proxy, dataDir string) {
	t.Helper()
	eng, proxy, dataDir = enginetest.Toolchain(t, filepath.Join("..", "..", "testdata", "modules"))
	seed.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), seedTimeout)
		defer cancel()
		seed.err = prepareSeed(ctx, eng, dataDir)
	})
	if seed.err != nil {
		t.Fatalf("preparing the build-cache seed: %v", seed.err)
	}
	return eng, proxy, dataDir
}

// seedTimeout bounds building the build-cache seed when the data
// directory does not hold it yet: minutes on a busy machine.
const seedTimeout = 30 * time.Minute

// prepareSeed builds the seed the fixtures' validations will use, with its
// own budget, so no fixture's timeout has to cover it. It picks the image
// as inspect does for the fixtures' go 1.24.
func prepareSeed(ctx context.Context, eng *dockerapi.Client, dataDir string) error {
	// The shared directory may predate the data directory's marker.
	dir, err := toolchain.PrepareDefaultDataDir(dataDir)
	if err != nil {
		return err
	}
	log := slog.New(slog.DiscardHandler)
	img, _, err := workflow.SelectImage(ctx, eng, workflow.ImageRequest{Table: imagetable.Default(), Directive: "1.24"}, log)
	if err != nil {
		return err
	}
	_, err = cacheseed.Ensure(ctx, eng, cacheseed.Config{
		DataDir: dir, Image: img.ID, GoVersion: img.GoVersion, Settings: validate.SeedSettings, Owner: "validate-test",
	})
	if errors.Is(err, cacheseed.ErrUnsupported) {
		return nil
	}
	return err
}

// goldenCompare checks the normalized text and JSON reports of r against
// testdata/<name>.txt and .json.
func goldenCompare(t *testing.T, name string, r *report.Report) {
	t.Helper()
	n := report.Normalized(r)
	var text, js bytes.Buffer
	if err := report.WriteText(&text, n); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteJSON(&js, n); err != nil {
		t.Fatal(err)
	}
	for _, g := range []struct {
		ext string
		got []byte
	}{{".txt", text.Bytes()}, {".json", js.Bytes()}} {
		path := filepath.Join("testdata", name+g.ext)
		if *update {
			if err := os.WriteFile(path, g.got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if !bytes.Equal(g.got, want) {
			t.Errorf("%s differs from the golden report (go test -update accepts it):\n--- got\n%s\n--- want\n%s", path, g.got, want)
		}
	}
}

// noEngine fails the test on any engine call: refusals must not need one.
type noEngine struct {
	workflow.Engine // nil: every call panics
}

func TestInspect_RefusalsNeedNoContainer(t *testing.T) {
	for _, tc := range []struct{ repo, kind string }{
		{"workspace", "workspace"},
		{"vendored", "vendor"},
		{"nested-module", "nested_module"},
		{"local-replace", "local_replace"},
		{"submodule", "submodule"},
		{"symlink-escape", "symlink_escape"},
		{"newer-go", "requires_newer_toolchain"},
	} {
		t.Run(tc.repo, func(t *testing.T) {
			dir, err := filepath.Abs(filepath.Join(repos, tc.repo))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Inspect(context.Background(), noEngine{}, Options{Options: workflow.Options{Dir: dir, DataDir: t.TempDir()}})
			if err != nil {
				t.Fatalf("Inspect = %v; want a refusal report", err)
			}
			if rep.Verdict != report.Unsupported || rep.ExitCode != 2 || rep.Refusal == nil || rep.Refusal.Kind != tc.kind {
				t.Fatalf("Inspect: verdict %s, exit %d, refusal %+v; want unsupported, 2, %s", rep.Verdict, rep.ExitCode, rep.Refusal, tc.kind)
			}
			if len(rep.Checks) != 0 || rep.Image != nil {
				t.Errorf("a refused module has checks or an image: %+v", rep)
			}
			pre, refused, _ := Refuse(context.Background(), dir, false, t.TempDir())
			if !refused || pre.Refusal.Kind != tc.kind {
				t.Errorf("Refuse(%s) = %+v, %v; want the same refusal", tc.repo, pre, refused)
			}
			goldenCompare(t, tc.repo, rep)
		})
	}
}

// TestInspect_MalformedGoModFails: a go.mod that does not parse is not an
// unsupported layout: the go command fails on it at home too, so the
// verdict is failing (exit 3), decided before any container runs.
func TestInspect_MalformedGoModFails(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"go.mod": "module stockade.test/malformed\n\ngo 1.24\n\nrequire (\n",
		"m.go":   "package malformed\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	host := exec.Command("go", "list", "./...")
	host.Dir, host.Env = dir, append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := host.CombinedOutput(); err == nil {
		t.Fatalf("go list on the host passed on the malformed go.mod:\n%s", out)
	}
	rep, err := Inspect(context.Background(), noEngine{}, Options{Options: workflow.Options{Dir: dir, DataDir: t.TempDir()}})
	if err != nil {
		t.Fatalf("Inspect = %v; want a report", err)
	}
	if rep.Verdict != report.Failing || rep.ExitCode != 3 || rep.Refusal == nil || rep.Refusal.Kind != report.RefusalMalformedGoMod {
		t.Errorf("verdict %s, exit %d, refusal %+v; want failing, 3, %s", rep.Verdict, rep.ExitCode, rep.Refusal, report.RefusalMalformedGoMod)
	}
	pre, refused, err := Refuse(context.Background(), dir, false, t.TempDir())
	if err != nil || !refused || pre.Verdict != report.Failing {
		t.Errorf("Refuse = %+v, %v, %v; want the same failing report", pre, refused, err)
	}
}

// fixture is one engine-backed fixture run and what must hold of it
// beyond its golden report.
type fixture struct {
	repo    string
	dir     string        // the repository; empty means repos/<repo>
	timeout time.Duration // validation timeout; zero means fixtureTimeout
	// cooldown is the run's -min-age, on a clock fixed against the
	// fixture proxy's times; the zero value holds back nothing.
	cooldown workflow.Cooldown
	verdict  report.Verdict
	check    func(t *testing.T, r *report.Report)
}

// fixtureTimeout bounds each fixture's validation: a seeded cache compiles
// the standard library zero times, so each takes seconds, but the engine
// may be shared with other test packages.
const fixtureTimeout = 8 * time.Minute

// hangTimeout is the hang fixture's validation timeout: long enough to
// build, vet and start the tests, then it kills TestForever.
const hangTimeout = time.Minute

func checkStatus(t *testing.T, r *report.Report, name string, want report.Status, reasonPart string) {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name != name {
			continue
		}
		if c.Status != want {
			t.Errorf("check %s = %s %q; want %s", name, c.Status, c.Reasons, want)
		}
		if reasonPart != "" && !strings.Contains(strings.Join(c.Reasons, "; "), reasonPart) {
			t.Errorf("check %s reasons %q; want one mentioning %q", name, c.Reasons, reasonPart)
		}
		return
	}
	t.Errorf("no %s check in %+v", name, r.Checks)
}

// checkSARIF: the report's SARIF log has a result of rule at file, with
// the line Go reported.
func checkSARIF(t *testing.T, r *report.Report, rule, file string) {
	t.Helper()
	for _, res := range r.SARIF("inspect").Runs[0].Results {
		if loc := res.Locations[0].PhysicalLocation; res.RuleID == rule && loc.ArtifactLocation.URI == file && loc.Region != nil && loc.Region.StartLine > 0 {
			return
		}
	}
	t.Errorf("no SARIF result of rule %s at a line of %s in %+v", rule, file, r.SARIF("inspect").Runs[0].Results)
}

// fixtureNow is the clock of a fixture with a cooldown: ten days after the
// fixture proxy's oldest version of each module (greet v1.0.0; v1.0.1 is a
// day younger, v1.1.0 two days).
func fixtureNow() time.Time { return modproxy.BaseTime.Add(10 * 24 * time.Hour) }

var fixtures = []fixture{
	// With a cooldown of 8.5 days on a clock 10 days after greet v1.0.0:
	// greet v1.1.0 (8 days old) is held back until day 10.5, v1.0.1 (9
	// days old) is the patch candidate; nothing else is that young.
	{repo: "clean", cooldown: workflow.Cooldown{MinAge: 8*24*time.Hour + 12*time.Hour, Now: fixtureNow}, verdict: report.Clean, check: func(t *testing.T, r *report.Report) {
		want := []report.HeldBack{{Path: "stockade.test/greet", Current: "v1.0.0", Version: "v1.1.0", Class: "minor",
			Published: modproxy.BaseTime.Add(2 * 24 * time.Hour), Until: modproxy.BaseTime.Add(10*24*time.Hour + 12*time.Hour)}}
		if !reflect.DeepEqual(r.HeldBack, want) {
			t.Errorf("held back %+v; want %+v", r.HeldBack, want)
		}
		for _, c := range r.Candidates {
			if c.Path == "stockade.test/greet" && c.Version != "v1.0.1" {
				t.Errorf("candidate %+v: the cooldown holds it back", c)
			}
		}
		var newer bool
		for _, c := range r.Candidates {
			if c.Path == "stockade.test/nextgo" && c.Version == "v0.2.0" {
				newer = c.RequiresNewerToolchain && c.GoVersion == "1.99"
			}
		}
		if !newer {
			t.Errorf("candidates %+v: want nextgo v0.2.0 flagged requires_newer_toolchain (go 1.99)", r.Candidates)
		}
		if r.Image == nil || !r.Image.StandIn || !r.Image.Local {
			t.Errorf("image %+v: want the local go 1.26 image standing in for go 1.24", r.Image)
		}
	}},
	{repo: "failing-test", verdict: report.Failing, check: func(t *testing.T, r *report.Report) {
		checkStatus(t, r, validate.CheckTest, report.StatusFail, "")
		checkSARIF(t, r, "stockade/test", "calc_test.go")
	}},
	{repo: "build-error", verdict: report.Failing, check: func(t *testing.T, r *report.Report) {
		checkStatus(t, r, validate.CheckBuild, report.StatusFail, "")
		checkSARIF(t, r, "stockade/build", "broken.go")
	}},
	{repo: "vet-finding", verdict: report.Failing, check: func(t *testing.T, r *report.Report) {
		checkStatus(t, r, validate.CheckBuild, report.StatusPass, "")
		checkStatus(t, r, validate.CheckVet, report.StatusFail, "")
		checkSARIF(t, r, "stockade/vet", "vet.go")
	}},
	{repo: "test-build-error", verdict: report.Failing, check: func(t *testing.T, r *report.Report) {
		checkStatus(t, r, validate.CheckBuild, report.StatusPass, "")
		checkStatus(t, r, validate.CheckTest, report.StatusFail, "")
	}},
	{repo: "hang", timeout: hangTimeout, verdict: report.Inconclusive, check: func(t *testing.T, r *report.Report) {
		checkStatus(t, r, validate.CheckTest, report.StatusInconclusive, "timed out")
	}},
	{repo: "big-output", verdict: report.Inconclusive, check: func(t *testing.T, r *report.Report) {
		checkStatus(t, r, validate.CheckTest, report.StatusInconclusive, "truncated")
	}},
	// go.mod has a requirement and no go line: the go command adds one to
	// download the requirement, as at home. Acquisition does that on a
	// staging copy, the updated tree is validated, the report says so and
	// the user's go.mod is unchanged.
	{repo: "no-go-line", verdict: report.Clean, check: func(t *testing.T, r *report.Report) {
		if r.Source == nil || r.Source.Updated == nil || !slices.Equal(r.Source.Updated.Files, []string{"go.mod"}) ||
			!strings.Contains(r.Source.Updated.Reason, "go: updating go.mod: open /src/go.mod: permission denied") {
			t.Errorf("source %+v; want go.mod named as updated, with the go command's message", r.Source)
		}
		checkStatus(t, r, validate.CheckTest, report.StatusPass, "")
		if b, _ := os.ReadFile(filepath.Join(repos, "no-go-line", "go.mod")); strings.Contains(string(b), "\ngo ") {
			t.Errorf("the user's go.mod changed:\n%s", b)
		}
	}},
	// go.mod requires greet and there is no go.sum: go mod download
	// records only go.mod hashes, so go test -mod=readonly would fail
	// with "missing go.sum entry"; acquisition adds the entries the
	// checks need on a staging copy, as go test with GOFLAGS=-mod=mod does
	// at home, and the report says go.sum needed updating.
	{repo: "missing-sum", verdict: report.Clean, check: func(t *testing.T, r *report.Report) {
		if r.Source == nil || r.Source.Updated == nil || !slices.Equal(r.Source.Updated.Files, []string{"go.sum"}) {
			t.Errorf("source %+v; want go.sum named as updated", r.Source)
		}
		checkStatus(t, r, validate.CheckTest, report.StatusPass, "")
	}},
	// Its test writes beside itself, as at home: the validation's
	// throwaway working tree lets it, and the user's directory is
	// untouched.
	{repo: "writes-tree", verdict: report.Clean, check: func(t *testing.T, r *report.Report) {
		checkStatus(t, r, validate.CheckTest, report.StatusPass, "")
		for _, name := range []string{"out.log", "link.txt"} {
			if _, err := os.Lstat(filepath.Join(repos, "writes-tree", name)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s appeared in the user's directory: %v", name, err)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(repos, "writes-tree", "testdata", "in.txt")); string(b) != "input\n" {
			t.Errorf("the user's testdata/in.txt changed: %q", b)
		}
	}},
	// Its tests serve and dial on loopback as published modules' do
	// (httptest, localhost, ::1, 0.0.0.0): execute has no network, but
	// loopback works as on the host.
	{repo: "loopback", verdict: report.Clean, check: func(t *testing.T, r *report.Report) {
		checkStatus(t, r, validate.CheckTest, report.StatusPass, "")
		for _, c := range r.Checks {
			if c.Name == validate.CheckTest && (c.Tests == nil || c.Tests.Passed != 4) {
				t.Errorf("tests %+v; want the four loopback tests passed", c.Tests)
			}
		}
	}},
	// Its tests dial PostgreSQL's port and the Docker daemon's socket:
	// services a machine may run and the sandbox never does. The
	// failures are named as such, not left as ordinary test failures.
	{repo: "host-service", verdict: report.Failing, check: func(t *testing.T, r *report.Report) {
		var kinds []string
		for _, c := range r.Checks {
			for _, f := range c.Findings {
				kinds = append(kinds, f.Test+" "+f.Kind)
			}
		}
		slices.Sort(kinds)
		if want := []string{"TestDockerDaemon " + validate.KindNeedsHostService, "TestPostgres " + validate.KindNeedsHostService}; !slices.Equal(kinds, want) {
			t.Errorf("findings %q; want %q", kinds, want)
		}
	}},
	// A dependency needs a newer Go: acquisition fails under
	// GOTOOLCHAIN=local and the module is refused after that container.
	{repo: "newer-dep", dir: filepath.Join("testdata", "repos", "newer-dep"), verdict: report.Unsupported, check: func(t *testing.T, r *report.Report) {
		if r.Refusal == nil || r.Refusal.Kind != "requires_newer_toolchain" || !strings.Contains(r.Refusal.Reason, "stockade.test/nextgo@v0.2.0 requires go >= 1.99") {
			t.Errorf("refusal %+v; want requires_newer_toolchain naming stockade.test/nextgo@v0.2.0 and go 1.99", r.Refusal)
		}
	}},
	// The repository requires what cannot be had: acquisition fails, a
	// finding about the repository with its own verdict and exit code.
	{repo: "missing-dep", dir: filepath.Join("testdata", "repos", "missing-dep"), verdict: report.AcquisitionFailed, check: func(t *testing.T, r *report.Report) {
		if r.Acquisition == nil || !strings.Contains(r.Acquisition.Detail, "stockade.test/greet@v1.9.0") || r.ExitCode != 4 {
			t.Errorf("acquisition %+v, exit %d; want the missing stockade.test/greet@v1.9.0 named, exit 4", r.Acquisition, r.ExitCode)
		}
	}},
	{repo: "checksum-mismatch", dir: filepath.Join("testdata", "repos", "checksum-mismatch"), verdict: report.AcquisitionFailed, check: func(t *testing.T, r *report.Report) {
		if r.Acquisition == nil || !strings.Contains(r.Acquisition.Detail, "checksum mismatch") {
			t.Errorf("acquisition %+v; want the checksum mismatch named", r.Acquisition)
		}
	}},
	{repo: "old-go", verdict: report.Clean, check: func(t *testing.T, r *report.Report) {
		if r.Image == nil || !r.Image.StandIn {
			t.Errorf("image %+v: want a newer image standing in for go 1.16", r.Image)
		}
	}},
}

// TestInspect_Fixtures runs inspect on every fixture repository that is
// not refused and compares the normalized report with its golden file.
func TestInspect_Fixtures(t *testing.T) {
	eng, proxy, dataDir := engine(t)
	for _, fx := range fixtures {
		t.Run(fx.repo, func(t *testing.T) {
			src := fx.dir
			if src == "" {
				src = filepath.Join(repos, fx.repo)
			}
			dir, err := filepath.Abs(src)
			if err != nil {
				t.Fatal(err)
			}
			timeout := fx.timeout
			if timeout == 0 {
				timeout = fixtureTimeout
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout+5*time.Minute)
			defer cancel()
			start := time.Now()
			rep, err := Inspect(ctx, eng, Options{Options: workflow.Options{
				Dir: dir, FixtureProxy: proxy, DataDir: dataDir, Timeout: timeout, LockTimeout: 10 * time.Minute, Owner: enginetest.Owner(t),
				Cooldown: fx.cooldown,
			}})
			if err != nil {
				t.Fatalf("Inspect(%s) = %v", fx.repo, err)
			}
			t.Logf("%s: %s in %v (%+v)", fx.repo, rep.Verdict, time.Since(start).Round(time.Millisecond), rep.Timings.Phases)
			if rep.Verdict != fx.verdict || rep.ExitCode != fx.verdict.ExitCode() {
				var b bytes.Buffer
				report.WriteText(&b, rep)
				t.Errorf("verdict %s (exit %d); want %s\n%s", rep.Verdict, rep.ExitCode, fx.verdict, b.String())
			}
			if fx.check != nil {
				fx.check(t, rep)
			}
			goldenCompare(t, fx.repo, rep)
		})
	}
}

// creates is an Engine that records the name of every container created
// through it; the engine underneath is real.
type creates struct {
	*dockerapi.Client
	mu    sync.Mutex
	names []string
}

func (c *creates) ContainerCreate(ctx context.Context, name string, cfg dockerapi.ContainerConfig) (string, error) {
	c.mu.Lock()
	c.names = append(c.names, name)
	c.mu.Unlock()
	return c.Client.ContainerCreate(ctx, name, cfg)
}

// TestInspect_OneAcquireContainer: an inspect that acquires and lists
// candidates makes one probe, one acquire and one execute container (the
// acquisition and the listing share the acquire container as execs; the
// listing runs beside the validation), and reports the same as before.
func TestInspect_OneAcquireContainer(t *testing.T) {
	eng, proxy, dataDir := engine(t)
	dir, err := filepath.Abs(filepath.Join(repos, "clean"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), fixtureTimeout+5*time.Minute)
	defer cancel()
	c := &creates{Client: eng}
	rep, err := Inspect(ctx, c, Options{Options: workflow.Options{
		Dir: dir, FixtureProxy: proxy, DataDir: dataDir, Timeout: fixtureTimeout, LockTimeout: 10 * time.Minute, Owner: enginetest.Owner(t),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != report.Clean || len(rep.Candidates) == 0 || rep.CandidatesError != "" {
		t.Fatalf("verdict %s, candidates %v (%q); want clean with candidates", rep.Verdict, rep.Candidates, rep.CandidatesError)
	}
	count := map[string]int{}
	for _, n := range c.names {
		for _, p := range []string{"probe", "acquire", "mutate", "execute"} {
			if strings.HasPrefix(n, "stockade-tc-"+p+"-") {
				count[p]++
			}
		}
	}
	if want := map[string]int{"probe": 1, "acquire": 1, "execute": 1}; !maps.Equal(count, want) {
		t.Errorf("containers made: %v (%v); want %v", count, c.names, want)
	}
	if got := rep.Timings.Phases; !slices.ContainsFunc(got, func(p report.Phase) bool { return p.Name == "candidates" }) {
		t.Errorf("phases %v lack candidates", got)
	}
}

// TestInspect_CommittedTreeOrWorktree checks that a git checkout is
// validated at its committed tree, that -worktree takes uncommitted
// changes, and that neither writes the checkout.
func TestInspect_CommittedTreeOrWorktree(t *testing.T) {
	eng, proxy, dataDir := engine(t)
	dir := filepath.Join(t.TempDir(), "repo")
	if err := hosttest.CopyTree(filepath.Join(repos, "old-go"), dir); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "fixture")
	// An uncommitted test that fails.
	failing := []byte("package old\n\nimport \"testing\"\n\nfunc TestUncommitted(t *testing.T) { t.Fatal(\"uncommitted change\") }\n")
	if err := os.WriteFile(filepath.Join(dir, "uncommitted_test.go"), failing, 0o644); err != nil {
		t.Fatal(err)
	}
	before := treeDigest(t, dir)

	for _, tc := range []struct {
		worktree bool
		kind     string
		verdict  report.Verdict
	}{
		{false, "commit", report.Clean},
		{true, "worktree", report.Failing},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), fixtureTimeout+5*time.Minute)
		rep, err := Inspect(ctx, eng, Options{Options: workflow.Options{
			Dir: dir, FixtureProxy: proxy, DataDir: dataDir, Timeout: fixtureTimeout, LockTimeout: 10 * time.Minute, Owner: enginetest.Owner(t),
		}, Worktree: tc.worktree})
		cancel()
		if err != nil {
			t.Fatalf("Inspect(worktree=%v) = %v", tc.worktree, err)
		}
		if rep.Source == nil || rep.Source.Kind != tc.kind || len(rep.Source.Commit) != 40 {
			t.Errorf("worktree=%v: source %+v; want kind %s with the commit", tc.worktree, rep.Source, tc.kind)
		}
		if rep.Verdict != tc.verdict {
			t.Errorf("worktree=%v: verdict %s; want %s", tc.worktree, rep.Verdict, tc.verdict)
		}
		if rep.Source != nil && rep.Source.Uncommitted != !tc.worktree {
			t.Errorf("worktree=%v: uncommitted_changes %v; want %v", tc.worktree, rep.Source.Uncommitted, !tc.worktree)
		}
	}
	if after := treeDigest(t, dir); after != before {
		t.Errorf("inspect changed the checkout:\nbefore %s\nafter  %s", before, after)
	}
}

// treeDigest lists every path under dir with its mode and content.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v %d", rel, fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestInspect_Monorepo: a module in a subdirectory of a repository is
// validated as its committed tree, as a module at the top is (the report
// names the subdirectory); -worktree takes its working tree; the rest of
// the repository (another module, an ignored symlink leaving it) plays no
// part.
func TestInspect_Monorepo(t *testing.T) {
	eng, proxy, dataDir := engine(t)
	top := filepath.Join(t.TempDir(), "mono")
	svc := filepath.Join(top, "services", "clean")
	if err := hosttest.CopyTree(filepath.Join(repos, "clean"), svc); err != nil {
		t.Fatal(err)
	}
	if err := hosttest.CopyTree(filepath.Join(repos, "old-go"), filepath.Join(top, "tools")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(top, ".gitignore"), []byte("/escape\n"), 0o644)
	os.Symlink("..", filepath.Join(top, "escape"))
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = top
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "monorepo")
	failing := []byte("package hello\n\nimport \"testing\"\n\nfunc TestUncommitted(t *testing.T) { t.Fatal(\"uncommitted change\") }\n")
	if err := os.WriteFile(filepath.Join(svc, "uncommitted_test.go"), failing, 0o644); err != nil {
		t.Fatal(err)
	}
	before := treeDigest(t, top)
	for _, tc := range []struct {
		worktree bool
		kind     string
		verdict  report.Verdict
	}{
		{false, "commit", report.Clean},
		{true, "worktree", report.Failing},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), fixtureTimeout+5*time.Minute)
		rep, err := Inspect(ctx, eng, Options{Options: workflow.Options{
			Dir: svc, FixtureProxy: proxy, DataDir: dataDir, Timeout: fixtureTimeout, LockTimeout: 10 * time.Minute, Owner: enginetest.Owner(t),
		}, Worktree: tc.worktree})
		cancel()
		if err != nil {
			t.Fatalf("Inspect(worktree=%v) = %v", tc.worktree, err)
		}
		if rep.Source == nil || rep.Source.Kind != tc.kind || rep.Source.Subdir != "services/clean" || len(rep.Source.Commit) != 40 {
			t.Errorf("worktree=%v: source %+v; want kind %s in services/clean with the commit", tc.worktree, rep.Source, tc.kind)
		}
		if rep.Verdict != tc.verdict || rep.Module != "stockade.test/repo/clean" {
			var b bytes.Buffer
			report.WriteText(&b, rep)
			t.Errorf("worktree=%v: verdict %s of %s; want %s\n%s", tc.worktree, rep.Verdict, rep.Module, tc.verdict, b.String())
		}
	}
	if after := treeDigest(t, top); after != before {
		t.Errorf("inspect changed the repository")
	}
}
