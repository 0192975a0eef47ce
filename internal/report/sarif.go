package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
)

// SARIF: what a run found as a SARIF 2.1.0 log (OASIS Static Analysis
// Results Interchange Format), the form a repository host's code-scanning
// view reads. One result per finding: each check finding (build errors,
// vet diagnostics, failing tests, with their file and line when Go
// reported one) and each vulnerability of a complete or partial scan
// (with the call trace as a stack, its first frame in the module's own
// code as the location). Every result carries a fingerprint derived from
// what identifies the finding and never from line numbers, so the same
// finding is the same alert across runs while the code around it moves.
//
// The log is built from the report alone and holds no time: the same
// report gives the same bytes. A run whose checks or scan could not be
// trusted says so (invocation executionSuccessful false, one notification
// per reason): the results it lists are real, the absence of others proves
// nothing.

// SARIF constants.
const (
	// SARIFVersion is the version every log declares.
	SARIFVersion = "2.1.0"
	// SARIFSchema is the $schema every log names: the OASIS schema,
	// errata 01, that the tests validate against.
	SARIFSchema = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
	// SARIFFingerprint names the fingerprint every result carries
	// (partialFingerprints and fingerprints): a finding's Key, or for a
	// vulnerability "vuln:" and a hash of its ID and module.
	SARIFFingerprint = "stockade/v1"
	// SARIFSrcRoot is the uriBaseId of every location: the repository's
	// top (the checkout's, or the directory's when it is not one).
	SARIFSrcRoot = "%SRCROOT%"
	// sarifRulePrefix begins the rule ID of a check finding's kind.
	sarifRulePrefix = "stockade/"
)

// SARIFLog is a SARIF log: one run.
type SARIFLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []SARIFRun `json:"runs"`
}

// SARIFRun is one run of one tool.
type SARIFRun struct {
	Tool        SARIFTool         `json:"tool"`
	Invocations []SARIFInvocation `json:"invocations"`
	Results     []SARIFResult     `json:"results"`
	// Properties: the command, the verdict, the module, the validated
	// commit and, with a scan, the scanner and database.
	Properties map[string]any `json:"properties,omitempty"`
}

// SARIFTool is Stockade, with its rules.
type SARIFTool struct {
	Driver SARIFDriver `json:"driver"`
}

// SARIFDriver is the tool component; Rules are sorted by ID.
type SARIFDriver struct {
	Name           string      `json:"name"`
	InformationURI string      `json:"informationUri,omitempty"`
	Rules          []SARIFRule `json:"rules"`
}

// SARIFRule is one kind of finding, or one vulnerability.
type SARIFRule struct {
	ID                   string          `json:"id"`
	Name                 string          `json:"name,omitempty"`
	ShortDescription     SARIFText       `json:"shortDescription"`
	FullDescription      *SARIFText      `json:"fullDescription,omitempty"`
	HelpURI              string          `json:"helpUri,omitempty"`
	Help                 *SARIFText      `json:"help,omitempty"`
	DefaultConfiguration SARIFRuleConfig `json:"defaultConfiguration"`
	Properties           *SARIFRuleProps `json:"properties,omitempty"`
}

// SARIFRuleConfig is a rule's default level: "error", "warning" or "note".
type SARIFRuleConfig struct {
	Level string `json:"level"`
}

// SARIFRuleProps are a rule's tags (code scanning filters on them).
type SARIFRuleProps struct {
	Tags []string `json:"tags,omitempty"`
}

// SARIFText is a plain-text message.
type SARIFText struct {
	Text string `json:"text"`
}

// SARIFInvocation says whether the run's analysis could be trusted.
type SARIFInvocation struct {
	ExecutionSuccessful bool                `json:"executionSuccessful"`
	ExitCode            int                 `json:"exitCode"`
	Notifications       []SARIFNotification `json:"toolExecutionNotifications,omitempty"`
}

// SARIFNotification is one reason the analysis is incomplete.
type SARIFNotification struct {
	Level   string    `json:"level"`
	Message SARIFText `json:"message"`
}

// SARIFResult is one finding.
type SARIFResult struct {
	RuleID              string            `json:"ruleId"`
	RuleIndex           int               `json:"ruleIndex"`
	Level               string            `json:"level"`
	Message             SARIFText         `json:"message"`
	Locations           []SARIFLocation   `json:"locations"`
	Fingerprints        map[string]string `json:"fingerprints"`
	PartialFingerprints map[string]string `json:"partialFingerprints"`
	Stacks              []SARIFStack      `json:"stacks,omitempty"`
	// Properties: the check, package and test of a check finding; the
	// level, module, version and fix of a vulnerability.
	Properties map[string]string `json:"properties,omitempty"`
}

