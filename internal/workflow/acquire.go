package workflow

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"

	"github.com/stockade/stockade/internal/gomod"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/testjson"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/validate"
)

// Acquired is what acquiring a snapshot's modules found. At most one of
// its fields is set; none means the modules are in the module cache.
type Acquired struct {
	// TimedOut: the acquisition's budget ran out.
	TimedOut bool
	// NewerToolchain, a refusal of kind requires_newer_toolchain: a
	// requirement needs a newer Go than the image's.
	NewerToolchain *report.Refusal
	// Failure: the requirements could not be had (a finding about the
	// repository, not a failure of Stockade's).
	Failure *report.Acquisition
	// Updated, with none of the above, says the go command updated the
	// manifests to download the modules (acquireSnapshot).
	Updated *report.Updated

	update string // with Failure: the go command wanted to update the manifests; its message
}

// acquireSnapshot acquires snap's modules (acquireModules) in acquire
// containers ending by until. When the go command has to update go.mod or
// go.sum to download them, as it does on a developer's machine (a go.mod
// with requirements and no go line gets one), it downloads them again in
// the mutate profile against a staging copy of the manifests (go mod
// download -modfile=/staging/go.mod) and returns a new snapshot of the run
// holding the updated files, which is the tree to validate; Updated says
// which files changed. Otherwise it returns snap. The repository and snap
// are never written.
//
// With c, a long-lived acquire container of snap, the first download runs
// as an exec in it rather than in a container of its own.
func acquireSnapshot(ctx context.Context, r *toolchain.Runner, c *toolchain.Container, snap toolchain.Snapshot, m *gomod.Module, img report.Image, until time.Time) (Acquired, toolchain.Snapshot, error) {
	got, err := acquireModules(ctx, acquireExecer{r: r, c: c, src: snap.Dir, until: until}, m, img, sumsIncomplete(snap.Dir))
	if err != nil || got.update == "" {
		return got, snap, err
	}
	staging, err := r.NewStaging(snap)
	if err != nil {
		return Acquired{}, snap, err
	}
	mut := acquireExecer{r: r, src: snap.Dir, staging: staging, until: until}
	staged, err := acquireModules(ctx, mut, m, img, true)
	if err != nil || staged.TimedOut || staged.NewerToolchain != nil || staged.Failure != nil {
		return staged, snap, err
	}
	goMod, goSum, err := toolchain.ReadManifests(staging)
	if err != nil {
		return Acquired{}, snap, err
	}
	oldMod, oldSum, err := toolchain.ReadManifests(snap.Dir)
	if err != nil {
		return Acquired{}, snap, err
	}
	u := &report.Updated{Reason: got.update}
	if !bytes.Equal(goMod, oldMod) {
		u.Files = append(u.Files, "go.mod")
	}
	if !bytes.Equal(goSum, oldSum) {
		u.Files = append(u.Files, "go.sum")
	}
	if len(u.Files) == 0 {
		// It said it had to update them, and then did not: keep the
		// first failure rather than guess.
		return got, snap, nil
	}
	post, err := r.SnapshotWith(ctx, snap, goMod, goSum)
	if err != nil {
		return Acquired{}, snap, err
	}
	return Acquired{Updated: u}, post, nil
}

// withModFile inserts -modfile=/staging/go.mod after the go subcommand's
// words ("go mod download", "go list"), before any flag or argument: the
// go command stops reading flags at the first argument.
func withModFile(argv []string) []string {
	n := 2
	if len(argv) > 1 && argv[1] == "mod" {
		n = 3
	}
	n = min(n, len(argv))
	return slices.Concat(argv[:n], []string{"-modfile=" + toolchain.StagingModFile}, argv[n:])
}

// manifestUpdateRE matches the go command failing to update go.mod or
// go.sum in the read-only snapshot: it wants to change them to download
// the modules (a go.mod with requirements and no go line gets one).
var manifestUpdateRE = regexp.MustCompile(`go: updating (go\.mod|go\.sum): open ` + regexp.QuoteMeta(toolchain.SourceDir) + `/go\.(mod|sum): (permission denied|read-only file system)`)

