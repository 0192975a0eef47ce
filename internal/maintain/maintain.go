// Package maintain is `stockade maintain`: one dependency upgrade, proven
// against the baseline and proposed as a commit.
//
// Threat model: the repository is hostile, as for inspect. Maintain runs
// inspect's validation (internal/validate) of the committed tree, stages
// the upgrade with go get and go mod tidy in the mutate profile (module
// commands only, against a writable staging copy of go.mod and go.sum,
// never the snapshot), admits only the requirement changes the target's
// own requirements explain, validates the upgraded tree in a fresh
// execute container, and reruns every failing test alone in fresh
// containers on both trees so a flaky test is neither a regression nor a
// pass. Anything that cannot be trusted is inconclusive, never a proposal.
//
// The user's repository is only read, except for the proposal: a commit
// made with git plumbing from a recipe (the validated commit, the two
// manifests, a fixed identity, date and message) under an environment
// built from scratch, stored under refs/stockade/proposals/. HEAD, the
// index, the working tree and branches never move (-branch adds a new one).
//
// Maintain, in this file, reads top to bottom as the pipeline's steps;
// attempt, in attempt.go, is one candidate's steps.
package maintain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/stockade/stockade/internal/cacheseed"
	"github.com/stockade/stockade/internal/gomod"
	"github.com/stockade/stockade/internal/imagetable"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/scanner"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/validate"
	"github.com/stockade/stockade/internal/vulndb"
)

// Defaults of Options.
const (
	// DefaultDeadline bounds a whole maintain run: two validations per
	// candidate, reruns and everything around them.
	DefaultDeadline = 2 * time.Hour
	// DefaultTimeout bounds each validation (the baseline's, each
	// candidate's) and each arm of reruns.
	DefaultTimeout = validate.DefaultTimeout
	// DefaultLockTimeout is how long maintain waits for the data
	// directory's lock (held by a run while it starts, or a reap).
	DefaultLockTimeout = validate.DefaultLockTimeout
)

// Budgets of the steps. Each step gets min(its budget, what is left of
// Options.Deadline); the validations' budget is Options.Timeout.
const (
	checkBudget      = 2 * time.Minute  // the layout and uncommitted-changes checks
	imageBudget      = 10 * time.Minute // choosing or building the image
	openBudget       = 5 * time.Minute  // opening the run, past the lock wait
	seedBudget       = 20 * time.Minute // the build-cache seed on first use
	probeBudget      = 2 * time.Minute  // the mount probe
	acquireBudget    = 10 * time.Minute // go mod download of one tree
	candidatesBudget = 10 * time.Minute // listing and downloading candidates
	stageBudget      = 10 * time.Minute // go get in the mutate profile
	tidyBudget       = 10 * time.Minute // both go mod tidy runs
	proposalBudget   = 2 * time.Minute  // the git plumbing of the proposal
	scannerBudget    = 25 * time.Minute // building the scanner on first use
	// minStep is the least time a step needs to start.
	minStep = time.Second
	// hostGrace is how much longer the host waits for a container step
	// than its in-container timeout.
	hostGrace = 2 * time.Minute
)

