package toolchain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/stockade/stockade/internal/container"
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
	// LockFile is the name of the lock file in the data directory.
	LockFile = "lock"
	// lockPoll is how often a waiting run retries the lock.
	lockPoll = 100 * time.Millisecond
)

// ErrLocked reports that another run holds the data directory's lock and
// did not release it within the lock timeout. The error is a *LockedError.
var ErrLocked = errors.New("toolchain: data directory is locked by another run")

// ErrDataDir reports a data directory that is unsafe to use (not a
// directory, or not owned by the current user).
var ErrDataDir = errors.New("toolchain: unusable data directory")

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

// DataDirID returns the short hash that labels the containers of runs using
// dir (label.DataDir): hex of the SHA-256 of the absolute path, 16 digits.
// dir should be what PrepareDataDir returned, so that two spellings of one
// directory get one ID.
func DataDirID(dir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	return hex.EncodeToString(sum[:8])
}

// PrepareDataDir creates dir with mode 0700 (parents 0700 too) or checks
// that an existing one is a directory owned by the current user and sets
// its mode to 0700. It returns the absolute path with symlinks resolved.
func PrepareDataDir(dir string) (string, error) {
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
	if fi.Mode().Perm() != DataDirMode {
		if err := os.Chmod(abs, DataDirMode); err != nil {
			return "", fmt.Errorf("%w: %v", ErrDataDir, err)
		}
	}
	return abs, nil
}

// Lock is an exclusive lock on a data directory, held by an open file
// descriptor (flock), so a crashed process releases it with its descriptors.
type Lock struct {
	f   *os.File
	dir string
}

// LockDataDir takes dir's exclusive lock. If another run holds it, onWait
// (when not nil) is called once with the holder's line, and LockDataDir
// retries until timeout has passed (a *LockedError matching ErrLocked) or
// ctx ends. timeout <= 0 refuses at once. what is written into the lock file
// for a waiting run to show, such as "run=abc".
func LockDataDir(ctx context.Context, dir string, timeout time.Duration, what string, onWait func(holder string)) (*Lock, error) {
	p := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("toolchain: open lock: %w", err)
	}
	start := time.Now()
	waited := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("toolchain: lock %s: %w", p, err)
		}
		holder := readHolder(p)
		if time.Since(start) >= timeout {
			f.Close()
			return nil, &LockedError{Dir: dir, Holder: holder, Waited: time.Since(start)}
		}
		if !waited && onWait != nil {
			onWait(holder)
		}
		waited = true
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("toolchain: waiting for the lock on %s: %w", dir, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
	line := fmt.Sprintf("pid=%d %s since=%s\n", os.Getpid(), what, time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(line), 0)
	}
	return &Lock{f: f, dir: dir}, nil
}

func readHolder(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return strings.TrimSpace(string(b))
}

// Unlock releases the lock. It is safe to call more than once.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.f.Truncate(0)
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	return err
}

// mkdirFresh creates dir/<prefix>-<random> with mode (chmod'ed past the
// umask) and returns it. The name is new: a mounted path is never deleted
// and recreated within a run.
func mkdirFresh(parent, prefix string, mode fs.FileMode) (string, error) {
	for range 4 {
		p := filepath.Join(parent, prefix+"-"+container.RandomHex(8))
		err := os.Mkdir(p, mode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("toolchain: %w", err)
		}
		if err := os.Chmod(p, mode); err != nil {
			return "", fmt.Errorf("toolchain: %w", err)
		}
		return p, nil
	}
	return "", fmt.Errorf("toolchain: could not make a fresh %s directory in %s", prefix, parent)
}
