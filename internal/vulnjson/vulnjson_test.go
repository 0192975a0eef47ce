package vulnjson

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stockade/stockade/internal/report"
)

// fixture is govulncheck v1.9.0's real output for testdata/repos/vuln
// against the database internal/vulndb/vulndbtest declares for go1.26.8:
// every vulnerability at module level, the imported and called ones at
// package level too, the called ones at symbol level (GO-2099-0003 twice,
// by two traces), and the withdrawn advisory's osv message without a
// finding.
func fixture(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixture.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// messages splits a stream into its JSON values.
func messages(t *testing.T, b []byte) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var m json.RawMessage
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func join(ms []json.RawMessage) []byte {
	var b bytes.Buffer
	for _, m := range ms {
		b.Write(m)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// short is a vulnerability without the advisory's words.
type short struct {
	ID, Level, Module, Version, Package, Fixed string
	From, To                                   string // a called one's trace ends
}

func shorten(vs []report.Vuln) []short {
	var out []short
	for _, v := range vs {
		s := short{ID: v.ID, Level: string(v.Level), Module: v.Module, Version: v.Version, Package: v.Package, Fixed: v.Fixed}
		if n := len(v.Trace); n > 0 {
			s.From = v.Trace[0].Package + "." + v.Trace[0].Function
			s.To = v.Trace[n-1].Package + "." + v.Trace[n-1].Function
		}
		out = append(out, s)
	}
	return out
}

// want is the fixture's deduplicated findings, in report order: called
// with a fix, called without, imported, required.
var want = []short{
	{"GO-2099-0001", "called", "stockade.test/vulnlib", "v1.0.0", "stockade.test/vulnlib/a", "v1.1.0", "stockade.test/repo/vuln.Shout", "stockade.test/vulnlib/a.Bad"},
	{"GO-2099-0003", "called", "stockade.test/othermod", "v1.0.0", "stockade.test/othermod", "v1.0.1", "stockade.test/repo/vuln.Greet", "stockade.test/othermod.Hello"},
	{"GO-2099-0004", "called", "stdlib", "v1.26.8", "strings", "v1.26.9", "stockade.test/repo/vuln.Shout", "strings.ToUpper"},
	{"GO-2099-0005", "called", "stockade.test/vulnlib", "v1.0.0", "stockade.test/vulnlib/a", "", "stockade.test/repo/vuln.Count", "stockade.test/vulnlib/a.Worse"},
	{"GO-2099-0002", "imported", "stockade.test/vulnlib", "v1.0.0", "stockade.test/vulnlib/b", "v1.1.0", "", ""},
	{"GO-2099-0007", "required", "stockade.test/vulnlib", "v1.0.0", "", "v1.1.0", "", ""},
}

func TestParse_Fixture(t *testing.T) {
	s := Parse(Output{Stdout: fixture(t)})
	if s.Status != report.ScanComplete || len(s.Reasons) > 0 {
		t.Fatalf("status %s %v; want complete", s.Status, s.Reasons)
	}
	if got := shorten(s.Vulns); !reflect.DeepEqual(got, want) {
		t.Errorf("vulns:\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(s.Withdrawn, []string{"GO-2099-0006"}) {
		t.Errorf("withdrawn = %v; want [GO-2099-0006]", s.Withdrawn)
	}
	if s.Scanner.Name != "govulncheck" || s.Scanner.Version != "v1.9.0" {
		t.Errorf("scanner = %+v", s.Scanner)
	}
	v := s.Vulns[0]
	if v.Summary == "" || v.URL != "https://pkg.go.dev/vuln/GO-2099-0001" || v.Trace[0].Position == "" {
		t.Errorf("first vuln lacks summary, URL or position: %+v", v)
	}
	if got := v.Upgrade(); got != "go get stockade.test/vulnlib@v1.1.0" {
		t.Errorf("Upgrade() = %q", got)
	}
}

// TestParse_AnyOrder: the messages in any order give the same scan.
func TestParse_AnyOrder(t *testing.T) {
	ms := messages(t, fixture(t))
	base := Parse(Output{Stdout: join(ms)})
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 50; i++ {
		sh := append([]json.RawMessage(nil), ms...)
		r.Shuffle(len(sh), func(a, b int) { sh[a], sh[b] = sh[b], sh[a] })
		if i == 0 {
			for a, b := 0, len(sh)-1; a < b; a, b = a+1, b-1 {
				sh[a], sh[b] = ms[b], ms[a]
			}
		}
		got := Parse(Output{Stdout: join(sh)})
		if !reflect.DeepEqual(got, base) {
			t.Fatalf("order %d gives a different scan:\n got %+v\nwant %+v", i, shorten(got.Vulns), shorten(base.Vulns))
		}
	}
}

// TestParse_Truncated: a stream cut anywhere inside a message, or flagged
// as cut at its cap, or by a scanner that did not exit 0, is inconclusive.
func TestParse_Truncated(t *testing.T) {
	b := fixture(t)
	for cut := 1; cut < len(b)-1; cut += 37 {
		head := b[:cut]
		if len(bytes.TrimSpace(b[cut:])) == 0 {
			continue
		}
		// A cut that lands between two messages reads as a shorter
		// stream: only the flag or the exit status can say it was cut.
		between := json.Valid(bytes.TrimSpace(head)) || wholeMessages(head)
		for _, o := range []Output{
			{Stdout: head, Truncated: true},
			{Stdout: head, ExitCode: 2, Stderr: []byte("signal: killed")},
			{Stdout: head, TimedOut: true},
		} {
			if s := Parse(o); s.Status != report.ScanInconclusive {
				t.Fatalf("cut at %d of %d (%+v): status %s; want inconclusive", cut, len(b), o, s.Status)
			}
		}
		if s := Parse(Output{Stdout: head}); !between && s.Status != report.ScanInconclusive {
			t.Fatalf("cut at %d of %d inside a message: status %s; want inconclusive", cut, len(b), s.Status)
		}
	}
}

// wholeMessages reports whether b is a sequence of complete JSON values.
func wholeMessages(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var m json.RawMessage
		if dec.Decode(&m) != nil {
			return false
		}
	}
	return true
}

func TestParse_Malformed(t *testing.T) {
	ms := messages(t, fixture(t))
	cfg, osv, fnd := -1, -1, -1
	for i, m := range ms {
		switch {
		case bytes.Contains(m[:20], []byte(`"config"`)):
			cfg = i
		case osv < 0 && bytes.Contains(m[:20], []byte(`"osv"`)) && bytes.Contains(m, []byte("GO-2099-0001")):
			osv = i
		case bytes.Contains(m[:20], []byte(`"finding"`)):
			fnd = i
		}
	}
	without := func(i int) []json.RawMessage {
		return append(append([]json.RawMessage(nil), ms[:i]...), ms[i+1:]...)
	}
	with := func(extra string) []json.RawMessage {
		return append(append([]json.RawMessage(nil), ms...), json.RawMessage(extra))
	}
	for _, tc := range []struct {
		name   string
		out    Output
		reason string
	}{
		{"empty", Output{}, "no config"},
		{"not json", Output{Stdout: []byte("panic: runtime error\n")}, "not govulncheck JSON"},
		{"no config", Output{Stdout: join(without(cfg))}, "no config"},
		{"advisory never described", Output{Stdout: join(without(osv))}, "never described"},
		{"unknown kind", Output{Stdout: join(with(`{"surprise": {}}`))}, "unknown kind"},
		{"two fields", Output{Stdout: join(with(`{"progress": {}, "finding": {}}`))}, "2 fields"},
		{"finding without trace", Output{Stdout: join(with(`{"finding": {"osv": "GO-2099-0001"}}`))}, "no trace"},
		{"another scanner", Output{Stdout: bytes.Replace(join(ms), []byte(`"scanner_name": "govulncheck"`), []byte(`"scanner_name": "other"`), 1)}, "not govulncheck"},
		{"module scan level", Output{Stdout: bytes.Replace(join(ms), []byte(`"scan_level": "symbol"`), []byte(`"scan_level": "module"`), 1)}, "not symbol"},
		{"exit status", Output{Stdout: join(ms), ExitCode: 1, Stderr: []byte("govulncheck: loading packages: boom")}, "exited 1"},
		{"out of memory", Output{Stdout: join(ms), OOMKilled: true}, "memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if fnd < 0 {
				t.Fatal("the fixture has no finding")
			}
			s := Parse(tc.out)
			if s.Status != report.ScanInconclusive || !strings.Contains(strings.Join(s.Reasons, "; "), tc.reason) {
				t.Errorf("status %s, reasons %q; want inconclusive naming %q", s.Status, s.Reasons, tc.reason)
			}
		})
	}
}
