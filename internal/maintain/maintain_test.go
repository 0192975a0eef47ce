package maintain

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/workflow"
)

// TestMaintain_Fixtures runs maintain on each fixture repository against
// the real engine and checks the outcome and what it names.
func TestMaintain_Fixtures(t *testing.T) {
	for _, tc := range []struct {
		repo    string
		o       Options
		outcome Outcome
		check   func(t *testing.T, r *Report)
	}{
		{"maintain-patch", Options{}, ProposalPrepared, func(t *testing.T, r *Report) {
			a := r.Attempts[0]
			if a.To != "v1.0.1" || a.Proposal == nil || !strings.HasPrefix(a.Proposal.Ref, ProposalRefPrefix) {
				t.Errorf("attempt %+v; want a proposal of greet v1.0.1", a)
			}
			if n := len(a.Timings); n == 0 || a.Timings[n-1].Name != "proposal" {
				t.Errorf("attempt timings %+v; want every step, the proposal last", a.Timings)
			}
			if a.Evidence == nil || a.Evidence.Tree == "" || a.Evidence.ImageID != r.Image.ID {
				t.Errorf("evidence %+v; want the validated tree and the image", a.Evidence)
			}
		}},
		{"maintain-build-break", Options{}, Regressed, func(t *testing.T, r *Report) {
			a := r.Attempts[0]
			if a.To != "v1.1.0" || len(a.Introduced) == 0 || a.Introduced[0].Kind != "build" || a.Proposal != nil {
				t.Errorf("attempt %+v; want brk v1.1.0 regressed with a build finding and no proposal", a)
			}
		}},
		{"maintain-test-break", Options{}, Regressed, func(t *testing.T, r *Report) {
			a := r.Attempts[0]
			if len(a.Introduced) != 1 || a.Introduced[0].Test != "TestPerimeter" {
				t.Fatalf("introduced %+v; want TestPerimeter", a.Introduced)
			}
			if fl := a.Post.Flaky; len(fl) != 1 || !fl[0].Regression || strings.Join(fl[0].After, " ") != "fail fail fail fail" || strings.Join(fl[0].Before, " ") != "pass pass pass pass" {
				t.Errorf("reruns %+v; want fail x4 after, pass x4 before", fl)
			}
		}},
		{"maintain-flaky", Options{}, ProposalPrepared, func(t *testing.T, r *Report) {
			a := r.Attempts[0]
			if fl := a.Post.Flaky; len(fl) != 1 || fl[0].Test != "TestFlaky" || fl[0].Regression {
				t.Fatalf("flaky %+v; want TestFlaky, not a regression", fl)
			}
			if !strings.Contains(a.Proposal.Message, "TestFlaky") {
				t.Errorf("the message does not name the flaky test:\n%s", a.Proposal.Message)
			}
		}},
		// newlang v1.0.1 needs go 1.25: go get raises the module's go
		// 1.24, which the image's go1.26 builds; admitted and said so.
		{"maintain-newlang", Options{}, ProposalPrepared, func(t *testing.T, r *Report) {
			a := r.Attempts[0]
			if g := a.GoRaised; g == nil || g.From != "1.24" || g.To != "1.25" || g.RequiredBy != "stockade.test/newlang" {
				t.Errorf("go raised %+v; want 1.24 => 1.25 required by newlang", g)
			}
			if a.Proposal == nil || !strings.Contains(a.Proposal.Message, "The go line moves from 1.24 to 1.25") {
				t.Errorf("attempt %+v; want a proposal whose message names the raise", a)
			}
		}},
		{"maintain-newlang", Options{Policy: Policy{KeepGo: true}}, AdmissionRefused, func(t *testing.T, r *Report) {
			if a := r.Attempts[0]; a.Rule != RuleGo || a.Module != "stockade.test/newlang" || !strings.Contains(a.Reason, "-keep-go") {
				t.Errorf("attempt refused by %q for %q (%s); want %q for newlang, -keep-go named", a.Rule, a.Module, a.Reason, RuleGo)
			}
		}},
		{"maintain-newer-go", Options{}, RequiresNewerToolchain, nil},
		{"failing-test", Options{}, BaselineFailing, func(t *testing.T, r *Report) {
			if len(r.Attempts) != 0 {
				t.Errorf("attempts %+v; want none", r.Attempts)
			}
		}},
		{"hang", Options{Options: workflow.Options{Timeout: 15 * time.Second}}, BaselineInconclusive, func(t *testing.T, r *Report) {
			if len(r.Attempts) != 0 || !strings.Contains(r.Reason, "timed out") {
				t.Errorf("reason %q; want the baseline's timeout named", r.Reason)
			}
		}},
		{"maintain-current", Options{}, NoCandidate, func(t *testing.T, r *Report) {
			if len(r.Candidates) != 1 || r.Candidates[0].Eligible {
				t.Errorf("candidates %+v; want greet/v2, not eligible", r.Candidates)
			}
		}},
		{"maintain-untidy", Options{}, NormalizationRefused, func(t *testing.T, r *Report) {
			if a := r.Attempts[0]; a.To != "v1.0.1" || a.Rule != RuleDirect || a.Module != "stockade.test/brk" {
				t.Errorf("attempt %s refused by %q for %q; want greet v1.0.1 refused by %q for brk", a.To, a.Rule, a.Module, RuleDirect)
			}
		}},
		// The baseline must pass within the timeout (a few seconds on a quiet
		// machine, over 20 under load); the upgraded tree's test hangs.
		{"maintain-hang", Options{Options: workflow.Options{Timeout: 45 * time.Second}}, ValidationInconclusive, func(t *testing.T, r *Report) {
			if a := r.Attempts[0]; a.Proposal != nil || !strings.Contains(a.Reason, "timed out") {
				t.Errorf("attempt %+v; want no proposal, the timeout named", a)
			}
		}},
		// A proxy that refuses every connection: nothing can be had.
		{"maintain-patch", Options{Options: workflow.Options{Proxy: "http://127.0.0.1:9"}}, AcquisitionFailed, func(t *testing.T, r *Report) {
			if len(r.Attempts) != 0 || !strings.Contains(r.Reason, "could not be downloaded") {
				t.Errorf("reason %q, attempts %+v; want the baseline's acquisition named", r.Reason, r.Attempts)
			}
		}},
		// go.mod has a requirement and no go line: the baseline's
		// acquisition updates it on a staging copy, as inspect's does
		// (inspect says clean), and the proposal carries the update.
		{"no-go-line", Options{}, ProposalPrepared, func(t *testing.T, r *Report) {
			if r.Source == nil || r.Source.Updated == nil || !slices.Contains(r.Source.Updated.Files, "go.mod") {
				t.Errorf("source %+v; want go.mod named as updated", r.Source)
			}
			a := r.Attempts[0]
			if a.Path != "stockade.test/greet" || a.To != "v1.0.1" || a.Proposal == nil || !strings.Contains(a.Proposal.Message, "also updated go.mod") {
				t.Errorf("attempt %+v; want a proposal of greet v1.0.1 that says go.mod was updated", a)
			}
		}},
		// Without -each the candidates are tried in selection order until
		// one passes: brk v1.1.0 regresses (with its evidence), greet
		// v1.1.0 is proposed, nextgo is not tried.
		{"maintain-each", Options{}, ProposalPrepared, func(t *testing.T, r *Report) {
			var got []string
			for _, a := range r.Attempts {
				got = append(got, a.Path+"@"+a.To+" "+string(a.Outcome))
			}
			want := []string{"stockade.test/brk@v1.1.0 regressed", "stockade.test/greet@v1.1.0 proposal_prepared"}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("attempts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if a := r.Attempts[0]; len(a.Introduced) == 0 || a.Evidence == nil || a.Evidence.Tree == "" {
				t.Errorf("the regressed attempt %+v lacks its findings or evidence", a)
			}
			// The API diff names what broke the build, before the tests.
			if a := r.Attempts[0]; !slices.Contains(a.APIChanges, APIChange{Package: "stockade.test/brk", Change: "func Old removed"}) {
				t.Errorf("brk's API changes %+v (%s); want func Old removed", a.APIChanges, a.APINote)
			}
			if a := r.Attempts[1]; len(a.APIChanges) != 0 || a.APINote != "" {
				t.Errorf("greet's API changes %+v (%s); want none", a.APIChanges, a.APINote)
			}
			if a := r.Attempts[1]; a.Proposal == nil || !strings.Contains(a.Why, "tried before it did not pass") {
				t.Errorf("the second attempt %+v; want a proposal saying why it was tried", a)
			}
		}},
		{"maintain-each", Options{Each: true}, ProposalPrepared, func(t *testing.T, r *Report) {
			var got []string
			for _, a := range r.Attempts {
				got = append(got, a.Path+"@"+a.To+" "+string(a.Outcome))
			}
			want := []string{
				"stockade.test/brk@v1.1.0 regressed",
				"stockade.test/greet@v1.1.0 proposal_prepared",
				"stockade.test/nextgo@v0.2.0 requires_newer_toolchain",
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("attempts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}},
		// -group: brk v1.1.0 fails alone; greet, pairone and pairtwo pass
		// alone, but the three together fail TestLevels (the pair
		// conflicts): greet and pairone together pass, pairtwo is named as
		// what breaks the group, and the one proposal has greet and pairone.
		{"maintain-group", Options{Group: true}, ProposalPrepared, func(t *testing.T, r *Report) {
			var got []string
			for _, a := range r.Attempts {
				got = append(got, a.Path+"@"+a.To+" "+string(a.Outcome))
			}
			g := r.Group
			if g == nil {
				t.Fatalf("no group in the report; attempts %v", got)
			}
			for _, a := range g.Tried {
				var m []string
				for _, c := range a.Members {
					m = append(m, c.Path+"@"+c.Version)
				}
				got = append(got, "together "+strings.Join(m, " ")+" "+string(a.Outcome))
			}
			for _, m := range g.Members {
				got = append(got, fmt.Sprintf("%s in=%v %s", m.Path, m.In, m.Why))
			}
			want := []string{
				"stockade.test/brk@v1.1.0 regressed",
				"stockade.test/greet@v1.1.0 passed",
				"stockade.test/pairone@v1.1.0 passed",
				"stockade.test/pairtwo@v1.1.0 passed",
				"together stockade.test/greet@v1.1.0 stockade.test/pairone@v1.1.0 stockade.test/pairtwo@v1.1.0 regressed",
				"together stockade.test/greet@v1.1.0 stockade.test/pairone@v1.1.0 passed",
				"stockade.test/brk in=false failed alone: regressed (attempt 1)",
				"stockade.test/greet in=true passed alone (attempt 2) and together (tried 2)",
				"stockade.test/pairone in=true passed alone (attempt 3) and together (tried 2)",
				"stockade.test/pairtwo in=false breaks the group: regressed together with stockade.test/greet@v1.1.0, stockade.test/pairone@v1.1.0 (tried 1)",
			}
			if len(got) != len(want) {
				t.Fatalf("attempts, combinations and members:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for i := range want {
				if !strings.HasPrefix(got[i], want[i]) {
					t.Errorf("got  %s\nwant %s...", got[i], want[i])
				}
			}
			p := g.Proposal
			if p == nil || !strings.Contains(p.Message, "upgrade 2 direct dependencies together") || !strings.Contains(p.Message, "stockade.test/pairtwo@v1.1.0 left out: breaks the group") {
				t.Fatalf("group proposal %+v; want greet and pairone, pairtwo named as left out", p)
			}
			if tried := g.Tried[1]; tried.Evidence == nil || tried.Evidence.Tree == "" || !strings.Contains(g.Tried[0].Reason, "TestLevels") {
				t.Errorf("combinations %+v; want the passing one's tree and the failing one's evidence naming TestLevels", g.Tried)
			}
		}},
	} {
		t.Run(tc.repo, func(t *testing.T) {
			r, _ := maintainFixture(t, tc.repo, tc.o)
			if r.Outcome != tc.outcome || r.ExitCode != tc.outcome.ExitCode() {
				t.Fatalf("outcome %s (exit %d); want %s", r.Outcome, r.ExitCode, tc.outcome)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}
