package hosttest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCopyTreeAndQuietHome(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(filepath.Join(src, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "a", "b", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CopyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "a", "b", "f")); err != nil || string(b) != "x" {
		t.Errorf("copied file = %q, %v; want x", b, err)
	}
	mode, err := os.ReadFile(filepath.Join(QuietHome(t), ".config", "go", "telemetry", "mode"))
	if err != nil || string(mode) != "off" {
		t.Errorf("telemetry mode = %q, %v; want off", mode, err)
	}
}
