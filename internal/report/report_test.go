package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestFinish(t *testing.T) {
	check := func(s Status) Check { return Check{Name: "x", Status: s} }
	for _, tc := range []struct {
		name    string
		refusal *Refusal
		checks  []Check
		want    Verdict
		code    int
	}{
		{"all pass", nil, []Check{check(StatusPass), check(StatusPass)}, Clean, 0},
		{"one fail", nil, []Check{check(StatusPass), check(StatusFail)}, Failing, 3},
		{"inconclusive beats fail", nil, []Check{check(StatusInconclusive), check(StatusFail)}, Inconclusive, 3},
		{"fail then inconclusive", nil, []Check{check(StatusFail), check(StatusInconclusive)}, Inconclusive, 3},
		{"not run is inconclusive", nil, []Check{check(StatusPass), check(StatusNotRun)}, Inconclusive, 3},
		{"nothing ran is never clean", nil, nil, Inconclusive, 3},
		{"refused", &Refusal{Kind: "vendor", Reason: "r"}, nil, Unsupported, 2},
		{"malformed go.mod", &Refusal{Kind: RefusalMalformedGoMod, Reason: "r"}, nil, Failing, 3},
		{"acquisition failed", nil, nil, AcquisitionFailed, 4},
		{"timed out after passing checks", nil, []Check{check(StatusPass)}, Inconclusive, 3},
		{"inconclusive scan after passing checks", nil, []Check{check(StatusPass)}, Inconclusive, 3},
		{"complete scan with a called vulnerability after passing checks", nil, []Check{check(StatusPass)}, Vulnerable, 3},
		{"complete scan with a called vulnerability after a failing check", nil, []Check{check(StatusFail)}, Failing, 3},
		{"complete scan with an imported vulnerability after passing checks", nil, []Check{check(StatusPass)}, Clean, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New("/d")
			r.Refusal = tc.refusal
			switch tc.name {
			case "acquisition failed":
				r.Acquisition = &Acquisition{Reason: "r"}
			case "timed out after passing checks":
				r.TimedOut = "candidates"
			case "inconclusive scan after passing checks":
				r.Vulns = &VulnScan{Status: ScanInconclusive, Reasons: []string{"output truncated"}}
			case "complete scan with a called vulnerability after passing checks", "complete scan with a called vulnerability after a failing check":
				r.Vulns = &VulnScan{Status: ScanComplete, Vulns: []Vuln{{ID: "GO-2099-0001", Level: LevelCalled}}}
			case "complete scan with an imported vulnerability after passing checks":
				r.Vulns = &VulnScan{Status: ScanComplete, Vulns: []Vuln{{ID: "GO-2099-0002", Level: LevelImported}}}
			}
			r.Checks = append(r.Checks, tc.checks...)
			r.Finish(time.Second)
			if r.Verdict != tc.want || r.ExitCode != tc.code {
				t.Errorf("Finish: verdict %s, exit %d; want %s, %d", r.Verdict, r.ExitCode, tc.want, tc.code)
			}
		})
	}
}

// sample is a report exercising every section of the text layout.
func sample() *Report {
	r := New("/home/u/src/m")
	r.Module = "example.com/m"
	r.Go = "1.16"
	r.Source = &Source{Kind: "commit", Commit: "0123456789abcdef0123456789abcdef01234567"}
	r.Image = &Image{Ref: "stockade/go:1.26.8-local", ID: "sha256:8248d61c0446aaaa", GoVersion: "go1.26.8", Minor: "1.26", Local: true, StandIn: true, Built: true}
	r.Notes = []string{"no image for go 1.26 was present; built stockade/go:1.26.8-local from the host's Go"}
	r.Checks = []Check{
		{Name: "list", Status: StatusPass, Packages: 3},
		{Name: "build", Status: StatusPass},
		{Name: "vet", Status: StatusFail, ExitCode: 1, Findings: []Finding{
			{Key: "vet:example.com/m:m.go:abc", Kind: "vet", Package: "example.com/m", File: "m.go", Line: 7, Message: "self-assignment of name to name"},
		}},
		{Name: "test", Status: StatusInconclusive, Reasons: []string{"timed out"}, ExitCode: 137, Packages: 2, Tests: &TestCount{Passed: 4, Skipped: 1},
			Findings: []Finding{{Key: "timeout:example.com/m/hang", Kind: "timeout", Package: "example.com/m/hang", Message: "no final event before the timeout\nsecond line", Detail: "=== RUN TestForever (0.00s)"}}},
	}
	r.Candidates = []Candidate{
		{Path: "example.com/dep", Current: "v1.0.0", Version: "v1.0.1", Class: "patch"},
		{Path: "example.com/dep/v2", Current: "v1.0.0", Version: "v2.0.0", Class: "major"},
		{Path: "example.com/next", Current: "v0.1.0", Version: "v0.2.0", Class: "minor", RequiresNewerToolchain: true, GoVersion: "1.99"},
	}
	r.Timings.AddPhase("acquire", 1200*time.Millisecond)
	r.Timings.AddPhase("validate", 31*time.Second)
	r.Finish(33 * time.Second)
	return r
}

