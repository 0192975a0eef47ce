package maintain

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/stockade/stockade/internal/report"
)

// Schema names the version of the maintain report's JSON layout
// (docs/REPORT.md).
const Schema = "stockade.maintain/v1"

// Outcome is the one-word answer of a maintain run, or of one candidate.
// Values are stable: reports print them.
type Outcome string

// Outcomes. Each has one exit code (ExitCode).
const (
	// ProposalPrepared: the upgrade passed every step; a proposal commit
	// is stored under refs/stockade/proposals/.
	ProposalPrepared Outcome = "proposal_prepared"
	// Passed: with -group, the candidate passed every step alone; the
	// group, not it, is proposed. Never a run's outcome.
	Passed Outcome = "passed"
	// NoCandidate: no direct dependency has an eligible newer version.
	NoCandidate Outcome = "no_candidate"
	// AdmissionRefused: go get moved something the admission gate does
	// not admit; Rule and Module say what.
	AdmissionRefused Outcome = "admission_refused"
	// NormalizationRefused: go mod tidy did not settle, or made a direct
	// dependency indirect.
	NormalizationRefused Outcome = "normalization_refused"
	// RequiresNewerToolchain: the upgrade needs a Go newer than the
	// toolchain image's (GOTOOLCHAIN=local).
	RequiresNewerToolchain Outcome = "requires_newer_toolchain"
	// AcquisitionFailed: modules could not be downloaded (the proxy is
	// unreachable or refuses, a version it does not have).
	AcquisitionFailed Outcome = "acquisition_failed"
	// Regressed: the upgraded tree has findings the baseline has not.
	Regressed Outcome = "regressed"
	// ValidationInconclusive: the upgraded tree's validation, or a rerun,
	// could not be trusted (timeout, truncation, OOM), or the deadline ran
	// out: nothing is claimed.
	ValidationInconclusive Outcome = "validation_inconclusive"
	// BaselineFailing: the validated commit already fails (a go.mod that
	// does not parse included); no upgrade can be judged against it.
	BaselineFailing Outcome = "baseline_failing"
	// BaselineInconclusive: the validated commit's validation could not be
	// trusted.
	BaselineInconclusive Outcome = "baseline_inconclusive"
	// Unsupported: the layout is refused (as by inspect), DIR is not in a
	// git checkout, or tracked files of the module have uncommitted
	// changes.
	Unsupported Outcome = "unsupported"
)

// Exit codes of `stockade maintain`; 1 is Stockade's own failure (a
// failure inside an attempt included), which has no report.
const (
	ExitProposal     = 0
	ExitError        = 1
	ExitUnsupported  = 2
	ExitInconclusive = 3 // baseline failing or inconclusive, validation inconclusive
	ExitNonResult    = 4 // an explained non-result
)

// ExitCode returns the exit code of o.
func (o Outcome) ExitCode() int {
	switch o {
	case ProposalPrepared, Passed:
		return ExitProposal
	case Unsupported:
		return ExitUnsupported
	case BaselineFailing, BaselineInconclusive, ValidationInconclusive:
		return ExitInconclusive
	case NoCandidate, AdmissionRefused, NormalizationRefused, RequiresNewerToolchain, AcquisitionFailed, Regressed:
		return ExitNonResult
	}
	return ExitError
}

// Report is the result of one maintain run.
type Report struct {
	Schema   string  `json:"schema"`
	Dir      string  `json:"dir"`
	Module   string  `json:"module,omitempty"`
	Go       string  `json:"go,omitempty"`
	Outcome  Outcome `json:"outcome"`
	ExitCode int     `json:"exit_code"`
	// Reason says, in one sentence, why the run ended as it did when no
	// candidate was tried (unsupported, baseline, no candidate).
	Reason string `json:"reason,omitempty"`
	// Refusal is inspect's refusal of the layout, with Unsupported.
	Refusal *report.Refusal `json:"refusal,omitempty"`
	// Uncommitted lists tracked files whose working copy differs from
	// the committed tree (Unsupported).
	Uncommitted []string       `json:"uncommitted,omitempty"`
	Source      *report.Source `json:"source,omitempty"`
	Image       *report.Image  `json:"image,omitempty"`
	// Baseline is the validation of the committed tree.
	Baseline *Validation `json:"baseline,omitempty"`
	// Candidates are every newer version of a direct dependency listed;
	// Eligible says which the policy allows.
	Candidates []Candidate `json:"candidates"`
	// HeldBack are the versions -min-age held back (report.HeldBack);
	// absent without a cooldown.
	HeldBack []report.HeldBack `json:"held_back,omitempty"`
	// Attempts are the candidates tried, in selection order: until one
	// prepared a proposal (at most maxTries), or with -each every eligible
	// one.
	Attempts []Attempt `json:"attempts"`
	// Group is -group's result: each eligible candidate in or out of the
	// proposal and why, and the combinations validated together.
	Group *Group `json:"group,omitempty"`
	// ConfigHash binds the outcome to the settings that decide it
	// (Config.Hash).
	ConfigHash string `json:"config_hash"`
	// Egress is what the run's egress gate saw, one entry per phase with
	// network (scanner, acquire, candidates, each attempt: report.Egress);
	// absent without network (a fixture proxy).
	Egress  []report.Egress `json:"egress,omitempty"`
	Notes   []string        `json:"notes,omitempty"`
	Timings report.Timings  `json:"timings"`
}

