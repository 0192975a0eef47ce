// Package vulndb reads, identifies and writes vulnerability databases in
// the layout of the public Go vulnerability database (vuln.go.dev):
// index/db.json (its "modified" time), index/modules.json,
// index/vulns.json, and one OSV entry per advisory at ID/<id>.json.
//
// Threat model: the database decides which vulnerabilities a scan can
// see, so every report names the one it used by its modified time and a
// hash of its content, and the database is never written by a container:
// scans mount a copy read-only. A database given as a .zip is extracted
// by the host with limits on names, entries and sizes.
package vulndb

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// EnvDefault names the variable that sets the database when -vulndb is
// not given.
const EnvDefault = "STOCKADE_VULNDB"

// Limits of a database, as Open reads it.
const (
	// MaxFiles is the most files a database may hold (the public one has
	// a few thousand).
	MaxFiles = 200_000
	// MaxBytes is the most bytes its files may hold together.
	MaxBytes = 2 << 30
)

// ErrInvalid reports a path that is not a database in the expected layout;
// the error is an *Error.
var ErrInvalid = errors.New("vulndb: not a Go vulnerability database")

// Error says why a database was refused.
type Error struct {
	Path   string
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("%v: %s: %s", ErrInvalid, e.Path, e.Reason) }

// Is matches ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// DB is a database on the host.
type DB struct {
	// Source is what was given: a directory or a .zip file.
	Source string
	// Dir is the database's directory: Source, or for a .zip the
	// directory it was extracted into (Close removes it).
	Dir string
	// Modified is index/db.json's "modified": when the newest entry
	// changed.
	Modified time.Time
	// SHA256 is the content hash (Hash) of Dir.
	SHA256 string
	// Entries is how many OSV entries ID/ holds.
	Entries int

	extracted bool
}

// Close removes what Open extracted; it does nothing for a directory.
func (d DB) Close() error {
	if !d.extracted {
		return nil
	}
	return os.RemoveAll(d.Dir)
}

// Open reads the database at p (a directory, or a .zip of one whose
// index/ may sit under a single top directory), checks its layout and
// identifies it. A .zip is extracted into a new temporary directory.
func Open(p string) (DB, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return DB{}, &Error{Path: p, Reason: err.Error()}
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return DB{}, &Error{Path: p, Reason: err.Error()}
	}
	db := DB{Source: abs, Dir: abs}
	if !fi.IsDir() {
		if !strings.HasSuffix(strings.ToLower(abs), ".zip") {
			return DB{}, &Error{Path: p, Reason: "neither a directory nor a .zip"}
		}
		tmp, err := os.MkdirTemp("", "stockade-vulndb-")
		if err != nil {
			return DB{}, fmt.Errorf("vulndb: %w", err)
		}
		if db.Dir, err = Extract(abs, tmp); err != nil {
			os.RemoveAll(tmp)
			return DB{}, err
		}
		db.extracted = true
		db.Dir = tmp
	}
	if err := db.identify(); err != nil {
		db.Close()
		return DB{}, err
	}
	return db, nil
}

// OpenIfSet is Open for an optional setting: an empty p is no database
// (the zero DB, whose Dir is empty and whose Close does nothing).
func OpenIfSet(p string) (DB, error) {
	if p == "" {
		return DB{}, nil
	}
	return Open(p)
}

// Identify returns the modified time and content hash of the database in
// dir, checking its layout as Open does.
func Identify(dir string) (modified time.Time, sum string, err error) {
	db := DB{Source: dir, Dir: dir}
	err = db.identify()
	return db.Modified, db.SHA256, err
}