// Options configure Maintain. Dir is required; the zero value of every
// other field is the default.
type Options struct {
	// Dir is the module's directory in a git checkout, absolute: its top,
	// or a directory below it (a monorepo). Only the proposal ref (and
	// Branch) is ever written in the repository.
	Dir string
	// FixtureProxy is a GOPROXY file-layout directory to acquire from with
	// no network; Proxy must then be empty.
	FixtureProxy string
	// Proxy is GOPROXY; empty means validate.DefaultProxy.
	Proxy string
	// GateNetwork and GateAllowPrivate are the run's egress gates'
	// outside network and admitted private ranges, and SumDB and Access
	// the checksum database and private modules' access, as
	// validate.InspectOptions has them.
	GateNetwork      string
	GateAllowPrivate []netip.Prefix
	SumDB            string
	Access           toolchain.ModuleAccess
	// Timeout bounds each validation; zero means DefaultTimeout.
	Timeout time.Duration
	// Deadline bounds the whole run; zero means DefaultDeadline. When it
	// runs out the outcome is inconclusive.
	Deadline time.Duration
	// DataDir holds caches, snapshots and the lock; empty means
	// validate.DefaultDataDir().
	DataDir string
	// LockTimeout is how long to wait for another run on DataDir.
	LockTimeout time.Duration
	// Image, when set, is the toolchain image to use instead of choosing
	// one as inspect does: an image ID or name@sha256:<digest>.
	Image string
	// Pull pulls Image when the engine does not have it; without Image it
	// does nothing.
	Pull bool
	// Cgo chooses (or builds) an image with the C toolchain, as inspect's
	// Cgo does; the CLI's default is true.
	Cgo bool
	// AptPackages are Debian packages added to the C toolchain layer, as
	// inspect's AptPackages are.
	AptPackages []string
	// Owner labels the run's containers; empty means toolchain's default.
	Owner string
	// Policy says which candidates may be tried.
	Policy Policy
	// Each tries every eligible candidate against the one baseline;
	// otherwise they are tried in selection order until one prepares a
	// proposal, at most maxTries.
	Each bool
	// Branch, when not empty, is a new branch pointed at the proposal
	// (only without Each); an existing branch is refused.
	Branch string
	// Identity is the proposal commits' author and committer; a zero Name
	// or Email takes DefaultIdentity's.
	Identity Identity
	// Logger receives debug detail; nil discards.
	Logger *slog.Logger
	// Progress, when not nil, is called as each step starts.
	Progress func(step string)
	// OnLockWait, when not nil, is called once if another run holds the
	// data directory.
	OnLockWait func(holder string)
	// VulnDB, when set, is a vulnerability database (internal/vulndb): the
	// baseline and each candidate are scanned with the same database and
	// the same verified scanner, and each attempt reports the
	// vulnerabilities the upgrade fixes and introduces.
	VulnDB string
	// vulnDBSum is the database's content hash, set by Maintain.
	vulnDBSum string
	// PreferFixes tries first, among the eligible candidates, those that
	// fix a vulnerability the baseline calls (selection order within each
	// group). It needs VulnDB.
	PreferFixes bool
}

// Config returns the settings that decide a run's outcome and proposal,
// one per line, in a fixed order; ConfigHash hashes them.
func (o Options) config(imageID string) string {
	proxy := o.Proxy
	if o.FixtureProxy != "" {
		proxy = "fixture"
	} else if proxy == "" {
		proxy = validate.DefaultProxy
	}
	allow := o.Policy.Allow
	if allow == nil {
		allow = DefaultAllow
	}
	who := o.identity()
	date := "parent"
	if !who.Date.IsZero() {
		date = who.Date.UTC().Format(time.RFC3339)
	}
	lines := []string{
		"schema " + Schema,
		"image " + imageID,
		"proxy " + proxy,
		fmt.Sprintf("allow %v", allow),
		"module " + o.Policy.Module + "@" + o.Policy.Version,
		fmt.Sprintf("each %v", o.Each),
		"timeout " + o.timeout().String(),
		"identity " + who.Name + " <" + who.Email + "> " + date,
	}
	// Each only when set: earlier hashes stay. The credentials decide
	// nothing but whether the modules can be had: not hashed.
	if o.Policy.KeepGo {
		lines = append(lines, "keep-go true")
	}
	if o.SumDB != "" {
		lines = append(lines, "sumdb "+o.SumDB)
	}
	if a := o.Access; a.Private != "" || a.NoSumDB != "" {
		lines = append(lines, "private "+a.Private, "nosumdb "+a.NoSumDB)
	}
	return strings.Join(lines, "\n") + "\n" + o.scanConfig()
}

// scanConfig is the config lines of a scan, empty without one (so runs
// without a database keep their config hash).
func (o Options) scanConfig() string {
	if o.VulnDB == "" {
		return ""
	}
	return fmt.Sprintf("vulndb %s\nprefer-fixes %v\n", o.vulnDBSum, o.PreferFixes)
}

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultTimeout
	}
	return o.Timeout
}

func (o Options) identity() Identity {
	who := o.Identity
	if who.Name == "" {
		who.Name = DefaultIdentity.Name
	}
	if who.Email == "" {
		who.Email = DefaultIdentity.Email
	}
	return who
}

