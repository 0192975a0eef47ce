package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/vulndb"
	"github.com/stockade/stockade/internal/vulndb/vulndbtest"
)

// TestScan_FixtureExitsThree is `stockade scan` of testdata/repos/vuln
// against the fixture database from $STOCKADE_VULNDB: exit 3 (called
// vulnerabilities), the text report lists first what to fix with the
// upgrade that fixes it, -json is the same scan, and -openvex writes its
// OpenVEX document (checkOpenVEX).
func TestScan_FixtureExitsThree(t *testing.T) {
	flags := fixtureScanFlags(t)
	t.Setenv("STOCKADE_VULNDB", vulndbtest.Write(t, hostGo(t)))
	args := append(append([]string{"scan"}, flags...), vulnFixture)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, &stdout, &stderr); code != exitFindings {
		t.Fatalf("stockade scan = exit %d; want %d\nstdout: %s\nstderr: %s", code, exitFindings, stdout.String(), stderr.String())
	}
	text := stdout.String()
	t.Logf("stockade scan:\n%s", text)
	fix, also := strings.Index(text, "fix now"), strings.Index(text, "also found")
	first := strings.Index(text, vulndbtest.CalledFixed)
	if fix < 0 || also < fix || first < fix || first > also || !strings.Contains(text, "go get stockade.test/vulnlib@v1.1.0") {
		t.Errorf("the text report does not list %s with its upgrade before the rest", vulndbtest.CalledFixed)
	}
	if strings.Contains(text, vulndbtest.Withdrawn+" called") || strings.Contains(text, vulndbtest.Withdrawn+" imported") {
		t.Errorf("the withdrawn advisory is reported")
	}
	stdout.Reset()
	vex := filepath.Join(t.TempDir(), "vuln.openvex.json")
	if code := run(context.Background(), append([]string{"scan", "-json", "-openvex", vex}, args[1:]...), &stdout, &stderr); code != exitFindings {
		t.Fatalf("stockade scan -json -openvex = exit %d\nstderr: %s", code, stderr.String())
	}
	var rep report.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != report.Vulnerable || rep.Vulns == nil || len(rep.Vulns.Called()) != 4 || rep.Vulns.DB.SHA256 == "" {
		t.Errorf("-json: verdict %s, vulns %+v; want vulnerable with 4 called and the database named", rep.Verdict, rep.Vulns)
	}
	checkOpenVEX(t, vex, &rep)
}

// checkOpenVEX checks the document -openvex wrote at name against the
// scan's report rep: the statuses govulncheck's openvex mode gives (called
// affected; imported and required not affected, not in the execute path),
// the database's modified time as the timestamp, and exactly the bytes
// the report gives again, so the document depends on the scan alone.
func checkOpenVEX(t *testing.T, name string, rep *report.Report) {
	t.Helper()
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("-openvex wrote nothing: %v", err)
	}
	var d report.VEX
	if err := json.Unmarshal(got, &d); err != nil {
		t.Fatalf("-openvex wrote no JSON: %v\n%s", err, got)
	}
	t.Logf("OpenVEX document:\n%s", got)
	want := map[string]string{
		vulndbtest.CalledFixed: report.VEXAffected, vulndbtest.ModuleLevel: report.VEXAffected,
		vulndbtest.Stdlib: report.VEXAffected, vulndbtest.NoFix: report.VEXAffected,
		vulndbtest.Imported: report.VEXNotAffected, vulndbtest.Required: report.VEXNotAffected,
	}
	if len(d.Statements) != len(want) {
		t.Errorf("%d statements; want %d", len(d.Statements), len(want))
	}
	for _, s := range d.Statements {
		if w, ok := want[s.Vulnerability.Name]; !ok || s.Status != w {
			t.Errorf("%s: status %q; want %q", s.Vulnerability.Name, s.Status, w)
		}
		if s.Status == report.VEXNotAffected && s.Justification != report.VEXNotInExecutePath {
			t.Errorf("%s: justification %q", s.Vulnerability.Name, s.Justification)
		}
		if len(s.Products) != 1 || s.Products[0].ID != "pkg:golang/stockade.test/repo/vuln" {
			t.Errorf("%s: products %+v; want the fixture's module", s.Vulnerability.Name, s.Products)
		}
	}
	if d.Context != report.VEXContext || !strings.HasPrefix(d.ID, report.VEXIDPrefix) || !d.Timestamp.Equal(rep.Vulns.DB.Modified) {
		t.Errorf("document head: %s %s %v; want the v0.2.0 context, a content @id, the database's time %v", d.Context, d.ID, d.Timestamp, rep.Vulns.DB.Modified)
	}
	again, err := report.OpenVEX(rep)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	report.WriteOpenVEX(&b, again)
	if !bytes.Equal(b.Bytes(), got) {
		t.Errorf("the document is not the one the -json report gives:\n%s", b.Bytes())
	}
}

