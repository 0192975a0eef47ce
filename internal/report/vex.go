package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// OpenVEX: a complete scan as an OpenVEX v0.2.0 document
// (https://openvex.dev), one statement per vulnerability the scan found,
// with the statuses govulncheck's own -format openvex gives: a called
// vulnerability is affected; one only imported or required is not
// affected, justified as vulnerable_code_not_in_execute_path (the scan is
// always at symbol level, vulnjson refuses any other).
//
// The document is built from the scan in the report, the one parse of the
// scanner's stream, and depends on nothing else: the same module, source,
// scanner and database give the same bytes. Its timestamp is the
// database's modified time (the statements are true as of that database),
// and its @id is derived from the rest of its content.

// OpenVEX constants.
const (
	// VEXContext is the @context of every document: OpenVEX v0.2.0.
	VEXContext = "https://openvex.dev/ns/v0.2.0"
	// VEXAuthor is the author of every document, as govulncheck writes
	// it: the person or organisation that publishes the document is not
	// known to the scan.
	VEXAuthor = "Unknown Author"
	// VEXIDPrefix begins every document's @id; the rest is the hex
	// sha256 of the document's JSON with an empty @id.
	VEXIDPrefix = "urn:stockade:vex:sha256:"
	// VEXVulnIRI, followed by a Go vulnerability ID, is a statement's
	// vulnerability @id.
	VEXVulnIRI = "https://pkg.go.dev/vuln/"
)

// VEX statuses and justification, as the OpenVEX specification defines
// them.
const (
	VEXAffected    = "affected"
	VEXNotAffected = "not_affected"
	// VEXNotInExecutePath justifies not_affected: the vulnerable code is
	// present but not reachable from the module's code.
	VEXNotInExecutePath = "vulnerable_code_not_in_execute_path"
)

// ErrNoVEX reports a report from which no OpenVEX document may be made: no
// scan ran, or the scan is inconclusive, so no statement about any
// vulnerability could be trusted (an empty document would claim that none
// affects the module).
var ErrNoVEX = errors.New("report: no OpenVEX document")

// VEX is an OpenVEX document.
type VEX struct {
	Context string `json:"@context"`
	ID      string `json:"@id"`
	Author  string `json:"author"`
	// Timestamp is the database's modified time, UTC.
	Timestamp time.Time `json:"timestamp"`
	Version   int       `json:"version"` // always 1: each document is made whole, never amended
	// Tooling names Stockade, the scanner (version, sha256, its Go) and
	// the database (modified time, content hash).
	Tooling string `json:"tooling"`
	// Statements are one per vulnerability, by ID; empty when the scan
	// found none.
	Statements []VEXStatement `json:"statements"`
}

// VEXStatement is what the scan says of one vulnerability.
type VEXStatement struct {
	Vulnerability VEXVulnerability `json:"vulnerability"`
	Products      []VEXProduct     `json:"products"`
	Status        string           `json:"status"` // VEXAffected or VEXNotAffected
	// StatusNotes, when affected, is the call trace that reaches the
	// vulnerable symbol.
	StatusNotes string `json:"status_notes,omitempty"`
	// Justification and ImpactStatement say, when not affected, why.
	Justification   string `json:"justification,omitempty"`
	ImpactStatement string `json:"impact_statement,omitempty"`
	// ActionStatement says, when affected, what fixes it.
	ActionStatement string `json:"action_statement,omitempty"`
}

// VEXVulnerability names a vulnerability.
type VEXVulnerability struct {
	ID          string   `json:"@id"`  // VEXVulnIRI + Name
	Name        string   `json:"name"` // such as "GO-2024-3250"
	Description string   `json:"description,omitempty"`
	Aliases     []string `json:"aliases,omitempty"` // CVE and GHSA IDs
}

// VEXProduct is the scanned module, with the affected module as its
// subcomponent.
type VEXProduct struct {
	// ID is the module's package URL: pkg:golang/PATH, with @COMMIT when
	// the committed tree of a git checkout was scanned.
	ID            string         `json:"@id"`
	Subcomponents []VEXComponent `json:"subcomponents,omitempty"`
}

// VEXComponent is an affected module: pkg:golang/PATH@VERSION
// (pkg:golang/stdlib@VERSION for the standard library).
type VEXComponent struct {
	ID string `json:"@id"`
}

