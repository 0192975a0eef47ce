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

	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/testjson"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/validate"
)

// maxDetail caps the go command's stderr kept in an attempt, in bytes.
const maxDetail = 4 << 10

// attempt tries one candidate against the baseline, after tried others: stage it with go get,
// pass the admission gate, normalize with go mod tidy, validate the
// upgraded tree, compare, rerun what fails, and make the proposal. Each
// step is a call; the attempt is built from their results. A failure of
// Stockade's own is the error: it ends the run (exit 1), since nothing
// the attempt would say could be trusted.
func (x *run) attempt(ctx context.Context, c report.Candidate, tried int) (Attempt, error) {
	a := Attempt{Path: c.Path, From: c.Current, To: c.Version, Class: c.Class, Why: whyChosen(c, x.o.Policy, x.o.Each, tried), Timings: []report.Phase{}}
	if fix := fixesCalled(x.base, c); x.o.PreferFixes && len(fix) > 0 {
		a.Why = "-prefer-fixes: fixes called " + strings.Join(fix, ", ")
	}
	st := &steps{log: x.log.With("candidate", c.Path+"@"+c.Version), phases: &a.Timings}
	target := module.Version{Path: c.Path, Version: c.Version}
	tree := "" // the validated tree, once the upgraded manifests exist
	end := func(out Outcome, format string, args ...any) (Attempt, error) {
		st.end() // the last step's time, before a is returned
		a.Outcome, a.Reason = out, fmt.Sprintf(format, args...)
		a.Evidence = &Evidence{Tree: tree, Parent: x.snap.Commit, ConfigHash: hashOf(x.config), ImageID: x.img.ID}
		return a, nil
	}
	failed := func(err error) (Attempt, error) {
		return a, fmt.Errorf("maintain: attempt %s during %s: %w", target, st.cur, err)
	}
	timedOut := func() (Attempt, error) {
		return end(ValidationInconclusive, "the -deadline ran out during %s", st.cur)
	}

	st.begin("stage") // budget: stageBudget
	d, ok := x.clock.step(stageBudget)
	if !ok {
		return timedOut()
	}
	staging, err := x.r.NewStaging(x.snap)
	if err != nil {
		return failed(err)
	}
	out, err := x.mutate(ctx, staging, []string{"go", "get", "-modfile=" + toolchain.StagingModFile, target.String()}, d)
	switch {
	case err != nil:
		return failed(err)
	case out.TimedOut || validate.OutputReason(out) != "":
		return end(ValidationInconclusive, "go get %s: %s", target, validate.OutputReason(out))
	case out.ExitCode != 0:
		a.Detail = capText(out.Stderr)
		if n := testjson.NeedsNewerGo(out.Stderr); len(n) > 0 {
			a.Module = n[0].Module
			return end(RequiresNewerToolchain, "%s@%s requires go >= %s; the toolchain image has go %s (GOTOOLCHAIN=local)", n[0].Module, n[0].Version, n[0].Go, x.img.Minor)
		}
		return end(AcquisitionFailed, "go get %s failed (exit %d)", target, out.ExitCode)
	}

	st.begin("gate")
	before, err := readManifest(x.snap.Dir)
	if err != nil {
		return failed(err)
	}
	staged, err := readManifest(staging)
	if err != nil {
		return failed(err)
	}
	a.Moved = moves(before, staged)
	gr := goRule{keep: x.o.Policy.KeepGo, imageGo: x.img.GoVersion, goLines: readGoLines(x.r.ModCache(), a.Moved)}
	if ref := admit(before, staged, target, readClosure(x.r.ModCache(), target), gr); ref != nil {
		a.Rule, a.Module = ref.Rule, ref.Module
		return end(AdmissionRefused, "%s", ref.Reason)
	}
	if b, g := before.goVersion(), staged.goVersion(); b != g {
		_, by := gr.highest()
		a.GoRaised = &GoRaise{From: b, To: g, RequiredBy: by}
	}

	st.begin("tidy") // budget: tidyBudget, both runs
	if d, ok = x.clock.step(tidyBudget); !ok {
		return timedOut()
	}
	tidied, ref, why, err := x.normalize(ctx, staging, before, target, d)
	if tidied.m != nil {
		a.Moved = moves(before, tidied.m)
	}
	switch {
	case err != nil:
		return failed(err)
	case why != "":
		return end(ValidationInconclusive, "%s", why)
	case ref != nil:
		a.Rule, a.Module = ref.Rule, ref.Module
		return end(NormalizationRefused, "%s", ref.Reason)
	}

	st.begin("post/snapshot")
	post, err := x.postSnapshot(ctx, tidied)
	if err != nil {
		return failed(err)
	}
	tree, err = x.git.validatedTree(ctx, x.snap.Commit, tidied.goMod, tidied.goSum)
	if err != nil {
		return failed(err)
	}

	st.begin("post/acquire") // budget: acquireBudget
	if d, ok = x.clock.step(acquireBudget); !ok {
		return timedOut()
	}
	got, err := validate.AcquireModules(ctx, validate.NewAcquireExecer(x.r, post.Dir, time.Now().Add(d)), x.mod, x.img, validate.SumsIncomplete(post.Dir))
	switch {
	case err != nil:
		return failed(err)
	case got.TimedOut && d >= acquireBudget:
		return end(ValidationInconclusive, "the acquisition's budget (%v) ran out during %s", acquireBudget, st.cur)
	case got.TimedOut:
		return timedOut()
	case got.NewerToolchain != nil:
		return end(RequiresNewerToolchain, "%s", got.NewerToolchain.Reason)
	case got.Failure != nil:
		a.Detail = got.Failure.Detail
		return end(AcquisitionFailed, "the upgraded tree's modules could not be downloaded")
	}

	st.begin("post/validate") // budget: Timeout
	if d, ok = x.clock.step(x.o.timeout()); !ok {
		return timedOut()
	}
	res, err := validate.ValidateSnapshot(ctx, x.r, post.Dir, d, x.seed, x.mod.Path, x.log)
	if err != nil {
		return failed(err)
	}
	a.Post = &Validation{Checks: res.Checks}
	if x.o.VulnDB != "" {
		st.begin("post/scan") // budget: scanBudget
		if a.Post.Vulns, err = x.scan(ctx, post.Dir); err != nil {
			return failed(err)
		}
		a.VulnsFixed, a.VulnsIntroduced = vulnDelta(x.base.Vulns, a.Post.Vulns)
	}
	if inconclusive(res.Checks) {
		return end(ValidationInconclusive, "the upgraded tree's validation cannot be trusted: %s", reasons(res.Checks))
	}

	st.begin("compare")
	introduced := introducedFindings(x.base.Checks, res.Checks)

	st.begin("rerun") // budget: Timeout per arm
	flakes, why, err := x.rerunIntroduced(ctx, post.Dir, introduced)
	switch {
	case err != nil:
		return failed(err)
	case why != "":
		return end(ValidationInconclusive, "%s", why)
	}
	a.Post.Flaky = flakes
	a.Introduced = regressions(introduced, flakes)
	if len(a.Introduced) > 0 {
		return end(Regressed, "the upgrade introduces %d finding(s): %s", len(a.Introduced), describeFindings(a.Introduced))
	}

	st.begin("proposal") // budget: proposalBudget
	if d, ok = x.clock.step(proposalBudget); !ok {
		return timedOut()
	}
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	p, made, err := x.propose(pctx, &a, tidied, res.Checks)
	switch {
	case errors.Is(err, ErrBranchExists):
		return end(AdmissionRefused, "%v", err)
	case err != nil:
		return failed(err)
	case made != tree:
		// What was committed must be what was validated.
		return failed(fmt.Errorf("maintain: the proposal's tree %s is not the validated tree %s", made, tree))
	}
	a.Proposal = p
	return end(ProposalPrepared, "validated: no finding the baseline does not have")
}

