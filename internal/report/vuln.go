package report

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Vulnerable is the verdict of `stockade scan`, and of `stockade inspect
// -vulndb` whose checks all passed, when a called vulnerability was found:
// the module's code reaches a vulnerable symbol. Its exit code is 3.
const Vulnerable Verdict = "vulnerable"

// Level is how far a vulnerability reaches the module, strongest first.
type Level string

// Levels.
const (
	// Called: the module's code calls a vulnerable symbol (a call trace
	// shows how).
	LevelCalled Level = "called"
	// Imported: a vulnerable package is imported, no vulnerable symbol is
	// reached.
	LevelImported Level = "imported"
	// Required: a vulnerable module version is required, none of its
	// vulnerable packages is imported (or the advisory names no package).
	LevelRequired Level = "required"
)

// Rank orders levels: called 3, imported 2, required 1, anything else 0.
func (l Level) Rank() int {
	switch l {
	case LevelCalled:
		return 3
	case LevelImported:
		return 2
	case LevelRequired:
		return 1
	}
	return 0
}

// ScanStatus says whether a scan's answer can be trusted.
type ScanStatus string

// Scan statuses.
const (
	// ScanComplete: the scanner finished and its stream was read whole.
	ScanComplete ScanStatus = "complete"
	// ScanInconclusive: the stream was cut short, unreadable or the
	// scanner failed; the vulnerabilities listed are what was read, and
	// their absence proves nothing.
	ScanInconclusive ScanStatus = "inconclusive"
)

// VulnScan is what a vulnerability scan found.
type VulnScan struct {
	Status ScanStatus `json:"status"`
	// Reasons say why the scan is inconclusive; empty otherwise.
	Reasons []string `json:"reasons,omitempty"`
	Scanner Scanner  `json:"scanner"`
	DB      VulnDB   `json:"db"`
	// Vulns are one per vulnerability, ordered as the text report shows
	// them: called with a fix, called without, imported, required; by ID
	// within each.
	Vulns []Vuln `json:"vulns"`
	// Withdrawn are IDs of withdrawn advisories the stream mentioned; they
	// are not reported as vulnerabilities.
	Withdrawn []string `json:"withdrawn,omitempty"`
}

// Scanner identifies the scanner binary that ran.
type Scanner struct {
	Name      string `json:"name"`       // "govulncheck"
	Version   string `json:"version"`    // the pinned module version, such as "v1.9.0"
	SHA256    string `json:"sha256"`     // the verified binary's digest
	GoVersion string `json:"go_version"` // the Go it was built by, the image's
}

// VulnDB identifies the database a scan read.
type VulnDB struct {
	// Modified is index/db.json's modified time.
	Modified time.Time `json:"modified"`
	// SHA256 is the content hash of the database's files (vulndb.Hash).
	SHA256 string `json:"sha256"`
}

// Vuln is one vulnerability, at the strongest level the scan reached.
type Vuln struct {
	ID      string   `json:"id"` // such as "GO-2024-3250"
	Aliases []string `json:"aliases,omitempty"`
	Summary string   `json:"summary,omitempty"`
	URL     string   `json:"url,omitempty"`
	Level   Level    `json:"level"`
	// Module and Version are the affected module as required ("stdlib"
	// and the image's Go for the standard library).
	Module  string `json:"module"`
	Version string `json:"version,omitempty"`
	// Package is the affected package; empty at level required.
	Package string `json:"package,omitempty"`
	// Fixed is the version that fixes it; empty when there is no fix.
	Fixed string `json:"fixed,omitempty"`
	// Trace, at level called, is one call path from the module's code to
	// the vulnerable symbol, outermost caller first.
	Trace []Frame `json:"trace,omitempty"`
}

// Frame is one function of a call trace.
type Frame struct {
	Package  string `json:"package"`
	Function string `json:"function"`           // with its receiver: "T.Method"
	Position string `json:"position,omitempty"` // "file.go:12:3", relative to the module
}

// Upgrade says what fixes v: `go get module@fixed`, or for the standard
// library the Go release; empty when there is no fix.
func (v Vuln) Upgrade() string {
	switch {
	case v.Fixed == "":
		return ""
	case v.Module == "stdlib" || v.Module == "toolchain":
		return "upgrade Go to go" + strings.TrimPrefix(v.Fixed, "v") + " or later (a newer toolchain image)"
	}
	return "go get " + v.Module + "@" + v.Fixed
}

