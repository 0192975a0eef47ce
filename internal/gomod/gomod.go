// Package gomod reads and checks a Go module directory before any
// toolchain command runs against it.
//
// The directory is untrusted. Load reads it without following a symlink out
// of it, refuses the layouts the validator does not support yet (each a
// typed *UnsupportedError matching ErrUnsupported, which the CLI turns into
// exit code 2), and parses go.mod strictly. Nothing here runs code or
// reaches the network.
package gomod

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"

	"github.com/stockade/stockade/internal/imagetable"
)

// MaxGoModBytes is the largest go.mod Load reads, in bytes. Real go.mod
// files are a few KiB; the cap stops a hostile one from exhausting memory.
const MaxGoModBytes = 1 << 20

// MaxEntries is the most directory entries Load walks. A repository with
// more is refused (ReasonTooLarge) rather than checked partially.
const MaxEntries = 200_000

// maxSymlinkHops bounds symlink resolution, as the kernel's ELOOP does.
const maxSymlinkHops = 40

// ErrUnsupported matches every *UnsupportedError: a layout the validator
// refuses before anything runs.
var ErrUnsupported = errors.New("gomod: unsupported module layout")

// ErrNoModule reports a directory without a go.mod file.
var ErrNoModule = errors.New("gomod: no go.mod in directory")

// ErrMalformed matches every *MalformedError: a go.mod that does not parse.
var ErrMalformed = errors.New("gomod: malformed go.mod")

// Reason says which unsupported layout a directory has. Values are stable:
// reports print them.
type Reason string

const (
	// ReasonWorkspace: a go.work file at the module root.
	ReasonWorkspace Reason = "workspace"
	// ReasonVendor: a vendor directory at the module root.
	ReasonVendor Reason = "vendor"
	// ReasonNestedModule: a go.mod below the root, outside directories the
	// go command ignores (testdata, and names starting with "." or "_").
	ReasonNestedModule Reason = "nested_module"
	// ReasonLocalReplace: a replace directive whose target is a directory.
	ReasonLocalReplace Reason = "local_replace"
	// ReasonSubmodule: a .gitmodules file, or a .git entry below the root.
	ReasonSubmodule Reason = "submodule"
	// ReasonSymlinkEscape: a symlink that resolves outside the directory,
	// or is absolute. One that loops resolves nowhere and is accepted.
	ReasonSymlinkEscape Reason = "symlink_escape"
	// ReasonIrregularFile: a device, named pipe or socket, which a snapshot
	// copy could block on or misread.
	ReasonIrregularFile Reason = "irregular_file"
	// ReasonTooLarge: more than MaxEntries entries, or go.mod larger than
	// MaxGoModBytes.
	ReasonTooLarge Reason = "too_large"
	// ReasonGoVersion: a go directive no toolchain image can build.
	ReasonGoVersion Reason = "go_version"
)

// UnsupportedError is a refusal: the directory's layout is not supported.
// It matches ErrUnsupported with errors.Is and unwraps to Err, if any.
type UnsupportedError struct {
	// Reason is the kind of layout.
	Reason Reason
	// Path is the offending file or directory, slash-separated and relative
	// to the module root ("go.work", "tools/go.mod"); "go.mod" for
	// directives.
	Path string
	// Detail says more in words, such as the symlink's target or the
	// replace directive; may be empty.
	Detail string
	// Err is the underlying error, such as an *imagetable.TooNewError;
	// may be nil.
	Err error
}

func (e *UnsupportedError) Error() string {
	s := fmt.Sprintf("unsupported module layout: %s: %s", e.Reason, e.Path)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrUnsupported) true.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// Unwrap returns Err.
func (e *UnsupportedError) Unwrap() error { return e.Err }

// MalformedError reports a go.mod that cannot be used: it does not parse,
// has no module directive, or is not a regular file. It matches
// ErrMalformed with errors.Is.
type MalformedError struct {
	// Path is the file, relative to the module root: "go.mod".
	Path string
	// Err is the parser's error (a modfile.ErrorList with line numbers)
	// or a description.
	Err error
}

func (e *MalformedError) Error() string { return fmt.Sprintf("malformed %s: %v", e.Path, e.Err) }