// OpenVEX returns r's scan as an OpenVEX document. It fails with ErrNoVEX
// when r has no scan, the scan is inconclusive, or r lacks what the
// document must name (the module, the database's modified time).
func OpenVEX(r *Report) (*VEX, error) {
	s := r.Vulns
	switch {
	case s == nil:
		return nil, fmt.Errorf("%w: no vulnerability scan ran", ErrNoVEX)
	case s.Status != ScanComplete:
		why := "the scan is " + string(s.Status)
		if len(s.Reasons) > 0 {
			why += ": " + strings.Join(s.Reasons, "; ")
		}
		return nil, fmt.Errorf("%w: %s", ErrNoVEX, why)
	case r.Module == "":
		return nil, fmt.Errorf("%w: the report names no module", ErrNoVEX)
	case s.DB.Modified.IsZero() || s.DB.SHA256 == "":
		return nil, fmt.Errorf("%w: the scan does not identify its database", ErrNoVEX)
	}
	product := "pkg:golang/" + purlEscape(r.Module, true)
	if r.Source != nil && r.Source.Kind == "commit" && r.Source.Commit != "" {
		product += "@" + purlEscape(r.Source.Commit, false)
	}
	d := &VEX{
		Context:   VEXContext,
		Author:    VEXAuthor,
		Timestamp: s.DB.Modified.UTC(),
		Version:   1,
		Tooling: fmt.Sprintf("stockade scan: %s %s (sha256 %s, built by %s), database modified %s (sha256 %s)",
			s.Scanner.Name, s.Scanner.Version, s.Scanner.SHA256, s.Scanner.GoVersion, s.DB.Modified.UTC().Format(time.RFC3339), s.DB.SHA256),
		Statements: []VEXStatement{},
	}
	for _, v := range s.Vulns {
		d.Statements = append(d.Statements, vexStatement(v, product))
	}
	sort.Slice(d.Statements, func(i, j int) bool { return d.Statements[i].Vulnerability.Name < d.Statements[j].Vulnerability.Name })
	b, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	d.ID = VEXIDPrefix + hex.EncodeToString(sum[:])
	return d, nil
}

// vexStatement is v's statement about product.
func vexStatement(v Vuln, product string) VEXStatement {
	sub := "pkg:golang/" + purlEscape(v.Module, true)
	if v.Version != "" {
		sub += "@" + purlEscape(v.Version, false)
	}
	st := VEXStatement{
		Vulnerability: VEXVulnerability{ID: VEXVulnIRI + v.ID, Name: v.ID, Description: v.Summary, Aliases: v.Aliases},
		Products:      []VEXProduct{{ID: product, Subcomponents: []VEXComponent{{ID: sub}}}},
	}
	switch v.Level {
	case LevelCalled:
		st.Status = VEXAffected
		var path []string
		for _, f := range v.Trace {
			p := f.Package + "." + f.Function
			if f.Position != "" {
				p += " (" + f.Position + ")"
			}
			path = append(path, p)
		}
		st.StatusNotes = "govulncheck found a call path from the module's code to the vulnerable code: " + strings.Join(path, " -> ")
		if u := v.Upgrade(); u != "" {
			st.ActionStatement = "fixed in " + v.Fixed + ": " + u
		} else {
			st.ActionStatement = "no fixed version is known yet: avoid the call path in status_notes"
		}
	default:
		st.Status = VEXNotAffected
		st.Justification = VEXNotInExecutePath
		if v.Level == LevelImported {
			st.ImpactStatement = "govulncheck determined that the vulnerable code isn't called: " + v.Package + " is imported, but no call path reaches its vulnerable symbols"
		} else {
			st.ImpactStatement = "govulncheck determined that the vulnerable code isn't called: " + v.Module + "@" + v.Version + " is required, but none of its vulnerable packages is imported"
		}
	}
	return st
}

// WriteOpenVEX writes d as indented JSON, as the text of a document file.
func WriteOpenVEX(w io.Writer, d *VEX) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// purlEscape percent-encodes s for a package URL: every byte but ASCII
// letters, digits and "-._~" (and "/" between a path's segments, with
// path), so "+incompatible" becomes "%2Bincompatible". Case is kept: Go
// module paths are case-sensitive.
func purlEscape(s string, path bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~', path && c == '/':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
