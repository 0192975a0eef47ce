package maintain

import (
	"context"
	"fmt"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/validate"
	"github.com/stockade/stockade/internal/workflow"
)

// tryGroup is -group: every eligible candidate is validated alone against
// the one baseline (attempt, without a proposal of its own); the group is
// the set that passed, validated together once more. When the group does
// not pass, what breaks it is found by growing a subset in selection
// order: each member is added to the last subset that passed and left out
// when the combination fails, so every member left out is named with the
// combination whose evidence shows it. The one proposal holds the members
// in. N candidates cost N validations and one more when the group passes;
// at most N-2 more when it does not.
func (x *run) tryGroup(ctx context.Context) error {
	more := func() bool { return x.steps.Left() >= validate.MinStep }
	tries := make([]*try, len(x.order))
	var err error
	x.attempts, err = tryInOrder(x.order, true, more, func(c report.Candidate, i int) (a Attempt, err error) {
		name := "attempt " + c.Path + "@" + c.Version
		err = x.steps.Do(ctx, name, workflow.Unbounded, func(ctx context.Context, _ time.Duration) error {
			if a, tries[i], err = x.attempt(ctx, c, i); err != nil {
				return err
			}
			return x.takeEgress(ctx, name)
		})
		return a, err
	})
	if err != nil {
		return err
	}
	g := &Group{Members: make([]Member, len(x.order)), Tried: []Attempt{}}
	x.group = g
	var passed []int // indexes into x.order
	for i, c := range x.order {
		g.Members[i] = Member{Path: c.Path, From: c.Current, To: c.Version, Class: c.Class}
		switch {
		case i >= len(x.attempts):
			g.Members[i].Why = "not tried: the -deadline ran out first"
		case x.attempts[i].Outcome == Passed:
			passed = append(passed, i)
		default:
			a := x.attempts[i]
			g.Members[i].Why = fmt.Sprintf("failed alone: %s (attempt %d): %s", a.Outcome, i+1, a.Reason)
		}
	}
	// One version of a module: of those that passed alone, the highest.
	passed = highestOfEach(x.order, passed, func(i, higher int) {
		g.Members[i].Why = fmt.Sprintf("passed alone (attempt %d); superseded by %s@%s, which also passed alone", i+1, x.order[higher].Path, x.order[higher].Version)
	})
	if len(passed) == 0 {
		return nil
	}

	// The group, then, if it fails, growing subsets.
	in := passed[:1]
	last := tries[passed[0]] // the last validated set that passed: in
	lastTried := 0           // its number in g.Tried; 0: its own attempt
	var fullFailed *Attempt
	tried := func(set []int, why string) (*Attempt, *try, error) {
		a, t, err := x.together(ctx, set, why)
		if err != nil {
			return nil, nil, err
		}
		g.Tried = append(g.Tried, a)
		return &g.Tried[len(g.Tried)-1], t, nil
	}
	if len(passed) > 1 {
		a, t, err := tried(passed, "every candidate that passed alone")
		if err != nil {
			return err
		}
		switch a.Outcome {
		case Passed:
			in, last, lastTried = passed, t, 1
		case ValidationInconclusive:
			for _, i := range passed {
				g.Members[i].Why = fmt.Sprintf("passed alone; the group's validation is inconclusive (tried %d): nothing is claimed", len(g.Tried))
			}
			return nil
		default:
			fullFailed = a
			for _, i := range passed[1:] {
				set := append(append([]int{}, in...), i)
				if len(set) == len(passed) {
					// The whole group: known to fail.
					g.Members[i].Why = fmt.Sprintf("breaks the group: %s together with %s (tried 1): %s", fullFailed.Outcome, x.names(in), fullFailed.Reason)
					continue
				}
				if !more() {
					g.Members[i].Why = "passed alone; not tried in the group: the -deadline ran out first"
					continue
				}
				a, t, err := tried(set, "the last combination that passed, and "+x.order[i].Path+"@"+x.order[i].Version)
				if err != nil {
					return err
				}
				switch a.Outcome {
				case Passed:
					in, last, lastTried = set, t, len(g.Tried)
				case ValidationInconclusive:
					g.Members[i].Why = fmt.Sprintf("passed alone; inconclusive together with %s (tried %d): left out", x.names(in), len(g.Tried))
				default:
					g.Members[i].Why = fmt.Sprintf("breaks the group: %s together with %s (tried %d): %s", a.Outcome, x.names(in), len(g.Tried), a.Reason)
				}
			}
		}
	}
	for _, i := range in {
		g.Members[i].In = true
		g.Members[i].Why = fmt.Sprintf("passed alone (attempt %d)", i+1)
		if lastTried > 0 {
			g.Members[i].Why = fmt.Sprintf("passed alone (attempt %d) and together (tried %d)", i+1, lastTried)
		}
	}
	// The proposal of the set in, from its validated tree.
	last.a.Why = x.groupWhy(g)
	err = x.steps.Do(ctx, "group/proposal", workflow.ProposalBudget, func(ctx context.Context, _ time.Duration) error {
		if err := last.propose(ctx, 0); err != nil {
			return err
		}
		g.Proposal = last.a.Proposal
		return nil
	})
	return err
}

// together validates the candidates set (indexes into x.order) together:
// one attempt whose targets are all of them, without a proposal.
func (x *run) together(ctx context.Context, set []int, why string) (Attempt, *try, error) {
	a := Attempt{Class: "group", Why: why}
	var targets []module.Version
	for _, i := range set {
		c := x.order[i]
		a.Members = append(a.Members, c)
		targets = append(targets, module.Version{Path: c.Path, Version: c.Version})
	}
	t := &try{run: x, a: &a, targets: targets}
	name := "group " + t.what()
	err := x.steps.Do(ctx, name, workflow.Unbounded, func(ctx context.Context, _ time.Duration) error {
		if err := x.runTry(ctx, t, false); err != nil {
			return err
		}
		return x.takeEgress(ctx, name)
	})
	return a, t, err
}

// highestOfEach keeps, of the candidates set (indexes into order), the
// highest version of each module path, in set's order, and calls
// superseded for each one left out, with the one kept.
func highestOfEach(order []report.Candidate, set []int, superseded func(i, higher int)) []int {
	best := map[string]int{}
	for _, i := range set {
		if b, ok := best[order[i].Path]; !ok || semver.Compare(order[i].Version, order[b].Version) > 0 {
			best[order[i].Path] = i
		}
	}
	var out []int
	for _, i := range set {
		if b := best[order[i].Path]; b == i {
			out = append(out, i)
		} else {
			superseded(i, b)
		}
	}
	return out
}

// names lists the candidates set (indexes into x.order) as path@version.
func (x *run) names(set []int) string {
	var s []string
	for _, i := range set {
		s = append(s, x.order[i].Path+"@"+x.order[i].Version)
	}
	return strings.Join(s, ", ")
}

// groupWhy is the proposal's "why" of a group: which members are in, and
// which were left out and why.
func (x *run) groupWhy(g *Group) string {
	var out []string
	for _, m := range g.Members {
		if !m.In {
			out = append(out, m.Path+"@"+m.To+" left out: "+m.Why)
		}
	}
	why := "-group: each eligible candidate validated alone against the parent, then together"
	if len(out) > 0 {
		why += ";\n" + strings.Join(out, ";\n")
	}
	return why
}