// Actionable reports whether v is called and has a fix: what a person acts
// on first.
func (v Vuln) Actionable() bool { return v.Level == LevelCalled && v.Fixed != "" }

// SortVulns orders vs as VulnScan.Vulns is: called with a fix, called
// without one, imported, required; by ID within each.
func SortVulns(vs []Vuln) {
	group := func(v Vuln) int {
		switch {
		case v.Actionable():
			return 0
		case v.Level == LevelCalled:
			return 1
		}
		return 4 - v.Level.Rank()
	}
	sort.SliceStable(vs, func(i, j int) bool {
		if gi, gj := group(vs[i]), group(vs[j]); gi != gj {
			return gi < gj
		}
		return vs[i].ID < vs[j].ID
	})
}

// Called returns the vulnerabilities at level called.
func (s *VulnScan) Called() []Vuln {
	var out []Vuln
	for _, v := range s.Vulns {
		if v.Level == LevelCalled {
			out = append(out, v)
		}
	}
	return out
}

// FinishScan computes the verdict of `stockade scan` (r.Vulns set, no
// checks): a go.mod that does not parse, unsupported, acquisition failed
// and a deadline that ran out as Finish does; then an inconclusive or missing scan is Inconclusive, a
// called vulnerability Vulnerable (exit 3), and anything else Clean.
func (r *Report) FinishScan(total time.Duration) {
	r.Timings.TotalMS = total.Milliseconds()
	switch {
	case r.Refusal != nil && r.Refusal.Kind == RefusalMalformedGoMod:
		r.Verdict = Failing // the scanner, as the go command, cannot load it
	case r.Refusal != nil:
		r.Verdict = Unsupported
	case r.Acquisition != nil:
		r.Verdict = AcquisitionFailed
	case r.TimedOut != "" || r.Vulns == nil || r.Vulns.Status != ScanComplete:
		r.Verdict = Inconclusive
	case len(r.Vulns.Called()) > 0:
		r.Verdict = Vulnerable
	default:
		r.Verdict = Clean
	}
	r.ExitCode = r.Verdict.ExitCode()
	if r.Checks == nil {
		r.Checks = []Check{}
	}
	if r.Candidates == nil {
		r.Candidates = []Candidate{}
	}
}

// writeVulns writes the scan section of the text report: what to act on
// first, then the rest.
func writeVulns(b *strings.Builder, s *VulnScan) {
	fmt.Fprintf(b, "\nvulnerabilities: %s, %s %s, database of %s (sha256 %s)\n", s.Status, s.Scanner.Name, s.Scanner.Version, s.DB.Modified.UTC().Format(time.RFC3339), short(s.DB.SHA256))
	for _, r := range s.Reasons {
		fmt.Fprintf(b, "  inconclusive: %s\n", r)
	}
	var act, rest []Vuln
	for _, v := range s.Vulns {
		if v.Actionable() {
			act = append(act, v)
		} else {
			rest = append(rest, v)
		}
	}
	if len(act) > 0 {
		b.WriteString("  fix now (your code calls these, and a fix exists):\n")
		for _, v := range act {
			fmt.Fprintf(b, "    %s %s@%s: %s\n", v.ID, v.Module, v.Version, v.Summary)
			fmt.Fprintf(b, "      fix: %s\n", v.Upgrade())
			for i, f := range v.Trace {
				pos := ""
				if f.Position != "" {
					pos = " (" + f.Position + ")"
				}
				fmt.Fprintf(b, "      %s%s.%s%s\n", strings.Repeat("  ", i), f.Package, f.Function, pos)
			}
		}
	}
	if len(rest) > 0 {
		b.WriteString("  also found:\n")
		for _, v := range rest {
			fix := "no fix yet"
			if v.Fixed != "" {
				fix = "fixed in " + v.Fixed
			}
			where := v.Module + "@" + v.Version
			if v.Package != "" {
				where = v.Package + " (" + where + ")"
			}
			fmt.Fprintf(b, "    %s %s %s, %s: %s\n", v.ID, v.Level, where, fix, v.Summary)
		}
	}
	if len(s.Vulns) == 0 && s.Status == ScanComplete {
		b.WriteString("  none found\n")
	}
	if len(s.Withdrawn) > 0 {
		fmt.Fprintf(b, "  withdrawn advisories not reported: %s\n", strings.Join(s.Withdrawn, ", "))
	}
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
