package nogo

import "testing"

func TestHi(t *testing.T) {
	if got := Hi(); got != "hello, world" {
		t.Errorf("Hi() = %q", got)
	}
}