// SARIFLocation is a file, and a region of it when the line is known.
type SARIFLocation struct {
	PhysicalLocation *SARIFPhysical `json:"physicalLocation,omitempty"`
	Message          *SARIFText     `json:"message,omitempty"`
}

// SARIFPhysical is a file relative to SARIFSrcRoot.
type SARIFPhysical struct {
	ArtifactLocation SARIFArtifact `json:"artifactLocation"`
	Region           *SARIFRegion  `json:"region,omitempty"`
}

// SARIFArtifact is a slash path relative to its base.
type SARIFArtifact struct {
	URI       string `json:"uri"`
	URIBaseID string `json:"uriBaseId"`
}

// SARIFRegion is a line, and a column when known (1-based).
type SARIFRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn,omitempty"`
}

// SARIFStack is a vulnerability's call trace, outermost caller first.
type SARIFStack struct {
	Message SARIFText    `json:"message"`
	Frames  []SARIFFrame `json:"frames"`
}

// SARIFFrame is one function of a trace.
type SARIFFrame struct {
	Location SARIFLocation `json:"location"`
	Module   string        `json:"module,omitempty"`
}

// SARIFInput is what a log is made from: a report's module, source,
// checks and scan. Inspect and scan give their report's (Report.SARIF);
// maintain gives its baseline's, the validated commit's.
type SARIFInput struct {
	Command string // "inspect", "scan", "maintain"
	Module  string
	Source  *Source
	// Verdict and ExitCode are the run's, for the properties and the
	// invocation.
	Verdict  string
	ExitCode int
	Checks   []Check
	Vulns    *VulnScan
	// Incomplete are reasons the analysis as a whole is not to be
	// trusted besides the checks' and the scan's own (a refusal, a failed
	// acquisition, a deadline).
	Incomplete []string
}

// SARIF returns r as a SARIF log for the command cmd.
func (r *Report) SARIF(cmd string) *SARIFLog {
	in := SARIFInput{Command: cmd, Module: r.Module, Source: r.Source, Verdict: string(r.Verdict), ExitCode: r.ExitCode, Checks: r.Checks, Vulns: r.Vulns}
	if r.Refusal != nil {
		in.Incomplete = append(in.Incomplete, "refused: "+r.Refusal.Reason)
	}
	if r.Acquisition != nil {
		in.Incomplete = append(in.Incomplete, "acquisition failed: "+r.Acquisition.Reason)
	}
	if r.TimedOut != "" {
		in.Incomplete = append(in.Incomplete, "timed out in "+r.TimedOut+" ("+r.TimedOutBy+")")
	}
	if cmd != "scan" && len(r.Checks) == 0 && r.Refusal == nil && r.Acquisition == nil {
		in.Incomplete = append(in.Incomplete, "no check ran")
	}
	return SARIF(in)
}

// SARIF returns in as a SARIF log.
func SARIF(in SARIFInput) *SARIFLog {
	subdir := ""
	if in.Source != nil {
		subdir = in.Source.Subdir
	}
	b := &sarifBuilder{subdir: subdir, index: map[string]int{}}
	inv := SARIFInvocation{ExecutionSuccessful: true, ExitCode: in.ExitCode}
	fail := func(why string) {
		inv.ExecutionSuccessful = false
		inv.Notifications = append(inv.Notifications, SARIFNotification{Level: "error", Message: SARIFText{Text: why}})
	}
	for _, why := range in.Incomplete {
		fail(why)
	}
	for _, c := range in.Checks {
		switch c.Status {
		case StatusInconclusive:
			fail(c.Name + " is inconclusive: " + strings.Join(c.Reasons, "; "))
		case StatusNotRun:
			fail(c.Name + " did not run")
		}
		for _, f := range c.Findings {
			b.finding(c.Name, f)
		}
	}
	props := map[string]any{"command": "stockade " + in.Command, "verdict": in.Verdict}
	if in.Module != "" {
		props["module"] = in.Module
	}
	if in.Source != nil {
		props["source"] = in.Source.Kind
		if in.Source.Commit != "" {
			props["commit"] = in.Source.Commit
		}
		if in.Source.Subdir != "" {
			props["subdir"] = in.Source.Subdir
		}
	}
	if s := in.Vulns; s != nil {
		if s.Status != ScanComplete {
			fail("the vulnerability scan is " + string(s.Status) + ": " + strings.Join(s.Reasons, "; "))
		}
		props["scanner"] = s.Scanner.Name + " " + s.Scanner.Version + " (sha256 " + s.Scanner.SHA256 + ")"
		props["vulndb_sha256"] = s.DB.SHA256
		for _, v := range s.Vulns {
			b.vuln(in.Module, v)
		}
	}
	b.sortRules()
	return &SARIFLog{Schema: SARIFSchema, Version: SARIFVersion, Runs: []SARIFRun{{
		Tool:        SARIFTool{Driver: SARIFDriver{Name: "stockade", Rules: b.rules}},
		Invocations: []SARIFInvocation{inv},
		Results:     b.results,
		Properties:  props,
	}}}
}

