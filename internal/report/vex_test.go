package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// vexScan is a report of a complete scan with one vulnerability of each
// kind the fixture reaches (testdata/repos/vuln against the fixture
// database): called with a fix, a module-level advisory reached by a call,
// the standard library, called without a fix, imported, required.
func vexScan() *Report {
	r := New("/x")
	r.Module, r.Go = "stockade.test/repo/vuln", "1.24"
	r.Source = &Source{Kind: "commit", Commit: "0123456789abcdef0123456789abcdef01234567"}
	trace := func(fn string) []Frame {
		return []Frame{{Package: "stockade.test/repo/vuln", Function: "Shout", Position: "vuln.go:18:59"}, {Package: "stockade.test/vulnlib/a", Function: fn, Position: "a/a.go:6:6"}}
	}
	r.Vulns = &VulnScan{
		Status:  ScanComplete,
		Scanner: Scanner{Name: "govulncheck", Version: "v1.9.0", SHA256: strings.Repeat("ab", 32), GoVersion: "go1.26.8"},
		DB:      VulnDB{Modified: time.Date(2025, 1, 2, 4, 4, 5, 0, time.UTC), SHA256: strings.Repeat("f1", 32)},
		Vulns: []Vuln{
			{ID: "GO-2099-0001", Aliases: []string{"CVE-2099-0001"}, Summary: "Bad does bad things", Level: LevelCalled, Module: "stockade.test/vulnlib", Version: "v1.0.0", Package: "stockade.test/vulnlib/a", Fixed: "v1.1.0", Trace: trace("Bad")},
			{ID: "GO-2099-0003", Summary: "Everything is unsafe", Level: LevelCalled, Module: "stockade.test/othermod", Version: "v1.0.0", Package: "stockade.test/othermod", Fixed: "v1.0.1",
				Trace: []Frame{{Package: "stockade.test/repo/vuln", Function: "Greet", Position: "vuln.go:27:44"}, {Package: "stockade.test/othermod", Function: "Hello"}}},
			{ID: "GO-2099-0004", Summary: "ToUpper is unsafe", Level: LevelCalled, Module: "stdlib", Version: "v1.26.8", Package: "strings", Fixed: "v1.26.9",
				Trace: []Frame{{Package: "stockade.test/repo/vuln", Function: "Shout"}, {Package: "strings", Function: "ToUpper"}}},
			{ID: "GO-2099-0005", Summary: "Worse has no fix", Level: LevelCalled, Module: "stockade.test/vulnlib", Version: "v1.0.0", Package: "stockade.test/vulnlib/a", Trace: trace("Worse")},
			{ID: "GO-2099-0002", Summary: "Unused is unsafe", Level: LevelImported, Module: "stockade.test/vulnlib", Version: "v1.0.0", Package: "stockade.test/vulnlib/b", Fixed: "v1.1.0"},
			{ID: "GO-2099-0007", Summary: "Risky is unsafe", Level: LevelRequired, Module: "stockade.test/vulnlib", Version: "v1.0.0", Fixed: "v1.1.0"},
		},
		Withdrawn: []string{"GO-2099-0006"},
	}
	r.FinishScan(time.Second)
	return r
}

// TestOpenVEX_Statements: called is affected with the upgrade as the
// action and the trace as notes; imported and required are not affected,
// justified as not in the execute path, as govulncheck's openvex mode
// says; the affected module is the product's subcomponent.
func TestOpenVEX_Statements(t *testing.T) {
	d, err := OpenVEX(vexScan())
	if err != nil {
		t.Fatal(err)
	}
	const product = "pkg:golang/stockade.test/repo/vuln@0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		id, status, justification, sub string
		action, notes, impact          string // substrings; "" wants the field empty
	}{
		{id: "GO-2099-0001", status: VEXAffected, sub: "pkg:golang/stockade.test/vulnlib@v1.0.0",
			action: "fixed in v1.1.0: go get stockade.test/vulnlib@v1.1.0", notes: "stockade.test/repo/vuln.Shout (vuln.go:18:59) -> stockade.test/vulnlib/a.Bad (a/a.go:6:6)"},
		{id: "GO-2099-0002", status: VEXNotAffected, justification: VEXNotInExecutePath, sub: "pkg:golang/stockade.test/vulnlib@v1.0.0",
			impact: "stockade.test/vulnlib/b is imported, but no call path"},
		{id: "GO-2099-0003", status: VEXAffected, sub: "pkg:golang/stockade.test/othermod@v1.0.0",
			action: "go get stockade.test/othermod@v1.0.1", notes: "stockade.test/othermod.Hello"},
		{id: "GO-2099-0004", status: VEXAffected, sub: "pkg:golang/stdlib@v1.26.8",
			action: "upgrade Go to go1.26.9 or later", notes: "strings.ToUpper"},
		{id: "GO-2099-0005", status: VEXAffected, sub: "pkg:golang/stockade.test/vulnlib@v1.0.0",
			action: "no fixed version is known yet", notes: "stockade.test/vulnlib/a.Worse"},
		{id: "GO-2099-0007", status: VEXNotAffected, justification: VEXNotInExecutePath, sub: "pkg:golang/stockade.test/vulnlib@v1.0.0",
			impact: "stockade.test/vulnlib@v1.0.0 is required, but none of its vulnerable packages is imported"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			i := slices.IndexFunc(d.Statements, func(s VEXStatement) bool { return s.Vulnerability.Name == tc.id })
			if i < 0 {
				t.Fatalf("no statement for %s", tc.id)
			}
			s := d.Statements[i]
			if s.Status != tc.status || s.Justification != tc.justification {
				t.Errorf("status %q justification %q; want %q %q", s.Status, s.Justification, tc.status, tc.justification)
			}
			if s.Vulnerability.ID != VEXVulnIRI+tc.id || s.Vulnerability.Description == "" {
				t.Errorf("vulnerability = %+v; want @id %s%s and the summary", s.Vulnerability, VEXVulnIRI, tc.id)
			}
			if len(s.Products) != 1 || s.Products[0].ID != product || len(s.Products[0].Subcomponents) != 1 || s.Products[0].Subcomponents[0].ID != tc.sub {
				t.Errorf("products = %+v; want %s with subcomponent %s", s.Products, product, tc.sub)
			}
			for _, f := range []struct{ name, got, want string }{
				{"action_statement", s.ActionStatement, tc.action},
				{"status_notes", s.StatusNotes, tc.notes},
				{"impact_statement", s.ImpactStatement, tc.impact},
			} {
				if f.want == "" && f.got != "" || !strings.Contains(f.got, f.want) {
					t.Errorf("%s = %q; want %q in it", f.name, f.got, f.want)
				}
			}
		})
	}
	if len(d.Statements) != 6 {
		t.Errorf("%d statements; want 6 (one per vulnerability, the withdrawn one not among them)", len(d.Statements))
	}
	if d.Context != VEXContext || d.Author == "" || d.Version != 1 || !d.Timestamp.Equal(vexScan().Vulns.DB.Modified) {
		t.Errorf("document head = %q %q %d %v; want the v0.2.0 context, an author, version 1, the database's modified time", d.Context, d.Author, d.Version, d.Timestamp)
	}
}

