package toolchain

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPrepareDataDir_OwnerOnly(t *testing.T) {
	base, existing := t.TempDir(), t.TempDir()
	for _, dir := range []string{filepath.Join(base, "new", "data"), existing} {
		if dir == existing {
			os.Chmod(existing, 0o755) // an existing, empty, too open directory is tightened
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

// TestPrepareDataDir_RefusesUnmarked: a non-empty directory without the
// marker (a mistaken -data-dir such as the home directory) is refused
// before anything in it changes: not its mode, not a file named lock, not
// a run-* directory. Open refuses it the same way.
func TestPrepareDataDir_RefusesUnmarked(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	write(t, filepath.Join(dir, LockFile), "the user's lock file\n", 0o644)
	write(t, filepath.Join(dir, "run-x", "notes"), "the user's notes\n", 0o644)
	unchanged := func(what string) {
		t.Helper()
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v (%v); want 0755 unchanged", what, fi.Mode().Perm(), err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, LockFile)); string(b) != "the user's lock file\n" {
			t.Errorf("%s: lock now %q (%v)", what, b, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "run-x", "notes")); string(b) != "the user's notes\n" {
			t.Errorf("%s: run-x/notes now %q (%v)", what, b, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, MarkerFile)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: marked the directory (%v)", what, err)
		}
	}
	_, err := PrepareDataDir(dir)
	if !errors.Is(err, ErrNotDataDir) || !errors.Is(err, ErrDataDir) {
		t.Fatalf("PrepareDataDir(unmarked, non-empty) = %v; want ErrNotDataDir", err)
	}
	unchanged("PrepareDataDir")
	if _, err := Open(context.Background(), nil, Options{DataDir: dir, Config: Config{Image: "sha256:img"}}); !errors.Is(err, ErrNotDataDir) {
		t.Fatalf("Open(unmarked, non-empty) = %v; want ErrNotDataDir", err)
	}
	unchanged("Open")
	// A marker that is not a regular file does not mark.
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, MarkerFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := PrepareDataDir(dir); !errors.Is(err, ErrNotDataDir) {
		t.Errorf("PrepareDataDir(symlinked marker) = %v; want ErrNotDataDir", err)
	}
}

// TestPrepareDataDir_Marker: a new or empty directory is marked and then
// used as it is; the default location also adopts what an earlier version
// left there without a marker, and nothing else.
func TestPrepareDataDir_Marker(t *testing.T) {
	for _, dir := range []string{filepath.Join(t.TempDir(), "new"), t.TempDir()} {
		got, err := PrepareDataDir(dir)
		if err != nil {
			t.Fatalf("PrepareDataDir(%s) = %v", dir, err)
		}
		if b, err := os.ReadFile(filepath.Join(got, MarkerFile)); err != nil || len(b) == 0 {
			t.Errorf("%s not marked: %q %v", dir, b, err)
		}
		write(t, filepath.Join(got, LockFile), "", 0o600)
		write(t, filepath.Join(got, "run-abc", "f"), "", 0o600)
		if _, err := PrepareDataDir(got); err != nil {
			t.Errorf("PrepareDataDir(marked, in use) = %v", err)
		}
	}

	legacy := t.TempDir()
	write(t, filepath.Join(legacy, LockFile), "", 0o600)
	write(t, filepath.Join(legacy, "run-abc", "f"), "", 0o600)
	write(t, filepath.Join(legacy, "seeds", "k", "seed.json"), "{}", 0o600)
	if _, err := PrepareDataDir(legacy); !errors.Is(err, ErrNotDataDir) {
		t.Errorf("PrepareDataDir(earlier version's directory) = %v; want ErrNotDataDir outside the default location", err)
	}
	if _, err := PrepareDefaultDataDir(legacy); err != nil {
		t.Errorf("PrepareDefaultDataDir(earlier version's directory) = %v", err)
	}
	if _, err := PrepareDataDir(legacy); err != nil {
		t.Errorf("PrepareDataDir(adopted) = %v; want it marked now", err)
	}
	other := t.TempDir()
	write(t, filepath.Join(other, LockFile), "", 0o600)
	write(t, filepath.Join(other, "notes.txt"), "", 0o600)
	if _, err := PrepareDefaultDataDir(other); !errors.Is(err, ErrNotDataDir) {
		t.Errorf("PrepareDefaultDataDir(with a file of the user's) = %v; want ErrNotDataDir", err)
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
