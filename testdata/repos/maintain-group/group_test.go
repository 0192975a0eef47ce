package group

import "testing"

func TestMessage(t *testing.T) {
	if got, want := Message("gopher"), "hello, gopher"; got != want {
		t.Errorf("Message = %q; want %q", got, want)
	}
}

// TestLevels passes while at most one of the pair is at level 2.
func TestLevels(t *testing.T) {
	if got := Levels(); got > 3 {
		t.Errorf("Levels = %d; want at most 3", got)
	}
}
