package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/scanner"
	"github.com/stockade/stockade/internal/validate"
)

// Budget is a step's own bound and what a report calls it when it runs
// out.
type Budget struct {
	// D is the step's own bound; zero or less: none, the step gets what
	// is left of the deadline.
	D time.Duration
	// Of names the bound in a report's timed_out_by, such as "the
	// acquisition's budget".
	Of string
	// Grace: the step sets in-container timeouts from the time it is
	// given, and its context ends validate.HostGrace after that time, so
	// the host still collects, kills and removes what those timeouts
	// ended. Without it the step's context ends with its time.
	Grace bool
	// Alone makes D the step's only bound (zero: it has none): the step
	// runs however little is left of the deadline. The layout check has
	// it (a refusal is decided on the host before anything else, and
	// reported even when the deadline is spent), and so has Unbounded.
	Alone bool
}

// The steps' budgets, each declared once. A step gets min(its budget,
// what is left of the deadline); the lock step's and the validation's
// come from options (lockBudget, Validation), and so does stockade scan's
// (ScanBudget with -timeout).
var (
	CheckBudget      = Budget{D: 2 * time.Minute, Of: "the check's budget", Alone: true}              // the layout check (maintain: and its git checks)
	ImageBudget      = Budget{D: 10 * time.Minute, Of: "the image phase's budget"}                    // choosing the toolchain image, or building it
	ScannerBudget    = Budget{D: 25 * time.Minute, Of: "the scanner phase's budget"}                  // building the pinned scanner on first use, its lock wait included
	SeedBudget       = Budget{D: 20 * time.Minute, Of: "the seed phase's budget"}                     // building the build-cache seed on first use: it compiles the standard library
	ProbeBudget      = Budget{D: 2 * time.Minute, Of: "the probe phase's budget"}                     // the mount probe's container
	AcquireBudget    = Budget{D: 10 * time.Minute, Of: "the acquisition's budget", Grace: true}       // downloading the modules of one tree
	CandidatesBudget = Budget{D: 10 * time.Minute, Of: "the candidate listing's budget", Grace: true} // listing and downloading the upgrade candidates
	ScanBudget       = Budget{D: scanner.DefaultScanTimeout, Of: "the scan's budget", Grace: true}    // the vulnerability scan of one tree
	StageBudget      = Budget{D: 10 * time.Minute, Of: "go get's budget", Grace: true}                // maintain: go get of one candidate, in the mutate profile
	TidyBudget       = Budget{D: 10 * time.Minute, Of: "go mod tidy's budget", Grace: true}           // maintain: both go mod tidy runs of one candidate
	ProposalBudget   = Budget{D: 2 * time.Minute, Of: "the proposal's budget"}                        // maintain: the git plumbing of one proposal
	APIDiffBudget    = Budget{D: 3 * time.Minute, Of: "the API diff's budget", Grace: true}           // maintain: go list and go doc of the moved modules' imported packages, old and new
	// Left is no budget of its own: what is left of the deadline (for
	// steps on the host, or whose containers take what is left).
	Left = Budget{Grace: true}
	// Unbounded is no bound at all, for a step whose work is bounded
	// elsewhere: the wait for work that runs beside earlier steps within
	// a budget of its own (inspect's candidate listing), or a step made
	// of steps that have theirs (a maintain attempt).
	Unbounded = Budget{Alone: true}
)

// openBudget covers opening the run past the lock wait: reaping what a
// crashed run left, making the run's directories.
const openBudget = 5 * time.Minute

// lockBudget is the budget of the lock step: the lock wait lockTimeout, then
// opening the run.
func lockBudget(lockTimeout time.Duration) Budget {
	return Budget{D: lockTimeout + openBudget, Of: "-lock-timeout and opening the run"}
}

// Validation is the budget of a validation: -timeout.
func Validation(timeout time.Duration) Budget { return Budget{D: timeout, Of: "-timeout", Grace: true} }

// ErrDeadline matches a *DeadlineError. A step's function returns it
// (wrapped or not) when an in-container timeout it set from the time it
// was given ran out: Do then reports the step as timed out.
var ErrDeadline = errors.New("workflow: out of time")

// DeadlineError says that time ran out during a step: it was too short
// to start (less than validate.MinStep left), or the step's time ran out
// while it ran.
type DeadlineError struct {
	// Step is the step's name, such as "acquire".
	Step string
	// By is what ran out: "the -deadline (1h0m0s)", or the step's own
	// budget when that was less than what was left of the deadline,
	// such as "the acquisition's budget (10m0s)".
	By string
}

func (e *DeadlineError) Error() string { return e.By + " ran out during " + e.Step }

// Is matches ErrDeadline.
func (e *DeadlineError) Is(target error) bool { return target == ErrDeadline }