// clock is what is left of the run's deadline.
type clock struct{ deadline time.Time }

// step returns how long a step whose budget is max may take; ok is false
// when too little is left to start it.
func (c clock) step(max time.Duration) (time.Duration, bool) {
	d := time.Until(c.deadline)
	if max < d {
		d = max
	}
	return d, d >= minStep
}

// steps times the named steps of a run for the report.
type steps struct {
	log      *slog.Logger
	progress func(string)
	phases   *[]report.Phase
	cur      string
	start    time.Time
}

func (s *steps) begin(name string) {
	s.end()
	s.cur, s.start = name, time.Now()
	s.log.Debug("step", "phase", name)
	if s.progress != nil {
		s.progress(name)
	}
}

func (s *steps) end() {
	if s.cur != "" {
		*s.phases = append(*s.phases, report.Phase{Name: s.cur, MS: time.Since(s.start).Milliseconds()})
	}
	s.cur = ""
}

// run is what the steps of one maintain run share.
type run struct {
	o     Options
	clock clock
	log   *slog.Logger
	r     *toolchain.Runner
	git   *gitRepo
	snap  toolchain.Snapshot
	mod   *gomod.Module
	img   report.Image
	seed  cacheseed.Seed
	// acq is the baseline snapshot's acquire container: its acquisition
	// and the candidate listing run in it as execs; nil once acquisition
	// updated the manifests (acquirer).
	acq *toolchain.Container
	// updated, when not nil, says the go command updated the baseline's
	// manifests to download the modules: snap holds the update.
	updated *report.Updated
	base    *Validation
	config  string // Options.config
	// scanner is the verified scanner when Options.VulnDB is set.
	scanner scanner.Scanner
	// pinned is the candidate -module path@version names, checked.
	pinned *report.Candidate
}