// sarifBuilder gathers rules and results.
type sarifBuilder struct {
	subdir  string
	rules   []SARIFRule
	index   map[string]int // rule ID to its place in rules, before sorting
	results []SARIFResult
}

// rule returns the index of the rule id, adding it with r when new.
func (b *sarifBuilder) rule(id string, r func() SARIFRule) int {
	if i, ok := b.index[id]; ok {
		return i
	}
	b.index[id] = len(b.rules)
	b.rules = append(b.rules, r())
	return len(b.rules) - 1
}

// sortRules orders the rules by ID and renumbers the results' indexes.
func (b *sarifBuilder) sortRules() {
	if b.rules == nil {
		b.rules = []SARIFRule{}
	}
	if b.results == nil {
		b.results = []SARIFResult{}
	}
	sort.Slice(b.rules, func(i, j int) bool { return b.rules[i].ID < b.rules[j].ID })
	for i, r := range b.rules {
		b.index[r.ID] = i
	}
	for i := range b.results {
		b.results[i].RuleIndex = b.index[b.results[i].RuleID]
	}
}

// location is file (relative to the module root) in the repository, at
// line and col when known; go.mod when file is empty.
func (b *sarifBuilder) location(file string, line, col int) SARIFLocation {
	if file == "" {
		file, line, col = "go.mod", 0, 0
	}
	loc := SARIFLocation{PhysicalLocation: &SARIFPhysical{ArtifactLocation: SARIFArtifact{URI: path.Join(b.subdir, file), URIBaseID: SARIFSrcRoot}}}
	if line > 0 {
		loc.PhysicalLocation.Region = &SARIFRegion{StartLine: line, StartColumn: col}
	}
	return loc
}

// sarifKinds are the rules of check findings by Finding.Kind: a name, a
// description and a level. A kind not listed gets a generic rule.
var sarifKinds = map[string]struct{ name, desc, level string }{
	"build":              {"BuildError", "The package does not compile.", "error"},
	"vet":                {"VetDiagnostic", "go vet reported a suspicious construct.", "warning"},
	"test":               {"FailingTest", "A test failed.", "error"},
	"test_timeout":       {"TestTimeout", "A test did not finish before the validation's timeout.", "error"},
	"package":            {"PackageFailure", "A package's tests failed outside any test (a panic, a failing TestMain, an exit).", "error"},
	"toolchain":          {"ToolchainError", "The go command failed on the module outside any package's code.", "error"},
	"missing_c_header":   {"MissingCHeader", "cgo code includes a C header the toolchain image does not have.", "error"},
	"missing_c_library":  {"MissingCLibrary", "cgo code links a C library the toolchain image does not have.", "error"},
	"writes_read_only":   {"WritesReadOnly", "A test writes into the source tree or another read-only place.", "error"},
	"needs_network":      {"NeedsNetwork", "A test needs the network, which validation does not give.", "error"},
	"missing_program":    {"MissingProgram", "A test runs a program the toolchain image does not have.", "error"},
	"needs_host_service": {"NeedsHostService", "A test needs a service of the host (a database, a daemon).", "error"},
}

// finding adds a check's finding.
func (b *sarifBuilder) finding(check string, f Finding) {
	id := sarifRulePrefix + f.Kind
	k, ok := sarifKinds[f.Kind]
	if !ok {
		k.name, k.desc, k.level = "Finding", "The "+check+" check reported a problem of kind "+f.Kind+".", "error"
	}
	i := b.rule(id, func() SARIFRule {
		return SARIFRule{ID: id, Name: k.name, ShortDescription: SARIFText{Text: k.desc},
			DefaultConfiguration: SARIFRuleConfig{Level: k.level}, Properties: &SARIFRuleProps{Tags: []string{check}}}
	})
	msg := f.Message
	if f.Test != "" {
		msg = f.Test + ": " + msg
	}
	if msg == "" {
		msg = k.desc
	}
	props := map[string]string{"check": check}
	if f.Package != "" {
		props["package"] = f.Package
	}
	if f.Test != "" {
		props["test"] = f.Test
	}
	key := f.Key
	if key == "" {
		key = sarifHash("finding", f.Kind, f.Package, f.Test, f.File, f.Message)
	}
	b.results = append(b.results, SARIFResult{
		RuleID: id, RuleIndex: i, Level: k.level, Message: SARIFText{Text: msg},
		Locations:    []SARIFLocation{b.location(f.File, f.Line, f.Col)},
		Fingerprints: map[string]string{SARIFFingerprint: key}, PartialFingerprints: map[string]string{SARIFFingerprint: key},
		Properties: props,
	})
}

