package vet

import "testing"

func TestGreeting(t *testing.T) {
	if got := Greeting("vet"); got != "hello, vet" {
		t.Errorf("Greeting = %q", got)
	}
}
