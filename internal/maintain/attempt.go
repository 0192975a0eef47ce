package maintain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"

	"github.com/stockade/stockade/internal/gomod"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/testjson"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/validate"
	"github.com/stockade/stockade/internal/workflow"
)

// attempt tries one candidate against the baseline, after tried others:
// stage it with go get, pass the admission gate, normalize with go mod
// tidy, validate the upgraded tree, compare, rerun what fails, and make
// the proposal (with -group, no proposal: a candidate that passes is
// Passed, and the group is proposed). Each step is a call; the attempt is
// built from their results. A failure of Stockade's own is the error: it
// ends the run (exit 1), since nothing the attempt would say could be
// trusted.
func (x *run) attempt(ctx context.Context, c report.Candidate, tried int) (Attempt, *try, error) {
	a := Attempt{Path: c.Path, From: c.Current, To: c.Version, Class: c.Class, Why: whyChosen(c, x.o.Policy, x.o.Each || x.o.Group, tried), Repo: c.Repo, Compare: c.Compare}
	if a.Repo == "" {
		// A -module candidate is not listed: its links from the path.
		a.Repo, a.Compare = gomod.Links(c.Path, c.Current, c.Version, nil)
	}
	if fix := fixesCalled(x.base, c); x.o.PreferFixes && len(fix) > 0 {
		a.Why = "-prefer-fixes: fixes called " + strings.Join(fix, ", ")
	}
	t := &try{run: x, a: &a, targets: []module.Version{{Path: c.Path, Version: c.Version}}}
	err := t.run.runTry(ctx, t, !x.o.Group)
	return a, t, err
}

// runTry runs the steps of t's attempt (the proposal only with propose)
// and sets its outcome, timings and evidence.
func (x *run) runTry(ctx context.Context, t *try, propose bool) error {
	a := t.a
	st := x.steps.Inner(x.log.With("candidate", t.what()))
	err := st.Run(ctx,
		workflow.Step{Name: "stage", Budget: workflow.StageBudget, Do: t.stage},
		workflow.Step{Name: "gate", Budget: workflow.Left, Do: t.gate},
		workflow.Step{Name: "tidy", Budget: workflow.TidyBudget, Do: t.tidy},
		workflow.Step{Name: "post/snapshot", Budget: workflow.Left, Do: t.postSnapshot},
		workflow.Step{Name: "post/acquire", Budget: workflow.AcquireBudget, Do: t.postAcquire},
		workflow.Step{Name: "post/apidiff", Budget: workflow.APIDiffBudget, Do: t.apiDiff},
		workflow.Step{Name: "post/validate", Budget: workflow.Validation(x.o.timeout()), Do: t.postValidate},
		workflow.Step{Name: "post/scan", Budget: workflow.ScanBudget, Do: t.postScan, Skip: x.o.VulnDB == ""},
		workflow.Step{Name: "compare", Budget: workflow.Left, Do: t.compare},
		workflow.Step{Name: "rerun", Budget: workflow.Left, Do: t.rerun},
		workflow.Step{Name: "proposal", Budget: workflow.ProposalBudget, Do: t.propose, Skip: !propose},
	)
	a.Timings = st.Phases()
	a.Evidence = &Evidence{Tree: t.tree, Parent: x.p.Snapshot.Commit, ConfigHash: hashOf(x.config), ImageID: x.p.Image.ID}
	var e *ended
	var de *workflow.DeadlineError
	switch {
	case errors.As(err, &e):
		a.Outcome, a.Reason = e.out, e.reason
	case errors.As(err, &de):
		a.Outcome, a.Reason = ValidationInconclusive, de.Error()
	case err != nil:
		return fmt.Errorf("maintain: attempt %s during %s: %w", t.what(), a.Timings[len(a.Timings)-1].Name, err)
	case !propose:
		a.Outcome, a.Reason = Passed, "validated: no finding the baseline does not have"
	default:
		a.Outcome, a.Reason = ProposalPrepared, "validated: no finding the baseline does not have"
	}
	return nil
}

// try is one attempt: its steps and what they found.
type try struct {
	*run
	a *Attempt
	// targets are the upgrades: one candidate's, or a group's.
	targets []module.Version
	// staging holds the staged manifests; before is the baseline's go.mod.
	staging string
	before  *manifest
	// tidied are the manifests after go mod tidy; post the snapshot of
	// the upgraded tree and tree its git tree ID; checks its validation.
	tidied     manifests
	post       toolchain.Snapshot
	tree       string
	checks     []report.Check
	introduced []report.Finding
}

// what names t's targets: "path@version", space-separated for a group.
func (t *try) what() string {
	var s []string
	for _, v := range t.targets {
		s = append(s, v.String())
	}
	return strings.Join(s, " ")
}

