// Package hello is the clean fixture: it builds, vets and tests cleanly.
package hello

import (
	"stockade.test/greet"
	"stockade.test/nextgo"
)

// Message returns a greeting that mentions the answer.
func Message(name string) string {
	if nextgo.Answer() != 42 {
		return "?"
	}
	return greet.Hello(name)
}