// vuln adds a vulnerability of the scan of module.
func (b *sarifBuilder) vuln(module string, v Vuln) {
	level := map[Level]string{LevelCalled: "error", LevelImported: "warning", LevelRequired: "note"}[v.Level]
	if level == "" {
		level = "warning"
	}
	i := b.rule(v.ID, func() SARIFRule {
		short := v.Summary
		if short == "" {
			short = "a vulnerability in " + v.Module
		}
		r := SARIFRule{ID: v.ID, Name: strings.ReplaceAll(v.ID, "-", ""), ShortDescription: SARIFText{Text: v.ID + ": " + short},
			HelpURI:              VEXVulnIRI + v.ID,
			DefaultConfiguration: SARIFRuleConfig{Level: "error"},
			Properties:           &SARIFRuleProps{Tags: []string{"security", "vulnerability"}}}
		if v.URL != "" {
			r.HelpURI = v.URL
		}
		full := v.Summary
		if len(v.Aliases) > 0 {
			full += " (" + strings.Join(v.Aliases, ", ") + ")"
		}
		r.FullDescription = &SARIFText{Text: strings.TrimSpace(full)}
		return r
	})
	where := v.Module + "@" + v.Version
	if v.Package != "" {
		where = v.Package + " (" + where + ")"
	}
	var msg string
	switch v.Level {
	case LevelCalled:
		msg = v.ID + ": the module's code calls vulnerable code in " + where
	case LevelImported:
		msg = v.ID + ": the module imports " + where + "; no call reaches its vulnerable symbols"
	default:
		msg = v.ID + ": the module requires " + where + "; none of its vulnerable packages is imported"
	}
	if u := v.Upgrade(); u != "" {
		msg += ". Fixed in " + v.Fixed + ": " + u
	} else {
		msg += ". No fix is known yet"
	}
	res := SARIFResult{RuleID: v.ID, RuleIndex: i, Level: level, Message: SARIFText{Text: msg},
		Properties: map[string]string{"level": string(v.Level), "module": v.Module, "version": v.Version}}
	if v.Fixed != "" {
		res.Properties["fixed"] = v.Fixed
	}
	// The location: the trace's first frame in the module's own code
	// (positions of other modules' frames are relative to those modules),
	// else go.mod, where the requirement is.
	loc := b.location("", 0, 0)
	found := false
	var frames []SARIFFrame
	for _, f := range v.Trace {
		own := module != "" && (f.Package == module || strings.HasPrefix(f.Package, module+"/"))
		fr := SARIFFrame{Location: SARIFLocation{Message: &SARIFText{Text: f.Package + "." + f.Function}}}
		if file, line, col := SplitPosition(f.Position); own && line > 0 {
			fl := b.location(file, line, col)
			fr.Location.PhysicalLocation = fl.PhysicalLocation
			if !found {
				loc, found = fl, true
			}
		}
		frames = append(frames, fr)
	}
	res.Locations = []SARIFLocation{loc}
	if len(frames) > 0 {
		res.Stacks = []SARIFStack{{Message: SARIFText{Text: "a call path from the module's code to the vulnerable symbol"}, Frames: frames}}
	}
	key := "vuln:" + sarifHash(v.ID, v.Module)
	res.Fingerprints = map[string]string{SARIFFingerprint: key}
	res.PartialFingerprints = map[string]string{SARIFFingerprint: key}
	b.results = append(b.results, res)
}

// SplitPosition reads a Go position, "file.go:12:3" or "file.go:12",
// into its file, line and column (0 when absent); a pos without a line is
// the file alone.
func SplitPosition(pos string) (file string, line, col int) {
	parts := strings.Split(pos, ":")
	if len(parts) >= 2 {
		if line, err := strconv.Atoi(parts[1]); err == nil {
			if len(parts) >= 3 {
				col, _ = strconv.Atoi(parts[2])
			}
			return parts[0], line, col
		}
	}
	return pos, 0, 0
}

// sarifHash is the first 16 hex digits of a SHA-256 over parts, each
// length-prefixed.
func sarifHash(parts ...string) string {
	h := sha256.New()
	for _, s := range parts {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	return fmt.Sprintf("%x", h.Sum(nil)[:8])
}

// WriteSARIF writes l as indented JSON, as the text of a log file.
func WriteSARIF(w io.Writer, l *SARIFLog) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}
