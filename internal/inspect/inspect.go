// Package inspect is `stockade inspect` and `stockade scan`: each a short
// list of named steps over the prelude the workflows share
// (workflow.Prepare), whose report is built from the steps' results.
//
// Threat model: the repository is hostile. Inspect runs its code only in
// the validation's execute container (internal/validate); scan runs only
// the pinned scanner over it, in the same profile. Everything the module
// does is in the report, a refusal, a failed acquisition and a deadline
// that ran out included; an error is Stockade's own failure.
package inspect

import (
	"context"
	"errors"
	"time"

	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/scanner"
	"github.com/stockade/stockade/internal/validate"
	"github.com/stockade/stockade/internal/vulndb"
	"github.com/stockade/stockade/internal/workflow"
)

// Defaults of Options.
const (
	// DefaultDeadline bounds a whole inspect or scan: every step, from
	// the layout check to the candidate listing, fits in it.
	DefaultDeadline = time.Hour
	// DefaultTimeout bounds inspect's validation (list, build, vet and
	// test together).
	DefaultTimeout = validate.DefaultTimeout
	// DefaultScanTimeout bounds scan's scanner.
	DefaultScanTimeout = scanner.DefaultScanTimeout
)

// Options configure Inspect and Scan. Dir is required; the zero value of
// every other field is the default.
type Options struct {
	workflow.Options
	// Worktree works on the working tree of a git checkout, uncommitted
	// changes included, instead of the committed tree.
	Worktree bool
	// ScanOutputCap is how many bytes of each of the scanner's streams
	// a scan keeps (scanner.Options.OutputCap); zero means
	// scanner.DefaultOutputCap.
	ScanOutputCap int64
}

// ErrScanNeedsDB reports Scan without a VulnDB.
var ErrScanNeedsDB = errors.New("inspect: a scan needs a vulnerability database (-vulndb or " + vulndb.EnvDefault + ")")

// Inspect is `stockade inspect`: the prelude (workflow.Prepare: layout,
// image, lock, snapshot, seed, probe, acquisition), then the validation of
// the snapshot in one execute container with a fresh build cache (its
// container started beside the acquisition), with VulnDB its scan, and
// the upgrade candidates, listed beside the validation. Every step fits
// in o.Deadline (zero: DefaultDeadline), each with its own budget;
// o.Timeout (zero: DefaultTimeout) bounds the validation.
func Inspect(ctx context.Context, eng workflow.Engine, o Options) (*report.Report, error) {
	timeout := o.TimeoutOr(DefaultTimeout)
	st := workflow.NewSteps(o.DeadlineOr(DefaultDeadline), o.Logger, o.Progress)
	p, err := workflow.Prepare(ctx, eng, o.Options, st, workflow.Plan{Worktree: o.Worktree, Validation: timeout})
	defer p.Close(ctx)
	var r results
	if err == nil && p.Ready() {
		err = st.Run(ctx,
			workflow.Step{Name: "validate", Budget: workflow.Validation(timeout), Do: r.validate(p, st)},
			workflow.Step{Name: "scan", Budget: workflow.ScanBudget, Do: r.scan(p, o.ScanOutputCap), Skip: o.VulnDB == ""},
			workflow.Step{Name: "candidates", Budget: workflow.Unbounded, Do: r.candidates(p)},
		)
	}
	rep, err := newReport(o.Dir, p, r, err)
	if err != nil {
		return nil, err
	}
	rep.Timings.Phases = st.Phases()
	rep.Finish(st.Elapsed())
	return rep, nil
}

// Scan is `stockade scan`: the prelude, then the scan of the snapshot
// with the pinned scanner against VulnDB, which it needs
// (ErrScanNeedsDB); o.Timeout (zero: DefaultScanTimeout) bounds the
// scanner. The verdict is the scan's (report.FinishScan).
func Scan(ctx context.Context, eng workflow.Engine, o Options) (*report.Report, error) {
	if o.VulnDB == "" {
		return nil, ErrScanNeedsDB
	}
	budget := workflow.ScanBudget
	budget.D = o.TimeoutOr(DefaultScanTimeout)
	st := workflow.NewSteps(o.DeadlineOr(DefaultDeadline), o.Logger, o.Progress)
	p, err := workflow.Prepare(ctx, eng, o.Options, st, workflow.Plan{Worktree: o.Worktree})
	defer p.Close(ctx)
	var r results
	if err == nil && p.Ready() {
		err = st.Do(ctx, "scan", budget, r.scan(p, o.ScanOutputCap))
	}
	rep, err := newReport(o.Dir, p, r, err)
	if err != nil {
		return nil, err
	}
	rep.Timings.Phases = st.Phases()
	rep.FinishScan(st.Elapsed())
	return rep, nil
}

