package validate

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"

	"github.com/stockade/stockade/internal/cacheseed"
	"github.com/stockade/stockade/internal/gomod"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/scanner"
	"github.com/stockade/stockade/internal/toolchain"
)

// The steps of Inspect that other workflows (maintain) run too, each
// exported once here so there is one home for each.

// CheckTree checks the layout of the tree of dir that is validated (the
// committed tree of a git checkout; with worktree, its working tree),
// copied into a scratch directory of dataDir (empty: DefaultDataDir()),
// and sets rep.Source. A refused layout fills rep's refusal and returns
// refused; err is an input that cannot be read (toolchain.ErrSnapshot) or
// Stockade's own failure.
func CheckTree(ctx context.Context, dir string, worktree bool, dataDir string, rep *report.Report) (m *gomod.Module, refused bool, err error) {
	m, src, err := checkTree(ctx, dir, worktree, dataDir)
	rep.Source = src
	if refusal(rep, m, err) {
		return m, true, nil
	}
	return m, false, err
}

// CheckSnapshot checks the snapshot that runs, which may differ from the
// tree checked before it was taken, and that its go directive is still
// directive (the image was chosen for it); dataDir is as for CheckTree.
func CheckSnapshot(snap toolchain.Snapshot, directive, dataDir string, rep *report.Report) (m *gomod.Module, refused bool, err error) {
	rep.Source = SourceOf(snap)
	m, _, err = gomod.Check(snap.Dir, Releases(context.Background(), dataDir), nil)
	if err == nil && len(snap.Submodules) > 0 {
		err = &gomod.UnsupportedError{Reason: gomod.ReasonSubmodule, Path: snap.Submodules[0]}
	}
	if refusal(rep, m, err) {
		return m, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	if m.Go != directive {
		return nil, false, fmt.Errorf("validate: the go directive of the validated tree (%q) changed while the run started (%q)", m.Go, directive)
	}
	return m, false, nil
}

// SelectImage picks (or builds) the toolchain image for req, as inspect
// does; note, when not empty, says what was done on the way. A directive or
// toolchain line newer than every available image is an
// *imagetable.TooNewError.
func SelectImage(ctx context.Context, eng ImageEngine, req ImageRequest, log *slog.Logger) (img report.Image, note string, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ic, err := pickImage(ctx, eng, req, log)
	return ic.img, ic.note, err
}

// EnsureSeed returns the trusted build-cache seed for img, building it on
// first use; without one validations run with an empty fresh cache and
// rep's notes say why.
func EnsureSeed(ctx context.Context, eng Engine, r *toolchain.Runner, img report.Image, owner string, rep *report.Report, log *slog.Logger) cacheseed.Seed {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return ensureSeed(ctx, eng, r, img, owner, rep, log)
}

// EnsureScanner returns the pinned vulnerability scanner for img in the
// data directory (empty: DefaultDataDir), building it on first use in a
// toolchain run of its own (scanner.Ensure), and verifies the stored
// binary before any container of the caller's run exists. A note for the
// report says when it was built.
func EnsureScanner(ctx context.Context, eng Engine, dataDir string, img report.Image, owner string, lockTimeout time.Duration, log *slog.Logger) (s scanner.Scanner, note string, err error) {
	defaultDir := dataDir == ""
	if defaultDir {
		if dataDir, err = DefaultDataDir(); err != nil {
			return s, "", err
		}
	}
	s, err = scanner.Ensure(ctx, eng, scanner.Config{
		DataDir: dataDir, DefaultDataDir: defaultDir, Image: img.ID, GoVersion: img.GoVersion,
		Owner: owner, LockTimeout: lockTimeout, Logger: log,
	})
	if err != nil {
		return s, "", err
	}
	// Refuse a tampered scanner before any container runs; the scan
	// verifies the copy it mounts again.
	if err := s.VerifyCopy(s.Dir); err != nil {
		return s, "", err
	}
	if s.Built {
		note = fmt.Sprintf("built the vulnerability scanner (govulncheck %s) for %s in %v", s.Meta.Version, img.GoVersion, (time.Duration(s.Meta.BuildMS) * time.Millisecond).Round(time.Second))
	}
	return s, note, nil
}

// ProbeDirs are the host directories outside the run that seed makes
// validations mount: Runner.Probe must see them.
func ProbeDirs(seed cacheseed.Seed) []string {
	if !seed.Valid() {
		return nil
	}
	// The seed itself is read-only (0555), even to the host user; its
	// parent is the host's to write the probe's marker into.
	return []string{filepath.Dir(seed.Dir)}
}

// NewAcquireExecer runs module commands in one-shot acquire containers on
// the snapshot src, each ending by until.
func NewAcquireExecer(r *toolchain.Runner, src string, until time.Time) Execer {
	return acquireExecer{r: r, src: src, until: until}
}

// StartAcquire starts a long-lived acquire container on the snapshot src
// for at most lifetime (toolchain.Runner.Start): the run's module commands
// on that snapshot then run as execs in it (AcquireIn), each saving a
// container's create, start and removal. Close it when done.
func StartAcquire(ctx context.Context, r *toolchain.Runner, src string, lifetime time.Duration) (*toolchain.Container, error) {
	return r.Start(ctx, toolchain.Job{Profile: toolchain.Acquire, Source: src, Timeout: lifetime})
}

// AcquireIn runs module commands as execs in c, an acquire container from
// StartAcquire, each ending by until.
func AcquireIn(r *toolchain.Runner, c *toolchain.Container, until time.Time) Execer {
	return acquireExecer{r: r, c: c, until: until}
}

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
	// manifests to download the modules (AcquireSnapshot).
	Updated *report.Updated

	update string // with Failure: the go command wanted to update the manifests; its message
}