// Maintain is `stockade maintain`. It refuses a checkout whose tracked
// files have uncommitted changes, validates the committed tree as inspect
// does (the baseline), lists the upgrade candidates, and tries the
// eligible ones in selection order until one prepares a proposal (with
// Each, every one) in attempt. What the module and its
// upgrades did is in the report; an error is Stockade's own failure, or a
// policy it cannot apply (ErrPolicy, ErrMajor, ErrBranchExists).
func Maintain(ctx context.Context, eng validate.Engine, o Options) (*Report, error) {
	start := time.Now()
	if err := o.Policy.Validate(); err != nil {
		return nil, err
	}
	if o.Each && o.Branch != "" {
		return nil, fmt.Errorf("%w: -branch names one proposal; -each may make several", ErrPolicy)
	}
	if o.PreferFixes && o.VulnDB == "" {
		return nil, fmt.Errorf("%w: -prefer-fixes needs a vulnerability database (-vulndb)", ErrPolicy)
	}
	db, err := vulndb.OpenIfSet(o.VulnDB)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	o.vulnDBSum = db.SHA256
	deadline := o.Deadline
	if deadline <= 0 {
		deadline = DefaultDeadline
	}
	x := &run{o: o, clock: clock{deadline: start.Add(deadline)}, log: o.Logger}
	if x.log == nil {
		x.log = slog.New(slog.DiscardHandler)
	}
	rep := &Report{Schema: Schema, Dir: o.Dir}
	st := &steps{log: x.log, progress: o.Progress, phases: &rep.Timings.Phases}
	vrep := report.New(o.Dir) // what the validate steps note on the way
	finish := func() (*Report, error) {
		st.end()
		rep.Notes = append(rep.Notes, vrep.Notes...)
		rep.finish(time.Since(start).Milliseconds(), o.Each)
		return rep, nil
	}
	end := func(out Outcome, format string, args ...any) (*Report, error) {
		rep.Outcome, rep.Reason = out, fmt.Sprintf(format, args...)
		return finish()
	}
	timedOut := func() (*Report, error) {
		return end(ValidationInconclusive, "the -deadline ran out during %s", st.cur)
	}
	// refusedEnd ends a run whose tree inspect refuses; a go.mod that does
	// not parse is a baseline that fails, as the go command fails on it
	// at home.
	refusedEnd := func(r *report.Refusal) (*Report, error) {
		if r.Kind == report.RefusalMalformedGoMod {
			return end(BaselineFailing, "the baseline already fails: %s", r.Reason)
		}
		return end(Unsupported, "the layout is not supported: %s", r.Reason)
	}
	dataDir, defaultDir := o.DataDir, o.DataDir == ""
	if defaultDir {
		if dataDir, err = validate.DefaultDataDir(); err != nil {
			return nil, err
		}
	}
	// git's HOME: an empty directory of the data directory's, not $TMPDIR.
	home, err := toolchain.NewScratch(dataDir, defaultDir)
	if err != nil {
		return nil, err
	}
	defer home.Close()

	st.begin("check") // budget: checkBudget
	cctx, cancel := context.WithTimeout(ctx, checkBudget)
	defer cancel()
	// The module's directory: the checkout's top, or below it (a monorepo).
	top, sub, git := toolchain.GitWorkTree(cctx, o.Dir)
	if !git {
		return end(Unsupported, "%s is not in a git checkout: a proposal is a commit", o.Dir)
	}
	x.git = newGitRepo(top, sub, home.Dir)
	m, refused, err := validate.CheckTree(cctx, o.Dir, false, o.DataDir, vrep)
	rep.Source, rep.Refusal = vrep.Source, vrep.Refusal
	if refused {
		if m != nil {
			rep.Module, rep.Go = m.Path, m.Go
		}
		return refusedEnd(vrep.Refusal)
	}
	if err != nil {
		return nil, err
	}
	rep.Module, rep.Go = m.Path, m.Go
	dirty, err := x.git.uncommitted(cctx, rep.Source.Commit)
	if err != nil {
		return nil, err
	}
	if len(dirty) > 0 {
		rep.Uncommitted = dirty
		return end(Unsupported, "tracked files have uncommitted changes (%s): commit or stash them first; maintain proposes a commit on top of HEAD", strings.Join(dirty, ", "))
	}
	if o.Branch != "" {
		if err := x.git.checkBranch(cctx, o.Branch); err != nil {
			return nil, err
		}
	}
	// -module is checked against go.mod before anything runs; whether a
	// version is a listed release, once the proxy can be asked.
	if x.pinned, err = o.Policy.checkModule(m.Direct()); err != nil {
		return nil, err
	}
	cancel()

	st.begin("image") // budget: imageBudget
	d, ok := x.clock.step(imageBudget)
	if !ok {
		return timedOut()
	}
	pctx, cancel := context.WithTimeout(ctx, d)
	img, note, err := validate.SelectImage(pctx, eng, validate.ImageRequest{
		Directive: m.Go, Toolchain: m.Toolchain, Image: o.Image, Pull: o.Pull, DataDir: o.DataDir, Cgo: o.Cgo, AptPackages: o.AptPackages,
	}, x.log)
	cancel()
	var tn *imagetable.TooNewError
	if errors.As(err, &tn) {
		rep.Refusal = &report.Refusal{Kind: "requires_newer_toolchain", Reason: tn.Error()}
		return end(Unsupported, "the layout is not supported: %s", tn.Error())
	}
	if err != nil {
		return nil, err
	}
	x.img, rep.Image = img, &img
	if note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	x.config = o.config(img.ID)
	rep.ConfigHash = hashOf(x.config)

	if o.VulnDB != "" {
		st.begin("scanner") // budget: scannerBudget
		if d, ok = x.clock.step(scannerBudget); !ok {
			return timedOut()
		}
		pctx, cancel := context.WithTimeout(ctx, d)
		var note string
		x.scanner, note, err = validate.EnsureScanner(pctx, eng, o.DataDir, img, o.Owner, min(o.LockTimeout, d), x.log)
		cancel()
		if err != nil {
			return nil, err
		}
		if note != "" {
			rep.Notes = append(rep.Notes, note)
		}
		if x.scanner.Built {
			rep.Egress = append(rep.Egress, report.NewEgress("scanner", x.scanner.Egress, x.scanner.EgressLost))
		}
	}

	st.begin("lock") // budget: LockTimeout + openBudget
	if d, ok = x.clock.step(o.LockTimeout + openBudget); !ok {
		return timedOut()
	}
	if x.r, err = openRunner(ctx, eng, o, img, x.scanner.Dir, db.Dir, d); err != nil {
		return nil, err
	}
	defer func() {
		if err := x.r.Close(context.WithoutCancel(ctx)); err != nil {
			x.log.Warn("cleanup failed", "err", err)
		}
	}()

	st.begin("snapshot")
	if x.snap, err = x.r.Snapshot(ctx, o.Dir, toolchain.SnapshotOptions{}); err != nil {
		return nil, err
	}
	if x.snap.Commit != rep.Source.Commit {
		return nil, fmt.Errorf("maintain: HEAD moved from %s to %s while maintain ran", rep.Source.Commit, x.snap.Commit)
	}
	if x.mod, refused, err = validate.CheckSnapshot(x.snap, m.Go, o.DataDir, vrep); refused {
		rep.Refusal = vrep.Refusal
		return refusedEnd(vrep.Refusal)
	} else if err != nil {
		return nil, err
	}

	st.begin("seed") // budget: seedBudget
	if d, ok = x.clock.step(seedBudget); !ok {
		return timedOut()
	}
	pctx, cancel = context.WithTimeout(ctx, d)
	x.seed = validate.EnsureSeed(pctx, eng, x.r, img, o.Owner, vrep, x.log)
	cancel()

	st.begin("probe") // budget: probeBudget
	if d, ok = x.clock.step(probeBudget); !ok {
		return timedOut()
	}
	pctx, cancel = context.WithTimeout(ctx, d)
	err = x.r.Probe(pctx, validate.ProbeDirs(x.seed)...)
	cancel()
	if err != nil {
		return nil, err
	}

	st.begin("acquire") // budget: acquireBudget
	if d, ok = x.clock.step(acquireBudget); !ok {
		return timedOut()
	}
	// It lives until the candidates are listed, after the baseline.
	if x.acq, err = validate.StartAcquire(ctx, x.r, x.snap.Dir, min(time.Until(x.clock.deadline), toolchain.MaxTimeout)); err != nil {
		return nil, err
	}
	defer func() {
		if x.acq == nil {
			return
		}
		if err := x.acq.Close(context.WithoutCancel(ctx)); err != nil {
			x.log.Warn("removing the acquire container failed", "err", err)
		}
	}()
	// As inspect acquires: when the go command has to update the
	// manifests to download the modules (no go line, missing go.sum
	// entries), the baseline is the commit's tree with that update, as
	// on a developer's machine; the proposal then carries it too.
	got, updated, err := validate.AcquireSnapshot(ctx, x.r, x.acq, x.snap, x.mod, img, time.Now().Add(d))
	if err == nil {
		err = x.egress(ctx, rep, "acquire")
	}
	switch {
	case err != nil:
		return nil, err
	case got.TimedOut && d >= acquireBudget:
		return end(ValidationInconclusive, "the acquisition's budget (%v) ran out during %s", acquireBudget, st.cur)
	case got.TimedOut:
		return timedOut()
	case got.NewerToolchain != nil:
		rep.Refusal = got.NewerToolchain
		return end(Unsupported, "the baseline cannot be built: %s", got.NewerToolchain.Reason)
	case got.Failure != nil:
		return end(AcquisitionFailed, "the baseline's modules could not be downloaded: %s", got.Failure.Detail)
	case got.Updated != nil:
		rep.Source.Updated, x.updated = got.Updated, got.Updated
		updated.Commit = x.snap.Commit // the commit's tree, manifests updated
		x.snap = updated
		// The acquire container holds the tree before the update: what
		// asks about the baseline from now on runs on the new one.
		if err := x.acq.Close(context.WithoutCancel(ctx)); err != nil {
			x.log.Warn("removing the acquire container failed", "err", err)
		}
		x.acq = nil
	}

	if x.pinned != nil {
		// A version the proxy does not list is refused before the
		// baseline's validation, not after.
		versions, err := validate.ListVersions(ctx, x.acquirer(time.Now().Add(candidatesBudget)), []string{x.pinned.Path})
		if err == nil {
			err = listed(*x.pinned, versions)
		}
		if err != nil {
			return nil, err
		}
	}

	st.begin("baseline") // budget: Timeout
	if d, ok = x.clock.step(o.timeout()); !ok {
		return timedOut()
	}
	res, err := validate.ValidateSnapshot(ctx, x.r, x.snap.Dir, d, x.seed, x.mod.Path, x.log)
	if err != nil {
		return nil, err
	}
	x.base = &Validation{Checks: res.Checks}
	rep.Baseline = x.base

	st.begin("baseline/rerun") // budget: Timeout
	failing := failingTests(res.Checks)
	if inconclusive(res.Checks) {
		return end(BaselineInconclusive, "the baseline's validation cannot be trusted: %s", reasons(res.Checks))
	}
	if len(failing) > 0 && len(failing) == len(allFindings(res.Checks)) {
		// Only tests fail: each is rerun before the baseline is judged.
		if d, ok = x.clock.step(o.timeout()); !ok {
			return timedOut()
		}
		runs, why, err := rerun(ctx, x.r, x.snap.Dir, x.seed, x.mod.Path, failing, d)
		if err != nil {
			return nil, err
		}
		if why != "" {
			return end(BaselineInconclusive, "a rerun of the baseline's failing tests cannot be trusted: %s", why)
		}
		for _, f := range failing {
			fl := Flake{Key: f.Key, Package: f.Package, Test: f.Test, Before: append([]string{"fail"}, runs[f.Key]...)}
			if !all(fl.Before, "fail") {
				x.base.Flaky = append(x.base.Flaky, fl)
			}
		}
	}
	if n := len(allFindings(res.Checks)) - len(x.base.Flaky); n > 0 {
		return end(BaselineFailing, "the baseline already fails (%d findings): no upgrade can be judged against it", n)
	}

	if o.VulnDB != "" {
		st.begin("baseline/scan") // budget: scanBudget
		if x.base.Vulns, err = x.scan(ctx, x.snap.Dir); err != nil {
			return nil, err
		}
	}

	st.begin("candidates") // budget: candidatesBudget
	if d, ok = x.clock.step(candidatesBudget); !ok {
		return timedOut()
	}
	order, err := x.candidates(ctx, rep, d)
	if err == nil {
		err = x.egress(ctx, rep, "candidates")
	}
	if err != nil {
		return nil, err
	}
	if len(order) == 0 {
		return end(NoCandidate, "no direct dependency has an eligible newer version (%s)", policyText(o.Policy))
	}
	if o.PreferFixes {
		order = preferFixes(x.base, order)
	}
	rep.Attempts, err = tryInOrder(order, o.Each, func() bool { _, ok := x.clock.step(minStep); return ok },
		func(c report.Candidate, tried int) (Attempt, error) {
			name := "attempt " + c.Path + "@" + c.Version
			st.begin(name) // budget: what is left; each step its own
			a, err := x.attempt(ctx, c, tried)
			if err == nil {
				err = x.egress(ctx, rep, name)
			}
			return a, err
		})
	if err != nil {
		return nil, err
	}
	return finish()
}

