// Package report holds what `stockade inspect` found about a module and
// renders it twice: as text a person reads in ten seconds, and as the JSON
// machine report documented in docs/REPORT.md; a vulnerability scan it
// holds can also be written as an OpenVEX document (OpenVEX).
//
// Everything in a Report describes untrusted code and what it did; the
// report never holds host secrets. It does hold host paths (Dir) and engine
// IDs, which Normalize replaces so golden files compare across machines.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"
)

// Schema names the version of the JSON layout. A change that removes or
// renames a field, or changes a field's meaning, gets a new version.
const Schema = "stockade.report/v1"

// Verdict is the one-word answer for the whole module.
type Verdict string

// Verdicts, in the order of their exit codes.
const (
	// Clean: every check passed.
	Clean Verdict = "clean"
	// Unsupported: the layout was refused before any container ran.
	Unsupported Verdict = "unsupported"
	// Failing: at least one check failed conclusively and none was
	// inconclusive.
	Failing Verdict = "failing"
	// Inconclusive: at least one check could not be trusted (timeout,
	// truncated or malformed output, an exit no finding explains), or
	// inspect's -timeout ran out before the checks ended (TimedOut).
	Inconclusive Verdict = "inconclusive"
	// AcquisitionFailed: the modules go.mod requires could not be
	// downloaded (a checksum mismatch, a module or version the proxy does
	// not have), so nothing could be checked. See Acquisition.
	AcquisitionFailed Verdict = "acquisition_failed"
)

// Exit codes of `stockade inspect`, one per verdict; ExitError is Stockade's
// own failure, which has no report.
const (
	ExitClean             = 0
	ExitError             = 1
	ExitUnsupported       = 2
	ExitFindings          = 3 // failing or inconclusive
	ExitAcquisitionFailed = 4
)

// ExitCode returns the exit code for v.
func (v Verdict) ExitCode() int {
	switch v {
	case Clean:
		return ExitClean
	case Unsupported:
		return ExitUnsupported
	case Failing, Inconclusive, Vulnerable:
		return ExitFindings
	case AcquisitionFailed:
		return ExitAcquisitionFailed
	}
	return ExitError
}

// Status is the outcome of one check.
type Status string

// Statuses.
const (
	StatusPass         Status = "pass"
	StatusFail         Status = "fail"
	StatusInconclusive Status = "inconclusive"
	// StatusNotRun: the check did not start because the validation's
	// time ran out first. It counts as inconclusive.
	StatusNotRun Status = "not_run"
)

// Report is the result of inspecting one module.
type Report struct {
	Schema   string  `json:"schema"`
	Dir      string  `json:"dir"`              // the directory given to inspect, absolute
	Module   string  `json:"module,omitempty"` // module path from go.mod
	Go       string  `json:"go,omitempty"`     // the go directive, such as "1.24"
	Verdict  Verdict `json:"verdict"`
	ExitCode int     `json:"exit_code"`
	// Refusal says why the layout is unsupported; set only with
	// Unsupported, and with Failing for a go.mod that does not parse
	// (RefusalMalformedGoMod).
	Refusal *Refusal `json:"refusal,omitempty"`
	// Acquisition says why the modules could not be downloaded; set only
	// with AcquisitionFailed.
	Acquisition *Acquisition `json:"acquisition,omitempty"`
	// TimedOut names the phase during which time ran out, such as
	// "acquire"; the verdict is then Inconclusive. TimedOutBy says what
	// bound it: the -deadline, or the phase's own budget, with its length.
	TimedOut   string  `json:"timed_out,omitempty"`
	TimedOutBy string  `json:"timed_out_by,omitempty"`
	Source     *Source `json:"source,omitempty"`
	Image      *Image  `json:"image,omitempty"`
	// Checks are list, build, vet and test, in that order; empty when refused.
	Checks []Check `json:"checks"`
	// Candidates are newer versions of direct dependencies.
	Candidates []Candidate `json:"candidates"`
	// HeldBack are the candidates a cooldown (-min-age) held back: the
	// versions the proxy published too recently, each listed with when it
	// ages in; Candidates has the newest old enough version of the class
	// instead, when there is one. Absent without a cooldown.
	HeldBack []HeldBack `json:"held_back,omitempty"`
	// CandidatesError says why candidates could not be listed; the
	// verdict does not depend on it.
	CandidatesError string `json:"candidates_error,omitempty"`
	// Vulns is the vulnerability scan, with `stockade scan` or
	// `inspect -vulndb`; absent when no scan was asked for.
	Vulns *VulnScan `json:"vulns,omitempty"`
	// Egress is what the run's egress gates saw, one entry per phase with
	// network (acquire, candidates); absent when the run had none (a
	// fixture proxy).
	Egress  []Egress `json:"egress,omitempty"`
	Notes   []string `json:"notes,omitempty"` // things inspect did on the way, such as building an image
	Timings Timings  `json:"timings"`
}

