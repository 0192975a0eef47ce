package workflow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/validate"
)

// stepsAt returns Steps whose clock stands still at now with left of the
// deadline left.
func stepsAt(now time.Time, left time.Duration) *Steps {
	s := NewSteps(time.Hour, nil, nil)
	s.now = func() time.Time { return now }
	s.start, s.deadline = now, now.Add(left)
	return s
}

// TestBudget_Phase: each step gets min(its budget, what is left), a
// budget of zero what is left, and does not start with less than
// validate.MinStep left; what bounds it is named as the report names it.
func TestBudget_Phase(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		left, max time.Duration
		want      time.Duration
		ok        bool
		by        string
	}{
		{time.Hour, 10 * time.Minute, 10 * time.Minute, true, "the x's budget (10m0s)"},
		{5 * time.Minute, 10 * time.Minute, 5 * time.Minute, true, "the -deadline (1h0m0s)"},
		{10 * time.Minute, 10 * time.Minute, 10 * time.Minute, true, "the x's budget (10m0s)"},
		{1500 * time.Millisecond, time.Minute, 1500 * time.Millisecond, true, "the -deadline (1h0m0s)"},
		{500 * time.Millisecond, time.Minute, 500 * time.Millisecond, false, "the -deadline (1h0m0s)"},
		{-time.Minute, time.Minute, -time.Minute, false, "the -deadline (1h0m0s)"},
		{time.Hour, 0, time.Hour, true, "the -deadline (1h0m0s)"}, // no budget of its own: what is left
	} {
		s := stepsAt(now, tc.left)
		s.total = time.Hour
		got, called := time.Duration(0), false
		err := s.Do(context.Background(), "x", Budget{D: tc.max, Of: "the x's budget"}, func(_ context.Context, d time.Duration) error {
			got, called = d, true
			return ErrDeadline // the step's own in-container timeout ran out
		})
		if called != tc.ok || called && got != tc.want {
			t.Errorf("left %v: Do(budget %v) gave %v (called %v); want %v, %v", tc.left, tc.max, got, called, tc.want, tc.ok)
		}
		var de *DeadlineError
		if !errors.As(err, &de) || de.Step != "x" || de.By != tc.by || de.Error() != tc.by+" ran out during x" {
			t.Errorf("left %v, budget %v: Do = %v; want a *DeadlineError naming x and %q", tc.left, tc.max, err, tc.by)
		}
	}
}

