package writes

import (
	"os"
	"testing"
)

// TestWritesBeside writes a file at a relative path (O_EXCL: a file left by
// an earlier validation would fail it), makes a symlink beside its own
// source, changes the mode of a file of the checkout and appends to it.
func TestWritesBeside(t *testing.T) {
	f, err := os.OpenFile("out.log", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(Greeting); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("writes.go", "link.txt"); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod("testdata/in.txt", 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := os.OpenFile("testdata/in.txt", os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.WriteString("more\n"); err != nil {
		t.Fatal(err)
	}
}
