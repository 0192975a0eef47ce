package main

import (
	"archive/zip"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stockade/stockade/internal/vulndb"
	"github.com/stockade/stockade/internal/vulndb/vulndbtest"
)

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
