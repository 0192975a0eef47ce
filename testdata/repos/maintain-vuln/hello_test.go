package hello

import "testing"

func TestMessage(t *testing.T) {
	if got, want := Message("gopher"), "bad:hello, gopher"; got != want {
		t.Errorf("Message = %q; want %q", got, want)
	}
}
