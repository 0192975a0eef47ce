// Package each is the maintain -each fixture: of its three eligible
// candidates greet v1.1.0 is safe, brk v1.1.0 breaks the build and
// nextgo v0.2.0 needs a newer Go.
package each

import (
	"stockade.test/brk"
	"stockade.test/greet"
	"stockade.test/nextgo"
)

// Message greets name with the answer.
func Message(name string) string {
	if nextgo.Answer() != 42 {
		return "?"
	}
	return brk.Old(greet.Hello(name))
}
