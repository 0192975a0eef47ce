package vulndb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
)

// DefaultURL is the public database's bulk download.
const DefaultURL = "https://vuln.go.dev/vulndb.zip"

// MaxDownload bounds a fetched .zip, in bytes (the public one is a few
// MiB).
const MaxDownload = 256 << 20

// ErrFetch reports a download that failed (status, size, transport): the
// database could not be had.
var ErrFetch = errors.New("vulndb: fetch failed")

// ErrNotEmpty reports a Fetch into a directory that is not empty: nothing
// in it is replaced.
var ErrNotEmpty = errors.New("vulndb: the directory is not empty")

// Fetch downloads the .zip at u (DefaultURL when empty) with client
// (http.DefaultClient when nil), extracts and checks it, and renames it
// into dir, which must not exist or be empty. Nothing is left in dir
// unless the whole database was read and identified.
func Fetch(ctx context.Context, client *http.Client, u, dir string) (DB, error) {
	if u == "" {
		u = DefaultURL
	}
	if client == nil {
		client = http.DefaultClient
	}
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" {
		return DB{}, fmt.Errorf("%w: %q is not an http(s) URL", ErrFetch, u)
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return DB{}, fmt.Errorf("vulndb: %w", err)
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return DB{}, fmt.Errorf("%w: %s", ErrNotEmpty, dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return DB{}, fmt.Errorf("vulndb: %w", err)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return DB{}, fmt.Errorf("vulndb: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, ".vulndb-fetch-")
	if err != nil {
		return DB{}, fmt.Errorf("vulndb: %w", err)
	}
	defer os.RemoveAll(tmp)
	zipPath := filepath.Join(tmp, "vulndb.zip")
	if err := download(ctx, client, u, zipPath); err != nil {
		return DB{}, err
	}
	out := filepath.Join(tmp, "db")
	if err := os.Mkdir(out, 0o755); err != nil {
		return DB{}, fmt.Errorf("vulndb: %w", err)
	}
	if _, err := Extract(zipPath, out); err != nil {
		return DB{}, err
	}
	db := DB{Source: u, Dir: out}
	if err := db.identify(); err != nil {
		return DB{}, err
	}
	os.Remove(dir) // empty or absent
	if err := os.Rename(out, dir); err != nil {
		return DB{}, fmt.Errorf("vulndb: %w", err)
	}
	db.Dir = dir
	return db, nil
}

func download(ctx context.Context, client *http.Client, u, dst string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFetch, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFetch, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s: %s", ErrFetch, u, resp.Status)
	}
	f, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("vulndb: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(resp.Body, MaxDownload+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFetch, err)
	}
	if n > MaxDownload {
		return fmt.Errorf("%w: %s is larger than %d bytes", ErrFetch, u, MaxDownload)
	}
	return nil
}
