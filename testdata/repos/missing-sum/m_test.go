package m

import (
	"testing"

	"stockade.test/greet"
)

func TestHello(t *testing.T) {
	if Hello() == "" || greet.Hello("x") == "" {
		t.Fatal("empty")
	}
}