// Refuse checks, without an engine, the layout of the tree of dir that
// inspect works on (workflow.Check), against the releases dataDir (empty:
// workflow.DefaultDataDir()) and the host have: it returns a finished
// report and true when the module is refused (an unsupported layout, or a
// go directive no image can build) or its go.mod does not parse (failing),
// and nil and false when it may be inspected; err is an input that cannot
// be read (toolchain.ErrSnapshot) or Stockade's failure. Inspect makes the
// same check first, and again on the snapshot it validates.
func Refuse(ctx context.Context, dir string, worktree bool, dataDir string) (*report.Report, bool, error) {
	start := time.Now()
	m, src, ref, err := workflow.Check(ctx, dir, worktree, dataDir)
	if ref == nil {
		return nil, false, err
	}
	rep := report.New(dir)
	rep.Source, rep.Refusal = src, ref
	if m != nil {
		rep.Module, rep.Go = m.Path, m.Go
	}
	rep.Finish(time.Since(start))
	return rep, true, nil
}

// results are what inspect's and scan's steps found.
type results struct {
	validation validate.Result
	vulns      *report.VulnScan
	listing    <-chan listing // the candidate listing, started beside the validation
	listed     listing
}

// validate starts the candidate listing beside the validation (it needs
// only the acquired modules and the network, the validation neither),
// then validates the snapshot; the validation's own steps are listed
// after it.
func (r *results) validate(p *workflow.Prepared, st *workflow.Steps) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		r.listing = listCandidates(p, st)
		var err error
		r.validation, err = p.Validate(ctx, d)
		st.After(r.validation.Phases...)
		return err
	}
}

// scan scans the snapshot.
func (r *results) scan(p *workflow.Prepared, outputCap int64) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) (err error) {
		r.vulns, err = p.Scan(ctx, p.Snapshot.Dir, d, outputCap)
		return err
	}
}

// candidates waits for the listing past the validation (and scan); it
// began when the validation did.
func (r *results) candidates(p *workflow.Prepared) func(context.Context, time.Duration) error {
	return func(context.Context, time.Duration) error {
		r.listed = <-r.listing
		return r.listed.err
	}
}

// listing is what the candidate listing found: the candidates, or why
// they are not known (failure, for the report), and its egress record;
// err is Stockade's own failure.
type listing struct {
	cands   []report.Candidate
	held    []report.HeldBack
	failure string
	egress  []report.Egress
	err     error
}

// listCandidates lists the module's upgrade candidates beside the next
// steps (Prepared.Beside), in the acquisition's container while it holds
// the snapshot, within workflow.CandidatesBudget and what is left of the
// deadline; the channel delivers the one result. The verdict does not
// depend on it: a listing that cannot be made is a failure in the report.
func listCandidates(p *workflow.Prepared, st *workflow.Steps) <-chan listing {
	out := make(chan listing, 1)
	d := min(workflow.CandidatesBudget.D, st.Left())
	if d < validate.MinStep {
		out <- listing{failure: "not listed: the -deadline ran out first"}
		return out
	}
	until := time.Now().Add(d)
	p.Beside(func(ctx context.Context) {
		var l listing
		cands, held, err := p.Candidates(ctx, until)
		if err != nil {
			l.failure = err.Error()
		} else {
			l.cands, l.held = cands, held
		}
		l.egress, l.err = p.TakeEgress(ctx, "candidates")
		out <- l
	})
	return out
}

// newReport builds the report of dir from what the prelude and the steps
// found; err is what ended them: a *workflow.DeadlineError is in the
// report (timed_out), any other error is returned.
func newReport(dir string, p *workflow.Prepared, r results, err error) (*report.Report, error) {
	var de *workflow.DeadlineError
	if err != nil && !errors.As(err, &de) {
		return nil, err
	}
	rep := report.New(dir)
	if de != nil {
		rep.TimedOut, rep.TimedOutBy = de.Step, de.By
	}
	if p.Module != nil {
		rep.Module, rep.Go = p.Module.Path, p.Module.Go
	}
	rep.Source, rep.Refusal, rep.Notes, rep.Egress = p.Source, p.Refusal, p.Notes, p.Egress
	if p.Refusal == nil {
		rep.Image = p.Image // a refused layout has none
	}
	switch a := p.Acquired; {
	case a.NewerToolchain != nil:
		rep.Refusal = a.NewerToolchain
	case a.Failure != nil:
		rep.Acquisition = a.Failure
	}
	rep.Checks, rep.Vulns = r.validation.Checks, r.vulns
	if rep.Checks == nil {
		rep.Checks = []report.Check{}
	}
	rep.Egress = append(rep.Egress, r.listed.egress...)
	if r.listed.failure != "" {
		rep.CandidatesError = r.listed.failure
	} else if r.listed.cands != nil {
		rep.Candidates, rep.HeldBack = r.listed.cands, r.listed.held
	}
	return rep, nil
}