// maxTries bounds the candidates one run without Each tries: each costs
// two validations and reruns (minutes each).
const maxTries = 5

// tryInOrder tries the candidates of order with try, in order: with each,
// every one; otherwise until one prepares a proposal, at most maxTries,
// and none once the deadline leaves no time to start (more is false).
// Every try is an attempt of the report, each failure with its evidence.
func tryInOrder(order []report.Candidate, each bool, more func() bool, try func(c report.Candidate, tried int) (Attempt, error)) ([]Attempt, error) {
	var out []Attempt
	for i, c := range order {
		if !each && (i == maxTries || i > 0 && !more()) {
			break
		}
		a, err := try(c, i)
		if err != nil {
			return out, err
		}
		out = append(out, a)
		if !each && a.Outcome == ProposalPrepared {
			break
		}
	}
	return out, nil
}

// acquirer runs module commands on the baseline ending by until: as execs
// in its acquire container, or, once acquisition updated the manifests
// (the container holds the tree before), in one-shot acquire containers.
func (x *run) acquirer(until time.Time) validate.Execer {
	if x.acq == nil {
		return validate.NewAcquireExecer(x.r, x.snap.Dir, until)
	}
	return validate.AcquireIn(x.r, x.acq, until)
}

// egress adds the record of phase (validate.EgressOf) to rep: what the
// run's egress gate saw since the phase before; nothing without network.
func (x *run) egress(ctx context.Context, rep *Report, phase string) error {
	es, err := validate.EgressOf(ctx, x.r, phase)
	rep.Egress = append(rep.Egress, es...)
	return err
}

