package vuln

import "testing"

func TestShout(t *testing.T) {
	if got := Shout("x"); got != "BAD:X" {
		t.Fatalf("Shout(x) = %q", got)
	}
}
