package sandbox

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
)

// Bulk write limits. The prepare script gets the targets as arguments, so
// their total stays well under the kernel's 2 MiB argument limit.
const (
	maxBulkFiles     = 10000   // files in one BulkWrite
	maxBulkPathBytes = 1 << 20 // bytes of all target paths together
)

// BulkWrite plans a write of many files with a constant number of engine
// round trips, whatever the number of files:
//
//  1. run BulkPrepareShell with the targets as arguments (one exec); pass its
//     exit code and stderr to Fault, which, at a fault, keeps only the
//     targets before it;
//  2. if Delivered is not empty, upload Archive, extracted in workdir by
//     the sandbox user (one upload: tar(1) as that user, ExtractArgv);
//  3. run BulkRenameShell with Manifest and DirList (one exec) and pass its
//     result to Fault;
//  4. after any failure from step 2 on, run BulkDiscardShell with
//     Delivered; LeftBehind reports what is still there. (An upload that
//     extracted as root could leave what the user cannot remove, which
//     EmptyArchive replaced; the backends here extract as the user, so
//     what is left is the session's own doing.)
//
// Staged files sit in a directory named TempName in each target's directory,
// under their final base names, so one mv per directory lands them and each
// landing is a rename(2) within one filesystem: atomic. The manifest (the
// targets, in order, with a count at the end) and the list of staging
// directories sit in workdir and are delivered last: if they arrived whole,
// so did every file before them.
type BulkWrite struct {
	// Manifest is the container path of the manifest the archive delivers.
	Manifest string
	// DirList is the container path of the list of staging directories.
	DirList string

	root  string // workdir: where the archive is extracted
	tmp   string // TempName shared by every staging directory
	files []FileWrite
	n     int // files still to write: len(files) until Fault truncates
	sent  int // files the last Archive or Members carried
	mtime time.Time
}

// NewBulkWrite plans writing files, in order, through an archive extracted in
// workdir (absolute and clean; the backend's writable root holding every
// target). Each path must be absolute, clean, below workdir and distinct; a
// path outside workdir is a *PathNotWritableError. Data is not copied.
func NewBulkWrite(workdir string, files []FileWrite) (*BulkWrite, error) {
	if err := CheckPath(workdir); err != nil {
		return nil, fmt.Errorf("sandbox: bulk write root: %w", err)
	}
	if len(files) > maxBulkFiles {
		return nil, fmt.Errorf("sandbox: bulk write of %d files, at most %d", len(files), maxBulkFiles)
	}
	seen := make(map[string]bool, len(files))
	total := 0
	for _, f := range files {
		if err := CheckPath(f.Path); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(f.Path, workdir+"/") {
			return nil, &PathNotWritableError{Path: f.Path, Reason: "outside the writable place " + workdir}
		}
		if err := checkNotTemp(f.Path); err != nil {
			return nil, err
		}
		if seen[f.Path] {
			return nil, fmt.Errorf("sandbox: %s appears twice in one bulk write", f.Path)
		}
		seen[f.Path] = true
		if err := CheckWriteSize(int64(len(f.Data))); err != nil {
			return nil, fmt.Errorf("sandbox: %s: %w", f.Path, err)
		}
		total += len(f.Path) + 1
	}
	if total > maxBulkPathBytes {
		return nil, fmt.Errorf("sandbox: bulk write paths total %d bytes, at most %d", total, maxBulkPathBytes)
	}
	tmp := TempName()
	return &BulkWrite{
		Manifest: workdir + "/" + tmp + ".list",
		DirList:  workdir + "/" + tmp + ".dirs",
		root:     workdir,
		tmp:      tmp,
		files:    files,
		n:        len(files),
		mtime:    time.Now().Truncate(time.Second),
	}, nil
}

// Plan returns what a one-step lander (BulkOps.Land) needs: the files
// still to write, in order (not copied), the name of the staging directory
// in each target's directory, and the files' modification time.
func (b *BulkWrite) Plan() (files []FileWrite, temp string, mtime time.Time) {
	return b.files[:b.n], b.tmp, b.mtime
}

// targets returns the target paths still to write, in order: the arguments
// of BulkPrepareShell.
func (b *BulkWrite) targets() []string {
	out := make([]string, b.n)
	for i := range out {
		out[i] = b.files[i].Path
	}
	return out
}

// dirs returns the distinct target directories of the files still to write,
// in order of first appearance.
func (b *BulkWrite) dirs() []string { return dirsOf(b.files[:b.n]) }