// Steps runs a workflow's named steps against one deadline, and keeps
// their timings for the report. It is not safe for concurrent use: steps
// run one after another (what runs beside them is not a step).
type Steps struct {
	start    time.Time
	deadline time.Time
	total    time.Duration // the -deadline, as the report names it
	now      func() time.Time
	grace    time.Duration // validate.HostGrace
	log      *slog.Logger
	progress func(step string)
	phases   []report.Phase
	subs     []report.Phase // the current step's own, listed after it
}

// NewSteps starts the clock of a workflow whose steps must all end
// within deadline (the -deadline, positive). log receives each step's
// start at debug level ("phase", with the key "phase"; nil discards);
// progress, when not nil, is called with each step's name as it starts.
func NewSteps(deadline time.Duration, log *slog.Logger, progress func(step string)) *Steps {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := time.Now()
	return &Steps{start: now, deadline: now.Add(deadline), total: deadline, now: time.Now, grace: validate.HostGrace, log: log, progress: progress}
}

// Inner returns Steps for the steps inside one of s's steps (a maintain
// attempt): the same clock, timings of their own, no progress, log for
// their debug lines.
func (s *Steps) Inner(log *slog.Logger) *Steps {
	return &Steps{start: s.now(), deadline: s.deadline, total: s.total, now: s.now, grace: s.grace, log: log}
}

// Left is what is left of the deadline.
func (s *Steps) Left() time.Duration { return s.deadline.Sub(s.now()) }

// Elapsed is the time since the clock started.
func (s *Steps) Elapsed() time.Duration { return s.now().Sub(s.start) }

// Phases are the steps that ran, each followed by its own sub-steps
// (After), in order; never nil.
func (s *Steps) Phases() []report.Phase {
	if s.phases == nil {
		return []report.Phase{}
	}
	return s.phases
}

// After lists the current step's own sub-steps (a validation's
// "validate/list", ...) after it in Phases.
func (s *Steps) After(ps ...report.Phase) { s.subs = append(s.subs, ps...) }

// bound returns how long a step of budget b may take and what bounds it:
// min(b.D, what is left) (b.Alone: b.D), and the words for a report.
func (s *Steps) bound(b Budget) (time.Duration, string) {
	if b.Alone {
		return b.D, fmt.Sprintf("%s (%v)", b.Of, b.D)
	}
	left := s.Left()
	if b.D > 0 && b.D <= left {
		return b.D, fmt.Sprintf("%s (%v)", b.Of, b.D)
	}
	return left, fmt.Sprintf("the -deadline (%v)", s.total)
}

// Do runs fn as the step name, with budget b. fn is given d, the time it
// may take: min(b.D, what is left of the deadline); its context ends
// then, or, for a budget with Grace, validate.HostGrace later (a budget
// that is Alone with no D: fn's context is ctx). Do returns a
// *DeadlineError naming the step and the bound, without calling fn, when
// less than validate.MinStep is left; and instead of fn's error when fn's
// context ran out (not ctx) or fn returned ErrDeadline. Any other error
// of fn's is returned as it is. The step's time goes into Phases, its
// sub-steps after it.
func (s *Steps) Do(ctx context.Context, name string, b Budget, fn func(ctx context.Context, d time.Duration) error) error {
	s.log.Debug("phase", "phase", name)
	if s.progress != nil {
		s.progress(name)
	}
	t := s.now()
	defer func() {
		s.phases = append(s.phases, report.Phase{Name: name, MS: s.now().Sub(t).Milliseconds()})
		s.phases = append(s.phases, s.subs...)
		s.subs = nil
	}()
	d, by := s.bound(b)
	if b.Alone && b.D <= 0 {
		return fn(ctx, 0)
	}
	if d < validate.MinStep {
		s.log.Debug("time ran out", "phase", name, "limit", by)
		return &DeadlineError{Step: name, By: by}
	}
	end := d
	if b.Grace {
		end += s.grace
	}
	sctx, cancel := context.WithTimeout(ctx, end)
	defer cancel()
	err := fn(sctx, d)
	var de *DeadlineError
	switch {
	case err == nil || errors.As(err, &de):
		return err
	case errors.Is(err, ErrDeadline), errors.Is(sctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		s.log.Debug("time ran out", "phase", name, "limit", by, "err", err)
		return &DeadlineError{Step: name, By: by}
	}
	return err
}

// Step is one named step of a list Run runs.
type Step struct {
	Name   string
	Budget Budget
	Do     func(ctx context.Context, d time.Duration) error
	// Skip leaves the step out (a scan without a vulnerability database).
	Skip bool
}

// Run runs the steps in order (Do), each but those skipped, until one
// returns an error, which it returns.
func (s *Steps) Run(ctx context.Context, steps ...Step) error {
	for _, st := range steps {
		if st.Skip {
			continue
		}
		if err := s.Do(ctx, st.Name, st.Budget, st.Do); err != nil {
			return err
		}
	}
	return nil
}
