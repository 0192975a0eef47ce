// Package lockfile is the one file lock Stockade takes: an exclusive
// flock(2) on a file, held by an open descriptor, so the kernel releases
// it when the holder exits or crashes and a dead holder never wedges the
// next one. The data directory's lock, each run's liveness lock, and the
// build-once locks of seeds, scanners and images are all this lock.
//
// A holder writes one line into the file (its pid, what it is and since
// when) for a waiting process to show. Locks are advisory: they order
// Stockade's own processes, not anyone else's.
package lockfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// poll is how often Acquire tries a held lock again.
const poll = 200 * time.Millisecond

// maxHolderLine bounds what Holder reads of a lock file.
const maxHolderLine = 200

// ErrHeld reports a lock another holder has: TryAcquire's answer, and
// Acquire's when its wait ran out (a *HeldError).
var ErrHeld = errors.New("lockfile: held by another")

// HeldError is a lock that was still held when the wait ran out.
type HeldError struct {
	Path   string
	Holder string        // the holder's line, "" when it wrote none
	Waited time.Duration // how long Acquire waited
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lockfile: %s is held (%s) after waiting %v", e.Path, e.Holder, e.Waited.Round(time.Millisecond))
}

func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// A Lock is a held lock. Unlock releases it.
type Lock struct {
	f    *os.File
	path string
}

// Path returns the lock file's path.
func (l *Lock) Path() string { return l.path }

// Holding reports whether l is held: taken, and not yet unlocked.
func (l *Lock) Holding() bool { return l != nil && l.f != nil }

// Acquire takes path's lock, creating the file (0600, never through a
// symlink) if needed. While another holds it, onWait (when not nil) is
// called once with the holder's line, and Acquire tries again until
// timeout has passed (a *HeldError) or ctx ends; timeout <= 0 refuses at
// once. what goes into the holder's line, such as "run=abc".
func Acquire(ctx context.Context, path string, timeout time.Duration, what string, onWait func(holder string)) (*Lock, error) {
	start := time.Now()
	waited := false
	for {
		l, err := TryAcquire(path, what)
		if !errors.Is(err, ErrHeld) {
			return l, err
		}
		holder := Holder(path)
		if time.Since(start) >= timeout {
			return nil, &HeldError{Path: path, Holder: holder, Waited: time.Since(start)}
		}
		if !waited && onWait != nil {
			onWait(holder)
		}
		waited = true
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("lockfile: waiting for %s: %w", path, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// TryAcquire takes path's lock if no one holds it, or returns ErrHeld.
func TryAcquire(path, what string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lockfile: open %s: %w", path, err)
	}
	switch err := tryFlock(f); {
	case errors.Is(err, syscall.EWOULDBLOCK):
		f.Close()
		return nil, ErrHeld
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("lockfile: lock %s: %w", path, err)
	}
	line := fmt.Sprintf("pid=%d %s since=%s\n", os.Getpid(), what, time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(line), 0)
	}
	return &Lock{f: f, path: path}, nil
}

// Held reports whether someone holds path's lock. A missing file is not
// held. It takes and drops the lock to find out, so it must not be asked
// of a lock a new holder may take at the same moment and then rely on
// being the only one: callers serialize that (the data directory's lock
// orders a run's start against the reaping that asks).
func Held(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lockfile: open %s: %w", path, err)
	}
	defer f.Close()
	switch err := tryFlock(f); {
	case errors.Is(err, syscall.EWOULDBLOCK):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("lockfile: lock %s: %w", path, err)
	}
	return false, nil // closing the descriptor drops it
}

// tryFlock takes f's exclusive flock without waiting: nil, or
// syscall.EWOULDBLOCK when another descriptor holds it.
func tryFlock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// Holder returns the line the holder of path wrote, "" when none.
func Holder(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, maxHolderLine)
	n, _ := f.Read(b)
	return strings.TrimSpace(string(b[:n]))
}

// Unlock releases the lock, clearing the holder's line. It is safe to call
// more than once, and on a nil Lock.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.f.Truncate(0)
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	return err
}
