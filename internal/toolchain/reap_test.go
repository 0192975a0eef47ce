package toolchain

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestReapRuns: with the lock of a marked data directory held, the run-*
// directories a crashed run left are removed, and nothing else: not the
// seeds, not a file or a symlink named run-*, not what a symlink points at.
// Without the lock, or without the marker, nothing is removed.
func TestReapRuns(t *testing.T) {
	ctx := context.Background()
	dir, err := PrepareDataDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	write(t, filepath.Join(outside, "keep"), "outside", 0o644)
	write(t, filepath.Join(dir, "run-a", "modcache", "m@v1", "f"), "x", 0o444)
	os.Chmod(filepath.Join(dir, "run-a", "modcache", "m@v1"), 0o555) // as the module cache leaves it
	write(t, filepath.Join(dir, "run-b", "src", "go.mod"), "module m\n", 0o644)
	write(t, filepath.Join(dir, "seeds", "k", "seed.json"), "{}", 0o644)
	write(t, filepath.Join(dir, "run-file"), "a file", 0o644)
	if err := os.Symlink(outside, filepath.Join(dir, "run-link")); err != nil {
		t.Fatal(err)
	}

	if _, err := ReapRuns(ctx, nil, nil, ""); !errors.Is(err, ErrNotLocked) {
		t.Errorf("ReapRuns without the lock = %v; want ErrNotLocked", err)
	}
	lock, err := LockDataDir(ctx, dir, 0, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := ReapRuns(ctx, nil, lock, "")
	if err != nil || n != 2 {
		t.Errorf("ReapRuns = %d, %v; want 2 removed", n, err)
	}
	lock.Unlock()
	if _, err := ReapRuns(ctx, nil, lock, ""); !errors.Is(err, ErrNotLocked) {
		t.Errorf("ReapRuns after Unlock = %v; want ErrNotLocked", err)
	}
	for _, gone := range []string{"run-a", "run-b"} {
		if _, err := os.Lstat(filepath.Join(dir, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there: %v", gone, err)
		}
	}
	for _, kept := range []string{"seeds/k/seed.json", "run-file", "run-link", MarkerFile} {
		if _, err := os.Lstat(filepath.Join(dir, kept)); err != nil {
			t.Errorf("%s removed: %v", kept, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(outside, "keep")); string(b) != "outside" {
		t.Errorf("the symlink's target changed: %q %v", b, err)
	}

	// A directory without the marker is not a data directory.
	unmarked := t.TempDir()
	write(t, filepath.Join(unmarked, "run-x", "f"), "the user's", 0o644)
	lock, err = LockDataDir(ctx, unmarked, 0, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	if _, err := ReapRuns(ctx, nil, lock, ""); !errors.Is(err, ErrNotDataDir) {
		t.Errorf("ReapRuns(unmarked) = %v; want ErrNotDataDir", err)
	}
	if _, err := os.Stat(filepath.Join(unmarked, "run-x", "f")); err != nil {
		t.Errorf("run-x of an unmarked directory removed: %v", err)
	}
}

// TestScratch: a scratch directory lives in the data directory; ReapRuns
// leaves one in use (its lock held) and removes one whose process died
// (its lock free); Close removes it.
func TestScratch(t *testing.T) {
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	live, err := NewScratch(data, false)
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := PrepareDataDir(data)
	if filepath.Dir(filepath.Dir(live.Dir)) != dir {
		t.Fatalf("scratch %s is not in the data directory %s", live.Dir, dir)
	}
	write(t, filepath.Join(live.Dir, "tree", "go.mod"), "module m\n", 0o644)
	dead, err := NewScratch(data, false)
	if err != nil {
		t.Fatal(err)
	}
	deadRoot := filepath.Dir(dead.Dir)
	dead.lock.Unlock() // as the kernel does when the process dies
	lock, err := LockDataDir(ctx, dir, 0, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := ReapRuns(ctx, nil, lock, "")
	lock.Unlock()
	if err != nil || n != 1 {
		t.Errorf("ReapRuns = %d, %v; want the dead scratch removed", n, err)
	}
	if _, err := os.Stat(deadRoot); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead scratch is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(live.Dir, "tree", "go.mod")); err != nil {
		t.Errorf("the live scratch lost its files: %v", err)
	}
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(live.Dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close left %s: %v", live.Dir, err)
	}
	if err := live.Close(); err != nil {
		t.Errorf("a second Close = %v", err)
	}
}
