package toolchain

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/internal/lockfile"
)

// The data directory holds everything a run mounts. It is owner-only
// because what is inside must be writable by the container user (mode 0777
// caches), and no other host user may reach those.
const (
	// DataDirMode is the data directory's permission bits.
	DataDirMode = 0o700
	// CacheDirMode is the mode of every directory a container writes:
	// the container user is not the host user.
	CacheDirMode = 0o777
	// RunDirMode is a run directory's mode inside the data directory.
	RunDirMode = 0o711
	// ToolchainsDir is the directory in the data directory that keeps
	// what image builds fetch (image.Options.CacheDir): Go releases from
	// the module proxy, Debian packages and their unpacked trees.
	ToolchainsDir = "toolchains"
	// LockFile is the name of the lock file in the data directory.
	LockFile = "lock"
	// MarkerFile marks a directory as a Stockade data directory. It is
	// written when Stockade creates (or adopts an empty) data directory;
	// a non-empty directory without it is never used, so a mistaken
	// -data-dir (the home directory) is refused rather than tightened,
	// truncated and pruned.
	MarkerFile = ".stockade-data-dir"
	// markerContent is what MarkerFile holds, for a person who finds it.
	markerContent = "This directory is a Stockade data directory: caches, snapshots and the lock of its runs.\n"
	// runPrefix names each run's directory in the data directory:
	// run-<run ID>.
	runPrefix = "run"
	// RunLockFile is the name of the lock file in a run's directory: held
	// by the run for its life, it is how a reap tells a live run's
	// containers and directory from a crashed one's.
	RunLockFile = ".lock"
)

// ErrLocked reports that the data directory's lock (held briefly, by a
// run starting or a reap) was not released within the lock timeout. The
// error is a *LockedError.
var ErrLocked = errors.New("toolchain: data directory is locked by another run")

// ErrDataDir reports a data directory that is unsafe to use (not a
// directory, or not owned by the current user).
var ErrDataDir = errors.New("toolchain: unusable data directory")

// ErrNotDataDir reports a non-empty directory without MarkerFile: not made
// by Stockade, so nothing in it is touched. It also matches ErrDataDir.
var ErrNotDataDir = errors.New("toolchain: not a Stockade data directory (no marker, not empty)")

// notDataDir is the error of a directory PrepareDataDir will not use.
type notDataDir struct {
	dir   string
	entry string // one entry that is not Stockade's, for the message
}

func (e *notDataDir) Error() string {
	return fmt.Sprintf("%v: %s holds %q and no %s; give an empty or new directory", ErrNotDataDir, e.dir, e.entry, MarkerFile)
}

// Is matches ErrNotDataDir and ErrDataDir.
func (e *notDataDir) Is(target error) bool { return target == ErrNotDataDir || target == ErrDataDir }

// LockedError names the directory and what the lock file says of its holder.
type LockedError struct {
	Dir    string
	Holder string // the holder's "pid=... run=... since=..." line; may be empty
	Waited time.Duration
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("toolchain: data directory %s is locked by another run (%s); gave up after %v", e.Dir, e.Holder, e.Waited.Round(time.Millisecond))
}

// Is matches ErrLocked.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// DataDirID is label.DataDirID: the label of the containers of runs using
// dir. dir should be what PrepareDataDir returned.
func DataDirID(dir string) string { return label.DataDirID(dir) }

// PrepareDataDir returns dir ready for a run: absolute, symlinks
// resolved, mode 0700, marked with MarkerFile. A missing dir is created
// (parents 0700 too) and marked; an existing one must be a directory owned
// by the current user and either carry the marker or be empty (then it is
// marked). Any other directory is refused with an error matching
// ErrNotDataDir before anything in it, or its mode, is changed.
func PrepareDataDir(dir string) (string, error) { return prepareDataDir(dir, false) }

// PrepareDefaultDataDir is PrepareDataDir for the default location, which
// versions of Stockade before the marker made without one: an unmarked
// directory holding nothing but what Stockade writes there (the lock file,
// run-* directories, seeds) is adopted and marked too.
func PrepareDefaultDataDir(dir string) (string, error) { return prepareDataDir(dir, true) }