func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *Report
	}{
		{"sample", sample()},
		{"sample-normalized", Normalized(sample())},
		{"acquisition-failed", func() *Report {
			r := New("/x")
			r.Module, r.Go = "example.com/m", "1.24"
			r.Source = &Source{Kind: "commit", Commit: "0123456789abcdef0123456789abcdef01234567", Uncommitted: true}
			r.Acquisition = &Acquisition{Reason: "go mod download failed (exit 1)",
				Detail: "go: example.com/dep@v1.9.0: reading file:///fixture-proxy/example.com/dep/@v/v1.9.0.info: file does not exist\n"}
			r.Finish(3 * time.Millisecond)
			return r
		}()},
		{"egress-refused", egressRefused()},
		{"egress-refused-normalized", Normalized(egressRefused())},
		{"timed-out", func() *Report {
			r := New("/x")
			r.Module, r.Go = "example.com/m", "1.24"
			r.Source = &Source{Kind: "directory"}
			r.TimedOut, r.TimedOutBy = "acquire", "the acquisition's budget (10m0s)"
			r.CandidatesError = "the -deadline ran out first"
			r.Finish(3 * time.Millisecond)
			return r
		}()},
		{"refused", func() *Report {
			r := New("/x")
			r.Module, r.Go = "example.com/w", "1.24"
			r.Refusal = &Refusal{Kind: "workspace", Reason: "go.work workspaces are not supported yet"}
			r.Finish(3 * time.Millisecond)
			return r
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var text, js bytes.Buffer
			if err := WriteText(&text, tc.r); err != nil {
				t.Fatal(err)
			}
			if err := WriteJSON(&js, tc.r); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", tc.name+".txt"), text.Bytes(), *update)
			golden(t, filepath.Join("testdata", tc.name+".json"), js.Bytes(), *update)
			var back Report
			if err := json.Unmarshal(js.Bytes(), &back); err != nil {
				t.Fatalf("JSON report does not read back: %v", err)
			}
		})
	}
}

// egressRefused is an acquisition the egress gate cut short: the proxy
// redirected to a host the gate refused.
func egressRefused() *Report {
	at := time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC)
	recs := []domain.EgressRecord{
		{Time: at, Method: "GET", Host: "proxy.test", Port: "8080", Addr: "10.215.7.2:8080", Verdict: domain.EgressAllowed, Status: 302, BytesDn: 0, Duration: 3 * time.Millisecond},
		{Time: at.Add(time.Millisecond), Method: "GET", Host: "denied.test", Port: "8080", Verdict: domain.EgressRefused, Reason: "host not allowed: denied.test", Status: 403, Duration: time.Millisecond},
	}
	r := New("/x")
	r.Module, r.Go = "example.com/m", "1.24"
	r.Source = &Source{Kind: "directory"}
	r.Acquisition = &Acquisition{Reason: "go mod download failed (exit 1)", RefusedHosts: RefusedHosts(recs),
		Detail: "go: example.com/dep@v1.0.0: reading http://proxy.test:8080/example.com/dep/@v/v1.0.0.info: 403 Forbidden\n"}
	r.Egress = append(r.Egress, NewEgress("acquire", recs, 0))
	r.Finish(3 * time.Millisecond)
	return r
}

// TestEgressLine: the text report's one line about egress.
func TestEgressLine(t *testing.T) {
	rec := func(host, verdict string) domain.EgressRecord {
		return domain.EgressRecord{Host: host, Verdict: verdict}
	}
	for _, tt := range []struct {
		es   []Egress
		want string
	}{
		{[]Egress{{Phase: "acquire", Records: []domain.EgressRecord{rec("p.test", "allowed"), rec("p.test", "allowed"), rec("s.test", "allowed"), rec("evil.test", "refused")}}},
			"egress: acquire 3 allowed (p.test, s.test), 1 refused (evil.test)"},
		{[]Egress{{Phase: "acquire"}, {Phase: "candidates", Records: []domain.EgressRecord{rec("p.test", "failed")}, Lost: 2}},
			"egress: acquire no requests; candidates 1 failed (p.test), 2 not recorded (the gate's record was full)"},
		{[]Egress{{Phase: "acquire", Records: []domain.EgressRecord{rec("a", "refused"), rec("b", "refused"), rec("c", "refused"), rec("d", "refused"), rec("a", "invalid")}}},
			"egress: acquire 4 refused (a, b, c, +1 more), 1 invalid (a)"},
	} {
		if got := EgressLine(tt.es); got != tt.want {
			t.Errorf("EgressLine(%+v) = %q; want %q", tt.es, got, tt.want)
		}
	}
}

func TestNormalized_DoesNotModifyOriginal(t *testing.T) {
	r := sample()
	_ = Normalized(r)
	if r.Dir != "/home/u/src/m" || r.Image.ID != "sha256:8248d61c0446aaaa" || r.Timings.Phases[0].MS != 1200 {
		t.Errorf("Normalized changed its argument: %+v", r)
	}
}

// Golden compares got with the file at path; with update it rewrites it.
func golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestDetail: stderr is kept whole up to MaxDetail bytes, and cut there,
// with "...", past it.
func TestDetail(t *testing.T) {
	whole := strings.Repeat("x", MaxDetail)
	if got := Detail([]byte(whole)); got != whole {
		t.Errorf("Detail(%d bytes) cut to %d", len(whole), len(got))
	}
	if got := Detail([]byte(whole + "y")); got != whole+"..." {
		t.Errorf("Detail(%d bytes) = %d bytes ending %q; want the first %d and ...", len(whole)+1, len(got), got[len(got)-4:], MaxDetail)
	}
}