// Candidate is a listed upgrade and whether the policy allows it.
type Candidate struct {
	report.Candidate
	Eligible bool `json:"eligible"`
	// Why says why an ineligible candidate is not tried.
	Why string `json:"why,omitempty"`
}

// Validation is one validation and the tests whose reruns changed their
// mind.
type Validation struct {
	Checks []report.Check `json:"checks"`
	Flaky  []Flake        `json:"flaky,omitempty"`
	// Vulns is the tree's vulnerability scan, with -vulndb.
	Vulns *report.VulnScan `json:"vulns,omitempty"`
}

// Flake is a failing test and what its reruns said.
type Flake struct {
	Key     string `json:"key"`
	Package string `json:"package"`
	Test    string `json:"test"`
	// Before and After are the results on the baseline and upgraded trees:
	// the validation's first, then the reruns ("pass", "fail").
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
	// Regression: failed every time after and passed every time before.
	Regression bool `json:"regression"`
}

// Attempt is what happened to one candidate.
type Attempt struct {
	Path  string `json:"path"`
	From  string `json:"from"`
	To    string `json:"to"`
	Class string `json:"class"`
	// Members, in a group's combination (Group.Tried), are the upgrades
	// validated together; Path, From and To are then empty and Class is
	// "group".
	Members []report.Candidate `json:"members,omitempty"`
	Why     string             `json:"why"` // why this candidate was chosen
	// Repo and Compare link the candidate's repository and the changes
	// from From to To (report.Candidate's).
	Repo    string  `json:"repo,omitempty"`
	Compare string  `json:"compare,omitempty"`
	Outcome Outcome `json:"outcome"`
	Reason  string  `json:"reason,omitempty"`
	// Rule and Module name what the gate or normalization refused.
	Rule   string `json:"rule,omitempty"`
	Module string `json:"module,omitempty"`
	// Detail is the go command's standard error, capped, when it failed.
	Detail string `json:"detail,omitempty"`
	// Moved lists every requirement the upgrade changed.
	Moved []Move `json:"moved,omitempty"`
	// APIChanges are the incompatible changes of the exported API of the
	// packages the module imports from the modules the upgrade moved,
	// old version to new (apidiff.go), found before the upgraded tree's
	// tests run; APINote says when they could not all be compared.
	APIChanges []APIChange `json:"api_changes,omitempty"`
	APINote    string      `json:"api_note,omitempty"`
	// GoRaised, when set, says the upgrade raised the go line, as go get
	// does when a requirement that moved needs a newer language version:
	// the upgraded tree was validated with the image's Go, which builds it.
	GoRaised *GoRaise `json:"go_raised,omitempty"`
	// Post is the validation of the upgraded tree.
	Post *Validation `json:"post,omitempty"`
	// Introduced are the findings the upgraded tree has and the baseline
	// has not (with Regressed, those that are not flaky).
	Introduced []report.Finding `json:"introduced,omitempty"`
	// VulnsFixed and VulnsIntroduced, with -vulndb, are the
	// vulnerabilities the baseline has and the upgraded tree has not, and
	// the reverse; empty unless both scans are complete.
	VulnsFixed      []report.Vuln  `json:"vulns_fixed,omitempty"`
	VulnsIntroduced []report.Vuln  `json:"vulns_introduced,omitempty"`
	Proposal        *Proposal      `json:"proposal,omitempty"`
	Evidence        *Evidence      `json:"evidence,omitempty"`
	Timings         []report.Phase `json:"timings"`
}

// Group is what -group did after each candidate's attempt alone.
type Group struct {
	// Members are the eligible candidates, in selection order, each in
	// the proposal or left out, and why.
	Members []Member `json:"members"`
	// Tried are the combinations validated together, in order: every
	// candidate that passed alone; when that did not pass, growing
	// subsets in selection order, each member added to the last subset
	// that passed. A combination known to fail is not tried again.
	Tried []Attempt `json:"tried"`
	// Proposal is the one commit of the members in, when there is one:
	// the last combination that passed (or, with one member in, its own
	// attempt's validated tree).
	Proposal *Proposal `json:"proposal,omitempty"`
}

