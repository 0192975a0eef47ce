package maintain

import (
	"strings"
	"testing"
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
