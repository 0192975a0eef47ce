package maintain

import (
	"fmt"
	"io"
	"strings"

	"github.com/stockade/stockade/internal/report"
)

// WriteText writes the report a person reads: the outcome first, then
// the baseline, each attempt with what moved and what it found, and the
// proposal with the commands to look at and apply it.
func WriteText(w io.Writer, r *Report) error {
	var b strings.Builder
	mod := r.Module
	if mod == "" {
		mod = r.Dir
	}
	fmt.Fprintf(&b, "%s: %s (exit %d)\n", mod, strings.ToUpper(string(r.Outcome)), r.ExitCode)
	if r.Reason != "" {
		fmt.Fprintf(&b, "  %s\n", r.Reason)
	}
	for _, f := range r.Uncommitted {
		fmt.Fprintf(&b, "  uncommitted: %s\n", f)
	}
	if r.Source != nil && r.Source.Commit != "" {
		in := ""
		if r.Source.Subdir != "" {
			in = ", module in " + r.Source.Subdir + "/"
		}
		fmt.Fprintf(&b, "  go %s, commit %s%s\n", r.Go, short(r.Source.Commit), in)
	}
	if r.Source != nil && r.Source.Updated != nil {
		fmt.Fprintf(&b, "  %s needed updating to download the modules, as the go command does at home: the baseline and the proposal carry it\n", strings.Join(r.Source.Updated.Files, " and "))
	}
	if im := r.Image; im != nil {
		fmt.Fprintf(&b, "  image %s (%s, %s)\n", im.Ref, short(strings.TrimPrefix(im.ID, "sha256:")), im.GoVersion)
	}
	if len(r.Egress) > 0 {
		fmt.Fprintf(&b, "  %s\n", report.EgressLine(r.Egress))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	if r.Baseline != nil {
		fmt.Fprintf(&b, "\nbaseline: %s\n", checksLine(r.Baseline))
		for _, fl := range r.Baseline.Flaky {
			fmt.Fprintf(&b, "  flaky: %s %s (%s)\n", fl.Package, fl.Test, strings.Join(fl.Before, " "))
		}
		if v := r.Baseline.Vulns; v != nil {
			fmt.Fprintf(&b, "  vulnerabilities: %s\n", vulnLine(v))
		}
	}
	if len(r.Candidates) > 0 {
		b.WriteString("\ncandidates:\n")
		for _, c := range r.Candidates {
			state := "eligible"
			if c.RequiresNewerToolchain {
				state += ", needs go " + c.GoVersion
			}
			if !c.Eligible {
				state = c.Why
			}
			fmt.Fprintf(&b, "  %s %s -> %s (%s): %s\n", c.Path, c.Current, c.Version, c.Class, state)
		}
	}
	if len(r.HeldBack) > 0 {
		b.WriteString("\n")
		report.WriteHeldBack(&b, r.HeldBack)
	}
	for _, a := range r.Attempts {
		writeAttempt(&b, a)
	}
	if g := r.Group; g != nil {
		b.WriteString("\ngroup (-group):\n")
		for _, m := range g.Members {
			state := "out"
			if m.In {
				state = "in"
			}
			fmt.Fprintf(&b, "  %s %s %s -> %s: %s\n", state, m.Path, m.From, m.To, m.Why)
		}
		for i, a := range g.Tried {
			fmt.Fprintf(&b, "\ntried %d:", i+1)
			writeAttempt(&b, a)
		}
		if p := g.Proposal; p != nil {
			fmt.Fprintf(&b, "\ngroup proposal %s at %s\n", p.Commit, p.Ref)
			if p.Branch != "" {
				fmt.Fprintf(&b, "  branch %s\n", p.Branch)
			}
			for _, c := range p.Commands {
				fmt.Fprintf(&b, "    %s\n", c)
			}
		}
	}
	fmt.Fprintf(&b, "\ntime %.1fs\n", float64(r.Timings.TotalMS)/1000)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeAttempt writes one attempt, or one combination of a group.
func writeAttempt(b *strings.Builder, a Attempt) {
	head := a.Path + " " + a.From + " -> " + a.To
	if len(a.Members) > 0 {
		var m []string
		for _, c := range a.Members {
			m = append(m, c.Path+" "+c.Current+" -> "+c.Version)
		}
		head = "together: " + strings.Join(m, ", ")
	}
	fmt.Fprintf(b, "\n%s: %s\n", head, strings.ToUpper(string(a.Outcome)))
	if link := orText(a.Compare, a.Repo); link != "" {
		fmt.Fprintf(b, "  changes: %s\n", link)
	}
	if a.Reason != "" {
		fmt.Fprintf(b, "  %s\n", a.Reason)
	}
	if a.Rule != "" {
		fmt.Fprintf(b, "  rule %s, module %s\n", a.Rule, a.Module)
	}
	for _, l := range strings.Split(strings.TrimSpace(a.Detail), "\n") {
		if l != "" {
			fmt.Fprintf(b, "    %s\n", l)
		}
	}
	for _, m := range a.Moved {
		fmt.Fprintf(b, "  moved %s %s => %s\n", m.Path, orNone(m.From), orNone(m.To))
	}
	for _, c := range a.APIChanges {
		fmt.Fprintf(b, "  api %s: %s\n", c.Package, c.Change)
	}
	if a.APINote != "" {
		fmt.Fprintf(b, "  api: %s\n", a.APINote)
	}
	if g := a.GoRaised; g != nil {
		fmt.Fprintf(b, "  go line %s => %s, required by %s (validated with the image's Go; -keep-go refuses it)\n", orNone(g.From), g.To, g.RequiredBy)
	}
	if a.Post != nil {
		fmt.Fprintf(b, "  after: %s\n", checksLine(a.Post))
		for _, fl := range a.Post.Flaky {
			what := "flaky"
			if fl.Regression {
				what = "regression"
			}
			fmt.Fprintf(b, "  %s: %s %s (before %s; after %s)\n", what, fl.Package, fl.Test, strings.Join(fl.Before, " "), strings.Join(fl.After, " "))
		}
	}
	for _, f := range a.Introduced {
		fmt.Fprintf(b, "  introduced %s\n", describeFindings([]report.Finding{f}))
	}
	if a.Post != nil && a.Post.Vulns != nil {
		fmt.Fprintf(b, "  vulnerabilities after: %s\n", vulnLine(a.Post.Vulns))
	}
	if len(a.VulnsFixed) > 0 {
		fmt.Fprintf(b, "  fixes %s\n", ids(a.VulnsFixed))
	}
	if len(a.VulnsIntroduced) > 0 {
		fmt.Fprintf(b, "  introduces vulnerabilities %s\n", ids(a.VulnsIntroduced))
	}
	if p := a.Proposal; p != nil {
		fmt.Fprintf(b, "  proposal %s at %s\n", p.Commit, p.Ref)
		if p.Branch != "" {
			fmt.Fprintf(b, "  branch %s\n", p.Branch)
		}
		for _, c := range p.Commands {
			fmt.Fprintf(b, "    %s\n", c)
		}
	}
}

func checksLine(v *Validation) string {
	var s []string
	for _, c := range v.Checks {
		t := c.Name + " " + string(c.Status)
		if c.Tests != nil {
			t += fmt.Sprintf(" (%d passed, %d failed, %d skipped)", c.Tests.Passed, c.Tests.Failed, c.Tests.Skipped)
		} else if n := len(c.Findings); n > 0 {
			t += fmt.Sprintf(" (%d findings)", n)
		}
		s = append(s, t)
	}
	return strings.Join(s, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