func (d *DB) identify() error {
	bad := func(format string, args ...any) error {
		return &Error{Path: d.Source, Reason: fmt.Sprintf(format, args...)}
	}
	b, err := os.ReadFile(filepath.Join(d.Dir, "index", "db.json"))
	if err != nil {
		return bad("no index/db.json: %v", err)
	}
	var meta struct {
		Modified time.Time `json:"modified"`
	}
	if err := json.Unmarshal(b, &meta); err != nil || meta.Modified.IsZero() {
		return bad("index/db.json has no modified time")
	}
	d.Modified = meta.Modified.UTC()
	b, err = os.ReadFile(filepath.Join(d.Dir, "index", "modules.json"))
	if err != nil {
		return bad("no index/modules.json: %v", err)
	}
	var mods []struct {
		Path  string            `json:"path"`
		Vulns []json.RawMessage `json:"vulns"`
	}
	if err := json.Unmarshal(b, &mods); err != nil {
		return bad("index/modules.json: %v", err)
	}
	ents, err := os.ReadDir(filepath.Join(d.Dir, "ID"))
	if err != nil {
		return bad("no ID directory: %v", err)
	}
	d.Entries = 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") {
			d.Entries++
		}
	}
	if d.SHA256, err = Hash(d.Dir); err != nil {
		return &Error{Path: d.Source, Reason: err.Error()}
	}
	return nil
}

// Hash returns the content hash of the tree at dir: sha256 over each
// regular file's slash path and sha256, in path order. Symbolic links and
// other irregular files are refused; so is a tree over MaxFiles or
// MaxBytes. A directory and a .zip of the same files hash the same.
func Hash(dir string) (string, error) {
	type file struct{ rel, sum string }
	var files []file
	var total int64
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if !e.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", rel)
		}
		if len(files) >= MaxFiles {
			return fmt.Errorf("more than %d files", MaxFiles)
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		if total += fi.Size(); total > MaxBytes {
			return fmt.Errorf("more than %d bytes", MaxBytes)
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		files = append(files, file{filepath.ToSlash(rel), hex.EncodeToString(h.Sum(nil))})
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("vulndb: hash: %w", err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%s\n", f.rel, f.sum)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Extract unpacks the database in the .zip at zipPath into the empty
// directory dst and returns dst. Entries must be relative slash paths
// without "..", regular files or directories, within MaxFiles and
// MaxBytes; a single top directory holding index/ is stripped.
func Extract(zipPath, dst string) (string, error) {
	bad := func(format string, args ...any) error {
		return &Error{Path: zipPath, Reason: fmt.Sprintf(format, args...)}
	}
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		return "", bad("%v", err)
	}
	defer zr.Close()
	if len(zr.File) > MaxFiles {
		return "", bad("more than %d entries", MaxFiles)
	}
	prefix := ""
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "index/db.json") {
			prefix = strings.TrimSuffix(f.Name, "index/db.json")
			break
		}
	}
	if strings.Count(prefix, "/") > 1 {
		return "", bad("index/db.json is nested too deep (%s)", prefix)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return "", fmt.Errorf("vulndb: %w", err)
	}
	defer root.Close()
	var total int64
	for _, f := range zr.File {
		name, ok := strings.CutPrefix(f.Name, prefix)
		if !ok || name == "" {
			continue
		}
		if !fs.ValidPath(strings.TrimSuffix(name, "/")) || strings.Contains(name, "\\") {
			return "", bad("entry %q is not a clean relative path", f.Name)
		}
		mode := f.Mode()
		switch {
		case mode.IsDir():
			if err := root.MkdirAll(strings.TrimSuffix(name, "/"), 0o755); err != nil {
				return "", fmt.Errorf("vulndb: %w", err)
			}
			continue
		case !mode.IsRegular():
			return "", bad("entry %q is not a regular file", f.Name)
		}
		if total += int64(f.UncompressedSize64); f.UncompressedSize64 > MaxBytes || total > MaxBytes {
			return "", bad("more than %d bytes", MaxBytes)
		}
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return "", fmt.Errorf("vulndb: %w", err)
			}
		}
		if err := extractFile(root, f, name); err != nil {
			return "", bad("%s: %v", f.Name, err)
		}
	}
	return dst, nil
}

func extractFile(root *os.Root, f *zip.File, name string) error {
	rc, err := f.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(rc, int64(f.UncompressedSize64)+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != int64(f.UncompressedSize64) {
		err = fmt.Errorf("holds %d bytes, its header says %d", n, f.UncompressedSize64)
	}
	return err
}
