package maintain

import (
	"context"
	"slices"
	"testing"

	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/vulndb/vulndbtest"
	"github.com/stockade/stockade/internal/workflow"
)

// TestMaintain_PreferFixes: on maintain-vuln, whose first candidate in
// selection order is greet's patch, -prefer-fixes picks vulnlib v1.1.0,
// which fixes the vulnerability the baseline calls, and the attempt reports
// it fixed, scanned with the same database and scanner as the baseline.
func TestMaintain_PreferFixes(t *testing.T) {
	eng, _, _ := engine(t)
	img, _, err := workflow.SelectImage(context.Background(), eng, workflow.ImageRequest{Directive: "1.24"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := maintainFixture(t, "maintain-vuln", Options{Options: workflow.Options{VulnDB: vulndbtest.Write(t, img.GoVersion)}, PreferFixes: true})
	if rep.Outcome != ProposalPrepared || len(rep.Attempts) != 1 {
		t.Fatalf("outcome %s, %d attempts; want one proposal", rep.Outcome, len(rep.Attempts))
	}
	b := rep.Baseline.Vulns
	if b == nil || b.Status != report.ScanComplete {
		t.Fatalf("baseline scan = %+v; want complete", b)
	}
	var called []string
	for _, v := range b.Called() {
		called = append(called, v.ID)
	}
	if !slices.Equal(called, []string{vulndbtest.CalledFixed}) {
		t.Errorf("baseline calls %v; want [%s]", called, vulndbtest.CalledFixed)
	}
	a := rep.Attempts[0]
	if a.Path != "stockade.test/vulnlib" || a.To != "v1.1.0" {
		t.Fatalf("attempted %s@%s; want stockade.test/vulnlib@v1.1.0 (the first in selection order is greet v1.0.1)", a.Path, a.To)
	}
	var fixed []string
	for _, v := range a.VulnsFixed {
		fixed = append(fixed, v.ID)
	}
	if !slices.Contains(fixed, vulndbtest.CalledFixed) || len(a.VulnsIntroduced) > 0 {
		t.Errorf("fixed %v, introduced %v; want %s fixed and nothing introduced", fixed, a.VulnsIntroduced, vulndbtest.CalledFixed)
	}
	post := a.Post.Vulns
	if post == nil || post.DB != b.DB || post.Scanner != b.Scanner {
		t.Errorf("the candidate was scanned with %+v, the baseline with %+v; want the same database and scanner", post, b)
	}
}

// TestPreferFixes_Order: candidates that fix a called vulnerability of the
// baseline go first, in selection order; nothing moves without a complete
// baseline scan.
func TestPreferFixes_Order(t *testing.T) {
	base := &Validation{Vulns: &report.VulnScan{Status: report.ScanComplete, Vulns: []report.Vuln{
		{ID: "GO-1", Level: report.LevelCalled, Module: "m/a", Fixed: "v1.2.0"},
		{ID: "GO-2", Level: report.LevelImported, Module: "m/b", Fixed: "v1.0.1"},
		{ID: "GO-3", Level: report.LevelCalled, Module: "m/c"},
	}}}
	order := []report.Candidate{
		{Path: "m/b", Version: "v1.0.1", Class: "patch"},
		{Path: "m/c", Version: "v1.1.0", Class: "minor"},
		{Path: "m/a", Version: "v1.1.0", Class: "minor"},
		{Path: "m/a", Version: "v1.2.0", Class: "minor"},
	}
	got := preferFixes(base, order)
	var s []string
	for _, c := range got {
		s = append(s, c.Path+"@"+c.Version)
	}
	if want := []string{"m/a@v1.2.0", "m/b@v1.0.1", "m/c@v1.1.0", "m/a@v1.1.0"}; !slices.Equal(s, want) {
		t.Errorf("preferFixes = %v; want %v", s, want)
	}
	base.Vulns.Status = report.ScanInconclusive
	if got := preferFixes(base, order); !slices.Equal(got, order) {
		t.Errorf("an inconclusive baseline scan reordered the candidates: %v", got)
	}
}

// TestVulnDelta: fixed and introduced by ID; nothing claimed unless both
// scans are complete.
func TestVulnDelta(t *testing.T) {
	scan := func(st report.ScanStatus, ids ...string) *report.VulnScan {
		s := &report.VulnScan{Status: st}
		for _, id := range ids {
			s.Vulns = append(s.Vulns, report.Vuln{ID: id})
		}
		return s
	}
	ok := report.ScanComplete
	fixed, introduced := vulnDelta(scan(ok, "A", "B"), scan(ok, "B", "C"))
	if len(fixed) != 1 || fixed[0].ID != "A" || len(introduced) != 1 || introduced[0].ID != "C" {
		t.Errorf("delta = %v, %v; want [A], [C]", fixed, introduced)
	}
	if f, i := vulnDelta(scan(ok, "A"), scan(report.ScanInconclusive)); f != nil || i != nil {
		t.Errorf("an inconclusive scan gave a delta: %v, %v", f, i)
	}
}