// mutate runs argv in the mutate profile against staging for at most d.
func (x *run) mutate(ctx context.Context, staging string, argv []string, d time.Duration) (validate.Output, error) {
	ctx, cancel := context.WithTimeout(ctx, d+hostGrace)
	defer cancel()
	res, err := x.r.Run(ctx, toolchain.Job{Profile: toolchain.Mutate, Cmd: argv, Source: x.snap.Dir, Staging: staging, Timeout: d})
	return validate.Output{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr,
		Truncated: res.Truncated(), TimedOut: res.TimedOut, OOMKilled: res.OOMKilled}, err
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
// target must stay at its version. why says when a run cannot be trusted.
func (x *run) normalize(ctx context.Context, staging string, before *manifest, target module.Version, d time.Duration) (tidied manifests, ref *Refusal, why string, err error) {
	until := time.Now().Add(d)
	var runs [2]manifests
	for i := range runs {
		left := time.Until(until)
		if left < minStep {
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
				Reason: fmt.Sprintf("go mod tidy failed (exit %d): %s", out.ExitCode, capText(out.Stderr))}, "", nil
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
	if got := after.reqs[target.Path].version; got != target.Version {
		return runs[1], &Refusal{Rule: RuleTarget, Module: target.Path, Reason: fmt.Sprintf("go mod tidy moved %s to %q", target.Path, got)}, "", nil
	}
	return runs[1], nil, "", nil
}

// postSnapshot is the validated commit's snapshot with the staged
// manifests in place: a fresh snapshot directory of the run.
func (x *run) postSnapshot(ctx context.Context, ms manifests) (toolchain.Snapshot, error) {
	return x.r.SnapshotWith(ctx, x.snap, ms.goMod, ms.goSum)
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
	for i, dir := range []string{postDir, x.snap.Dir} {
		d, ok := x.clock.step(x.o.timeout())
		if !ok {
			return nil, "the -deadline ran out during the reruns", nil
		}
		runs, why, err := rerun(ctx, x.r, dir, x.seed, x.mod.Path, tests, d)
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

func capText(b []byte) string {
	if len(b) > maxDetail {
		return string(b[:maxDetail]) + "..."
	}
	return string(b)
}
