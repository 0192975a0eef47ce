// Package hosttest holds what tests need to run the host's go command on
// fixture files: a tree copy and a quiet HOME. It is imported only by tests.
package hosttest

import (
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