// RefusalMalformedGoMod is the refusal kind of a go.mod that does not
// parse. Nothing runs on it, but it is not an unsupported layout: the go
// command fails on it at home too, so the verdict is Failing.
const RefusalMalformedGoMod = "malformed_go_mod"

// Refusal is why a layout is not supported yet, or why nothing could run
// on a go.mod that does not parse (RefusalMalformedGoMod).
type Refusal struct {
	Kind   string `json:"kind"`   // stable identifier, such as "workspace" or "vendor"
	Reason string `json:"reason"` // one sentence for a person
}

// Acquisition is why the modules go.mod requires could not be downloaded.
type Acquisition struct {
	// Reason is one sentence for a person.
	Reason string `json:"reason"`
	// Detail is the go command's standard error, capped (Detail); it
	// names the module and what went wrong (checksum mismatch, unknown
	// revision).
	Detail string `json:"detail,omitempty"`
	// RefusedHosts are the hosts the egress gate refused during the
	// acquisition (anything but the configured proxy's and checksum
	// database's), sorted; the acquire phase's Egress has the records.
	RefusedHosts []string `json:"refused_hosts,omitempty"`
}

// MaxDetail caps the go command's standard error a report keeps as a
// detail (Acquisition.Detail, a maintain attempt's), in bytes.
const MaxDetail = 4 << 10

// Detail is stderr as a report keeps it: at most MaxDetail bytes, "..."
// when it was cut.
func Detail(stderr []byte) string {
	if len(stderr) > MaxDetail {
		return string(stderr[:MaxDetail]) + "..."
	}
	return string(stderr)
}

// Source says which tree was validated.
type Source struct {
	// Kind is "commit" (the committed tree of a git checkout), "worktree"
	// (the working tree, uncommitted changes included, with -worktree) or
	// "directory" (a directory that is not a git checkout).
	Kind   string `json:"kind"`
	Commit string `json:"commit,omitempty"` // full hash, with Kind "commit"
	// Subdir, with Kind "commit" or "worktree", is the module's directory
	// below the checkout's top, slash-separated: a module in a
	// subdirectory of a repository (a monorepo). Absent at the top.
	Subdir string `json:"subdir,omitempty"`
	// Uncommitted, with Kind "commit", reports that the working tree
	// differs from the committed tree that was validated (changed, added
	// or deleted files git would commit); -worktree validates them.
	Uncommitted bool `json:"uncommitted_changes,omitempty"`
	// Updated, when set, says the go command had to update the manifests
	// to download the modules, as it does on a developer's machine (a
	// go.mod with requirements and no go line gets one): the validated
	// tree has the updated files; the repository's are unchanged.
	Updated *Updated `json:"updated,omitempty"`
}

// Updated is what the go command changed in the validated tree's
// manifests during acquisition.
type Updated struct {
	// Files are the manifests it changed: "go.mod", "go.sum".
	Files []string `json:"files"`
	// Reason is what the go command said when it could not write them in
	// place, such as "go: updating go.mod: open /src/go.mod: permission
	// denied".
	Reason string `json:"reason"`
}

