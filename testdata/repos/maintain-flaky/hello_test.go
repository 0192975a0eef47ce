package hello

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestMessage(t *testing.T) {
	if got, want := Message("gopher"), "hello, gopher"; got != want {
		t.Errorf("Message = %q; want %q", got, want)
	}
}

// TestFlaky fails every other run in one container; whether the first
// run fails depends on the greet version (v1.0.1 trims its argument).
func TestFlaky(t *testing.T) {
	p := filepath.Join(os.TempDir(), "stockade-fixture-flaky-runs")
	b, _ := os.ReadFile(p)
	n, _ := strconv.Atoi(string(b))
	if err := os.WriteFile(p, []byte(strconv.Itoa(n+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if Message(" x") == "hello, x" {
		n++
	}
	if n%2 == 1 {
		t.Errorf("run %d fails, as every other run does", n)
	}
}
