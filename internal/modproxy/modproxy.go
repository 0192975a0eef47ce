// Package modproxy generates an offline Go module proxy, in the GOPROXY file
// layout, from module sources kept as plain directories.
//
// Fixture runs mount the generated directory read-only as GOPROXY=file://...
// with no network, so the toolchain can acquire every dependency a fixture
// repository needs without reaching a server. Generation is deterministic:
// the same sources give byte-identical files, so go.sum lines recorded
// against one generation hold for every later one, on every machine.
//
// Source layout: each module version is a directory named
// "<last path element>@<version>" at the place its module path names, under
// the source root. For example
//
//	src/stockade.test/greet@v1.0.0/go.mod       module stockade.test/greet
//	src/stockade.test/greet/v2@v2.0.0/go.mod    module stockade.test/greet/v2
//
// The sources are trusted test data, not repository input; they are still
// checked (module path, canonical version, go.mod's module line) so a typo
// fails generation instead of producing a proxy the toolchain rejects later.
package modproxy

import (
	"bytes"
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

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

// BaseTime is the time recorded in the .info file of the oldest version of
// every module. Each later version (in semver order) is one day younger, so
// times are fixed, ordered like the versions, and never depend on the clock
// or on file modification times.
var BaseTime = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// ErrSource reports a source tree that does not describe valid module
// versions: a bad directory name, a non-canonical version, a missing go.mod,
// a module line that does not match the directory, or a duplicate.
var ErrSource = errors.New("modproxy: invalid module source")

// ErrOutputExists reports an output directory that already has entries.
// Generate never removes or overwrites files it did not create.
var ErrOutputExists = errors.New("modproxy: output directory is not empty")

// Info is the content of a version's .info file, as the go command reads it.
type Info struct {
	Version string    // canonical semantic version, such as "v1.0.0"
	Time    time.Time // commit time; see BaseTime
}

// Generate writes a module proxy for every module version found under srcDir
// into outDir, which must not exist or be empty. For each module it writes
// <escaped path>/@v/list (versions in semver order, one a line) and
// <escaped path>/@latest (the .info of the highest release, or of the highest
// pre-release when there is no release); for each version, @v/<v>.info,
// @v/<v>.mod (the version's go.mod, byte for byte) and @v/<v>.zip (made by
// golang.org/x/mod/zip, which also omits what a real proxy would omit).
//
// On error outDir may hold a partial proxy; callers use a fresh directory.
func Generate(srcDir, outDir string) error {
	mods, err := Scan(srcDir)
	if err != nil {
		return err
	}
	if err := prepareOut(outDir); err != nil {
		return err
	}
	byPath := make(map[string][]Version)
	var paths []string
	for _, v := range mods {
		if _, ok := byPath[v.Path]; !ok {
			paths = append(paths, v.Path)
		}
		byPath[v.Path] = append(byPath[v.Path], v)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := writeModule(outDir, byPath[p]); err != nil {
			return err
		}
	}
	return nil
}

// Version is one module version found in a source tree.
type Version struct {
	module.Version
	// Dir is the directory holding the version's files.
	Dir string
}

// Scan lists the module versions under srcDir, sorted by module path and
// then by semantic version. It checks each as Generate does but writes
// nothing.
func Scan(srcDir string) ([]Version, error) {
	var out []Version
	seen := make(map[module.Version]bool)
	err := filepath.WalkDir(srcDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() || !strings.Contains(d.Name(), "@") {
			return nil
		}
		rel, err := filepath.Rel(srcDir, p)
		if err != nil {
			return err
		}
		modPath, vers, _ := strings.Cut(filepath.ToSlash(rel), "@")
		if strings.Contains(vers, "/") {
			return fmt.Errorf("%w: %s: '@' in a parent directory name", ErrSource, rel)
		}
		mv := module.Version{Path: modPath, Version: vers}
		if err := checkVersion(p, mv); err != nil {
			return err
		}
		if seen[mv] {
			return fmt.Errorf("%w: %s listed twice", ErrSource, mv)
		}
		seen[mv] = true
		out = append(out, Version{Version: mv, Dir: p})
		return filepath.SkipDir
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no module versions under %s", ErrSource, srcDir)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return semver.Compare(out[i].Version.Version, out[j].Version.Version) < 0
	})
	return out, nil
}

