package vulndb_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/vulndb"
	"github.com/stockade/stockade/internal/vulndb/vulndbtest"
)

// zipOf returns a .zip of dir's files under prefix ("" or "top/").
func zipOf(t *testing.T, dir, prefix string, extra map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		w, err := zw.Create(prefix + filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		c, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = w.Write(c)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range extra {
		w, _ := zw.Create(name)
		w.Write([]byte(c))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestOpen_DirAndZipSameIdentity: the fixture database is identified by its
// newest entry's modified time and a content hash that a .zip of the same
// files (with or without a top directory) shares, and that changes with
// any byte.
func TestOpen_DirAndZipSameIdentity(t *testing.T) {
	dir := vulndbtest.Write(t, "go1.26.8")
	db, err := vulndb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2025, 1, 2, 4, 4, 5, 0, time.UTC); !db.Modified.Equal(want) || db.Entries != 7 || len(db.SHA256) != 64 {
		t.Fatalf("db = %+v; want modified %v (the withdrawn entry's), 7 entries", db, want)
	}
	for _, prefix := range []string{"", "vulndb/"} {
		zp := filepath.Join(t.TempDir(), "db.zip")
		os.WriteFile(zp, zipOf(t, dir, prefix, nil), 0o644)
		zdb, err := vulndb.Open(zp)
		if err != nil {
			t.Fatal(err)
		}
		if zdb.SHA256 != db.SHA256 || !zdb.Modified.Equal(db.Modified) {
			t.Errorf("zip %q: %s %v; want %s %v", prefix, zdb.SHA256, zdb.Modified, db.SHA256, db.Modified)
		}
		extracted := zdb.Dir
		zdb.Close()
		if _, err := os.Stat(extracted); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Close left %s", extracted)
		}
	}
	os.WriteFile(filepath.Join(dir, "ID", "GO-2099-0001.json"), []byte("{}"), 0o644)
	if _, sum, err := vulndb.Identify(dir); err != nil || sum == db.SHA256 {
		t.Errorf("after a change: %s, %v; want a new hash", sum, err)
	}
}

func TestOpen_Refuses(t *testing.T) {
	good := vulndbtest.Write(t, "go1.26.8")
	for _, tc := range []struct {
		name   string
		make   func(t *testing.T) string
		reason string
	}{
		{"missing", func(t *testing.T) string { return filepath.Join(t.TempDir(), "none") }, "no such file"},
		{"not a database", func(t *testing.T) string { return t.TempDir() }, "index/db.json"},
		{"a file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "db.json")
			os.WriteFile(p, []byte("{}"), 0o644)
			return p
		}, "neither a directory nor a .zip"},
		{"no modified time", func(t *testing.T) string {
			d := t.TempDir()
			os.MkdirAll(filepath.Join(d, "index"), 0o755)
			os.WriteFile(filepath.Join(d, "index", "db.json"), []byte(`{}`), 0o644)
			return d
		}, "no modified time"},
		{"a symlink inside", func(t *testing.T) string {
			d := vulndbtest.Write(t, "go1.26.8")
			os.Symlink("/etc/passwd", filepath.Join(d, "ID", "GO-2099-9999.json"))
			return d
		}, "not a regular file"},
		{"zip escaping", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "db.zip")
			os.WriteFile(p, zipOf(t, good, "", map[string]string{"../escape": "x"}), 0o644)
			return p
		}, "not a clean relative path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := vulndb.Open(tc.make(t))
			var e *vulndb.Error
			if !errors.Is(err, vulndb.ErrInvalid) || !errors.As(err, &e) || !strings.Contains(e.Reason, tc.reason) {
				t.Errorf("Open = %v; want an *Error naming %q", err, tc.reason)
			}
		})
	}
}

// TestFetch_FromServer: fetch downloads a .zip from an HTTP server (here
// one serving the fixture, as vuln.go.dev/vulndb.zip would serve the
// public database), and the result is the same database; a failing server
// leaves nothing behind.
func TestFetch_FromServer(t *testing.T) {
	src := vulndbtest.Write(t, "go1.26.8")
	want, err := vulndb.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	body := zipOf(t, src, "", nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/vulndb.zip" {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}))
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "vulndb")
	db, err := vulndb.Fetch(context.Background(), srv.Client(), srv.URL+"/vulndb.zip", dir)
	if err != nil {
		t.Fatal(err)
	}
	if db.SHA256 != want.SHA256 || db.Dir != dir {
		t.Errorf("fetched %s into %s; want %s into %s", db.SHA256, db.Dir, want.SHA256, dir)
	}
	if again, err := vulndb.Open(dir); err != nil || again.SHA256 != want.SHA256 {
		t.Errorf("reopened: %v %v", again.SHA256, err)
	}
	if _, err := vulndb.Fetch(context.Background(), srv.Client(), srv.URL+"/vulndb.zip", dir); err == nil {
		t.Error("fetch into a non-empty directory succeeded")
	}
	other := filepath.Join(t.TempDir(), "other")
	if _, err := vulndb.Fetch(context.Background(), srv.Client(), srv.URL+"/missing.zip", other); !errors.Is(err, vulndb.ErrFetch) {
		t.Errorf("fetch of a 404 = %v; want ErrFetch", err)
	}
	if _, err := os.Stat(other); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed fetch left %s", other)
	}
}
