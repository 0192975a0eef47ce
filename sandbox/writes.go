package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
)

// ReadSource reads exactly size bytes from src for WriteFileStream: it
// checks size with CheckWriteSize before reading anything and refuses a
// source shorter or longer than size, so such a write lands nothing.
// backend prefixes the errors ("docker", "kubernetes").
func ReadSource(backend, p string, src io.Reader, size int64) ([]byte, error) {
	if err := CheckWriteSize(size); err != nil {
		return nil, fmt.Errorf("%s: write %s: %w", backend, p, err)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(src, buf); err != nil {
		return nil, fmt.Errorf("%s: write %s: source shorter than %d bytes: %w", backend, p, size, err)
	}
	var one [1]byte
	if n, err := io.ReadFull(src, one[:]); n > 0 {
		return nil, fmt.Errorf("%s: write %s: source longer than %d bytes", backend, p, size)
	} else if err != io.EOF {
		return nil, fmt.Errorf("%s: write %s: reading the source: %w", backend, p, err)
	}
	return buf, nil
}

// WriteRuns implements Sandbox.WriteFiles for a backend: it checks every
// path, groups files into runs of consecutive files in the same one of
// roots (the sandbox's WritablePaths), and calls bulk with each run's
// BulkWrite, run after run. The first file outside every root, or naming
// a root itself, stops the write there (after the runs before it); so
// does the first failed run, as Sandbox.WriteFiles promises.
func WriteRuns(ctx context.Context, backend string, roots []string, files []FileWrite, bulk func(ctx context.Context, bw *BulkWrite, files []FileWrite) error) error {
	type run struct {
		root  string
		files []FileWrite
	}
	var runs []run
	var stop error
	for _, f := range files {
		root, err := writablePlace(backend, "write", roots, f.Path)
		if errors.Is(err, ErrNotWritable) {
			stop = err
			break
		}
		if err != nil {
			return err
		}
		if f.Path == root {
			stop = fmt.Errorf("%s: write %s: %w", backend, f.Path, ErrIsDirectory)
			break
		}
		if n := len(runs); n > 0 && runs[n-1].root == root {
			runs[n-1].files = append(runs[n-1].files, f)
			continue
		}
		runs = append(runs, run{root: root, files: []FileWrite{f}})
	}
	for _, r := range runs {
		bw, err := NewBulkWrite(r.root, r.files)
		if err != nil {
			return fmt.Errorf("%s: %w", backend, err)
		}
		if err := bulk(ctx, bw, r.files); err != nil {
			return err
		}
	}
	return stop
}

// writablePlace is the rule of every path a sandbox's file API changes
// (writes, MakeDir, Remove, Rename), checked on the host before anything
// runs: p passes CheckPath, else a plain error; it lies in one of roots
// (the sandbox's WritablePaths), else a *PathNotWritableError; and its
// base name does not start with TempPrefix, which the backends' temporary
// files own. It returns the innermost root holding p (p itself, when p is
// a root). backend and op ("write", ...) prefix the errors.
func writablePlace(backend, op string, roots []string, p string) (string, error) {
	if err := CheckPath(p); err != nil {
		return "", fmt.Errorf("%s: %s: %w", backend, op, err)
	}
	root := rootOf(roots, p)
	if root == "" {
		return "", fmt.Errorf("%s: %w", backend, &PathNotWritableError{Path: p, Reason: "read-only root filesystem (writable: " + strings.Join(roots, ", ") + ")"})
	}
	if err := checkNotTemp(p); err != nil {
		return "", fmt.Errorf("%s: %s: %w", backend, op, err)
	}
	return root, nil
}

// checkNotTemp refuses a path whose base name starts with TempPrefix.
func checkNotTemp(p string) error {
	if base := path.Base(p); strings.HasPrefix(base, TempPrefix) {
		return fmt.Errorf("sandbox: %s: names starting with %q are reserved for temporary files", p, TempPrefix)
	}
	return nil
}

// rootOf returns the innermost root of roots (sorted) holding p, or "":
// the place, and so the filesystem, p is in.
func rootOf(roots []string, p string) string {
	in := ""
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			in = r
		}
	}
	return in
}

