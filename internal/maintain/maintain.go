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
// Maintain, in this file, reads top to bottom as the run's steps over the
// prelude every workflow shares (internal/workflow); attempt, in
// attempt.go, is one candidate's steps.
package maintain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/stockade/stockade/internal/gomod"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/validate"
	"github.com/stockade/stockade/internal/workflow"
)

// Defaults of Options.
const (
	// DefaultDeadline bounds a whole maintain run: two validations per
	// candidate, reruns and everything around them.
	DefaultDeadline = 2 * time.Hour
	// DefaultTimeout bounds each validation (the baseline's, each
	// candidate's) and each arm of reruns.
	DefaultTimeout = validate.DefaultTimeout
)

// Options configure Maintain. Dir is required: the module's directory in
// a git checkout, absolute (its top, or a directory below it: a
// monorepo); only the proposal ref (and Branch) is ever written in the
// repository. Timeout bounds each validation (zero: DefaultTimeout),
// Deadline the whole run (zero: DefaultDeadline; when it runs out the
// outcome is inconclusive). With VulnDB the baseline and each candidate
// are scanned with the same database and the same verified scanner, and
// each attempt reports the vulnerabilities the upgrade fixes and
// introduces. The zero value of every other field is the default.
type Options struct {
	workflow.Options
	// Policy says which candidates may be tried.
	Policy Policy
	// Each tries every eligible candidate against the one baseline;
	// otherwise they are tried in selection order until one prepares a
	// proposal, at most maxTries.
	Each bool
	// Group validates every eligible candidate alone against the one
	// baseline (as Each, without proposals of their own), then the set
	// that passed together, and proposes one commit with them
	// (tryGroup); not with Each.
	Group bool
	// Branch, when not empty, is a new branch pointed at the proposal
	// (only without Each); an existing branch is refused.
	Branch string
	// Identity is the proposal commits' author and committer; a zero Name
	// or Email takes DefaultIdentity's.
	Identity Identity
	// PreferFixes tries first, among the eligible candidates, those that
	// fix a vulnerability the baseline calls (selection order within each
	// group). It needs VulnDB.
	PreferFixes bool
	// vulnDBSum is the database's content hash, set by Maintain.
	vulnDBSum string
}