// Is makes errors.Is(err, ErrMalformed) true.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }

// Unwrap returns Err.
func (e *MalformedError) Unwrap() error { return e.Err }

// Requirement is one require directive.
type Requirement struct {
	module.Version
	// Indirect reports the "// indirect" comment.
	Indirect bool
}

// Module is a checked module directory.
type Module struct {
	// Dir is the module root, absolute, with symlinks resolved.
	Dir string
	// Path is the module path from the module directive.
	Path string
	// Go is the go directive, such as "1.24"; "" when go.mod has none (the
	// go command then assumes 1.16).
	Go string
	// Toolchain is the toolchain directive, such as "go1.26.1"; "" when
	// absent. Runs use GOTOOLCHAIN=local, so it selects nothing.
	Toolchain string
	// Requires lists the require directives in file order.
	Requires []Requirement
}

// Direct returns the requirements not marked // indirect, in file order.
func (m *Module) Direct() []module.Version {
	var out []module.Version
	for _, r := range m.Requires {
		if !r.Indirect {
			out = append(out, r.Version)
		}
	}
	return out
}

// Load checks the module directory dir and parses its go.mod. It returns
// an *UnsupportedError for every layout the validator refuses except the go
// directive (see Check), ErrNoModule when dir has no go.mod, and a
// *MalformedError when go.mod does not parse.
func Load(dir string) (*Module, error) {
	root, err := filepath.Abs(dir)
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		return nil, fmt.Errorf("gomod: %w", err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("gomod: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("gomod: %s is not a directory", dir)
	}
	for _, c := range []struct {
		name   string
		reason Reason
	}{
		{"go.work", ReasonWorkspace},
		{"vendor", ReasonVendor},
		{".gitmodules", ReasonSubmodule},
	} {
		if _, err := os.Lstat(filepath.Join(root, c.name)); err == nil {
			return nil, &UnsupportedError{Reason: c.reason, Path: c.name}
		}
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	data, err := readGoMod(root)
	if err != nil {
		return nil, err
	}
	f, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		return nil, &MalformedError{Path: "go.mod", Err: err}
	}
	if f.Module == nil || f.Module.Mod.Path == "" {
		return nil, &MalformedError{Path: "go.mod", Err: errors.New("no module directive")}
	}
	for _, r := range f.Replace {
		if r.New.Version == "" && modfile.IsDirectoryPath(r.New.Path) {
			return nil, &UnsupportedError{Reason: ReasonLocalReplace, Path: "go.mod",
				Detail: fmt.Sprintf("replace %s => %s", r.Old.String(), r.New.Path)}
		}
	}
	m := &Module{Dir: root, Path: f.Module.Mod.Path}
	if f.Go != nil {
		m.Go = f.Go.Version
	}
	if f.Toolchain != nil {
		m.Toolchain = f.Toolchain.Name
	}
	for _, r := range f.Require {
		m.Requires = append(m.Requires, Requirement{Version: r.Mod, Indirect: r.Indirect})
	}
	return m, nil
}

// Check is Load followed by the choice of a toolchain image for the go
// directive. A directive no image can build is an *UnsupportedError with
// ReasonGoVersion wrapping the table's *imagetable.TooNewError. A nil table
// means imagetable.Default(); locals may be nil.
func Check(dir string, table *imagetable.Table, locals []imagetable.Local) (*Module, imagetable.Choice, error) {
	m, err := Load(dir)
	if err != nil {
		return nil, imagetable.Choice{}, err
	}
	if table == nil {
		table = imagetable.Default()
	}
	c, err := table.Select(m.Go, locals)
	if errors.Is(err, imagetable.ErrTooNew) {
		return m, c, &UnsupportedError{Reason: ReasonGoVersion, Path: "go.mod", Detail: "go " + m.Go, Err: err}
	}
	if err != nil {
		return m, c, fmt.Errorf("gomod: %w", err)
	}
	return m, c, nil
}

func readGoMod(root string) ([]byte, error) {
	p := filepath.Join(root, "go.mod")
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoModule
	}
	if err != nil {
		return nil, fmt.Errorf("gomod: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, &MalformedError{Path: "go.mod", Err: errors.New("not a regular file")}
	}
	if fi.Size() > MaxGoModBytes {
		return nil, &UnsupportedError{Reason: ReasonTooLarge, Path: "go.mod", Detail: fmt.Sprintf("%d bytes, at most %d", fi.Size(), MaxGoModBytes)}
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("gomod: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxGoModBytes+1))
	if err != nil {
		return nil, fmt.Errorf("gomod: %w", err)
	}
	if len(data) > MaxGoModBytes {
		return nil, &UnsupportedError{Reason: ReasonTooLarge, Path: "go.mod", Detail: fmt.Sprintf("more than %d bytes", MaxGoModBytes)}
	}
	return data, nil
}

// walk checks every entry under root in lexical order: nested modules,
// nested .git entries, symlinks and irregular files. It never follows a
// symlink.
func walk(root string) error {
	n := 0
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("gomod: %w", err)
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if n++; n > MaxEntries {
			return &UnsupportedError{Reason: ReasonTooLarge, Path: ".", Detail: fmt.Sprintf("more than %d entries", MaxEntries)}
		}
		name := d.Name()
		switch {
		case name == ".git" && rel != ".git":
			return &UnsupportedError{Reason: ReasonSubmodule, Path: rel}
		case rel == ".git" && d.Type()&fs.ModeSymlink == 0:
			return skip(d) // the repository's own metadata
		}
		t := d.Type()
		switch {
		case t&fs.ModeSymlink != 0:
			if target, why := escapes(root, rel); why != "" {
				return &UnsupportedError{Reason: ReasonSymlinkEscape, Path: rel, Detail: fmt.Sprintf("-> %s: %s", target, why)}
			}
		case t.IsDir():
			return nil
		case !t.IsRegular():
			return &UnsupportedError{Reason: ReasonIrregularFile, Path: rel, Detail: t.String()}
		}
		// A go.mod symlink inside the tree still starts a module.
		if name == "go.mod" && rel != "go.mod" && !ignored(path.Dir(rel)) {
			return &UnsupportedError{Reason: ReasonNestedModule, Path: rel}
		}
		return nil
	})
}

func skip(d fs.DirEntry) error {
	if d.IsDir() {
		return filepath.SkipDir
	}
	return nil
}

// ignored reports whether the go command ignores the directory rel (slash
// path relative to the root) when matching "./...": a component named
// testdata or starting with "." or "_".
func ignored(rel string) bool {
	if rel == "." {
		return false
	}
	for _, c := range strings.Split(rel, "/") {
		if c == "testdata" || strings.HasPrefix(c, ".") || strings.HasPrefix(c, "_") {
			return true
		}
	}
	return false
}

// escapes resolves the symlink at rel (slash path under root) one component
// at a time, as the kernel would, and reports why it leaves root: "" when
// it stays inside, dangles inside, or loops (past maxSymlinkHops, where
// the kernel gives ELOOP). It returns the link's own target for
// the message. Lexical checks are not enough: a link "a -> ." makes
// "a/../x" resolve above root although it looks inside.
func escapes(root, rel string) (target, why string) {
	target, err := os.Readlink(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return "", "unreadable: " + err.Error()
	}
	var cur []string // physical components below root
	queue := strings.Split(rel, "/")
	hops := 0
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return target, "resolves outside the repository"
			}
			cur = cur[:len(cur)-1]
			continue
		}
		p := filepath.Join(append([]string{root}, append(cur, c)...)...)
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			// A missing component resolves no further links: the rest is
			// lexical, and a dangling link inside root is harmless.
			cur = append(cur, c)
			continue
		}
		if hops++; hops > maxSymlinkHops {
			// A loop (or a longer chain than the kernel follows)
			// resolves to nothing, as a dangling link does: the go
			// command skips it, and no open through it succeeds.
			return target, ""
		}
		t, err := os.Readlink(p)
		if err != nil {
			return target, "unreadable: " + err.Error()
		}
		if filepath.IsAbs(t) || filepath.VolumeName(t) != "" {
			return target, "absolute target"
		}
		queue = append(strings.Split(filepath.ToSlash(t), "/"), queue...)
	}
	return target, ""
}
