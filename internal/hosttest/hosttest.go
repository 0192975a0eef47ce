// Package hosttest holds what tests need of the host's files: a tree copy,
// a tree of hard links, and a quiet HOME for the host's go command. It is imported only by tests.
package hosttest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// CopyTree copies the directories and regular files under src into dst
// (directories 0755, files 0644), creating dst as needed.
func CopyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// LinkTree hard-links every regular file under src into dst, making the
// directories (dst too) and giving them src's modes once they are filled,
// so a read-only tree (a build-cache seed) is linked whole. Anything but
// directories and regular files is an error.
func LinkTree(src, dst string) error {
	var dirs []string
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			dirs = append(dirs, rel)
			return os.MkdirAll(target, 0o700)
		case d.Type().IsRegular():
			return os.Link(p, target)
		}
		return fmt.Errorf("hosttest: %s is not a file or directory", p)
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		fi, err := os.Stat(filepath.Join(src, dirs[i]))
		if err != nil {
			return err
		}
		if err := os.Chmod(filepath.Join(dst, dirs[i]), fi.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

// QuietHome returns a fresh HOME for the go command with telemetry off:
// otherwise telemetry writes counters into HOME after the command exits,
// racing the test's cleanup.
func QuietHome(t testing.TB) string {
	t.Helper()
	home := t.TempDir()
	tele := filepath.Join(home, ".config", "go", "telemetry")
	if err := os.MkdirAll(tele, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tele, "mode"), []byte("off"), 0o644); err != nil {
		t.Fatal(err)
	}
	return home
}