// TestOpenVEX_Refuses: no document claims anything from a report without
// a trustworthy scan.
func TestOpenVEX_Refuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(r *Report)
		reason string
	}{
		{"no scan", func(r *Report) { r.Vulns = nil }, "no vulnerability scan ran"},
		{"inconclusive", func(r *Report) {
			r.Vulns.Status = ScanInconclusive
			r.Vulns.Reasons = []string{"the scanner's output passed its cap and was cut"}
		}, "passed its cap"},
		{"inconclusive, nothing found", func(r *Report) {
			r.Vulns.Status, r.Vulns.Vulns = ScanInconclusive, []Vuln{}
		}, "inconclusive"},
		{"no module", func(r *Report) { r.Module = "" }, "no module"},
		{"unidentified database", func(r *Report) { r.Vulns.DB = VulnDB{} }, "database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := vexScan()
			tc.change(r)
			d, err := OpenVEX(r)
			if !errors.Is(err, ErrNoVEX) || d != nil || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("OpenVEX = %v, %v; want ErrNoVEX saying %q", d, err, tc.reason)
			}
		})
	}
}

// TestOpenVEX_Deterministic: the document depends on the scan alone (not
// on the order of its vulnerabilities), and its @id is the sha256 of the
// rest of it, so any change of content changes it.
func TestOpenVEX_Deterministic(t *testing.T) {
	encode := func(r *Report) []byte {
		t.Helper()
		d, err := OpenVEX(r)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := WriteOpenVEX(&b, d); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	base := encode(vexScan())
	reversed := vexScan()
	slices.Reverse(reversed.Vulns.Vulns)
	if !bytes.Equal(encode(vexScan()), base) || !bytes.Equal(encode(reversed), base) {
		t.Fatal("the same scan gives different documents")
	}
	var d VEX
	if err := json.Unmarshal(base, &d); err != nil {
		t.Fatal(err)
	}
	id := d.ID
	d.ID = ""
	b, _ := json.Marshal(d)
	if sum := sha256.Sum256(b); id != VEXIDPrefix+hex.EncodeToString(sum[:]) {
		t.Errorf("@id %s is not the sha256 of the document without it", id)
	}
	for name, change := range map[string]func(r *Report){
		"another database":   func(r *Report) { r.Vulns.DB.SHA256 = strings.Repeat("0", 64) },
		"another commit":     func(r *Report) { r.Source.Commit = strings.Repeat("1", 40) },
		"a weaker level":     func(r *Report) { r.Vulns.Vulns[0].Level = LevelImported },
		"another scanner":    func(r *Report) { r.Vulns.Scanner.SHA256 = strings.Repeat("cd", 32) },
		"no vulnerabilities": func(r *Report) { r.Vulns.Vulns = []Vuln{} },
	} {
		r := vexScan()
		change(r)
		var o VEX
		if err := json.Unmarshal(encode(r), &o); err != nil {
			t.Fatal(err)
		}
		if o.ID == id {
			t.Errorf("%s: same @id %s", name, id)
		}
	}
}

// TestOpenVEX_Golden is the document of the fixture-like scan.
func TestOpenVEX_Golden(t *testing.T) {
	d, err := OpenVEX(vexScan())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteOpenVEX(&b, d); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "vex.json"), b.Bytes(), *update)
}

func TestPurlEscape(t *testing.T) {
	for _, tc := range []struct {
		in   string
		path bool
		want string
	}{
		{"github.com/Azure/go-autorest", true, "github.com/Azure/go-autorest"},
		{"gopkg.in/yaml.v3", true, "gopkg.in/yaml.v3"},
		{"v2.0.0+incompatible", false, "v2.0.0%2Bincompatible"},
		{"v0.0.0-20210107192922-496545a6307b", false, "v0.0.0-20210107192922-496545a6307b"},
		{"a/b", false, "a%2Fb"},
		{"x y@z", true, "x%20y%40z"},
	} {
		if got := purlEscape(tc.in, tc.path); got != tc.want {
			t.Errorf("purlEscape(%q, %v) = %q; want %q", tc.in, tc.path, got, tc.want)
		}
	}
}