func prepareDataDir(dir string, legacy bool) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("%w: no path", ErrDataDir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	if err := os.MkdirAll(abs, DataDirMode); err != nil {
		return "", fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return "", fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%w: %s is not a directory", ErrDataDir, abs)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("%w: %s belongs to uid %d, not to us (%d)", ErrDataDir, abs, st.Uid, os.Geteuid())
	}
	marked, err := isMarked(abs)
	if err != nil {
		return "", err
	}
	if !marked {
		if err := checkAdoptable(abs, legacy); err != nil {
			return "", err
		}
	}
	if fi.Mode().Perm() != DataDirMode {
		if err := os.Chmod(abs, DataDirMode); err != nil {
			return "", fmt.Errorf("%w: %v", ErrDataDir, err)
		}
	}
	if !marked {
		if err := writeMarker(abs); err != nil {
			return "", err
		}
	}
	return abs, nil
}

// isMarked reports whether dir holds MarkerFile as a regular file.
func isMarked(dir string) (bool, error) {
	fi, err := os.Lstat(filepath.Join(dir, MarkerFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%w: %v", ErrDataDir, err)
	case !fi.Mode().IsRegular():
		return false, &notDataDir{dir: dir, entry: MarkerFile + " (not a regular file)"}
	}
	return true, nil
}

// checkAdoptable refuses an unmarked directory unless it is empty, or, with
// legacy, holds only what earlier versions of Stockade wrote.
func checkAdoptable(dir string, legacy bool) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	for _, e := range ents {
		if legacy && stockadeEntry(e) {
			continue
		}
		return &notDataDir{dir: dir, entry: e.Name()}
	}
	return nil
}

// stockadeEntry reports whether e is something Stockade writes into a data
// directory: the lock file, a run directory, the seeds directory.
func stockadeEntry(e fs.DirEntry) bool {
	switch {
	case e.Name() == LockFile:
		return e.Type().IsRegular()
	case e.Name() == "seeds":
		return e.IsDir()
	case strings.HasPrefix(e.Name(), runPrefix+"-"), strings.HasPrefix(e.Name(), scratchPrefix+"-"):
		return e.IsDir()
	}
	return false
}

// writeMarker creates dir's MarkerFile; a marker that appeared meanwhile
// (a concurrent run) is fine.
func writeMarker(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, MarkerFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, fs.ErrExist) {
		if ok, err := isMarked(dir); ok || err != nil {
			return err
		}
	}
	if err != nil {
		return fmt.Errorf("%w: marking %s: %v", ErrDataDir, dir, err)
	}
	_, err = f.WriteString(markerContent)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: marking %s: %v", ErrDataDir, dir, err)
	}
	return nil
}

// Lock is the exclusive lock on a data directory (lockfile), held by a run
// while it starts (reaping what crashed runs left, making its own run
// directory) and by `stockade reap`: never for a whole run, so runs on one
// data directory go on side by side. What keeps a live run's containers
// and directory from a reap is the run's own lock (RunLockFile).
type Lock struct {
	l   *lockfile.Lock
	dir string
}

// LockDataDir takes dir's exclusive lock. If another holds it, onWait
// (when not nil) is called once with the holder's line, and LockDataDir
// retries until timeout has passed (a *LockedError matching ErrLocked) or
// ctx ends. timeout <= 0 refuses at once. what is written into the lock file
// for a waiting run to show, such as "run=abc".
func LockDataDir(ctx context.Context, dir string, timeout time.Duration, what string, onWait func(holder string)) (*Lock, error) {
	l, err := lockfile.Acquire(ctx, filepath.Join(dir, LockFile), timeout, what, onWait)
	var he *lockfile.HeldError
	if errors.As(err, &he) {
		return nil, &LockedError{Dir: dir, Holder: he.Holder, Waited: he.Waited}
	}
	if err != nil {
		return nil, fmt.Errorf("toolchain: %w", err)
	}
	return &Lock{l: l, dir: dir}, nil
}

// Unlock releases the lock. It is safe to call more than once.
func (l *Lock) Unlock() error {
	if l == nil {
		return nil
	}
	return l.l.Unlock()
}

// held reports whether l is a lock LockDataDir took and Unlock has not
// released.
func (l *Lock) held() bool { return l != nil && l.l.Holding() }

// runLive reports whether run id on the data directory dir is live: its
// directory's RunLockFile is held. A run that crashed, or never had a
// directory, is not.
func runLive(dir, id string) (bool, error) {
	return lockfile.Held(filepath.Join(dir, runPrefix+"-"+id, RunLockFile))
}
