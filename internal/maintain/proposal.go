package maintain

import (
	"context"
	"fmt"
	"strings"

	"github.com/stockade/stockade/internal/report"
)

// proposalIDLen is how many hex digits of the commit ID name its ref.
const proposalIDLen = 12

// propose makes the proposal commit of attempt a from the recipe (the
// validated commit, the tidied manifests, the configured identity and the
// message), stores it under refs/stockade/proposals/<id> (and Branch),
// and returns it with its tree's ID.
func (x *run) propose(ctx context.Context, a *Attempt, ms manifests, post []report.Check) (*Proposal, string, error) {
	msg := x.message(a, post)
	commit, tree, err := x.git.commit(ctx, recipe{parent: x.p.Snapshot.Commit, goMod: ms.goMod, goSum: ms.goSum, who: x.o.identity(), message: msg})
	if err != nil {
		return nil, "", err
	}
	ref, err := x.git.store(ctx, commit[:proposalIDLen], commit, x.o.Branch)
	if err != nil {
		return nil, "", err
	}
	p := &Proposal{Commit: commit, Ref: ref, Branch: x.o.Branch, Message: msg, Commands: []string{
		"git show " + ref,
		"git diff HEAD " + ref + " -- go.mod go.sum",
		"git merge --ff-only " + ref,
	}}
	return p, tree, nil
}

// message is the proposal's commit message, ready for a pull request:
// what moved, why this candidate, what was validated with which image,
// and the test counts before and after. It holds nothing that differs
// between machines or runs.
func (x *run) message(a *Attempt, post []report.Check) string {
	var b strings.Builder
	if len(a.Members) > 0 {
		fmt.Fprintf(&b, "deps: upgrade %d direct dependencies together\n\n", len(a.Members))
		for _, m := range a.Members {
			fmt.Fprintf(&b, "  %s %s => %s (%s)\n", m.Path, m.Current, m.Version, m.Class)
			if link := orText(m.Compare, m.Repo); link != "" {
				fmt.Fprintf(&b, "    %s\n", link)
			}
		}
		fmt.Fprintf(&b, "\nWhy these: %s.\n\n", a.Why)
	} else {
		fmt.Fprintf(&b, "deps: upgrade %s from %s to %s\n\n", a.Path, a.From, a.To)
		fmt.Fprintf(&b, "A %s upgrade of a direct dependency.\nWhy this one: %s.\n", a.Class, a.Why)
		if a.Repo != "" {
			fmt.Fprintf(&b, "Repository: %s\n", a.Repo)
		}
		if a.Compare != "" {
			fmt.Fprintf(&b, "Changes: %s\n", a.Compare)
		}
		b.WriteString("\n")
	}
	if len(a.VulnsFixed) > 0 {
		var ids []string
		for _, v := range a.VulnsFixed {
			ids = append(ids, v.ID+" ("+string(v.Level)+")")
		}
		fmt.Fprintf(&b, "Fixes vulnerabilities: %s\n\n", strings.Join(ids, ", "))
	}
	b.WriteString("Requirements changed:\n")
	for _, m := range a.Moved {
		kind := "indirect"
		if m.Direct {
			kind = "direct"
		}
		fmt.Fprintf(&b, "  %s %s => %s (%s)\n", m.Path, orNone(m.From), orNone(m.To), kind)
	}
	if len(a.APIChanges) > 0 {
		b.WriteString("\nIncompatible API changes of the packages this module imports\n(go doc of the old and the new version, before any test ran):\n")
		for _, c := range a.APIChanges {
			fmt.Fprintf(&b, "  %s: %s\n", c.Package, c.Change)
		}
	}
	if g := a.GoRaised; g != nil {
		fmt.Fprintf(&b, "\nThe go line moves from %s to %s: %s requires it (go get raises it so).\nThe upgraded tree was validated with %s, which builds go %s.\n", orNone(g.From), g.To, g.RequiredBy, x.p.Image.GoVersion, g.To)
	}
	if u := x.p.Acquired.Updated; u != nil {
		fmt.Fprintf(&b, "\nThe go command also updated %s to download the modules, as it\ndoes on a developer's machine; both validations and this commit carry it.\n", strings.Join(u.Files, " and "))
	}
	b.WriteString("\nValidated by stockade maintain without trusting the repository:\n" +
		"go list, build, vet and test of the parent commit (before) and of\n" +
		"this tree (after), each in a fresh container without network.\n")
	fmt.Fprintf(&b, "Parent: %s\nImage: %s (%s)\n", x.p.Snapshot.Commit, x.p.Image.ID, x.p.Image.GoVersion)
	fmt.Fprintf(&b, "Tests before: %s\nTests after:  %s\n", testCounts(x.base.Checks), testCounts(post))
	var flaky []string
	for _, fl := range append(append([]Flake{}, x.base.Flaky...), a.postFlakes()...) {
		flaky = append(flaky, fl.Package+" "+fl.Test)
	}
	if len(flaky) > 0 {
		fmt.Fprintf(&b, "Flaky, not blocking (changed their mind when rerun alone): %s\n", strings.Join(dedupe(flaky), ", "))
	}
	fmt.Fprintf(&b, "\nStockade-Config: %s\n", hashOf(x.config))
	return b.String()
}

func (a *Attempt) postFlakes() []Flake {
	if a.Post == nil {
		return nil
	}
	var out []Flake
	for _, fl := range a.Post.Flaky {
		if !fl.Regression {
			out = append(out, fl)
		}
	}
	return out
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// testCounts sums the test check's counts.
func testCounts(checks []report.Check) string {
	for _, c := range checks {
		if c.Name == "test" && c.Tests != nil {
			return fmt.Sprintf("%d passed, %d failed, %d skipped", c.Tests.Passed, c.Tests.Failed, c.Tests.Skipped)
		}
	}
	return "none counted"
}
