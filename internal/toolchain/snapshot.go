package toolchain

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/stockade/stockade/internal/gitcmd"
)

// Bounds on a snapshot, so a hostile repository cannot fill the disk.
const (
	MaxSnapshotFiles = 200_000 // files, directories and symlinks
	MaxSnapshotBytes = 2 << 30 // bytes of file content
	// gitOutputCap caps what one git command may print, in bytes, except
	// cat-file, whose blobs count against MaxSnapshotBytes.
	gitOutputCap = 256 << 20
)

// ErrSnapshot reports a source that could not be snapshotted: missing,
// too large, a git checkout without a commit, unreadable, changing while
// it is copied. It is a problem of the input, not of Stockade: a failure
// to write the snapshot (the data directory) does not match it.
var ErrSnapshot = errors.New("toolchain: cannot snapshot source")

// ErrNoCommit reports a git checkout whose HEAD names no commit: there is
// no committed tree to take. It comes with ErrSnapshot.
var ErrNoCommit = errors.New("git checkout without a commit: commit first, or take the working tree")

// ours wraps a failure to write or read the snapshot itself (the run's
// directory): Stockade's, not the source's.
func ours(err error) error { return fmt.Errorf("toolchain: snapshot: %w", err) }

// ErrTooLarge reports a source past MaxSnapshotFiles or MaxSnapshotBytes;
// it comes with ErrSnapshot.
var ErrTooLarge = errors.New("toolchain: source exceeds the snapshot bounds")

// SnapshotOptions say what to take from a git checkout.
type SnapshotOptions struct {
	// Worktree takes the working tree, uncommitted and untracked (but not
	// ignored) files included, instead of the committed tree of HEAD.
	// It changes nothing for a directory that is not a git checkout.
	Worktree bool
}

// Snapshot is a read-only copy of a source directory in the run directory.
type Snapshot struct {
	Dir    string // host directory; pass it as Job.Source
	Git    bool   // the source is in a git checkout: its top, or a directory below it
	Commit string // HEAD's commit ID when Git
	// Subdir is, when Git, the source's directory below the checkout's
	// top, slash-separated ("" at the top): a module in a subdirectory
	// of a repository (a monorepo).
	Subdir string
	// Submodules are the gitlinks (submodules) the committed tree holds
	// below the source, slash paths relative to it: their content is not
	// in the repository, and the snapshot has none of it.
	Submodules []string
	Worktree   bool // the working tree was taken, not HEAD
	// Uncommitted reports, when the committed tree was taken, that the
	// working tree differs from it (changed, added or deleted files that
	// git would commit; ignored files do not count): what was validated
	// is not what the user sees.
	Uncommitted bool
	Files       int   // regular files copied
	Bytes       int64 // their total size
}

// Snapshot copies src into a fresh snapshot directory of the run
// (SnapshotTo).
func (r *Runner) Snapshot(ctx context.Context, src string, o SnapshotOptions) (Snapshot, error) {
	dst, err := r.mkdir("src", kindSnapshot)
	if err != nil {
		return Snapshot{}, err
	}
	return SnapshotTo(ctx, src, dst, o)
}

// SnapshotTo copies src into dst, an empty directory. When src is in a git
// checkout (its top, or a directory below it: Subdir) it takes the tree of
// src in HEAD's commit (read from the object database, so no filter, hook
// or fsmonitor the repository configures runs) and reports whether the
// working tree differs from it, or with o.Worktree the working tree's
// tracked and untracked files below src; otherwise it copies the
// directory. The user's directory is only read.
// Symlinks are copied as symlinks, never followed; special files and .git
// directories are skipped; file modes become 0644 or 0755, directories
// 0755.
func SnapshotTo(ctx context.Context, src, dst string, o SnapshotOptions) (Snapshot, error) {
	abs, err := filepath.Abs(src)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return Snapshot{}, fmt.Errorf("%w: %s is not a directory", ErrSnapshot, src)
	}
	s := Snapshot{Dir: dst}
	w := &treeWriter{}
	if w.root, err = os.OpenRoot(dst); err != nil {
		return s, ours(err)
	}
	defer w.root.Close()
	if top, sub, ok := GitWorkTree(ctx, abs); ok {
		s.Git, s.Worktree, s.Subdir = true, o.Worktree, sub
		// The working tree needs no commit: a new repository has none.
		if s.Commit, err = gitHead(ctx, abs); err != nil && !(o.Worktree && errors.Is(err, ErrNoCommit)) {
			return s, err
		}
		if o.Worktree {
			err = copyWorktree(ctx, abs, w)
		} else if s.Submodules, err = copyCommit(ctx, top, s.Commit, sub, w); err == nil {
			s.Uncommitted, err = worktreeDiffers(ctx, abs, w.root)
		}
	} else {
		err = copyTree(abs, dst, w)
	}
	s.Files, s.Bytes = w.files, w.bytes
	return s, err
}

