package toolchain

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPrepareDataDir_OwnerOnly(t *testing.T) {
	base := t.TempDir()
	for _, dir := range []string{filepath.Join(base, "new", "data"), base} {
		if dir == base {
			os.Chmod(base, 0o755) // an existing, too open directory is tightened
		}
		got, err := PrepareDataDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(got)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("PrepareDataDir(%s): mode %v; want 0700", dir, fi.Mode().Perm())
		}
	}
	f := filepath.Join(base, "file")
	os.WriteFile(f, nil, 0o600)
	if _, err := PrepareDataDir(f); !errors.Is(err, ErrDataDir) {
		t.Errorf("PrepareDataDir(file) = %v; want ErrDataDir", err)
	}
}

func TestDataDirID(t *testing.T) {
	a, b := DataDirID("/x/data"), DataDirID("/x/data/")
	if a != b || len(a) != 16 {
		t.Errorf("DataDirID = %q, %q; want one 16-digit id", a, b)
	}
	if a == DataDirID("/x/other") {
		t.Error("two directories share an id")
	}
}

// TestLock_WaitsThenRefuses: a second run on a locked data directory is told
// who holds it, waits, and gets ErrLocked after its timeout; once the first
// releases, the lock is free.
func TestLock_WaitsThenRefuses(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	l1, err := LockDataDir(ctx, dir, 0, "run=first", nil)
	if err != nil {
		t.Fatal(err)
	}
	var told atomic.Value
	start := time.Now()
	_, err = LockDataDir(ctx, dir, 300*time.Millisecond, "run=second", func(h string) { told.Store(h) })
	var le *LockedError
	if !errors.Is(err, ErrLocked) || !errors.As(err, &le) {
		t.Fatalf("second lock = %v; want ErrLocked", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("gave up after %v; want the 300ms timeout", d)
	}
	if h, _ := told.Load().(string); !strings.Contains(h, "run=first") {
		t.Errorf("wait message holder = %q; want the first run", h)
	}
	if _, err := LockDataDir(ctx, dir, 0, "run=third", nil); !errors.Is(err, ErrLocked) {
		t.Errorf("zero timeout = %v; want immediate ErrLocked", err)
	}
	// A waiter gets the lock once the holder releases it.
	go func() { time.Sleep(200 * time.Millisecond); l1.Unlock() }()
	l2, err := LockDataDir(ctx, dir, 5*time.Second, "run=fourth", nil)
	if err != nil {
		t.Fatalf("waiting lock = %v", err)
	}
	l2.Unlock()
	l2.Unlock() // idempotent
}

// TestLock_OtherProcess: the lock holds against another process (flock is
// per open file description), and dies with its holder.
func TestLock_OtherProcess(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock(1)")
	}
	dir := t.TempDir()
	cmd := exec.Command("flock", "--no-fork", "-x", filepath.Join(dir, LockFile), "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := LockDataDir(context.Background(), dir, 0, "", nil)
		if errors.Is(err, ErrLocked) {
			break
		}
		if err == nil {
			l.Unlock()
		}
		if time.Now().After(deadline) {
			t.Fatal("flock(1) never took the lock")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	l, err := LockDataDir(context.Background(), dir, 2*time.Second, "", nil)
	if err != nil {
		t.Fatalf("lock after the holder died = %v", err)
	}
	l.Unlock()
}
