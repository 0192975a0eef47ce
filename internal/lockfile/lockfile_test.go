package lockfile

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAcquire(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	if held, err := Held(p); err != nil || held {
		t.Fatalf("Held of a missing file = %v, %v; want false", held, err)
	}
	l, err := Acquire(context.Background(), p, 0, "first", nil)
	if err != nil {
		t.Fatal(err)
	}
	if held, err := Held(p); err != nil || !held {
		t.Errorf("Held while held = %v, %v; want true", held, err)
	}
	if !strings.Contains(Holder(p), "first") {
		t.Errorf("Holder = %q; want the holder's line", Holder(p))
	}
	if _, err := TryAcquire(p, "second"); !errors.Is(err, ErrHeld) {
		t.Errorf("TryAcquire while held = %v; want ErrHeld", err)
	}
	waits := 0
	_, err = Acquire(context.Background(), p, 300*time.Millisecond, "second", func(h string) { waits++ })
	var he *HeldError
	if !errors.As(err, &he) || !errors.Is(err, ErrHeld) || !strings.Contains(he.Holder, "first") || he.Waited < 300*time.Millisecond || waits != 1 {
		t.Errorf("Acquire while held = %v (waits %d); want a HeldError naming the holder after the timeout, onWait once", err, waits)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Acquire(ctx, p, time.Minute, "third", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire with a cancelled context = %v", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l.Unlock() // twice is fine
	if held, err := Held(p); err != nil || held {
		t.Errorf("Held after Unlock = %v, %v; want false", held, err)
	}
	l2, err := TryAcquire(p, "again")
	if err != nil {
		t.Fatalf("TryAcquire after Unlock = %v", err)
	}
	l2.Unlock()
}

// TestRefusesSymlink: the lock file is never opened through a symlink.
func TestRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, nil, 0o600)
	link := filepath.Join(dir, "lock")
	os.Symlink(target, link)
	if _, err := TryAcquire(link, "x"); err == nil || errors.Is(err, ErrHeld) {
		t.Errorf("TryAcquire through a symlink = %v; want an error", err)
	}
}

// TestCrashedHolderReleases: a holder that dies without unlocking leaves
// the lock free.
func TestCrashedHolderReleases(t *testing.T) {
	if os.Getenv("LOCKFILE_HOLD") != "" {
		if _, err := TryAcquire(os.Getenv("LOCKFILE_HOLD"), "child"); err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString("held\n")
		time.Sleep(time.Minute)
		return
	}
	p := filepath.Join(t.TempDir(), "lock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashedHolderReleases$")
	cmd.Env = append(os.Environ(), "LOCKFILE_HOLD="+p)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	if _, err := out.Read(b); err != nil || string(b) != "held\n" {
		t.Fatalf("child: %q, %v", b, err)
	}
	if held, _ := Held(p); !held {
		t.Fatal("the child's lock is not held")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if held, err := Held(p); err != nil || held {
		t.Errorf("Held after the holder was killed = %v, %v; want false", held, err)
	}
}