func checkVersion(dir string, mv module.Version) error {
	if module.CanonicalVersion(mv.Version) != mv.Version {
		return fmt.Errorf("%w: %s: version %q is not canonical", ErrSource, dir, mv.Version)
	}
	if err := module.Check(mv.Path, mv.Version); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrSource, dir, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrSource, dir, err)
	}
	if got := modfile.ModulePath(data); got != mv.Path {
		return fmt.Errorf("%w: %s: go.mod says module %q, directory says %q", ErrSource, dir, got, mv.Path)
	}
	return nil
}

func prepareOut(outDir string) error {
	ents, err := os.ReadDir(outDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(outDir, 0o755)
	case err != nil:
		return err
	case len(ents) > 0:
		return fmt.Errorf("%w: %s", ErrOutputExists, outDir)
	}
	return nil
}

// writeModule writes every version of one module; vs is in semver order.
func writeModule(outDir string, vs []Version) error {
	esc, err := module.EscapePath(vs[0].Path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSource, err)
	}
	vdir := filepath.Join(outDir, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	var list bytes.Buffer
	var latest []byte
	latestIsRelease := false
	for i, v := range vs {
		ev, err := module.EscapeVersion(v.Version.Version)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrSource, err)
		}
		info, err := json.Marshal(Info{Version: v.Version.Version, Time: BaseTime.AddDate(0, 0, i)})
		if err != nil {
			return err
		}
		info = append(info, '\n')
		gomod, err := os.ReadFile(filepath.Join(v.Dir, "go.mod"))
		if err != nil {
			return err
		}
		var zbuf bytes.Buffer
		if err := modzip.CreateFromDir(&zbuf, v.Version, v.Dir); err != nil {
			return fmt.Errorf("%w: %v", ErrSource, err)
		}
		for ext, data := range map[string][]byte{".info": info, ".mod": gomod, ".zip": zbuf.Bytes()} {
			if err := os.WriteFile(filepath.Join(vdir, ev+ext), data, 0o644); err != nil {
				return err
			}
		}
		fmt.Fprintln(&list, v.Version.Version)
		// vs is sorted, so the last release (or, lacking one, the last
		// pre-release) wins, as the go command's "latest" query picks it.
		if release := semver.Prerelease(v.Version.Version) == ""; release || !latestIsRelease {
			latest, latestIsRelease = info, release
		}
	}
	if err := os.WriteFile(filepath.Join(vdir, "list"), list.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(vdir, "..", "@latest"), latest, 0o644)
}

// HashZip returns the go.sum hash ("h1:...") of m's zip in the proxy at
// proxyDir, the value go.sum records on the line "<path> <version> h1:...".
func HashZip(proxyDir string, m module.Version) (string, error) {
	p, err := file(proxyDir, m, ".zip")
	if err != nil {
		return "", err
	}
	return dirhash.HashZip(p, dirhash.Hash1)
}

// HashMod returns the go.sum hash ("h1:...") of m's go.mod in the proxy at
// proxyDir, the value go.sum records on the line "<path> <version>/go.mod h1:...".
func HashMod(proxyDir string, m module.Version) (string, error) {
	p, err := file(proxyDir, m, ".mod")
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	return dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
}

// GoSumLines returns the two go.sum lines (zip and go.mod) for m, each
// ending in a newline, as the go command writes them.
func GoSumLines(proxyDir string, m module.Version) (string, error) {
	z, err := HashZip(proxyDir, m)
	if err != nil {
		return "", err
	}
	h, err := HashMod(proxyDir, m)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s %s\n%s %s/go.mod %s\n", m.Path, m.Version, z, m.Path, m.Version, h), nil
}

func file(proxyDir string, m module.Version, ext string) (string, error) {
	esc, err := module.EscapePath(m.Path)
	if err != nil {
		return "", err
	}
	ev, err := module.EscapeVersion(m.Version)
	if err != nil {
		return "", err
	}
	return filepath.Join(proxyDir, filepath.FromSlash(path.Join(esc, "@v", ev+ext))), nil
}