// openRunner opens the run on the locked data directory, waiting for the
// lock at most LockTimeout within d.
func openRunner(ctx context.Context, eng validate.Engine, o Options, img report.Image, scanTools, scanDB string, d time.Duration) (*toolchain.Runner, error) {
	dataDir, defaultDir := o.DataDir, o.DataDir == ""
	if defaultDir {
		var err error
		if dataDir, err = validate.DefaultDataDir(); err != nil {
			return nil, err
		}
	}
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return toolchain.Open(pctx, eng, toolchain.Options{
		DataDir:        dataDir,
		DefaultDataDir: defaultDir,
		Owner:          o.Owner,
		Config: toolchain.Config{Image: img.ID, Proxy: o.Proxy, SumDB: o.SumDB, FixtureProxy: o.FixtureProxy, ScanTools: scanTools, ScanVulnDB: scanDB,
			GateNetwork: o.GateNetwork, GateAllowPrivate: o.GateAllowPrivate, Access: o.Access},
		LockTimeout: min(o.LockTimeout, d),
		OnLockWait:  o.OnLockWait,
		Logger:      o.Logger,
	})
}

// candidates lists the upgrade candidates into rep and returns the
// eligible ones in selection order.
func (x *run) candidates(ctx context.Context, rep *Report, d time.Duration) ([]report.Candidate, error) {
	if c := x.pinned; c != nil { // checked and listed before the baseline
		rep.Candidates = []Candidate{{Candidate: *c, Eligible: true}}
		return []report.Candidate{*c}, nil
	}
	acq := x.acquirer(time.Now().Add(d))
	p := x.o.Policy
	listed, err := validate.Candidates(ctx, acq, x.mod.Direct())
	if err != nil {
		return nil, err
	}
	judged, order := judge(listed, p)
	rep.Candidates = judged
	return order, nil
}