// TestScan_OpenVEXRefusedWhenInconclusive: a scan the -timeout cuts short
// (1s, the least a phase gets; the fixture's scan takes several) is
// inconclusive (exit 3), writes no OpenVEX document, says so, and
// removes the one an earlier run left at that path, which would
// otherwise pass for this scan's.
func TestScan_OpenVEXRefusedWhenInconclusive(t *testing.T) {
	flags := fixtureScanFlags(t)
	db := vulndbtest.Write(t, hostGo(t))
	d, err := vulndb.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	// An earlier run's document, of a complete scan.
	earlier := report.New("/x")
	earlier.Module = "stockade.test/repo/vuln"
	earlier.Vulns = &report.VulnScan{Status: report.ScanComplete, Vulns: []report.Vuln{}, DB: report.VulnDB{Modified: d.Modified, SHA256: d.SHA256}}
	doc, err := report.OpenVEX(earlier)
	if err != nil {
		t.Fatal(err)
	}
	vex := filepath.Join(t.TempDir(), "vuln.openvex.json")
	f, err := os.Create(vex)
	if err != nil {
		t.Fatal(err)
	}
	report.WriteOpenVEX(f, doc)
	f.Close()
	args := append(append([]string{"scan", "-json", "-openvex", vex, "-timeout", "1s", "-vulndb", db}, flags...), vulnFixture)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, &stdout, &stderr); code != exitFindings {
		t.Fatalf("stockade scan -timeout 1s = exit %d; want %d\nstdout: %s\nstderr: %s", code, exitFindings, stdout.String(), stderr.String())
	}
	var rep report.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != report.Inconclusive || rep.Vulns == nil || rep.Vulns.Status != report.ScanInconclusive || !strings.Contains(strings.Join(rep.Vulns.Reasons, "; "), "timed out") {
		t.Fatalf("verdict %s (timed out in %q), vulns %+v; want a scan that ran and timed out", rep.Verdict, rep.TimedOut, rep.Vulns)
	}
	if _, err := os.Stat(vex); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the earlier document is still at %s (%v)", vex, err)
	}
	if msg := stderr.String(); !strings.Contains(msg, "not written") || !strings.Contains(msg, "inconclusive") || !strings.Contains(msg, "removed") {
		t.Errorf("stderr = %q; want it to say no document was written, why, and that the earlier one was removed", msg)
	}
}

// vulnFixture is the repository the engine scans take.
var vulnFixture = filepath.Join("..", "..", "testdata", "repos", "vuln")

// fixtureScanFlags skips without an engine and returns the flags every
// engine scan of vulnFixture takes: the data directory the validate and
// maintain engine tests share (one seed and one scanner serve all), the
// -cgo=false image they use, whose seed and scanner they build, and the
// fixture proxy.
func fixtureScanFlags(t *testing.T) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a scan against the engine")
	}
	enginetest.Client(t)
	dataDir, err := enginetest.SharedDataDir()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"-cgo=false", "-data-dir", dataDir, "-lock-timeout", "15m", "-fixture-proxy", filepath.Join("..", "..", "testdata", "modules")}
}

// hostGo is the host's Go version, the fixtures' image's: the fixture
// database's standard-library advisory affects it.
func hostGo(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestVulndbFetch: `stockade vulndb fetch -url URL DIR` against a local
// server serving the fixture database as a .zip (vuln.go.dev/vulndb.zip is
// not reachable here) prints the identity a scan report names it by.
func TestVulndbFetch(t *testing.T) {
	src := vulndbtest.Write(t, "go1.26.8")
	want, err := vulndb.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		w, _ := zw.Create("vulndb/" + filepath.ToSlash(rel))
		b, _ := os.ReadFile(p)
		w.Write(b)
		return nil
	})
	zw.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(zb.Bytes()) }))
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "db")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"vulndb", "fetch", "-url", srv.URL + "/vulndb.zip", dir}, &stdout, &stderr); code != exitOK {
		t.Fatalf("vulndb fetch = exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), want.SHA256) || !strings.Contains(stdout.String(), "7 advisories") {
		t.Errorf("vulndb fetch printed %q; want 7 advisories and sha256 %s", stdout.String(), want.SHA256)
	}
	if code := run(context.Background(), []string{"scan", "-vulndb", dir, "/nonexistent"}, &stdout, &stderr); code != exitUnsupported {
		t.Errorf("a scan of a missing directory with the fetched database = exit %d", code)
	}
}
