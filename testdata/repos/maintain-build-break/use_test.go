package use

import "testing"

func TestEcho(t *testing.T) {
	if got := Echo("x"); got != "x" {
		t.Errorf("Echo(x) = %q", got)
	}
}
