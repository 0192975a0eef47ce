package maintain

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/stockade/stockade/internal/report"
)

// TestTryInOrder: without -each the candidates are tried in order until
// one prepares a proposal, at most maxTries, and none once the deadline
// leaves no time; with -each every one is tried.
func TestTryInOrder(t *testing.T) {
	order := make([]report.Candidate, maxTries+3)
	for i := range order {
		order[i] = report.Candidate{Path: fmt.Sprintf("m%d", i), Version: "v1.0.1"}
	}
	outcomes := func(pass int) func(report.Candidate, int) (Attempt, error) {
		return func(c report.Candidate, tried int) (Attempt, error) {
			if c.Path != order[tried].Path {
				t.Fatalf("try %d got %s; want %s", tried, c.Path, order[tried].Path)
			}
			if tried == pass {
				return Attempt{Path: c.Path, Outcome: ProposalPrepared}, nil
			}
			return Attempt{Path: c.Path, Outcome: Regressed}, nil
		}
	}
	always := func() bool { return true }
	for _, tc := range []struct {
		name string
		each bool
		pass int // which try passes; -1 none
		more func() bool
		want int // attempts made
		out  Outcome
	}{
		{"the first passes", false, 0, always, 1, ProposalPrepared},
		{"the third passes", false, 2, always, 3, ProposalPrepared},
		{"none passes: bounded", false, -1, always, maxTries, Regressed},
		{"one past the bound would pass", false, maxTries, always, maxTries, Regressed},
		{"no time left after the first", false, 2, func() bool { return false }, 1, Regressed},
		{"each tries every one", true, 0, always, len(order), ProposalPrepared},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tryInOrder(order, tc.each, tc.more, outcomes(tc.pass))
			if err != nil || len(got) != tc.want {
				t.Fatalf("tryInOrder = %d attempts, %v; want %d", len(got), err, tc.want)
			}
			r := &Report{Attempts: got}
			r.finish(0, tc.each)
			if r.Outcome != tc.out {
				t.Errorf("outcome %s; want %s", r.Outcome, tc.out)
			}
		})
	}
}

// TestFinish_TriesUntilOneProposes: without -each an earlier attempt that
// was inconclusive does not hide the proposal a later one prepared; with
// -each an inconclusive attempt makes the run inconclusive.
func TestFinish_TriesUntilOneProposes(t *testing.T) {
	attempts := []Attempt{{Outcome: ValidationInconclusive}, {Outcome: ProposalPrepared}}
	r := &Report{Attempts: attempts}
	r.finish(0, false)
	if r.Outcome != ProposalPrepared || r.ExitCode != 0 {
		t.Errorf("tries: outcome %s (exit %d); want proposal_prepared (0)", r.Outcome, r.ExitCode)
	}
	r = &Report{Attempts: attempts}
	r.finish(0, true)
	if r.Outcome != ValidationInconclusive {
		t.Errorf("-each: outcome %s; want validation_inconclusive", r.Outcome)
	}
}

// TestFinish_Group: with -group, as with -each, an inconclusive attempt
// or combination makes the run inconclusive; else the group's proposal
// decides; otherwise the members' own outcomes do, "passed" never being
// the run's.
func TestFinish_Group(t *testing.T) {
	for _, tc := range []struct {
		name     string
		attempts []Outcome
		tried    []Outcome
		proposal bool
		want     Outcome
	}{
		{"proposed", []Outcome{Regressed, Passed, Passed}, []Outcome{Regressed, Passed}, true, ProposalPrepared},
		{"group inconclusive", []Outcome{Passed, Passed}, []Outcome{ValidationInconclusive}, false, ValidationInconclusive},
		{"none passed alone", []Outcome{Regressed, AdmissionRefused}, nil, false, Regressed},
		{"passed, no proposal", []Outcome{Passed, Regressed}, nil, false, Regressed},
		{"only passed, no proposal", []Outcome{Passed}, nil, false, ValidationInconclusive},
		{"a member inconclusive alone", []Outcome{ValidationInconclusive, Passed}, nil, true, ValidationInconclusive},
		{"a growing combination inconclusive", []Outcome{Passed, Passed, Passed}, []Outcome{Regressed, ValidationInconclusive}, true, ValidationInconclusive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Group: &Group{}}
			for _, o := range tc.attempts {
				r.Attempts = append(r.Attempts, Attempt{Outcome: o})
			}
			for _, o := range tc.tried {
				r.Group.Tried = append(r.Group.Tried, Attempt{Outcome: o})
			}
			if tc.proposal {
				r.Group.Proposal = &Proposal{Commit: "c"}
			}
			r.finish(0, true)
			if r.Outcome != tc.want || r.ExitCode != tc.want.ExitCode() {
				t.Errorf("outcome %s (exit %d); want %s", r.Outcome, r.ExitCode, tc.want)
			}
		})
	}
}

// TestHighestOfEach: a group holds one version of a module, the highest
// that passed alone; the others are named as superseded.
func TestHighestOfEach(t *testing.T) {
	order := []report.Candidate{
		{Path: "github.com/spf13/pflag", Version: "v1.0.10", Class: "patch"},
		{Path: "example.com/a", Version: "v1.2.0", Class: "minor"},
		{Path: "github.com/spf13/pflag", Version: "v1.1.0", Class: "minor"},
	}
	var out []string
	got := highestOfEach(order, []int{0, 1, 2}, func(i, higher int) {
		out = append(out, order[i].Version+" by "+order[higher].Version)
	})
	if !reflect.DeepEqual(got, []int{1, 2}) || !reflect.DeepEqual(out, []string{"v1.0.10 by v1.1.0"}) {
		t.Errorf("highestOfEach = %v, superseded %v; want [1 2], [v1.0.10 by v1.1.0]", got, out)
	}
}
