// Package hello is the maintain -prefer-fixes fixture: it calls
// vulnlib's a.Bad, which vulnlib v1.1.0 fixes (GO-2099-0001 in the fixture
// database). Without -prefer-fixes the first candidate is greet's patch
// v1.0.1; with it, vulnlib v1.1.0.
package hello

import (
	"stockade.test/greet"
	"stockade.test/vulnlib/a"
)

// Message greets name the risky way.
func Message(name string) string { return a.Bad(greet.Hello(name)) }
