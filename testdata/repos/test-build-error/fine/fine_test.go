package fine

import "testing"

func TestYes(t *testing.T) {
	if !Yes() {
		t.Fatal("no")
	}
}
