package greet

import "testing"

func TestHello(t *testing.T) {
	if got, want := Hello("gopher"), "hello, gopher"; got != want {
		t.Errorf("Hello(%q) = %q; want %q", "gopher", got, want)
	}
}
