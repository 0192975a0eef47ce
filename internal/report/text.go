package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// maxFindingsShown bounds the findings printed per check in the text
// report; the JSON report has them all.
const maxFindingsShown = 10

// maxMessageLen bounds one finding's message in the text report, in bytes.
const maxMessageLen = 200

// WriteText writes the report a person reads: verdict first, then the
// module, image, checks with their findings, candidates and timings.
func WriteText(w io.Writer, r *Report) error {
	var b strings.Builder
	mod := r.Module
	if mod == "" {
		mod = r.Dir
	}
	fmt.Fprintf(&b, "%s: %s (exit %d)\n", mod, strings.ToUpper(string(r.Verdict)), r.ExitCode)
	if r.Refusal != nil {
		fmt.Fprintf(&b, "  unsupported (%s): %s\n", r.Refusal.Kind, r.Refusal.Reason)
	}
	if a := r.Acquisition; a != nil {
		fmt.Fprintf(&b, "  acquisition failed: %s\n", a.Reason)
		if len(a.RefusedHosts) > 0 {
			fmt.Fprintf(&b, "  the egress gate refused: %s (only the module proxy's and checksum database's hosts are admitted)\n", strings.Join(a.RefusedHosts, ", "))
		}
		for _, l := range strings.Split(strings.TrimSpace(a.Detail), "\n") {
			if l != "" {
				fmt.Fprintf(&b, "    %s\n", l)
			}
		}
	}
	if r.TimedOut != "" {
		by := r.TimedOutBy
		if by == "" {
			by = "the time"
		}
		fmt.Fprintf(&b, "  timed out: %s ran out during %s\n", by, r.TimedOut)
	}
	if r.Go != "" {
		fmt.Fprintf(&b, "  go %s", r.Go)
		if r.Source != nil {
			fmt.Fprintf(&b, ", %s", sourceText(r.Source))
		}
		b.WriteString("\n")
	}
	if r.Source != nil && r.Source.Updated != nil {
		fmt.Fprintf(&b, "  %s needed updating: the go command changed it to download and load the modules, as go mod download and go test -mod=mod do on your machine: the validated tree has the update, the repository is unchanged\n", strings.Join(r.Source.Updated.Files, " and "))
	}
	if r.Source != nil && r.Source.Uncommitted {
		b.WriteString("  uncommitted changes in the working tree were not validated (-worktree validates them)\n")
	}
	if im := r.Image; im != nil {
		fmt.Fprintf(&b, "  image %s (%s, %s)", im.Ref, shortID(im.ID), im.GoVersion)
		var notes []string
		if im.Local {
			notes = append(notes, "local build")
		}
		switch {
		case im.StandIn && r.Go == "":
			notes = append(notes, fmt.Sprintf("go %s standing in: go.mod has no go line", im.Minor))
		case im.StandIn:
			notes = append(notes, fmt.Sprintf("go %s standing in for go %s", im.Minor, r.Go))
		}
		if im.Built {
			notes = append(notes, "built by this run")
		}
		if len(im.AptPackages) > 0 {
			notes = append(notes, "with "+strings.Join(im.AptPackages, ", "))
		}
		if len(notes) > 0 {
			fmt.Fprintf(&b, " [%s]", strings.Join(notes, "; "))
		}
		b.WriteString("\n")
	}
	if len(r.Egress) > 0 {
		fmt.Fprintf(&b, "  %s\n", EgressLine(r.Egress))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	if r.Vulns != nil {
		writeVulns(&b, r.Vulns)
	}

	if len(r.Checks) > 0 {
		b.WriteString("\nchecks:\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, c := range r.Checks {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Name, c.Status, checkSummary(c))
		}
		tw.Flush()
		for _, c := range r.Checks {
			if len(c.Findings) == 0 {
				continue
			}
			fmt.Fprintf(&b, "\n%s findings (%d):\n", c.Name, len(c.Findings))
			for i, f := range c.Findings {
				if i == maxFindingsShown {
					fmt.Fprintf(&b, "  ... and %d more (see -json)\n", len(c.Findings)-i)
					break
				}
				fmt.Fprintf(&b, "  %s\n", findingText(f))
			}
		}
	}

	scanOnly := r.Vulns != nil && len(r.Checks) == 0
	if r.Refusal == nil && r.Acquisition == nil && !scanOnly {
		b.WriteString("\n")
		switch {
		case r.CandidatesError != "":
			fmt.Fprintf(&b, "candidates: not listed: %s\n", r.CandidatesError)
		case len(r.Candidates) == 0:
			b.WriteString("candidates: none (direct dependencies are current)\n")
		default:
			fmt.Fprintf(&b, "candidates (%d):\n", len(r.Candidates))
			tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
			for _, c := range r.Candidates {
				extra := ""
				if c.RequiresNewerToolchain {
					extra = fmt.Sprintf("requires newer toolchain (go %s)", c.GoVersion)
				}
				fmt.Fprintf(tw, "  %s\t%s -> %s\t%s\t%s\n", c.Path, c.Current, c.Version, c.Class, extra)
			}
			tw.Flush()
		}
		WriteHeldBack(&b, r.HeldBack)
	}

	b.WriteString("\n")
	fmt.Fprintf(&b, "time: %s", ms(r.Timings.TotalMS))
	if len(r.Timings.Phases) > 0 {
		parts := make([]string, len(r.Timings.Phases))
		for i, p := range r.Timings.Phases {
			parts[i] = p.Name + " " + ms(p.MS)
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, trimLines(b.String()))
	return err
}

func sourceText(s *Source) string {
	in := ""
	if s.Subdir != "" {
		in = " of " + s.Subdir + "/"
	}
	switch s.Kind {
	case "commit":
		c := s.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		return "committed tree" + in + " at " + c
	case "worktree":
		return "working tree" + in + " (uncommitted changes included)"
	}
	return "directory (not a git checkout)"
}

func checkSummary(c Check) string {
	var parts []string
	parts = append(parts, c.Reasons...)
	switch c.Name {
	case "list":
		parts = append(parts, plural(c.Packages, "package"))
	case "test":
		if t := c.Tests; t != nil {
			parts = append(parts, fmt.Sprintf("%d passed, %d failed, %d skipped", t.Passed, t.Failed, t.Skipped))
		}
	}
	if len(c.Findings) > 0 {
		parts = append(parts, plural(len(c.Findings), "finding"))
	}
	if c.Status != StatusPass && c.Status != StatusNotRun {
		parts = append(parts, fmt.Sprintf("exit %d", c.ExitCode))
	}
	return strings.Join(parts, "; ")
}

func findingText(f Finding) string {
	var where string
	switch {
	case f.File != "" && f.Line > 0:
		where = fmt.Sprintf("%s:%d", f.File, f.Line)
	case f.File != "":
		where = f.File
	default:
		where = f.Package
	}
	if f.Test != "" {
		where += " " + f.Test
	}
	msg := f.Message
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i] + " ..."
	}
	if len(msg) > maxMessageLen {
		msg = msg[:maxMessageLen] + "..."
	}
	return fmt.Sprintf("%s: %s: %s", f.Kind, where, msg)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}

// WriteHeldBack writes the versions a cooldown held back, one a line,
// with when each ages in; nothing when none was.
func WriteHeldBack(b *strings.Builder, held []HeldBack) {
	if len(held) == 0 {
		return
	}
	fmt.Fprintf(b, "held back by -min-age (%d):\n", len(held))
	for _, h := range held {
		when := h.Reason
		if when == "" {
			when = "published " + h.Published.UTC().Format(time.RFC3339) + ", a candidate from " + h.Until.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(b, "  %s %s -> %s (%s): %s\n", h.Path, h.Current, h.Version, h.Class, when)
	}
}

func ms(n int64) string {
	d := time.Duration(n) * time.Millisecond
	if d < time.Second {
		return d.String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// trimLines removes trailing spaces that tabwriter leaves on lines.
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}
