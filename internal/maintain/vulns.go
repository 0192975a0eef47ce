package maintain

import (
	"fmt"
	"strings"

	"golang.org/x/mod/semver"

	"github.com/stockade/stockade/internal/report"
)

// fixesCalled returns the IDs of the baseline's called vulnerabilities in
// module c.Path that version c.Version fixes (it is at or past the fixed
// version); none without a complete baseline scan.
func fixesCalled(base *Validation, c report.Candidate) []string {
	if base == nil || base.Vulns == nil || base.Vulns.Status != report.ScanComplete {
		return nil
	}
	var ids []string
	for _, v := range base.Vulns.Called() {
		if v.Module == c.Path && v.Fixed != "" && semver.Compare(c.Version, v.Fixed) >= 0 {
			ids = append(ids, v.ID)
		}
	}
	return ids
}

// preferFixes moves the candidates that fix a called vulnerability of the
// baseline to the front, keeping the selection order within each group.
func preferFixes(base *Validation, order []report.Candidate) []report.Candidate {
	var fix, rest []report.Candidate
	for _, c := range order {
		if len(fixesCalled(base, c)) > 0 {
			fix = append(fix, c)
		} else {
			rest = append(rest, c)
		}
	}
	return append(fix, rest...)
}

// vulnDelta returns the vulnerabilities the baseline has and the upgraded
// tree has not (fixed), and those the upgraded tree has and the baseline
// has not (introduced), by ID. Both scans must be complete; otherwise
// nothing is claimed.
func vulnDelta(before, after *report.VulnScan) (fixed, introduced []report.Vuln) {
	if before == nil || after == nil || before.Status != report.ScanComplete || after.Status != report.ScanComplete {
		return nil, nil
	}
	in := func(s *report.VulnScan) map[string]bool {
		m := map[string]bool{}
		for _, v := range s.Vulns {
			m[v.ID] = true
		}
		return m
	}
	was, is := in(before), in(after)
	for _, v := range before.Vulns {
		if !is[v.ID] {
			fixed = append(fixed, v)
		}
	}
	for _, v := range after.Vulns {
		if !was[v.ID] {
			introduced = append(introduced, v)
		}
	}
	return fixed, introduced
}

// vulnLine summarizes a scan for the text report.
func vulnLine(s *report.VulnScan) string {
	if s.Status != report.ScanComplete {
		return "inconclusive: " + strings.Join(s.Reasons, "; ")
	}
	called := s.Called()
	var ids []string
	for _, v := range called {
		ids = append(ids, v.ID)
	}
	line := "no called vulnerability"
	if len(ids) > 0 {
		line = "called: " + strings.Join(ids, ", ")
	}
	if n := len(s.Vulns) - len(called); n > 0 {
		line += fmt.Sprintf("; %d other(s) imported or required", n)
	}
	return line
}

func ids(vs []report.Vuln) string {
	var s []string
	for _, v := range vs {
		s = append(s, v.ID+" ("+string(v.Level)+")")
	}
	return strings.Join(s, ", ")
}
