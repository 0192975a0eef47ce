package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
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
// upgrade that fixes it, and -json is the same scan.
func TestScan_FixtureExitsThree(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a scan against the engine")
	}
	enginetest.Client(t)
	// Shared with the validate and maintain engine tests: one seed and one
	// scanner serve all.
	dataDir, err := enginetest.SharedDataDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("STOCKADE_VULNDB", vulndbtest.Write(t, hostGo(t)))
	// -cgo=false: the image the validate and maintain tests use, whose
	// seed and scanner they build.
	args := []string{"scan", "-cgo=false", "-data-dir", dataDir, "-lock-timeout", "15m", "-fixture-proxy", filepath.Join("..", "..", "testdata", "modules"), filepath.Join("..", "..", "testdata", "repos", "vuln")}
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
	if code := run(context.Background(), append([]string{"scan", "-json"}, args[1:]...), &stdout, &stderr); code != exitFindings {
		t.Fatalf("stockade scan -json = exit %d", code)
	}
	var rep report.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != report.Vulnerable || rep.Vulns == nil || len(rep.Vulns.Called()) != 4 || rep.Vulns.DB.SHA256 == "" {
		t.Errorf("-json: verdict %s, vulns %+v; want vulnerable with 4 called and the database named", rep.Verdict, rep.Vulns)
	}
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