// Image is the toolchain image the checks ran in.
type Image struct {
	Ref       string `json:"ref"`        // what was asked of the engine: a pinned reference or a local tag
	ID        string `json:"id"`         // the engine's image ID, "sha256:..."
	GoVersion string `json:"go_version"` // the toolchain in the image, such as "go1.26.8"
	// Minor is the Go minor the image provides, such as "1.26".
	Minor string `json:"minor"`
	// Local is true for an image from `stockade image build` serving in
	// place of the pinned golang image.
	Local bool `json:"local"`
	// StandIn is true when no image has the directive's minor and an
	// image for a newer minor serves (directives older than the table).
	StandIn bool `json:"stand_in"`
	// Built is true when inspect built the local image during this run.
	Built bool `json:"built"`
	// CToolchain is true when the image carries the C toolchain layer
	// (gcc, binutils, libc headers), so cgo is on as the go command's
	// default; false for the small image (CGO_ENABLED=0).
	CToolchain bool `json:"c_toolchain,omitempty"`
	// AptPackages are the Debian packages ("name=version") the C toolchain
	// layer carries besides its own, asked for with -apt-packages; empty
	// without.
	AptPackages []string `json:"apt_packages,omitempty"`
}

// Check is one of list, build, vet and test.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Reasons say, for people, why a check is inconclusive (timed out,
	// output truncated, a line that is not a test event, a package with no
	// final event, an exit status that disagrees with the findings); empty
	// otherwise.
	Reasons  []string  `json:"reasons,omitempty"`
	ExitCode int       `json:"exit_code"`
	Findings []Finding `json:"findings"`
	// Packages is how many packages the check covered: those listed by
	// list, those that reported a final test event for test.
	Packages int        `json:"packages,omitempty"`
	Tests    *TestCount `json:"tests,omitempty"` // test only
}

// TestCount counts top-level and sub- tests by their final action.
type TestCount struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// Finding is one problem a check reported.
type Finding struct {
	// Key identifies the problem across runs and machines: derived from
	// the kind, package, test, file and normalized message, never from
	// line numbers, paths or times.
	Key     string `json:"key"`
	Kind    string `json:"kind"` // test, test_timeout, package, build, vet, toolchain; missing_c_header, missing_c_library, writes_read_only, needs_network, missing_program, needs_host_service
	Package string `json:"package,omitempty"`
	Test    string `json:"test,omitempty"`
	File    string `json:"file,omitempty"` // relative to the module root
	Line    int    `json:"line,omitempty"`
	Col     int    `json:"col,omitempty"`
	// Message is normalized: positions, paths, durations and addresses
	// are replaced by placeholders. Part of Key.
	Message string `json:"message"`
	// Detail is raw output around the problem, capped; not part of Key.
	Detail string `json:"detail,omitempty"`
}

// Candidate is a newer version of a direct dependency.
type Candidate struct {
	Path    string `json:"path"`    // module path of the candidate; a /vN path for major upgrades
	Current string `json:"current"` // the version go.mod requires (of the pre-/vN path for major)
	Version string `json:"version"`
	// Class is "patch", "minor" or "major".
	Class string `json:"class"`
	// RequiresNewerToolchain: the candidate's go.mod needs a Go newer than
	// the image's; with GOTOOLCHAIN=local the upgrade would fail at go get.
	RequiresNewerToolchain bool   `json:"requires_newer_toolchain,omitempty"`
	GoVersion              string `json:"go_version,omitempty"` // the candidate's go directive, when known
	// Repo is the module's repository and Compare the web view of the
	// changes from Current to Version there, from the module proxy's
	// Origin or the module path (gomod.Links); empty when neither says.
	Repo    string `json:"repo,omitempty"`
	Compare string `json:"compare,omitempty"`
}

// HeldBack is a candidate version a cooldown held back.
type HeldBack struct {
	Path    string `json:"path"`
	Current string `json:"current"`
	Version string `json:"version"`
	Class   string `json:"class"`
	// Published is the module proxy's time for the version (its .info
	// Time); Until is Published plus the minimum age, when the version
	// becomes a candidate. Both are absent when the proxy gave no time
	// (Reason says so): a version of unknown age is held back.
	Published time.Time `json:"published,omitzero"`
	Until     time.Time `json:"until,omitzero"`
	Reason    string    `json:"reason,omitempty"`
}

// Timings are wall-clock durations, in milliseconds.
type Timings struct {
	TotalMS int64   `json:"total_ms"`
	Phases  []Phase `json:"phases"`
}

// Phase is one step of inspect, or of the validation ("validate/test").
type Phase struct {
	Name string `json:"name"`
	MS   int64  `json:"ms"`
}