// stage runs go get of the target in the mutate profile on a staging copy
// of the baseline's manifests.
func (t *try) stage(ctx context.Context, d time.Duration) error {
	staging, err := t.p.Runner.NewStaging(t.p.Snapshot)
	if err != nil {
		return err
	}
	t.staging = staging
	argv := []string{"go", "get", "-modfile=" + toolchain.StagingModFile}
	for _, v := range t.targets {
		argv = append(argv, v.String())
	}
	out, err := t.mutate(ctx, staging, argv, d)
	switch {
	case err != nil:
		return err
	case out.TimedOut || validate.OutputReason(out) != "":
		return end(ValidationInconclusive, "go get %s: %s", t.what(), validate.OutputReason(out))
	case out.ExitCode != 0:
		t.a.Detail = report.Detail(out.Stderr)
		if n := testjson.NeedsNewerGo(out.Stderr); len(n) > 0 {
			t.a.Module = n[0].Module
			return end(RequiresNewerToolchain, "%s@%s requires go >= %s; the toolchain image has go %s (GOTOOLCHAIN=local)", n[0].Module, n[0].Version, n[0].Go, t.p.Image.Minor)
		}
		return end(AcquisitionFailed, "go get %s failed (exit %d)", t.what(), out.ExitCode)
	}
	return nil
}

// gate admits the staged requirement changes, or refuses them (admit).
func (t *try) gate(context.Context, time.Duration) error {
	before, err := readManifest(t.p.Snapshot.Dir)
	if err != nil {
		return err
	}
	staged, err := readManifest(t.staging)
	if err != nil {
		return err
	}
	t.before = before
	t.a.Moved = moves(before, staged)
	gr := goRule{keep: t.o.Policy.KeepGo, imageGo: t.p.Image.GoVersion, goLines: readGoLines(t.p.Runner.ModCache(), t.a.Moved)}
	cl := closure{}
	for _, v := range t.targets {
		cl.add(readClosure(t.p.Runner.ModCache(), v))
	}
	if ref := admitAll(before, staged, t.targets, cl, gr); ref != nil {
		t.a.Rule, t.a.Module = ref.Rule, ref.Module
		return end(AdmissionRefused, "%s", ref.Reason)
	}
	if b, g := before.goVersion(), staged.goVersion(); b != g {
		_, by := gr.highest()
		t.a.GoRaised = &GoRaise{From: b, To: g, RequiredBy: by}
	}
	return nil
}

// tidy normalizes the staged manifests with go mod tidy, twice.
func (t *try) tidy(ctx context.Context, d time.Duration) error {
	tidied, ref, why, err := t.normalize(ctx, t.staging, t.before, t.targets, d)
	if tidied.m != nil {
		t.a.Moved = moves(t.before, tidied.m)
	}
	t.tidied = tidied
	switch {
	case err != nil:
		return err
	case why != "":
		return end(ValidationInconclusive, "%s", why)
	case ref != nil:
		t.a.Rule, t.a.Module = ref.Rule, ref.Module
		return end(NormalizationRefused, "%s", ref.Reason)
	}
	return nil
}

// postSnapshot is the validated commit's snapshot with the tidied
// manifests in place (a fresh snapshot directory of the run), and the
// git tree the proposal will have.
func (t *try) postSnapshot(ctx context.Context, _ time.Duration) (err error) {
	if t.post, err = t.p.Runner.SnapshotWith(ctx, t.p.Snapshot, t.tidied.goMod, t.tidied.goSum); err != nil {
		return err
	}
	t.tree, err = t.git.validatedTree(ctx, t.p.Snapshot.Commit, t.tidied.goMod, t.tidied.goSum)
	return err
}

// postAcquire downloads the upgraded tree's modules.
func (t *try) postAcquire(ctx context.Context, d time.Duration) error {
	got, err := t.p.AcquireTree(ctx, t.post.Dir, d)
	switch {
	case err != nil:
		return err
	case got.TimedOut:
		return workflow.ErrDeadline
	case got.NewerToolchain != nil:
		return end(RequiresNewerToolchain, "%s", got.NewerToolchain.Reason)
	case got.Failure != nil:
		t.a.Detail = got.Failure.Detail
		return end(AcquisitionFailed, "the upgraded tree's modules could not be downloaded")
	}
	return nil
}

// postValidate validates the upgraded tree with a fresh build cache.
func (t *try) postValidate(ctx context.Context, d time.Duration) error {
	res, err := validate.ValidateSnapshot(ctx, t.p.Runner, t.post.Dir, d, t.p.Seed, t.p.Module.Path, t.log)
	if err != nil {
		return err
	}
	t.checks, t.a.Post = res.Checks, &Validation{Checks: res.Checks}
	if t.o.VulnDB != "" {
		return nil // trusted or not once scanned, as the baseline was
	}
	return t.trusted()
}

