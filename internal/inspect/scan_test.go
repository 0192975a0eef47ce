package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/scanner"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/vulndb"
	"github.com/stockade/stockade/internal/vulndb/vulndbtest"
	"github.com/stockade/stockade/internal/workflow"
)

// scanTimeout bounds a fixture's whole scan run: the first one in a data
// directory builds the scanner through the real module proxy (minutes).
const scanTimeout = 40 * time.Minute

// TestScan_Fixture is `stockade scan` of testdata/repos/vuln against the
// fixture database: the pinned scanner (built in the tool profile through
// the real module proxy on first use, verified before the scan) runs in
// execute, and the report has one finding per vulnerability at the
// strongest level reached — called with a fix, called without, a
// module-level advisory reached by a call, the standard library at the
// image's Go, imported, required — never the withdrawn one, and names the
// database by its modified time and content hash.
func TestScan_Fixture(t *testing.T) {
	eng, proxy, dataDir := engine(t)
	img, _, err := workflow.SelectImage(context.Background(), eng, workflow.ImageRequest{Directive: "1.24"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dbDir := vulndbtest.Write(t, img.GoVersion)
	db, err := vulndb.Open(dbDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), scanTimeout)
	defer cancel()
	rep, err := Scan(ctx, eng, Options{Options: workflow.Options{
		Dir: filepath.Join(repos, "vuln"), FixtureProxy: proxy, DataDir: dataDir, VulnDB: dbDir, LockTimeout: 15 * time.Minute, Owner: enginetest.Owner(t),
		Deadline: scanTimeout,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != report.Vulnerable || rep.ExitCode != 3 || len(rep.Checks) != 0 {
		t.Fatalf("verdict %s exit %d checks %d; want vulnerable, 3, no checks (report %+v)", rep.Verdict, rep.ExitCode, len(rep.Checks), rep)
	}
	s := rep.Vulns
	if s == nil || s.Status != report.ScanComplete {
		t.Fatalf("scan = %+v; want complete", s)
	}
	if !s.DB.Modified.Equal(db.Modified) || s.DB.SHA256 != db.SHA256 {
		t.Errorf("db = %+v; want modified %v sha256 %s", s.DB, db.Modified, db.SHA256)
	}
	if s.Scanner.Version != "v1.9.0" || s.Scanner.GoVersion != img.GoVersion || len(s.Scanner.SHA256) != 64 {
		t.Errorf("scanner = %+v", s.Scanner)
	}
	type got struct {
		level report.Level
		fixed string
	}
	want := map[string]got{
		vulndbtest.CalledFixed: {report.LevelCalled, "v1.1.0"},
		vulndbtest.ModuleLevel: {report.LevelCalled, "v1.0.1"},
		vulndbtest.Stdlib:      {report.LevelCalled, "v" + fixOf(img.GoVersion)},
		vulndbtest.NoFix:       {report.LevelCalled, ""},
		vulndbtest.Imported:    {report.LevelImported, "v1.1.0"},
		vulndbtest.Required:    {report.LevelRequired, "v1.1.0"},
	}
	var ids []string
	for _, v := range s.Vulns {
		ids = append(ids, v.ID)
		w, ok := want[v.ID]
		if !ok {
			t.Errorf("unexpected %s (%s)", v.ID, v.Level)
			continue
		}
		if v.Level != w.level || v.Fixed != w.fixed {
			t.Errorf("%s: level %s fixed %q; want %s %q", v.ID, v.Level, v.Fixed, w.level, w.fixed)
		}
		if (v.Level == report.LevelCalled) != (len(v.Trace) > 0) {
			t.Errorf("%s: level %s with %d trace frames", v.ID, v.Level, len(v.Trace))
		}
	}
	// One per vulnerability, actionable first.
	wantOrder := []string{vulndbtest.CalledFixed, vulndbtest.ModuleLevel, vulndbtest.Stdlib, vulndbtest.NoFix, vulndbtest.Imported, vulndbtest.Required}
	if !slices.Equal(ids, wantOrder) {
		t.Errorf("vulns %v; want %v", ids, wantOrder)
	}
	if !slices.Equal(s.Withdrawn, []string{vulndbtest.Withdrawn}) {
		t.Errorf("withdrawn = %v; want [%s] listed apart, not reported", s.Withdrawn, vulndbtest.Withdrawn)
	}
	tr := s.Vulns[0].Trace
	if len(tr) < 2 || tr[0].Package != "stockade.test/repo/vuln" || tr[len(tr)-1].Function != "Bad" {
		t.Errorf("trace of %s = %+v; want from the fixture's code to a.Bad", s.Vulns[0].ID, tr)
	}
}

// TestScan_RefusesTamperedScanner: a stored scanner whose binary changed
// after it was recorded is refused before any scan runs, with the reason.
func TestScan_RefusesTamperedScanner(t *testing.T) {
	eng, proxy, _ := engine(t)
	img, _, err := workflow.SelectImage(context.Background(), eng, workflow.ImageRequest{Directive: "1.24"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A data directory of its own holding a copy of the shared scanner
	// with one byte changed.
	_, _, shared := engine(t)
	ctx, cancel := context.WithTimeout(context.Background(), scanTimeout)
	defer cancel()
	s, err := scanner.Ensure(ctx, eng, scanner.Config{DataDir: shared, DefaultDataDir: true, Image: img.ID, GoVersion: img.GoVersion, Owner: enginetest.Owner(t), LockTimeout: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	own, err := toolchain.PrepareDataDir(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(own, scanner.ScannersDir, filepath.Base(s.Dir))
	if err := tamperedCopy(s.Dir, dst); err != nil {
		t.Fatal(err)
	}
	_, err = Scan(ctx, eng, Options{Options: workflow.Options{
		Dir: filepath.Join(repos, "vuln"), FixtureProxy: proxy, DataDir: own, VulnDB: vulndbtest.Write(t, img.GoVersion), Owner: enginetest.Owner(t),
		Deadline: scanTimeout,
	}})
	var ve *scanner.VerifyError
	if !errors.Is(err, scanner.ErrUnverified) || !errors.As(err, &ve) {
		t.Fatalf("scan with a tampered scanner = %v; want a *VerifyError", err)
	}
	t.Logf("refused: %v", err)
}

// TestScan_OutputPastCapIsInconclusive: the real scanner's stream on the
// fixture, cut at a cap set below its size, makes the scan inconclusive
// (exit 3), never "no vulnerabilities": cut inside a message, and cut
// exactly between two messages before the first finding, where what was
// kept reads as a whole, valid stream with nothing in it and only the
// truncation flag tells it from a clean scan; and in inspect -vulndb,
// where every check passes, the cut scan makes the verdict inconclusive.
func TestScan_OutputPastCapIsInconclusive(t *testing.T) {
	eng, proxy, dataDir := engine(t)
	img, _, err := workflow.SelectImage(context.Background(), eng, workflow.ImageRequest{Directive: "1.24"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dbDir := vulndbtest.Write(t, img.GoVersion)
	between := firstMessagesEnd(t, img.GoVersion)
	for _, tc := range []struct {
		name     string
		cap      int64
		reasons  int  // how many reasons: 1 when only the cap can tell
		validate bool // inspect -vulndb: the checks pass, the scan is cut
	}{
		{"inside a message", 1000, 0, false},
		{"between messages, before any finding", between, 1, false},
		{"inspect -vulndb, between messages", between, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), scanTimeout)
			defer cancel()
			run := Scan // stockade scan; with validate, inspect -vulndb
			if tc.validate {
				run = Inspect
			}
			rep, err := run(ctx, eng, Options{Options: workflow.Options{
				Dir: filepath.Join(repos, "vuln"), FixtureProxy: proxy, DataDir: dataDir, VulnDB: dbDir, LockTimeout: 15 * time.Minute,
				Owner: enginetest.Owner(t), Deadline: scanTimeout,
			}, ScanOutputCap: tc.cap})
			if err != nil {
				t.Fatal(err)
			}
			s := rep.Vulns
			if rep.Verdict != report.Inconclusive || rep.ExitCode != 3 || s == nil || s.Status != report.ScanInconclusive {
				t.Fatalf("verdict %s exit %d scan %+v; want inconclusive, 3", rep.Verdict, rep.ExitCode, s)
			}
			for _, c := range rep.Checks {
				if tc.validate && c.Status != report.StatusPass {
					t.Fatalf("check %s is %s; the fixture's checks should pass, so that only the scan makes the verdict", c.Name, c.Status)
				}
			}
			if tc.validate && len(rep.Checks) == 0 {
				t.Fatal("inspect -vulndb ran no check")
			}
			cut := fmt.Sprintf("the scanner's output passed its cap and was cut: %d of ", tc.cap)
			if len(s.Reasons) == 0 || !strings.HasPrefix(s.Reasons[0], cut) {
				t.Fatalf("reasons %q; want the cut first (%q...)", s.Reasons, cut)
			}
			if tc.reasons > 0 && len(s.Reasons) != tc.reasons {
				t.Errorf("reasons %q; want only the cut: the kept stream should read as whole messages", s.Reasons)
			}
			if len(s.Vulns) != 0 {
				t.Errorf("vulns %+v; want none read before the cut", s.Vulns)
			}
			var text bytes.Buffer
			report.WriteText(&text, rep)
			if strings.Contains(text.String(), "none found") {
				t.Errorf("the text report says none found:\n%s", text.String())
			}
			t.Logf("reasons: %q", s.Reasons)
		})
	}
}

// firstMessagesEnd is the offset in the fixture's real govulncheck stream
// (internal/vulnjson/testdata/fixture.json, the scan of repos/vuln with the
// fixture database, its Go version made goVersion) where the messages
// before the first osv or finding end: config, SBOM, progress.
func firstMessagesEnd(t *testing.T, goVersion string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "vulnjson", "testdata", "fixture.json"))
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.ReplaceAll(b, []byte("go1.26.8"), []byte(goVersion))
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var m map[string]json.RawMessage
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("the fixture stream has no osv or finding message: %v", err)
		}
		if m["osv"] != nil || m["finding"] != nil {
			break
		}
	}
	// The decoder has read up to the end of the first osv message: go
	// back to the newline that ends the message before it.
	end := bytes.LastIndex(b[:dec.InputOffset()], []byte("}\n{"))
	if end < 0 {
		t.Fatal("no message boundary in the fixture stream")
	}
	return int64(end + 2)
}

// fixOf is the fixture's standard-library fix for goVersion: the next
// patch release, without "go".
func fixOf(goVersion string) string {
	es, _ := vulndbtest.Entries(goVersion)
	for _, e := range es {
		if e.ID == vulndbtest.Stdlib {
			return e.Affected[0].Ranges[0].Events[1].Fixed
		}
	}
	return ""
}

// tamperedCopy copies the scanner directory src to dst (made with its
// parents) with one byte of the binary changed and the record kept.
func tamperedCopy(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, name := range []string{scanner.BinaryName, scanner.MetaFile} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return err
		}
		if name == scanner.BinaryName {
			b[len(b)/3] ^= 0x40
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o555); err != nil {
			return err
		}
	}
	return nil
}

// TestInspect_VulnDB: inspect -vulndb validates as before and adds the
// scan; a called vulnerability makes passing checks vulnerable, exit 3,
// as stockade scan says.
func TestInspect_VulnDB(t *testing.T) {
	eng, proxy, dataDir := engine(t)
	img, _, err := workflow.SelectImage(context.Background(), eng, workflow.ImageRequest{Directive: "1.24"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), scanTimeout)
	defer cancel()
	rep, err := Inspect(ctx, eng, Options{Options: workflow.Options{
		Dir: filepath.Join(repos, "vuln"), FixtureProxy: proxy, DataDir: dataDir, VulnDB: vulndbtest.Write(t, img.GoVersion), Timeout: fixtureTimeout,
		LockTimeout: 15 * time.Minute, Owner: enginetest.Owner(t), Deadline: scanTimeout,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != report.Vulnerable || rep.ExitCode != 3 || len(rep.Checks) != 4 {
		t.Errorf("verdict %s (exit %d) with %d checks; want vulnerable (exit 3), list build vet test", rep.Verdict, rep.ExitCode, len(rep.Checks))
	}
	for _, c := range rep.Checks {
		if c.Status != report.StatusPass {
			t.Errorf("check %s = %s; want pass", c.Name, c.Status)
		}
	}
	if rep.Vulns == nil || rep.Vulns.Status != report.ScanComplete || len(rep.Vulns.Called()) != 4 {
		t.Errorf("vulns = %+v; want a complete scan with 4 called", rep.Vulns)
	}
	var phases []string
	for _, p := range rep.Timings.Phases {
		phases = append(phases, p.Name)
	}
	if !slices.Contains(phases, "scan") || !slices.Contains(phases, "candidates") {
		t.Errorf("phases %v; want scan and candidates", phases)
	}
}