// AddPhase appends a phase of duration d.
func (t *Timings) AddPhase(name string, d time.Duration) {
	t.Phases = append(t.Phases, Phase{Name: name, MS: d.Milliseconds()})
}

// New returns a report for dir with the schema set and empty lists, so
// the JSON has [] rather than null.
func New(dir string) *Report {
	return &Report{Schema: Schema, Dir: dir, Checks: []Check{}, Candidates: []Candidate{}}
}

// Finish computes the verdict and exit code from the refusal, the failed
// acquisition, the timeout and the checks, in that order; with a scan
// (inspect -vulndb), an inconclusive one makes the verdict inconclusive,
// and a called vulnerability makes passing checks Vulnerable (exit 3, as
// stockade scan). It sets the total time.
func (r *Report) Finish(total time.Duration) {
	r.Timings.TotalMS = total.Milliseconds()
	r.Verdict = Clean
	switch {
	case r.Refusal != nil && r.Refusal.Kind == RefusalMalformedGoMod:
		r.Verdict = Failing
	case r.Refusal != nil:
		r.Verdict = Unsupported
	case r.Acquisition != nil:
		r.Verdict = AcquisitionFailed
	case r.TimedOut != "":
		r.Verdict = Inconclusive // whatever ran, it did not all run
	default:
		for _, c := range r.Checks {
			switch c.Status {
			case StatusInconclusive, StatusNotRun:
				r.Verdict = Inconclusive
			case StatusFail:
				if r.Verdict == Clean {
					r.Verdict = Failing
				}
			}
		}
		if len(r.Checks) == 0 {
			r.Verdict = Inconclusive // nothing ran: never claim clean
		}
		switch {
		case r.Vulns == nil:
		case r.Vulns.Status != ScanComplete:
			// inspect -vulndb: a scan was asked for and could not be
			// concluded; it must not pass for clean.
			r.Verdict = Inconclusive
		case r.Verdict == Clean && len(r.Vulns.Called()) > 0:
			// Every check passed and the code calls a vulnerable symbol:
			// as stockade scan says, exit 3.
			r.Verdict = Vulnerable
		}
	}
	r.ExitCode = r.Verdict.ExitCode()
	for i := range r.Checks {
		if r.Checks[i].Findings == nil {
			r.Checks[i].Findings = []Finding{}
		}
	}
	if r.Candidates == nil {
		r.Candidates = []Candidate{}
	}
}

// WriteJSON writes r as indented JSON followed by a newline.
func WriteJSON(w io.Writer, r *Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Normalized returns a copy of r with what varies between runs and
// machines replaced by fixed placeholders: the directory, the commit, the
// image ID and Go patch version, every duration, and the egress records'
// times and addresses. Golden files hold
// normalized reports.
func Normalized(r *Report) *Report {
	c := *r
	c.Dir = "DIR"
	if r.Source != nil {
		s := *r.Source
		if s.Commit != "" {
			s.Commit = "COMMIT"
		}
		c.Source = &s
	}
	if r.Image != nil {
		im := *r.Image
		im.ID = "IMAGE_ID"
		im.Ref = "IMAGE_REF"
		im.GoVersion = "GO_VERSION"
		im.Built = false
		c.Image = &im
	}
	c.Notes = nil
	if r.Egress != nil {
		c.Egress = make([]Egress, len(r.Egress))
		for i, e := range r.Egress {
			e.Records = slices.Clone(e.Records)
			for j := range e.Records {
				e.Records[j].Time, e.Records[j].Duration = time.Time{}, 0
				if e.Records[j].Addr != "" {
					e.Records[j].Addr = "ADDR"
				}
			}
			c.Egress[i] = e
		}
	}
	c.Checks = make([]Check, len(r.Checks))
	for i, ch := range r.Checks {
		// Raw output and reasons quoting it carry durations and paths.
		ch.Findings = append(make([]Finding, 0, len(ch.Findings)), ch.Findings...)
		for j := range ch.Findings {
			ch.Findings[j].Detail = ""
		}
		c.Checks[i] = ch
	}
	c.Timings = Timings{Phases: make([]Phase, len(r.Timings.Phases))}
	for i, p := range r.Timings.Phases {
		c.Timings.Phases[i] = Phase{Name: p.Name}
	}
	return &c
}