// acquireModules downloads the modules the snapshot's go.mod (m) requires
// with go mod download, then, with complete (sumsIncomplete), adds what
// go.sum lacks for the packages and tests the checks load (completeSums),
// through acq (acquireExecer); img is the image the refusal names.
// When the go command needs to update go.mod or go.sum to do so, that is
// a Failure saying so (acquireSnapshot makes the update on a staging copy
// instead).
func acquireModules(ctx context.Context, acq validate.Execer, m *gomod.Module, img report.Image, complete bool) (Acquired, error) {
	out, err := acq.Exec(ctx, []string{"go", "mod", "download"}, 0)
	if err != nil {
		return Acquired{}, fmt.Errorf("workflow: acquire: %w", err)
	}
	if out.TimedOut {
		return Acquired{TimedOut: true}, nil
	}
	if reason := validate.OutputReason(out); reason != "" {
		return Acquired{}, fmt.Errorf("workflow: acquiring modules: %s", reason)
	}
	if out.ExitCode == 0 {
		if !complete {
			return Acquired{}, nil
		}
		return completeSums(ctx, acq)
	}
	if u := manifestUpdateRE.Find(out.Stderr); u != nil {
		return Acquired{Failure: &report.Acquisition{
			Reason: "go mod download needs to update go.mod or go.sum, which this validation keeps as the repository has them",
			Detail: report.Detail(out.Stderr),
		}, update: string(u)}, nil
	}
	if mod, ver, need, ok := needsNewerGo(ctx, acq, out, m); ok {
		return Acquired{NewerToolchain: &report.Refusal{Kind: "requires_newer_toolchain",
			Reason: fmt.Sprintf("%s@%s requires go >= %s; the toolchain image has go %s (GOTOOLCHAIN=local)", mod, ver, need, img.Minor)}}, nil
	}
	return Acquired{Failure: &report.Acquisition{
		Reason: fmt.Sprintf("go mod download failed (exit %d): the modules go.mod requires could not be downloaded", out.ExitCode),
		Detail: report.Detail(out.Stderr),
	}}, nil
}

// completeArgv loads the module's packages and their tests the way the
// checks will and adds what go.sum lacks for them, as go test with
// GOFLAGS=-mod=mod does on a developer's machine: go mod download records
// only the go.mod hashes of the modules it fetches (Go 1.16 and later).
// go get loads packages without building anything.
var completeArgv = []string{"go", "get", "-t", "./..."}

// sumsIncomplete reports whether the go.sum in dir may lack what the
// checks need: an h1: line for a module go.mod requires (or its
// replacement). It reads the manifests on the host; when they cannot be
// read it says true, and the go command decides. go get contacts the
// checksum database even when nothing is missing, so it runs only then.
func sumsIncomplete(dir string) bool {
	goMod, goSum, err := toolchain.ReadManifests(dir)
	if err != nil {
		return true
	}
	f, err := modfile.Parse("go.mod", goMod, nil)
	if err != nil {
		return true
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(goSum), "\n") {
		if p := strings.Fields(l); len(p) == 3 && strings.HasPrefix(p[2], "h1:") && !strings.HasSuffix(p[1], "/go.mod") {
			have[p[0]+" "+p[1]] = true
		}
	}
	replaced := map[string]module.Version{}
	for _, r := range f.Replace {
		replaced[r.Old.Path+" "+r.Old.Version] = r.New
		if r.Old.Version == "" {
			replaced[r.Old.Path] = r.New
		}
	}
	for _, r := range f.Require {
		v := r.Mod
		if n, ok := replaced[v.Path+" "+v.Version]; ok {
			v = n
		} else if n, ok := replaced[v.Path]; ok {
			v = n
		}
		if v.Version != "" && !have[v.Path+" "+v.Version] {
			return true
		}
	}
	return false
}