func policyText(p Policy) string {
	allow := p.Allow
	if allow == nil {
		allow = DefaultAllow
	}
	var s []string
	for _, k := range allow {
		s = append(s, string(k))
	}
	t := "-allow " + strings.Join(s, ",")
	if p.Module != "" {
		t += ", -module " + p.Module
	}
	return t
}

// failingTests returns the test findings of checks.
func failingTests(checks []report.Check) []report.Finding {
	var out []report.Finding
	for _, f := range allFindings(checks) {
		if f.Kind == "test" {
			out = append(out, f)
		}
	}
	return out
}

// allFindings returns every finding of checks, each key once.
func allFindings(checks []report.Check) []report.Finding {
	seen := map[string]bool{}
	var out []report.Finding
	for _, c := range checks {
		for _, f := range c.Findings {
			if !seen[f.Key] {
				seen[f.Key] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// inconclusive reports whether any check cannot be trusted, or none ran.
func inconclusive(checks []report.Check) bool {
	if len(checks) == 0 {
		return true
	}
	for _, c := range checks {
		if c.Status == report.StatusInconclusive || c.Status == report.StatusNotRun {
			return true
		}
	}
	return false
}

func reasons(checks []report.Check) string {
	var out []string
	for _, c := range checks {
		switch c.Status {
		case report.StatusNotRun:
			out = append(out, c.Name+": not run")
		case report.StatusInconclusive:
			out = append(out, c.Name+": "+strings.Join(c.Reasons, "; "))
		}
	}
	if len(out) == 0 {
		return "no check ran"
	}
	return strings.Join(out, "; ")
}

func all(runs []string, want string) bool {
	for _, r := range runs {
		if r != want {
			return false
		}
	}
	return len(runs) > 0
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}