// NewStaging returns a fresh staging directory for Mutate holding a
// writable copy of snap's go.mod and go.sum (when it has one).
func (r *Runner) NewStaging(snap Snapshot) (string, error) {
	if r.kind(snap.Dir) != kindSnapshot {
		return "", fmt.Errorf("%w: %s is not a snapshot of this run", ErrNotOwned, snap.Dir)
	}
	dir, err := r.mkdir("staging", kindStaging)
	if err != nil {
		return "", err
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := readRegular(filepath.Join(snap.Dir, name), MaxManifestBytes)
		if errors.Is(err, fs.ErrNotExist) && name == "go.sum" {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("toolchain: staging %s: %w", name, err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o666); err != nil {
			return "", fmt.Errorf("toolchain: staging: %w", err)
		}
		if err := os.Chmod(p, 0o666); err != nil { // past the umask: the container user writes it
			return "", fmt.Errorf("toolchain: staging: %w", err)
		}
	}
	return dir, nil
}

// MaxManifestBytes bounds a go.mod or go.sum read from a snapshot or a
// staging directory.
const MaxManifestBytes = 64 << 20

// ReadManifests reads go.mod and go.sum (nil when there is none) from dir,
// a snapshot or staging directory: regular files (a symlink the container
// made is refused) of at most MaxManifestBytes.
func ReadManifests(dir string) (goMod, goSum []byte, err error) {
	if goMod, err = readRegular(filepath.Join(dir, "go.mod"), MaxManifestBytes); err != nil {
		return nil, nil, fmt.Errorf("toolchain: %w", err)
	}
	goSum, err = readRegular(filepath.Join(dir, "go.sum"), MaxManifestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return goMod, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("toolchain: %w", err)
	}
	return goMod, goSum, nil
}

// SnapshotWith returns a fresh snapshot of the run: a copy of snap with
// goMod and goSum as its go.mod and go.sum (goSum nil: no go.sum), such as
// the manifests a Mutate job left in its staging directory.
func (r *Runner) SnapshotWith(ctx context.Context, snap Snapshot, goMod, goSum []byte) (Snapshot, error) {
	if r.kind(snap.Dir) != kindSnapshot {
		return Snapshot{}, fmt.Errorf("%w: %s is not a snapshot of this run", ErrNotOwned, snap.Dir)
	}
	post, err := r.Snapshot(ctx, snap.Dir, SnapshotOptions{})
	if err != nil {
		return post, err
	}
	if err := os.WriteFile(filepath.Join(post.Dir, "go.mod"), goMod, 0o644); err != nil {
		return post, fmt.Errorf("toolchain: %w", err)
	}
	sum := filepath.Join(post.Dir, "go.sum")
	if goSum == nil {
		if err := os.Remove(sum); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return post, fmt.Errorf("toolchain: %w", err)
		}
		return post, nil
	}
	if err := os.WriteFile(sum, goSum, 0o644); err != nil {
		return post, fmt.Errorf("toolchain: %w", err)
	}
	return post, nil
}

func (r *Runner) kind(p string) dirKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dirs[p]
}

// readRegular reads a regular file (not through a symlink) of at most max
// bytes.
func readRegular(p string, max int64) ([]byte, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, max)
	}
	return os.ReadFile(p)
}

// treeWriter writes a tree below root, refusing unsafe names and counting
// against the snapshot bounds. os.Root keeps every write inside root even
// if an earlier entry was a symlink.
type treeWriter struct {
	root  *os.Root
	files int
	bytes int64
	n     int
}