// postScan scans the upgraded tree and compares with the baseline's scan.
func (t *try) postScan(ctx context.Context, d time.Duration) (err error) {
	if t.a.Post.Vulns, err = t.p.Scan(ctx, t.post.Dir, d, 0); err != nil {
		return err
	}
	t.a.VulnsFixed, t.a.VulnsIntroduced = vulnDelta(t.base.Vulns, t.a.Post.Vulns)
	return t.trusted()
}

// trusted ends the attempt when the upgraded tree's validation cannot be
// trusted.
func (t *try) trusted() error {
	if inconclusive(t.checks) {
		return end(ValidationInconclusive, "the upgraded tree's validation cannot be trusted: %s", reasons(t.checks))
	}
	return nil
}

// compare finds what the upgraded tree has that the baseline has not.
func (t *try) compare(context.Context, time.Duration) error {
	t.introduced = introducedFindings(t.base.Checks, t.checks)
	return nil
}

// rerun reruns the introduced failing tests on both trees: what fails
// every time after and passes every time before is a regression.
func (t *try) rerun(ctx context.Context, _ time.Duration) error {
	flakes, why, err := t.rerunIntroduced(ctx, t.post.Dir, t.introduced)
	switch {
	case err != nil:
		return err
	case why != "":
		return end(ValidationInconclusive, "%s", why)
	}
	t.a.Post.Flaky = flakes
	t.a.Introduced = regressions(t.introduced, flakes)
	if len(t.a.Introduced) > 0 {
		return end(Regressed, "the upgrade introduces %d finding(s): %s", len(t.a.Introduced), describeFindings(t.a.Introduced))
	}
	return nil
}

// propose makes the proposal commit, whose tree must be the validated one.
func (t *try) propose(ctx context.Context, _ time.Duration) error {
	p, made, err := t.run.propose(ctx, t.a, t.tidied, t.checks)
	switch {
	case errors.Is(err, ErrBranchExists):
		return end(AdmissionRefused, "%v", err)
	case err != nil:
		return err
	case made != t.tree:
		// What was committed must be what was validated.
		return fmt.Errorf("maintain: the proposal's tree %s is not the validated tree %s", made, t.tree)
	}
	t.a.Proposal = p
	return nil
}

// mutate runs argv in the mutate profile against staging for at most d.
func (x *run) mutate(ctx context.Context, staging string, argv []string, d time.Duration) (validate.Output, error) {
	ctx, cancel := context.WithTimeout(ctx, d+validate.HostGrace)
	defer cancel()
	res, err := x.p.Runner.Run(ctx, toolchain.Job{Profile: toolchain.Mutate, Cmd: argv, Source: x.p.Snapshot.Dir, Staging: staging, Timeout: d})
	return validate.OutputOf(res), err
}

// manifests are a tree's go.mod (parsed and raw) and go.sum (nil: none).
type manifests struct {
	m     *manifest
	goMod []byte
	goSum []byte
}

// maxManifest bounds go.mod and go.sum read back from staging, in bytes.
const maxManifest = 64 << 20

func readManifest(dir string) (*manifest, error) {
	ms, err := readManifests(dir)
	if err != nil {
		return nil, err
	}
	return ms.m, nil
}

func readManifests(dir string) (manifests, error) {
	var ms manifests
	var err error
	if ms.goMod, err = readFile(filepath.Join(dir, "go.mod")); err != nil {
		return ms, err
	}
	if ms.goSum, err = readFile(filepath.Join(dir, "go.sum")); errors.Is(err, fs.ErrNotExist) {
		ms.goSum = nil
	} else if err != nil {
		return ms, err
	}
	ms.m, err = parseManifest("go.mod", ms.goMod)
	return ms, err
}

// readFile reads a regular file (not a symlink the container made) of at
// most maxManifest bytes.
func readFile(p string) ([]byte, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxManifest {
		return nil, fmt.Errorf("maintain: %s is not a regular file of at most %d bytes", p, maxManifest)
	}
	return os.ReadFile(p)
}

