package hello

import "testing"

func TestMessage(t *testing.T) {
	if got, want := Message("gopher"), "hello, gopher"; got != want {
		t.Errorf("Message(%q) = %q; want %q", "gopher", got, want)
	}
}

func TestSkipped(t *testing.T) {
	t.Skip("skipped on purpose")
}