// completeSums runs completeArgv after a successful go mod download. When
// go.sum (or go.mod) already has what the checks need it writes nothing and
// there is nothing to do; when it has to write them, that is reported as
// the update acquireSnapshot makes on a staging copy. Any other failure is
// left to the checks, which report it as the go command does at home.
func completeSums(ctx context.Context, acq validate.Execer) (Acquired, error) {
	out, err := acq.Exec(ctx, completeArgv, 0)
	if err != nil {
		return Acquired{}, fmt.Errorf("workflow: acquire: %w", err)
	}
	if out.TimedOut {
		return Acquired{TimedOut: true}, nil
	}
	if reason := validate.OutputReason(out); reason != "" {
		return Acquired{}, fmt.Errorf("workflow: completing go.sum: %s", reason)
	}
	if u := manifestUpdateRE.Find(out.Stderr); out.ExitCode != 0 && u != nil {
		return Acquired{Failure: &report.Acquisition{
			Reason: "the checks need go.sum entries (or requirements) the repository's manifests lack",
			Detail: report.Detail(out.Stderr),
		}, update: string(u)}, nil
	}
	return Acquired{}, nil
}

// needsNewerGo says whether a failed acquisition failed because a
// requirement needs a newer Go than the image's, and which. testjson
// classifies the go command's stderr; when it does not recognise the
// form the module loader printed, each requirement of go.mod is
// downloaded on its own with -json, whose per-module errors it does.
func needsNewerGo(ctx context.Context, acq validate.Execer, out validate.Output, m *gomod.Module) (mod, version, goVersion string, ok bool) {
	if n := testjson.NeedsNewerGo(out.Stderr); len(n) > 0 {
		return n[0].Module, n[0].Version, n[0].Go, true
	}
	var queries []string
	for _, r := range m.Requires {
		queries = append(queries, r.Path+"@"+r.Version.Version)
	}
	if len(queries) == 0 {
		return "", "", "", false
	}
	dl, err := acq.Exec(ctx, downloadArgv(queries), 0)
	if err != nil || validate.OutputReason(dl) != "" {
		return "", "", "", false
	}
	st, err := parseDownload(dl.Stdout)
	if err != nil {
		return "", "", "", false
	}
	for _, s := range st {
		if s.NeedsGo != "" {
			return s.Path, s.Version, s.NeedsGo, true
		}
	}
	return "", "", "", false
}

// acquireExecer runs module commands in one-shot acquire containers on the
// snapshot, each ending by until, its phase's end; with a staging
// directory, in mutate containers with -modfile naming its go.mod, so the
// go command may update the manifests there; with c (and no staging), as
// execs in that long-lived acquire container of the snapshot.
type acquireExecer struct {
	r       *toolchain.Runner
	c       *toolchain.Container
	src     string
	staging string
	until   time.Time
}

// Exec runs argv for at most timeout (zero: the rest of the phase). With
// less than validate.MinStep left of the phase it runs nothing and reports a
// timeout, as the in-container timeout would have.
func (a acquireExecer) Exec(ctx context.Context, argv []string, timeout time.Duration) (validate.Output, error) {
	left := time.Until(a.until)
	if timeout <= 0 || timeout > left {
		timeout = left
	}
	if timeout < validate.MinStep {
		return validate.Output{ExitCode: -1, TimedOut: true}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+validate.HostGrace)
	defer cancel()
	if a.c != nil && a.staging == "" {
		res, err := a.c.Exec(ctx, argv, toolchain.ExecOptions{Timeout: timeout})
		return validate.OutputOf(res), err
	}
	job := toolchain.Job{Profile: toolchain.Acquire, Cmd: argv, Source: a.src, Timeout: timeout}
	if a.staging != "" {
		job.Profile, job.Cmd, job.Staging = toolchain.Mutate, withModFile(argv), a.staging
	}
	res, err := a.r.Run(ctx, job)
	return validate.OutputOf(res), err
}