func dirsOf(files []FileWrite) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range files {
		d := path.Dir(f.Path)
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// Delivered returns the container paths the archive delivers (or, once
// Archive or Members has run, delivered), in order: one staging directory
// per target directory, then Manifest and DirList. It is empty when no file
// is left to write (a fault at the first target).
// BulkDiscardShell takes them as arguments.
func (b *BulkWrite) Delivered() []string {
	n := max(b.n, b.sent)
	if n == 0 {
		return nil
	}
	var out []string
	for _, d := range dirsOf(b.files[:n]) {
		out = append(out, d+"/"+b.tmp)
	}
	return append(out, b.Manifest, b.DirList)
}

// rel returns p relative to the archive root.
func (b *BulkWrite) rel(p string) string { return strings.TrimPrefix(p, b.root+"/") }

// Archive writes the whole delivery as one uncompressed tar: Members, then
// the bookkeeping.
func (b *BulkWrite) Archive(w io.Writer) error {
	tw := tar.NewWriter(w)
	if err := b.members(tw); err != nil {
		return err
	}
	if err := b.bookkeeping(tw); err != nil {
		return err
	}
	return tw.Close()
}

// Members writes a tar of the staging directories and the staged files
// alone. Files are mode 0644 and directories 0700; owners are left to the
// upload, which extracts as the sandbox user.
func (b *BulkWrite) Members(w io.Writer) error {
	tw := tar.NewWriter(w)
	if err := b.members(tw); err != nil {
		return err
	}
	return tw.Close()
}

// Bookkeeping writes a tar of the manifest and the directory list alone.
func (b *BulkWrite) Bookkeeping(w io.Writer) error {
	tw := tar.NewWriter(w)
	if err := b.bookkeeping(tw); err != nil {
		return err
	}
	return tw.Close()
}

func (b *BulkWrite) members(tw *tar.Writer) error {
	b.sent = max(b.sent, b.n)
	made := map[string]bool{}
	for _, f := range b.files[:b.n] {
		d := path.Dir(f.Path)
		stage := b.rel(d + "/" + b.tmp)
		if !made[d] {
			made[d] = true
			if err := tw.WriteHeader(b.header(stage+"/", tar.TypeDir, 0o700, 0)); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(b.header(stage+"/"+path.Base(f.Path), tar.TypeReg, 0o644, int64(len(f.Data)))); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	return nil
}

func (b *BulkWrite) bookkeeping(tw *tar.Writer) error {
	b.sent = max(b.sent, b.n)
	var m bytes.Buffer
	m.WriteString("stockade-bulk 1\n" + b.tmp + "\n")
	for _, t := range b.targets() {
		m.WriteString(t + "\n")
	}
	m.WriteString("end " + strconv.Itoa(b.n) + "\n")
	var l bytes.Buffer
	dirs := b.dirs()
	for _, d := range dirs {
		l.WriteString(d + "/" + b.tmp + "\n")
	}
	l.WriteString("end " + strconv.Itoa(len(dirs)) + "\n")
	for _, e := range []struct {
		name string
		data []byte
	}{{b.Manifest, m.Bytes()}, {b.DirList, l.Bytes()}} {
		if err := tw.WriteHeader(b.header(b.rel(e.name), tar.TypeReg, 0o600, int64(len(e.data)))); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	return nil
}

func (b *BulkWrite) header(name string, typ byte, mode, size int64) *tar.Header {
	return &tar.Header{Typeflag: typ, Name: name, Mode: mode, Size: size, ModTime: b.mtime, Format: tar.FormatPAX}
}

// EmptyArchive writes a tar that replaces each of paths (which must be among
// Delivered; others are refused) with an empty file. The engine, extracting
// as root, removes whatever is there first, and the new file belongs to the
// container's user, who can then delete it: this is how a temporary the
// engine left owned by root (say, a file cut short in a sticky directory)
// is cleared.
func (b *BulkWrite) EmptyArchive(paths []string, w io.Writer) error {
	ok := map[string]bool{}
	for _, p := range b.Delivered() {
		ok[p] = true
	}
	tw := tar.NewWriter(w)
	for _, p := range paths {
		if !ok[p] {
			return fmt.Errorf("sandbox: %s is not a temporary of this bulk write", p)
		}
		if err := tw.WriteHeader(b.header(b.rel(p), tar.TypeReg, 0o600, 0)); err != nil {
			return err
		}
	}
	return tw.Close()
}

// LeftBehind returns the paths BulkDiscardShell's stdout reports as still
// present, keeping only paths among Delivered (the output comes from inside
// the sandbox and is not trusted further).
func (b *BulkWrite) LeftBehind(stdout string) []string {
	ok := map[string]bool{}
	for _, p := range b.Delivered() {
		ok[p] = true
	}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		if p, found := strings.CutPrefix(sc.Text(), "left "); found && ok[p] {
			out = append(out, p)
			delete(ok, p)
		}
	}
	return out
}

// LostItsList reports whether BulkRenameShell's stdout says the manifest or
// directory list was missing or cut short: the delivery did not arrive whole.
func (b *BulkWrite) LostItsList(stdout string) bool {
	for _, l := range strings.Split(stdout, "\n") {
		if l == "stockade: lost-list" {
			return true
		}
	}
	return false
}

// ExitBulkStage is the code of a one-step lander (BulkOps.Land: the Docker
// backend's agent) for a new file it could not write in its staging
// directory (a full file system, say), with a fault line naming it and a
// line "stockade: cannot stage: REASON"; nothing landed. The scripts have
// no such code: there, the upload fails instead.
const ExitBulkStage = 89

// errIncomplete reports a delivery that did not arrive whole.
var errIncomplete = errors.New("sandbox: bulk delivery incomplete; nothing landed")

// errModeNotKept reports a staged file that could not be given its target's
// mode (ExitBulkMode).
var errModeNotKept = errors.New("sandbox: cannot give a new file its target's mode; nothing landed")

// Fault turns a bulk script's exit code and stderr into an error (nil for
// code 0). backend names the backend in the message. The fault line names
// the failing target; from then on Delivered, Members, Archive and
// Bookkeeping cover only the targets before it, which BulkPrepareShell has
// found ready, so the caller can still land them. The error wraps
// ErrIsDirectory, ErrNotDirectory, ErrNotReplaceable or ErrNotWritable (as a
// *PathNotWritableError) for the path faults.
func (b *BulkWrite) Fault(backend string, code int, stderr string) error {
	if code == 0 {
		return nil
	}
	idx, p := faultLine(stderr, func(i int, _ string) bool { return i < b.n })
	if idx >= 0 && b.files[idx].Path == p {
		b.n = idx
	} else {
		// A fault we cannot place: write nothing more.
		b.n, p = 0, ""
	}
	what := "bulk write"
	if p != "" {
		what = "write " + p
	}
	err := pathFault(code)
	switch code {
	case ExitPathNotWritable:
		return fmt.Errorf("%s: %w", backend, &PathNotWritableError{Path: p, Reason: "the sandbox user cannot write its directory"})
	case ExitBulkExtract:
		err = fmt.Errorf("%w: a staged file is missing", errIncomplete)
	case ExitBulkIncomplete:
		err = fmt.Errorf("%w: the manifest is missing or cut short", errIncomplete)
	case ExitBulkMode:
		err = errModeNotKept
	case ExitBulkStage:
		reason := "cannot stage the new file"
		for _, l := range strings.Split(stderr, "\n") {
			if r, ok := strings.CutPrefix(l, "stockade: cannot stage: "); ok {
				reason += ": " + r
			}
		}
		return fmt.Errorf("%s: %w", backend, &PathNotWritableError{Path: p, Reason: reason})
	default:
		if err == nil {
			return fmt.Errorf("%s: %s: script exited %d: %s", backend, what, code, firstLine(stderr))
		}
	}
	return fmt.Errorf("%s: %s: %w", backend, what, err)
}

// faultLine returns the index and path of the last fault line of a
// script's stderr ("stockade: fault INDEX PATH") whose index is not
// negative and which ok accepts, or -1 and "".
func faultLine(stderr string, ok func(i int, p string) bool) (int, string) {
	idx, p := -1, ""
	for _, l := range strings.Split(stderr, "\n") {
		rest, found := strings.CutPrefix(l, "stockade: fault ")
		if !found {
			continue
		}
		is, ps, _ := strings.Cut(rest, " ")
		if i, err := strconv.Atoi(is); err == nil && i >= 0 && ok(i, ps) {
			idx, p = i, ps
		}
	}
	return idx, p
}

// pathFault returns the error of a script's exit code that names a path
// fault (ExitFileNotExist, ExitPathIsDirectory, ExitPathNotDirectory,
// ExitPathNotReplaceable, ExitPathNotReadable, ExitCrossDevice), else nil.
// ExitPathNotWritable is the caller's: its error names the path.
func pathFault(code int) error {
	switch code {
	case ExitFileNotExist:
		return ErrFileNotExist
	case ExitPathIsDirectory:
		return ErrIsDirectory
	case ExitPathNotDirectory:
		return ErrNotDirectory
	case ExitPathNotReplaceable:
		return ErrNotReplaceable
	case ExitPathNotReadable:
		return ErrNotReadable
	case ExitCrossDevice:
		return ErrCrossDevice
	}
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	const max = 200
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