// Member is one eligible candidate of a group.
type Member struct {
	Path  string `json:"path"`
	From  string `json:"from"`
	To    string `json:"to"`
	Class string `json:"class"`
	// In: the candidate is in the proposal.
	In bool `json:"in"`
	// Why says why it is in or out, naming the attempt or combination
	// whose evidence shows it: "passed alone and together (tried 1)",
	// "failed alone: regressed (attempt 1): ...", "breaks the group:
	// regressed together with ... (tried 1): ...".
	Why string `json:"why"`
}

// GoRaise is a raise of the go line an upgrade requires.
type GoRaise struct {
	From string `json:"from,omitempty"` // "" when go.mod had no go line
	To   string `json:"to"`
	// RequiredBy is the requirement whose go.mod has the new line.
	RequiredBy string `json:"required_by"`
}

// Move is one requirement changed by the upgrade.
type Move struct {
	Path   string `json:"path"`
	From   string `json:"from,omitempty"` // "" when added
	To     string `json:"to,omitempty"`   // "" when removed
	Direct bool   `json:"direct"`
}

// Proposal is the commit holding the upgraded manifests.
type Proposal struct {
	Commit string `json:"commit"`
	Ref    string `json:"ref"`
	Branch string `json:"branch,omitempty"`
	// Commands look at and apply the proposal.
	Commands []string `json:"commands"`
	// Message is the commit message, ready for a pull request.
	Message string `json:"message"`
}

// Evidence binds an outcome to what was validated.
type Evidence struct {
	// Tree is the git tree hash of the validated upgraded tree: the
	// proposal commit's tree.
	Tree string `json:"tree,omitempty"`
	// Parent is the validated baseline commit.
	Parent     string `json:"parent"`
	ConfigHash string `json:"config_hash"`
	ImageID    string `json:"image_id"`
}

// finish sets the exit code and the outcome of a run whose attempts
// decide it: with each, inconclusive if any attempt was, else a proposal
// if any was prepared, else the first attempt's outcome; without, the
// attempts were tries until one passed: a proposal if the last prepared
// one, else as with each. With a group, inconclusive if any attempt or
// combination was, else its proposal, else as with each.
func (r *Report) finish(total int64, each bool) {
	r.Timings.TotalMS = total
	if g := r.Group; r.Outcome == "" && g != nil {
		// As with each, an inconclusive attempt or combination makes the
		// run inconclusive (the proposal, if made, stays); else the
		// group's proposal decides; else the members' own outcomes.
		for _, a := range append(append([]Attempt{}, r.Attempts...), g.Tried...) {
			if a.Outcome == ValidationInconclusive {
				r.Outcome = ValidationInconclusive
			}
		}
		if r.Outcome == "" && g.Proposal != nil {
			r.Outcome = ProposalPrepared
		}
	}
	if n := len(r.Attempts); r.Outcome == "" && !each && n > 0 && r.Attempts[n-1].Outcome == ProposalPrepared {
		r.Outcome = ProposalPrepared
	}
	if r.Outcome == "" {
		r.Outcome = NoCandidate
		for _, a := range r.Attempts {
			if a.Outcome == ValidationInconclusive {
				r.Outcome = ValidationInconclusive
				break
			}
		}
		if r.Outcome != ValidationInconclusive {
			for i, a := range r.Attempts {
				if i == 0 || a.Outcome == ProposalPrepared || r.Outcome == Passed {
					r.Outcome = a.Outcome
				}
				if a.Outcome == ProposalPrepared {
					break
				}
			}
		}
	}
	if r.Outcome == Passed {
		// Every member passed alone and no group was proposed: only an
		// inconclusive combination does that (above); never "passed".
		r.Outcome = ValidationInconclusive
	}
	r.ExitCode = r.Outcome.ExitCode()
	if r.Candidates == nil {
		r.Candidates = []Candidate{}
	}
	if r.Attempts == nil {
		r.Attempts = []Attempt{}
	}
}

// WriteJSON writes r as indented JSON followed by a newline.
func WriteJSON(w io.Writer, r *Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("maintain: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// SARIF returns the baseline's findings as a SARIF log: what the
// validated commit has (its checks and, with -vulndb, its scan). An
// upgrade's findings are about a tree no commit of the repository has yet:
// they are in the attempts, not in the log. A run without a trusted
// baseline is marked unsuccessful.
func (r *Report) SARIF() *report.SARIFLog {
	in := report.SARIFInput{Command: "maintain", Module: r.Module, Source: r.Source, Verdict: string(r.Outcome), ExitCode: r.ExitCode}
	if r.Baseline != nil {
		in.Checks, in.Vulns = r.Baseline.Checks, r.Baseline.Vulns
		if len(in.Checks) == 0 {
			in.Incomplete = append(in.Incomplete, "the baseline's validation ran no check")
		}
	} else {
		in.Incomplete = append(in.Incomplete, "no baseline was validated: "+string(r.Outcome)+" "+r.Reason)
	}
	return report.SARIF(in)
}