// Config returns the settings that decide a run's outcome and proposal,
// one per line, in a fixed order; ConfigHash hashes them.
func (o Options) config(imageID string) string {
	proxy := o.Proxy
	if o.FixtureProxy != "" {
		proxy = "fixture"
	} else if proxy == "" {
		proxy = workflow.DefaultProxy
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
	if o.Group {
		lines = append(lines, "group true")
	}
	if o.Cooldown.MinAge > 0 {
		lines = append(lines, "min-age "+o.Cooldown.MinAge.String())
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

func (o Options) timeout() time.Duration { return o.TimeoutOr(DefaultTimeout) }

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

// run is what the steps of one maintain run share, and what they found.
type run struct {
	o     Options
	log   *slog.Logger
	home  string // git's HOME
	steps *workflow.Steps
	p     *workflow.Prepared
	git   *gitRepo
	// config is the run's settings (Options.config), once the image is
	// chosen.
	config string
	// pinned is the candidate -module path@version names, checked.
	pinned *report.Candidate
	// uncommitted are the tracked files with uncommitted changes.
	uncommitted []string
	base        *Validation
	judged      []Candidate        // every listed candidate, judged
	held        []report.HeldBack  // what the cooldown held back
	group       *Group             // -group's members and combinations
	order       []report.Candidate // the eligible ones, in the order tried
	attempts    []Attempt
	egress      []report.Egress // candidates' and attempts'
}

// ended is a step's outcome of the run, or of an attempt, decided: it
// ends the steps without being a failure.
type ended struct {
	out    Outcome
	reason string
}

func (e *ended) Error() string { return string(e.out) + ": " + e.reason }

// end returns the outcome out, with its reason, as an *ended.
func end(out Outcome, format string, args ...any) error {
	return &ended{out: out, reason: fmt.Sprintf(format, args...)}
}

// Maintain is `stockade maintain`. After the prelude every workflow runs
// (workflow.Prepare), which here refuses a checkout whose tracked files
// have uncommitted changes and checks -branch and -module before any
// container, it validates the committed tree as inspect does (the
// baseline), lists the upgrade candidates, and tries the eligible ones in
// selection order until one prepares a proposal (with Each, every one) in
// attempt. What the module and its upgrades did is in the report; an
// error is Stockade's own failure, or a policy it cannot apply
// (ErrPolicy, ErrMajor, ErrBranchExists).
func Maintain(ctx context.Context, eng workflow.Engine, o Options) (*Report, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	dataDir, isDefault, err := workflow.DataDir(o.DataDir)
	if err != nil {
		return nil, err
	}
	// git's HOME: an empty directory of the data directory's, not $TMPDIR.
	home, err := toolchain.NewScratch(dataDir, isDefault)
	if err != nil {
		return nil, err
	}
	defer home.Close()
	x := &run{o: o, log: o.Logger, home: home.Dir}
	if x.log == nil {
		x.log = slog.New(slog.DiscardHandler)
	}
	x.steps = workflow.NewSteps(o.DeadlineOr(DefaultDeadline), x.log, o.Progress)
	x.p, err = workflow.Prepare(ctx, eng, o.Options, x.steps, workflow.Plan{Check: x.checkGit, SameCommit: true})
	defer x.p.Close(ctx)
	if x.p.Image != nil {
		x.o.vulnDBSum = x.p.VulnDB.SHA256
		x.config = x.o.config(x.p.Image.ID)
	}
	if err == nil && x.p.Ready() {
		err = x.steps.Run(ctx,
			workflow.Step{Name: "module", Budget: workflow.CandidatesBudget, Do: x.listedPinned, Skip: x.pinned == nil},
			workflow.Step{Name: "baseline", Budget: workflow.Validation(o.timeout()), Do: x.validateBaseline},
			workflow.Step{Name: "baseline/rerun", Budget: workflow.Validation(o.timeout()), Do: x.rerunBaseline},
			workflow.Step{Name: "baseline/scan", Budget: workflow.ScanBudget, Do: x.scanBaseline, Skip: o.VulnDB == ""},
			workflow.Step{Name: "candidates", Budget: workflow.CandidatesBudget, Do: x.listCandidates},
		)
	}
	if err == nil && x.p.Ready() {
		err = x.tryCandidates(ctx)
	}
	return x.report(err)
}

// check refuses options that make no sense together, before anything.
func (o Options) check() error {
	if err := o.Policy.Validate(); err != nil {
		return err
	}
	if o.Each && o.Group {
		return fmt.Errorf("%w: -each proposes each candidate alone; -group proposes them together", ErrPolicy)
	}
	if o.Each && o.Branch != "" {
		return fmt.Errorf("%w: -branch names one proposal; -each may make several", ErrPolicy)
	}
	if o.PreferFixes && o.VulnDB == "" {
		return fmt.Errorf("%w: -prefer-fixes needs a vulnerability database (-vulndb)", ErrPolicy)
	}
	return nil
}

// checkGit is maintain's part of the check step (workflow.Plan.Check),
// before any container: the module's directory is in a git checkout (a
// proposal is a commit), no tracked file of it has uncommitted changes,
// -branch is a new branch, and -module names a direct requirement the
// policy allows.
func (x *run) checkGit(ctx context.Context, m *gomod.Module, src *report.Source) error {
	top, sub, git := toolchain.GitWorkTree(ctx, x.o.Dir)
	if !git {
		return end(Unsupported, "%s is not in a git checkout: a proposal is a commit", x.o.Dir)
	}
	x.git = newGitRepo(top, sub, x.home)
	dirty, err := x.git.uncommitted(ctx, src.Commit)
	if err != nil {
		return err
	}
	if len(dirty) > 0 {
		x.uncommitted = dirty
		return end(Unsupported, "tracked files have uncommitted changes (%s): commit or stash them first; maintain proposes a commit on top of HEAD", strings.Join(dirty, ", "))
	}
	if x.o.Branch != "" {
		if err := x.git.checkBranch(ctx, x.o.Branch); err != nil {
			return err
		}
	}
	// -module is checked against go.mod before anything runs; whether a
	// version is a listed release, once the proxy can be asked.
	x.pinned, err = x.o.Policy.checkModule(m.Direct())
	return err
}

// listedPinned refuses a -module version the proxy does not list, before
// the baseline's validation rather than after.
func (x *run) listedPinned(ctx context.Context, d time.Duration) error {
	versions, err := workflow.ListVersions(ctx, x.p.Acquirer(time.Now().Add(d)), []string{x.pinned.Path})
	if err != nil {
		return err
	}
	return listed(*x.pinned, versions)
}

// validateBaseline validates the baseline: the commit's tree (with the
// acquisition's update of the manifests, when it made one).
func (x *run) validateBaseline(ctx context.Context, d time.Duration) error {
	res, err := x.p.Validate(ctx, d)
	if err != nil {
		return err
	}
	x.base = &Validation{Checks: res.Checks}
	return nil
}

// rerunBaseline judges the baseline: one that cannot be trusted, or that
// fails, ends the run; when only tests fail, each is rerun alone first,
// and those that change their mind are flaky, not failing.
func (x *run) rerunBaseline(ctx context.Context, d time.Duration) error {
	checks := x.base.Checks
	if inconclusive(checks) {
		return end(BaselineInconclusive, "the baseline's validation cannot be trusted: %s", reasons(checks))
	}
	failing := failingTests(checks)
	if len(failing) > 0 && len(failing) == len(allFindings(checks)) {
		runs, why, err := rerun(ctx, x.p.Runner, x.p.Snapshot.Dir, x.p.Seed, x.p.Module.Path, failing, d)
		if err != nil {
			return err
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
	if n := len(allFindings(checks)) - len(x.base.Flaky); n > 0 {
		return end(BaselineFailing, "the baseline already fails (%d findings): no upgrade can be judged against it", n)
	}
	return nil
}

// scanBaseline scans the baseline.
func (x *run) scanBaseline(ctx context.Context, d time.Duration) (err error) {
	x.base.Vulns, err = x.p.Scan(ctx, x.p.Snapshot.Dir, d, 0)
	return err
}

// listCandidates lists the upgrade candidates (the -module one, checked
// before the baseline), judges them by the policy and orders the
// eligible ones; none ends the run.
func (x *run) listCandidates(ctx context.Context, d time.Duration) error {
	if c := x.pinned; c != nil {
		x.judged, x.order = []Candidate{{Candidate: *c, Eligible: true}}, []report.Candidate{*c}
	} else {
		listed, held, err := x.p.Candidates(ctx, time.Now().Add(d))
		if err != nil {
			return err
		}
		x.held = held
		x.judged, x.order = judge(listed, x.o.Policy)
	}
	if err := x.takeEgress(ctx, "candidates"); err != nil {
		return err
	}
	if len(x.order) == 0 {
		return end(NoCandidate, "no direct dependency has an eligible newer version (%s)", policyText(x.o.Policy))
	}
	if x.o.PreferFixes {
		x.order = preferFixes(x.base, x.order)
	}
	return nil
}

// tryCandidates tries the eligible candidates (tryInOrder), each attempt
// a step whose own steps have their budgets.
func (x *run) tryCandidates(ctx context.Context) (err error) {
	if x.o.Group {
		return x.tryGroup(ctx)
	}
	more := func() bool { return x.steps.Left() >= validate.MinStep }
	x.attempts, err = tryInOrder(x.order, x.o.Each, more, func(c report.Candidate, tried int) (a Attempt, err error) {
		name := "attempt " + c.Path + "@" + c.Version
		err = x.steps.Do(ctx, name, workflow.Unbounded, func(ctx context.Context, _ time.Duration) error {
			if a, _, err = x.attempt(ctx, c, tried); err != nil {
				return err
			}
			return x.takeEgress(ctx, name)
		})
		return a, err
	})
	return err
}

// takeEgress adds the egress record of phase (workflow.Prepared.TakeEgress).
func (x *run) takeEgress(ctx context.Context, phase string) error {
	es, err := x.p.TakeEgress(ctx, phase)
	x.egress = append(x.egress, es...)
	return err
}

// report builds the run's report from what the prelude and the steps
// found; err is what ended the steps: an outcome (*ended), a deadline
// (inconclusive), or Stockade's failure, which is returned instead.
func (x *run) report(err error) (*Report, error) {
	p := x.p
	rep := &Report{Schema: Schema, Dir: x.o.Dir, Source: p.Source, Refusal: p.Refusal, Uncommitted: x.uncommitted,
		Baseline: x.base, Candidates: x.judged, HeldBack: x.held, Attempts: x.attempts, Group: x.group, Notes: p.Notes, Egress: append(p.Egress, x.egress...)}
	if p.Module != nil {
		rep.Module, rep.Go = p.Module.Path, p.Module.Go
	}
	if p.Refusal == nil {
		rep.Image = p.Image // a refused layout has none
	}
	if x.config != "" {
		rep.ConfigHash = hashOf(x.config)
	}
	var e *ended
	var de *workflow.DeadlineError
	switch a := p.Acquired; {
	case errors.As(err, &e):
		rep.Outcome, rep.Reason = e.out, e.reason
	case errors.As(err, &de):
		rep.Outcome, rep.Reason = ValidationInconclusive, de.Error()
	case err != nil:
		return nil, err
	case p.Refusal != nil && p.Refusal.Kind == report.RefusalMalformedGoMod:
		// As the go command fails on it at home.
		rep.Outcome, rep.Reason = BaselineFailing, "the baseline already fails: "+p.Refusal.Reason
	case p.Refusal != nil:
		rep.Outcome, rep.Reason = Unsupported, "the layout is not supported: "+p.Refusal.Reason
	case a.NewerToolchain != nil:
		rep.Refusal = a.NewerToolchain
		rep.Outcome, rep.Reason = Unsupported, "the baseline cannot be built: "+a.NewerToolchain.Reason
	case a.Failure != nil:
		rep.Outcome, rep.Reason = AcquisitionFailed, "the baseline's modules could not be downloaded: "+a.Failure.Detail
	}
	rep.Timings.Phases = x.steps.Phases()
	rep.finish(x.steps.Elapsed().Milliseconds(), x.o.Each || x.o.Group)
	return rep, nil
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