// normalize runs go mod tidy twice on the staged manifests: the second
// must change nothing, every direct dependency must stay direct, and the
// targets must stay at their versions. why says when a run cannot be
// trusted.
func (x *run) normalize(ctx context.Context, staging string, before *manifest, targets []module.Version, d time.Duration) (tidied manifests, ref *Refusal, why string, err error) {
	target := targets[0]
	until := time.Now().Add(d)
	var runs [2]manifests
	for i := range runs {
		left := time.Until(until)
		if left < validate.MinStep {
			return tidied, nil, "the -deadline ran out during go mod tidy", nil
		}
		out, err := x.mutate(ctx, staging, []string{"go", "mod", "tidy", "-modfile=" + toolchain.StagingModFile}, left)
		if err != nil {
			return tidied, nil, "", err
		}
		if r := validate.OutputReason(out); r != "" {
			return tidied, nil, "go mod tidy: " + r, nil
		}
		if out.ExitCode != 0 {
			return tidied, &Refusal{Rule: "tidy_failed", Module: target.Path,
				Reason: fmt.Sprintf("go mod tidy failed (exit %d): %s", out.ExitCode, report.Detail(out.Stderr))}, "", nil
		}
		if runs[i], err = readManifests(staging); err != nil {
			return tidied, nil, "", err
		}
	}
	if !bytes.Equal(runs[0].goMod, runs[1].goMod) || !bytes.Equal(runs[0].goSum, runs[1].goSum) {
		return runs[1], &Refusal{Rule: RuleSettled, Module: target.Path, Reason: "a second go mod tidy changed the manifests again"}, "", nil
	}
	after := runs[1].m
	for p, r := range before.reqs {
		if r.indirect {
			continue
		}
		if a, ok := after.reqs[p]; !ok || a.indirect {
			return runs[1], &Refusal{Rule: RuleDirect, Module: p, Reason: fmt.Sprintf("go mod tidy made the direct dependency %s indirect or dropped it", p)}, "", nil
		}
	}
	for _, target := range targets {
		if got := after.reqs[target.Path].version; got != target.Version {
			return runs[1], &Refusal{Rule: RuleTarget, Module: target.Path, Reason: fmt.Sprintf("go mod tidy moved %s to %q", target.Path, got)}, "", nil
		}
	}
	return runs[1], nil, "", nil
}

// introducedFindings returns the findings of post whose key the baseline
// does not have.
func introducedFindings(base, post []report.Check) []report.Finding {
	seen := map[string]bool{}
	for _, f := range allFindings(base) {
		seen[f.Key] = true
	}
	var out []report.Finding
	for _, f := range allFindings(post) {
		if !seen[f.Key] {
			out = append(out, f)
		}
	}
	return out
}

// rerunIntroduced reruns each introduced failing test on the upgraded
// tree and on the baseline, each arm in a fresh container, and returns
// what each test did in both arms.
func (x *run) rerunIntroduced(ctx context.Context, postDir string, introduced []report.Finding) ([]Flake, string, error) {
	var tests []report.Finding
	for _, f := range introduced {
		if f.Kind == "test" {
			tests = append(tests, f)
		}
	}
	if len(tests) == 0 {
		return nil, "", nil
	}
	var arms [2]map[string][]string
	for i, dir := range []string{postDir, x.p.Snapshot.Dir} {
		d := min(x.o.timeout(), x.steps.Left())
		if d < validate.MinStep {
			return nil, "the -deadline ran out during the reruns", nil
		}
		runs, why, err := rerun(ctx, x.p.Runner, dir, x.p.Seed, x.p.Module.Path, tests, d)
		if err != nil || why != "" {
			return nil, why, err
		}
		arms[i] = runs
	}
	var out []Flake
	for _, f := range tests {
		fl := Flake{Key: f.Key, Package: f.Package, Test: f.Test,
			After:  append([]string{"fail"}, arms[0][f.Key]...),
			Before: append([]string{"pass"}, arms[1][f.Key]...)}
		fl.Regression = all(fl.After, "fail") && all(fl.Before, "pass")
		out = append(out, fl)
	}
	return out, "", nil
}

// regressions are the introduced findings that are not flaky tests.
func regressions(introduced []report.Finding, flakes []Flake) []report.Finding {
	flaky := map[string]bool{}
	for _, fl := range flakes {
		if !fl.Regression {
			flaky[fl.Key] = true
		}
	}
	var out []report.Finding
	for _, f := range introduced {
		if !flaky[f.Key] {
			out = append(out, f)
		}
	}
	return out
}

func describeFindings(fs []report.Finding) string {
	var s []string
	for i, f := range fs {
		if i == 5 {
			s = append(s, fmt.Sprintf("and %d more", len(fs)-5))
			break
		}
		what := f.Kind
		switch {
		case f.Test != "":
			what += " " + f.Package + " " + f.Test
		case f.File != "":
			what += " " + f.File
		case f.Package != "":
			what += " " + f.Package
		}
		s = append(s, what+": "+f.Message)
	}
	return strings.Join(s, "; ")
}