// AcquireSnapshot acquires snap's modules (AcquireModules) in acquire
// containers ending by until. When the go command has to update go.mod or
// go.sum to download them, as it does on a developer's machine (a go.mod
// with requirements and no go line gets one), it downloads them again in
// the mutate profile against a staging copy of the manifests (go mod
// download -modfile=/staging/go.mod) and returns a new snapshot of the run
// holding the updated files, which is the tree to validate; Updated says
// which files changed. Otherwise it returns snap. The repository and snap
// are never written.
//
// With c, a long-lived acquire container of snap (StartAcquire), the first
// download runs as an exec in it rather than in a container of its own.
func AcquireSnapshot(ctx context.Context, r *toolchain.Runner, c *toolchain.Container, snap toolchain.Snapshot, m *gomod.Module, img report.Image, until time.Time) (Acquired, toolchain.Snapshot, error) {
	got, err := AcquireModules(ctx, acquireExecer{r: r, c: c, src: snap.Dir, until: until}, m, img, SumsIncomplete(snap.Dir))
	if err != nil || got.update == "" {
		return got, snap, err
	}
	staging, err := r.NewStaging(snap)
	if err != nil {
		return Acquired{}, snap, err
	}
	mut := acquireExecer{r: r, src: snap.Dir, staging: staging, until: until}
	staged, err := AcquireModules(ctx, mut, m, img, true)
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

// AcquireModules downloads the modules the snapshot's go.mod (m) requires
// with go mod download, then, with complete (SumsIncomplete), adds what
// go.sum lacks for the packages and tests the checks load (completeSums),
// through acq (NewAcquireExecer); img is the image the refusal names.
// When the go command needs to update go.mod or go.sum to do so, that is
// a Failure saying so (AcquireSnapshot makes the update on a staging copy
// instead).
func AcquireModules(ctx context.Context, acq Execer, m *gomod.Module, img report.Image, complete bool) (Acquired, error) {
	out, err := acq.Exec(ctx, []string{"go", "mod", "download"}, 0)
	if err != nil {
		return Acquired{}, fmt.Errorf("validate: acquire: %w", err)
	}
	if out.TimedOut {
		return Acquired{TimedOut: true}, nil
	}
	if reason := outputReason(out); reason != "" {
		return Acquired{}, fmt.Errorf("validate: acquiring modules: %s", reason)
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
			Detail: capText(out.Stderr, maxAcquisitionDetail),
		}, update: string(u)}, nil
	}
	if mod, ver, need, ok := needsNewerGo(ctx, acq, out, m); ok {
		return Acquired{NewerToolchain: &report.Refusal{Kind: "requires_newer_toolchain",
			Reason: fmt.Sprintf("%s@%s requires go >= %s; the toolchain image has go %s (GOTOOLCHAIN=local)", mod, ver, need, img.Minor)}}, nil
	}
	return Acquired{Failure: &report.Acquisition{
		Reason: fmt.Sprintf("go mod download failed (exit %d): the modules go.mod requires could not be downloaded", out.ExitCode),
		Detail: capText(out.Stderr, maxAcquisitionDetail),
	}}, nil
}

// completeArgv loads the module's packages and their tests the way the
// checks will and adds what go.sum lacks for them, as go test with
// GOFLAGS=-mod=mod does on a developer's machine: go mod download records
// only the go.mod hashes of the modules it fetches (Go 1.16 and later).
// go get loads packages without building anything.
var completeArgv = []string{"go", "get", "-t", "./..."}