// safeRel cleans a slash-separated relative name and reports whether it
// may be written: relative, no "..", no .git component.
func safeRel(name string) (string, bool) {
	if name == "" || strings.HasPrefix(name, "/") || strings.ContainsRune(name, 0) {
		return "", false
	}
	c := path.Clean(name)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", false
	}
	for _, e := range strings.Split(c, "/") {
		if e == ".git" {
			return "", false
		}
	}
	return c, true
}

func (w *treeWriter) count(size int64) error {
	w.n++
	w.bytes += size
	if w.n > MaxSnapshotFiles {
		return fmt.Errorf("%w: %w: more than %d entries", ErrSnapshot, ErrTooLarge, MaxSnapshotFiles)
	}
	if w.bytes > MaxSnapshotBytes {
		return fmt.Errorf("%w: %w: more than %d bytes", ErrSnapshot, ErrTooLarge, int64(MaxSnapshotBytes))
	}
	return nil
}

func (w *treeWriter) parent(name string) error {
	if d := path.Dir(name); d != "." {
		if err := w.root.MkdirAll(d, 0o755); err != nil {
			return ours(err)
		}
	}
	return nil
}

func (w *treeWriter) dir(name string) error {
	if err := w.count(0); err != nil {
		return err
	}
	if err := w.root.MkdirAll(name, 0o755); err != nil {
		return ours(err)
	}
	return w.root.Chmod(name, 0o755)
}

func (w *treeWriter) file(name string, exe bool, size int64, r io.Reader) error {
	if err := w.count(size); err != nil {
		return err
	}
	if err := w.parent(name); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if exe {
		mode = 0o755
	}
	f, err := w.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return ours(err)
	}
	n, err := io.Copy(f, io.LimitReader(r, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return ours(err)
	case n != size:
		return fmt.Errorf("%w: %s: read %d of %d bytes: it changed while copied", ErrSnapshot, name, n, size)
	}
	w.files++
	return w.root.Chmod(name, mode)
}

func (w *treeWriter) symlink(name, target string) error {
	if err := w.count(0); err != nil {
		return err
	}
	if err := w.parent(name); err != nil {
		return err
	}
	if err := w.root.Symlink(target, name); err != nil {
		return ours(err)
	}
	return nil
}

// copyTree copies the directory src into dst (which exists). With w nil it
// opens its own writer on dst.
func copyTree(src, dst string, w *treeWriter) error {
	if w == nil {
		root, err := os.OpenRoot(dst)
		if err != nil {
			return err
		}
		defer root.Close()
		w = &treeWriter{root: root}
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("%w: %v", ErrSnapshot, err)
		}
		if p == src {
			return nil
		}
		rel, _ := filepath.Rel(src, p)
		name, ok := safeRel(filepath.ToSlash(rel))
		if !ok {
			if d.IsDir() {
				return filepath.SkipDir // .git
			}
			return nil
		}
		return copyEntry(p, name, d.Type(), w)
	})
}

// copyEntry copies one host entry p of type t to name.
func copyEntry(p, name string, t fs.FileMode, w *treeWriter) error {
	switch {
	case t.IsDir():
		return w.dir(name)
	case t&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrSnapshot, err)
		}
		return w.symlink(name, target)
	case t.IsRegular():
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrSnapshot, err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: %s changed while copied", ErrSnapshot, p)
		}
		return w.file(name, fi.Mode()&0o111 != 0, fi.Size(), f)
	}
	return nil // sockets, devices, fifos: not source
}

// git runs git in dir with an environment of its own: no system or global
// configuration, no prompts, and the repository's own fsmonitor and hooks
// disabled, so reading an untrusted checkout runs none of its programs.
func git(ctx context.Context, dir string, stdout io.Writer, args ...string) error {
	return gitcmd.Run(ctx, dir, gitcmd.Options{Stdout: stdout}, args...)
}

func gitOut(ctx context.Context, dir string, args ...string) (string, error) {
	var out bytes.Buffer
	err := git(ctx, dir, &limitWriter{w: &out, n: gitOutputCap}, args...)
	return out.String(), err
}