// TestDo_Errors: a step's context ends with its time, or, for a budget
// with Grace, validate.HostGrace after it (the in-container timeouts it
// sets end first); its failure because that
// context ran out is a *DeadlineError, matched by ErrDeadline; a failure
// of the caller's context, or any other error, is returned as it is, and
// so is an error that already is a *DeadlineError.
func TestDo_Errors(t *testing.T) {
	errOwn := errors.New("own")
	s := NewSteps(time.Hour, nil, nil)
	ctx := context.Background()

	var dl time.Time
	var hostDL time.Time
	s.Do(ctx, "host", Budget{D: 2 * time.Second, Of: "host's"}, func(ctx context.Context, d time.Duration) error {
		hostDL, _ = ctx.Deadline()
		return nil
	})
	if left := time.Until(hostDL); left > 2*time.Second || left < time.Second {
		t.Errorf("a host step's context ends in %v; want its time", left)
	}
	err := s.Do(ctx, "own", Budget{D: 2 * time.Second, Of: "own's", Grace: true}, func(ctx context.Context, d time.Duration) error {
		dl, _ = ctx.Deadline()
		return errOwn
	})
	if err != errOwn {
		t.Errorf("Do = %v; want fn's own error as it is", err)
	}
	if left := time.Until(dl); left > validate.HostGrace+2*time.Second || left < validate.HostGrace+time.Second {
		t.Errorf("the step's context ends in %v; want its time and validate.HostGrace", left)
	}

	// fn's context ran out: the host gave up on it.
	s = NewSteps(1500*time.Millisecond, nil, nil)
	called := false
	err = s.Do(ctx, "cut", ProbeBudget, func(ctx context.Context, d time.Duration) error {
		called = true
		<-ctx.Done()
		return fmt.Errorf("waiting: %w", ctx.Err())
	})
	if !called || !errors.Is(err, ErrDeadline) || err.Error() != "the -deadline (1.5s) ran out during cut" {
		t.Errorf("Do(cut) = %v (fn called: %v); want the -deadline named", err, called)
	}

	// The caller's context is cancelled: not a deadline.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	s = NewSteps(time.Hour, nil, nil)
	err = s.Do(cctx, "cancelled", Left, func(ctx context.Context, _ time.Duration) error { return ctx.Err() })
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrDeadline) {
		t.Errorf("Do(cancelled) = %v; want context.Canceled, not a deadline", err)
	}

	// A deadline of an inner step names the inner step.
	inner := &DeadlineError{Step: "stage", By: "go get's budget (10m0s)"}
	if err := s.Do(ctx, "attempt", Unbounded, func(context.Context, time.Duration) error { return inner }); err != inner {
		t.Errorf("Do(attempt) = %v; want the inner step's %v", err, inner)
	}

	// A lock the step's time cut short is time running out.
	err = s.Do(ctx, "lock", lockBudget(10*time.Minute), func(_ context.Context, d time.Duration) error {
		return lockCut(&toolchain.LockedError{}, d/2, d)
	})
	if !errors.As(err, new(*DeadlineError)) || err.Error() != "-lock-timeout and opening the run (15m0s) ran out during lock" {
		t.Errorf("Do(lock) = %v; want -lock-timeout and opening the run named", err)
	}
	if err := lockCut(&toolchain.LockedError{}, time.Minute, time.Minute); errors.Is(err, ErrDeadline) || !errors.Is(err, toolchain.ErrLocked) {
		t.Errorf("lockCut(a full wait) = %v; want the lock's error", err)
	}
}

// TestDo_CheckRunsWhateverIsLeft: the layout check's budget is its own:
// with the deadline spent it still runs, for its budget, so a refusal is
// reported; the next step does not start.
func TestDo_CheckRunsWhateverIsLeft(t *testing.T) {
	now := time.Now()
	s := stepsAt(now, -time.Minute)
	var got time.Duration
	if err := s.Do(context.Background(), "check", CheckBudget, func(_ context.Context, d time.Duration) error { got = d; return nil }); err != nil || got != CheckBudget.D {
		t.Errorf("Do(check) with the deadline spent = %v, given %v; want it run with %v", err, got, CheckBudget.D)
	}
	err := s.Do(context.Background(), "image", ImageBudget, func(context.Context, time.Duration) error { t.Error("image ran"); return nil })
	if !errors.Is(err, ErrDeadline) {
		t.Errorf("Do(image) with the deadline spent = %v; want ErrDeadline", err)
	}
}

// TestRun_Phases: Run runs the steps in order, leaves out the skipped,
// stops at the first error; each step's own sub-steps follow it; the
// progress callback sees each step start.
func TestRun_Phases(t *testing.T) {
	var started []string
	s := NewSteps(time.Hour, nil, func(step string) { started = append(started, step) })
	stop := errors.New("stop")
	nop := func(context.Context, time.Duration) error { return nil }
	err := s.Run(context.Background(),
		Step{Name: "a", Do: nop},
		Step{Name: "skipped", Do: nop, Skip: true},
		Step{Name: "validate", Do: func(context.Context, time.Duration) error {
			s.After(report.Phase{Name: "validate/list"}, report.Phase{Name: "validate/test"})
			return nil
		}},
		Step{Name: "b", Do: func(context.Context, time.Duration) error { return stop }},
		Step{Name: "c", Do: nop},
	)
	if err != stop {
		t.Errorf("Run = %v; want the error that stopped it", err)
	}
	var names []string
	for _, p := range s.Phases() {
		names = append(names, p.Name)
	}
	if want := []string{"a", "validate", "validate/list", "validate/test", "b"}; !slices.Equal(names, want) || !slices.Equal(started, []string{"a", "validate", "b"}) {
		t.Errorf("phases %v, started %v; want %v", names, started, want)
	}
}