// SumsIncomplete reports whether the go.sum in dir may lack what the
// checks need: an h1: line for a module go.mod requires (or its
// replacement). It reads the manifests on the host; when they cannot be
// read it says true, and the go command decides. go get contacts the
// checksum database even when nothing is missing, so it runs only then.
func SumsIncomplete(dir string) bool {
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
// the update AcquireSnapshot makes on a staging copy. Any other failure is
// left to the checks, which report it as the go command does at home.
func completeSums(ctx context.Context, acq Execer) (Acquired, error) {
	out, err := acq.Exec(ctx, completeArgv, 0)
	if err != nil {
		return Acquired{}, fmt.Errorf("validate: acquire: %w", err)
	}
	if out.TimedOut {
		return Acquired{TimedOut: true}, nil
	}
	if reason := outputReason(out); reason != "" {
		return Acquired{}, fmt.Errorf("validate: completing go.sum: %s", reason)
	}
	if u := manifestUpdateRE.Find(out.Stderr); out.ExitCode != 0 && u != nil {
		return Acquired{Failure: &report.Acquisition{
			Reason: "the checks need go.sum entries (or requirements) the repository's manifests lack",
			Detail: capText(out.Stderr, maxAcquisitionDetail),
		}, update: string(u)}, nil
	}
	return Acquired{}, nil
}

// ValidateSnapshot runs the validation (Run) of the snapshot at snapDir in
// one execute container with a fresh build cache and a throwaway working
// tree of its own (toolchain.Runner.Start), for at most timeout, and
// removes the container and the working tree. Copying the snapshot into
// the working tree is the phase "validate/worktree".
func ValidateSnapshot(ctx context.Context, r *toolchain.Runner, snapDir string, timeout time.Duration, seed cacheseed.Seed, modulePath string, log *slog.Logger) (Result, error) {
	c, err := StartValidation(ctx, r, snapDir, timeout, seed)
	if err != nil {
		return Result{}, err
	}
	return ValidateIn(ctx, c, timeout, modulePath, log)
}

// StartValidation starts the validation's execute container for the
// snapshot at snapDir, with a fresh build cache over seed and its working
// tree filled (toolchain.Runner.Start), living lifetime plus its own exec
// overhead; lifetime must cover what runs before the validation in it and
// the validation's timeout. Nothing of the repository runs yet:
// ValidateIn runs the steps and removes it.
func StartValidation(ctx context.Context, r *toolchain.Runner, snapDir string, lifetime time.Duration, seed cacheseed.Seed) (*toolchain.Container, error) {
	sctx, cancel := context.WithTimeout(ctx, hostGrace+toolchain.WorkTreeTimeout)
	defer cancel()
	return r.Start(sctx, toolchain.Job{
		Profile: toolchain.Execute, Source: snapDir, Timeout: lifetime + containerSlack,
		ReadOnly: seed.Mounts(), Env: seed.Env(),
	})
}

// ValidateIn runs the validation (Run) for at most timeout in c, a
// container from StartValidation, and removes it and its working tree,
// whatever happened.
func ValidateIn(ctx context.Context, c *toolchain.Container, timeout time.Duration, modulePath string, log *slog.Logger) (Result, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	vctx, cancel := context.WithTimeout(ctx, timeout+containerSlack+hostGrace)
	defer cancel()
	res, err := Run(vctx, execExecer{c: c}, Options{Timeout: timeout, ModulePath: modulePath, Logger: log})
	res.Phases = append([]report.Phase{{Name: "validate/worktree", MS: c.WorkTreeTime().Milliseconds()}}, res.Phases...)
	if cerr := c.Close(context.WithoutCancel(ctx)); cerr != nil {
		log.Warn("removing the validation container failed", "err", cerr)
	}
	return res, err
}

// NewExecExecer runs commands as execs in c, a long-lived execute
// container (Runner.Start).
func NewExecExecer(c *toolchain.Container) Execer { return execExecer{c: c} }

// OutputReason returns why out cannot be trusted at all (timed out,
// killed for memory, truncated), or "".
func OutputReason(out Output) string { return outputReason(out) }

// SourceOf says which tree a snapshot holds, for the report.
func SourceOf(s toolchain.Snapshot) *report.Source { return sourceOf(s) }

// ListVersions lists the known release versions of each module path
// through acq (acquire profile: go list -m -versions, which leaves out
// retracted versions and pseudo-versions); paths the proxy does not know
// map to nothing.
func ListVersions(ctx context.Context, acq Execer, paths []string) (map[string][]string, error) {
	out, err := acq.Exec(ctx, versionsArgv(paths), 0)
	if err != nil {
		return nil, fmt.Errorf("validate: listing versions: %w", err)
	}
	if reason := outputReason(out); reason != "" || out.ExitCode != 0 {
		return nil, fmt.Errorf("validate: listing versions: %s", commandFailure(out, reason))
	}
	versions, _, err := parseVersions(out.Stdout)
	return versions, err
}

// EgressOf returns the record of phase: what r's egress gates saw since
// the phase before (toolchain.Runner.TakeEgress), as one report.Egress; a
// run without network (a fixture proxy) has none and returns nothing.
func EgressOf(ctx context.Context, r *toolchain.Runner, phase string) ([]report.Egress, error) {
	if r.Config().FixtureProxy != "" {
		return nil, nil
	}
	recs, lost, err := r.TakeEgress(ctx)
	if err != nil {
		return nil, fmt.Errorf("validate: the egress record of %s: %w", phase, err)
	}
	return []report.Egress{report.NewEgress(phase, recs, lost)}, nil
}
