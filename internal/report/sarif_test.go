package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// sarifSchemaFile is the OASIS SARIF 2.1.0 schema (errata 01), as
// published; testdata/sarif-schema-2.1.0.md says where the copy comes from.
const sarifSchemaFile = "testdata/sarif-schema-2.1.0.json"

// validateSARIF validates the log b against the official schema.
func validateSARIF(t *testing.T, b []byte) error {
	t.Helper()
	f, err := os.Open(sarifSchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(SARIFSchema, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(SARIFSchema)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(v)
}

func encodeSARIF(t *testing.T, l *SARIFLog) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteSARIF(&b, l); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestSARIF_Schema: the logs of a failing and inconclusive validation, of
// a scan with every level, of a refusal and of a module in a
// subdirectory validate against the SARIF 2.1.0 schema; the first two are
// golden.
func TestSARIF_Schema(t *testing.T) {
	sub := vexScan()
	sub.Source.Subdir = "tools/vuln"
	refused := New("/x")
	refused.Module = "example.com/w"
	refused.Refusal = &Refusal{Kind: "workspace", Reason: "go.work workspaces are not supported yet"}
	refused.Finish(time.Millisecond)
	for _, tc := range []struct {
		name   string
		log    *SARIFLog
		golden string
	}{
		{"inspect", sample().SARIF("inspect"), "sarif-inspect.json"},
		{"scan", vexScan().SARIF("scan"), "sarif-scan.json"},
		{"subdir", sub.SARIF("scan"), ""},
		{"refused", refused.SARIF("inspect"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := encodeSARIF(t, tc.log)
			if err := validateSARIF(t, b); err != nil {
				t.Errorf("the log does not validate against the SARIF 2.1.0 schema: %v\n%s", err, b)
			}
			if tc.golden != "" {
				golden(t, filepath.Join("testdata", tc.golden), b, *update)
			}
		})
	}
	// The validator is not a no-op: a level SARIF does not define fails.
	bad := sample().SARIF("inspect")
	bad.Runs[0].Results[0].Level = "fatal"
	if err := validateSARIF(t, encodeSARIF(t, bad)); err == nil {
		t.Error("a result with level \"fatal\" validates")
	}
}

// TestSARIF_Results: one result per finding and per vulnerability, each
// rule once, the index pointing at it; a run that could not be trusted is
// not a successful execution.
func TestSARIF_Results(t *testing.T) {
	r := sample().SARIF("inspect").Runs[0]
	if len(r.Results) != 2 {
		t.Fatalf("%d results; want 2 (the vet finding and the timeout)", len(r.Results))
	}
	for _, res := range r.Results {
		if r.Tool.Driver.Rules[res.RuleIndex].ID != res.RuleID {
			t.Errorf("result %s points at rule %s", res.RuleID, r.Tool.Driver.Rules[res.RuleIndex].ID)
		}
	}
	vet := r.Results[0]
	if vet.RuleID != "stockade/vet" || vet.Level != "warning" {
		t.Errorf("vet result: rule %s level %s", vet.RuleID, vet.Level)
	}
	if loc := vet.Locations[0].PhysicalLocation; loc.ArtifactLocation.URI != "m.go" || loc.Region == nil || loc.Region.StartLine != 7 {
		t.Errorf("vet location %+v; want m.go line 7", loc)
	}
	if inv := r.Invocations[0]; inv.ExecutionSuccessful || len(inv.Notifications) == 0 || !strings.Contains(inv.Notifications[0].Message.Text, "timed out") {
		t.Errorf("inconclusive test check: invocation %+v; want unsuccessful, naming the reason", inv)
	}

	sub := vexScan()
	sub.Source.Subdir = "tools/vuln"
	s := sub.SARIF("scan").Runs[0]
	if len(s.Results) != len(sub.Vulns.Vulns) {
		t.Fatalf("%d results; want one per vulnerability, %d", len(s.Results), len(sub.Vulns.Vulns))
	}
	byID := map[string]SARIFResult{}
	for _, res := range s.Results {
		byID[res.RuleID] = res
	}
	for _, tc := range []struct {
		id, level, uri string
		line           int
	}{
		{"GO-2099-0001", "error", "tools/vuln/vuln.go", 18}, // called: the module's own frame
		{"GO-2099-0002", "warning", "tools/vuln/go.mod", 0}, // imported
		{"GO-2099-0007", "note", "tools/vuln/go.mod", 0},    // required
		{"GO-2099-0004", "error", "tools/vuln/go.mod", 0},   // called, no position
	} {
		res := byID[tc.id]
		loc := res.Locations[0].PhysicalLocation
		line := 0
		if loc.Region != nil {
			line = loc.Region.StartLine
		}
		if res.Level != tc.level || loc.ArtifactLocation.URI != tc.uri || line != tc.line {
			t.Errorf("%s: level %s at %s:%d; want %s at %s:%d", tc.id, res.Level, loc.ArtifactLocation.URI, line, tc.level, tc.uri, tc.line)
		}
	}
	if st := byID["GO-2099-0001"].Stacks; len(st) != 1 || len(st[0].Frames) != 2 || st[0].Frames[1].Location.PhysicalLocation != nil {
		t.Errorf("called vulnerability's stack %+v; want two frames, the other module's without a location in this repository", st)
	}
}

// TestSARIF_Fingerprints: the same finding at another line, with other
// raw output, is the same alert; another message or test is another.
func TestSARIF_Fingerprints(t *testing.T) {
	fp := func(f Finding, v *Vuln) string {
		r := New("/x")
		r.Module = "example.com/m"
		r.Checks = []Check{{Name: "test", Status: StatusFail, Findings: []Finding{f}}}
		if v != nil {
			r.Checks = nil
			r.Vulns = &VulnScan{Status: ScanComplete, Vulns: []Vuln{*v}}
		}
		r.Finish(0)
		return r.SARIF("inspect").Runs[0].Results[0].PartialFingerprints[SARIFFingerprint]
	}
	base := Finding{Key: "test:0011223344556677", Kind: "test", Package: "example.com/m", Test: "TestX", File: "m_test.go", Line: 12, Message: "got 1"}
	moved := base
	moved.Line, moved.Detail = 40, "other output"
	other := base
	other.Key = "test:8899aabbccddeeff"
	if fp(base, nil) != fp(moved, nil) {
		t.Error("the same finding at another line has another fingerprint")
	}
	if fp(base, nil) == fp(other, nil) {
		t.Error("another finding has the same fingerprint")
	}
	v := Vuln{ID: "GO-2099-0001", Level: LevelImported, Module: "example.com/dep", Version: "v1.0.0", Package: "example.com/dep/a"}
	called := v
	called.Level, called.Trace = LevelCalled, []Frame{{Package: "example.com/m", Function: "F", Position: "m.go:3:1"}}
	if fp(Finding{}, &v) != fp(Finding{}, &called) {
		t.Error("a vulnerability that becomes called is another alert")
	}
	if !strings.HasPrefix(fp(Finding{}, &v), "vuln:") {
		t.Errorf("vulnerability fingerprint %q; want vuln: prefix", fp(Finding{}, &v))
	}
}