// GitWorkTree reports whether dir is in a git work tree, whose committed
// tree SnapshotTo takes: top is the work tree's top directory and sub
// dir's path below it, slash-separated, "" when dir is the top. A
// directory inside .git is in none. git looks for the repository upwards
// from dir as it always does (GIT_CEILING_DIRECTORIES stops it).
func GitWorkTree(ctx context.Context, dir string) (top, sub string, ok bool) {
	out, err := gitOut(ctx, dir, "rev-parse", "--is-inside-work-tree", "--show-toplevel", "--show-prefix")
	if err != nil {
		return "", "", false
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || lines[0] != "true" {
		return "", "", false
	}
	top, err = filepath.EvalSymlinks(lines[1])
	if err != nil {
		return "", "", false
	}
	sub = strings.TrimSuffix(lines[2], "/")
	if c, ok := safeRel(sub); sub != "" && (!ok || c != sub) {
		return "", "", false
	}
	return top, sub, true
}

// IsGitCheckout reports whether dir is the top directory of a git work
// tree.
func IsGitCheckout(ctx context.Context, dir string) bool {
	_, sub, ok := GitWorkTree(ctx, dir)
	return ok && sub == ""
}

func gitHead(ctx context.Context, dir string) (string, error) {
	out, err := gitOut(ctx, dir, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", fmt.Errorf("%w: %w: %v", ErrSnapshot, ErrNoCommit, err)
	}
	return strings.TrimSpace(out), nil
}

// copyCommit writes the tree of the directory sub ("" the top) in commit
// of the checkout at dir, its top: ls-tree lists it, cat-file --batch
// streams the blobs raw (no smudge filters, no export-subst). It returns
// the gitlinks (submodules) it skipped.
func copyCommit(ctx context.Context, dir, commit, sub string, w *treeWriter) (gitlinks []string, err error) {
	treeish := commit
	if sub != "" {
		treeish = commit + ":" + sub
	}
	list, err := gitOut(ctx, dir, "ls-tree", "-r", "-t", "-z", "--full-tree", "-l", treeish)
	if err != nil {
		if sub != "" {
			return nil, fmt.Errorf("%w: %s is not a directory of commit %s (committed?): %v", ErrSnapshot, sub, commit, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	type entry struct {
		mode, oid, name string
		size            int64
	}
	var blobs []entry
	for _, rec := range strings.Split(list, "\x00") {
		if rec == "" {
			continue
		}
		meta, name, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 4 {
			return nil, fmt.Errorf("%w: unexpected ls-tree line %q", ErrSnapshot, rec)
		}
		clean, safe := safeRel(name)
		if !safe {
			continue
		}
		switch f[1] {
		case "tree":
			if err := w.dir(clean); err != nil {
				return nil, err
			}
		case "blob":
			size, err := strconv.ParseInt(f[3], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: size in %q", ErrSnapshot, rec)
			}
			blobs = append(blobs, entry{f[0], f[2], clean, size})
		case "commit":
			// A submodule: its content is not in this repository.
			gitlinks = append(gitlinks, clean)
		}
	}
	if len(blobs) == 0 {
		return gitlinks, nil
	}
	var in bytes.Buffer
	for _, b := range blobs {
		in.WriteString(b.oid + "\n")
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		cmdErr := gitStdin(ctx, dir, &in, pw, "cat-file", "--batch")
		pw.CloseWithError(cmdErr)
		done <- cmdErr
	}()
	br := bufio.NewReaderSize(pr, 64<<10)
	var rerr error
	for _, b := range blobs {
		hdr, err := br.ReadString('\n')
		if err != nil {
			rerr = fmt.Errorf("%w: cat-file: %v", ErrSnapshot, err)
			break
		}
		f := strings.Fields(hdr)
		if len(f) != 3 || f[0] != b.oid || f[1] != "blob" {
			rerr = fmt.Errorf("%w: cat-file answered %q for %s", ErrSnapshot, strings.TrimSpace(hdr), b.oid)
			break
		}
		size, _ := strconv.ParseInt(f[2], 10, 64)
		if b.mode == "120000" {
			if size > 4096 {
				rerr = fmt.Errorf("%w: symlink %s too long", ErrSnapshot, b.name)
				break
			}
			t := make([]byte, size)
			if _, err := io.ReadFull(br, t); err != nil {
				rerr = fmt.Errorf("%w: %v", ErrSnapshot, err)
				break
			}
			rerr = w.symlink(b.name, string(t))
		} else {
			rerr = w.file(b.name, b.mode == "100755", size, br)
		}
		if rerr != nil {
			break
		}
		if _, err := br.Discard(1); err != nil { // the newline after each object
			rerr = fmt.Errorf("%w: %v", ErrSnapshot, err)
			break
		}
	}
	pr.CloseWithError(errors.New("toolchain: snapshot stopped reading"))
	if err := <-done; rerr == nil && err != nil {
		rerr = fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	return gitlinks, rerr
}

func gitStdin(ctx context.Context, dir string, stdin io.Reader, stdout io.Writer, args ...string) error {
	return gitcmd.Run(ctx, dir, gitcmd.Options{Stdin: stdin, Stdout: stdout}, args...)
}

// copyWorktree copies the files git would commit from the working tree:
// tracked files that still exist, and untracked files that are not ignored.
func copyWorktree(ctx context.Context, dir string, w *treeWriter) error {
	list, err := gitOut(ctx, dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--deduplicate")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	src, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	defer src.Close()
	for _, name := range strings.Split(list, "\x00") {
		clean, ok := safeRel(name)
		if !ok {
			continue
		}
		// Lstat through the root: no parent directory may be a symlink
		// that leaves the checkout.
		fi, err := src.Lstat(clean)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrSnapshot, err)
		}
		if fi.IsDir() {
			continue // a submodule's directory
		}
		if err := copyEntry(filepath.Join(dir, filepath.FromSlash(clean)), clean, fi.Mode().Type(), w); err != nil {
			return err
		}
	}
	return nil
}

// worktreeDiffers reports whether the working tree of the checkout dir
// holds other files than the committed tree written below snap: the files
// git would commit (tracked ones that still exist, untracked ones that are
// not ignored), compared by type, executable bit, content and symlink
// target. It reads files and runs only ls-files, which applies no filter
// the repository configures (git status could run its clean filters).
func worktreeDiffers(ctx context.Context, dir string, snap *os.Root) (bool, error) {
	list, err := gitOut(ctx, dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--deduplicate")
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	src, err := os.OpenRoot(dir)
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	defer src.Close()
	seen := map[string]bool{}
	for _, name := range strings.Split(list, "\x00") {
		clean, ok := safeRel(name)
		if !ok {
			continue
		}
		fi, err := src.Lstat(clean)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted: the committed tree has it if it counts
		}
		if err != nil {
			return false, fmt.Errorf("%w: %v", ErrSnapshot, err)
		}
		if fi.IsDir() {
			continue // a submodule's directory
		}
		seen[clean] = true
		if same, err := sameEntry(src, snap, clean, fi); err != nil || !same {
			return !same, err
		}
	}
	// A committed file the working tree no longer has.
	differs := false
	err = fs.WalkDir(snap.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !seen[p] {
			differs = true
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return false, ours(err)
	}
	return differs, nil
}

// sameEntry reports whether the working tree's name (fi, from src) equals
// the snapshot's: same type, same executable bit, same bytes or target.
func sameEntry(src, snap *os.Root, name string, fi fs.FileInfo) (bool, error) {
	si, err := snap.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, ours(err)
	}
	switch {
	case fi.Mode().Type() != si.Mode().Type():
		return false, nil
	case fi.Mode()&fs.ModeSymlink != 0:
		a, err1 := src.Readlink(name)
		b, err2 := snap.Readlink(name)
		return err1 == nil && err2 == nil && a == b, nil
	case !fi.Mode().IsRegular():
		return false, nil // a fifo or device: never what was committed
	case fi.Size() != si.Size() || (fi.Mode()&0o111 != 0) != (si.Mode()&0o111 != 0):
		return false, nil
	}
	return sameContent(src, snap, name)
}

// sameContent compares the bytes of name in the two trees.
func sameContent(a, b *os.Root, name string) (bool, error) {
	fa, err := a.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	defer fa.Close()
	fb, err := b.Open(name)
	if err != nil {
		return false, ours(err)
	}
	defer fb.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		if ea == io.EOF || ea == io.ErrUnexpectedEOF {
			return eb == io.EOF || eb == io.ErrUnexpectedEOF, nil
		}
		if ea != nil {
			return false, fmt.Errorf("%w: %v", ErrSnapshot, ea)
		}
		if eb != nil {
			return false, ours(eb)
		}
	}
}

// limitWriter keeps at most n bytes and then fails, so a runaway git
// command cannot exhaust memory.
type limitWriter struct {
	w io.Writer
	n int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		return 0, errors.New("output too large")
	}
	l.n -= int64(len(p))
	return l.w.Write(p)
}