// BulkOps are a backend's three moves of a bulk write, for BulkWrite.Run.
type BulkOps struct {
	// Script runs one of the …Shell scripts with args as the sandbox user
	// and returns its exit code and output; an error is the backend's.
	Script func(ctx context.Context, script string, args ...string) (code int, stdout, stderr string, err error)
	// Put delivers the tar write produces, extracted in dir, with every
	// member owned by the sandbox user; its error is already the
	// backend's final word (wrapped, typed).
	Put func(ctx context.Context, dir string, write func(io.Writer) error) error
	// Discard removes what the write delivered and did not land, on its
	// own budget.
	Discard func(ctx context.Context, bw *BulkWrite)
	// Land, when set, does the whole write in one step in the sandbox, as
	// the sandbox user (the Docker backend's agent): the checks and
	// parents of BulkPrepareShell, the staging of the upload (files 0644
	// or their target's mode, directories 0700, the plan's mtime) and the
	// check and renames of BulkRenameShell, with their exit codes and
	// fault lines (and ExitBulkStage), removing its staging directories
	// itself. An error wrapping ErrNotLanded means it stopped or never
	// ran (its agent gone, hung or refusing): Run discards and goes on
	// with the three moves above. Any other error is final (after a
	// discard).
	Land func(ctx context.Context, bw *BulkWrite) (code int, stderr string, err error)
}

// ErrNotLanded reports a BulkOps.Land that did not carry out its write:
// the scripts may.
var ErrNotLanded = errors.New("sandbox: the one-step write did not run")

// ExtractArgv is the command that extracts, as the sandbox user, a
// BulkWrite's archive read from its stdin into dir: how every backend
// uploads (Kubernetes from its exec's stdin, Docker through its resident
// agent, else ExtractSizedArgv), never through an engine API that
// extracts as root. Every member is then the user's, and lands only where
// the user may write.
func ExtractArgv(dir string) []string { return []string{"tar", "-x", "-f", "-", "-C", dir} }

// ExtractSizedArgv is ExtractArgv for a backend whose engine cannot end
// the command's input (a Docker engine exec: its connection cannot be
// half-closed): it reads exactly size bytes, the archive's length, and
// extracts them, as the sandbox user.
func ExtractSizedArgv(dir string, size int64) []string {
	return []string{"/bin/sh", "-c", `head -c "$1" | ` + strings.Join(ExtractArgv(`"$2"`), " "), "stockade", strconv.FormatInt(size, 10), dir}
}

// Run carries out the write of files (the files b was planned with): in
// one step with ops.Land when it is set and runs, else the sequence of the
// BulkWrite documentation: prepare, upload, rename, and discard after any
// failure from the upload on. backend prefixes errors.
func (b *BulkWrite) Run(ctx context.Context, backend string, files []FileWrite, ops BulkOps) error {
	if ops.Land != nil {
		code, stderr, err := ops.Land(ctx, b)
		if err == nil {
			return b.Fault(backend, code, stderr)
		}
		// Whatever it staged and did not land goes; what it landed was
		// this write's, which the scripts land again.
		ops.Discard(ctx, b)
		if !errors.Is(err, ErrNotLanded) || ctx.Err() != nil {
			return err
		}
	}
	targets := make([]string, len(files))
	for i, f := range files {
		targets[i] = f.Path
	}
	code, _, stderr, err := ops.Script(ctx, BulkPrepareShell, targets...)
	if err != nil {
		return err
	}
	fault := b.Fault(backend, code, stderr)
	if len(b.Delivered()) == 0 {
		return fault
	}
	if err := ops.Put(ctx, path.Dir(b.Manifest), b.Archive); err != nil {
		ops.Discard(ctx, b)
		return err
	}
	code, stdout, stderr, err := ops.Script(ctx, BulkRenameShell, b.Manifest, b.DirList)
	if err != nil {
		ops.Discard(ctx, b)
		return err
	}
	if code != 0 {
		ferr := b.Fault(backend, code, stderr)
		ops.Discard(ctx, b)
		if b.LostItsList(stdout) {
			return fmt.Errorf("%w (the upload arrived incomplete)", ferr)
		}
		return ferr
	}
	return fault
}
