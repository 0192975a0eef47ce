// Package hello is the maintain-current fixture: greet v1.1.0 is the
// newest v1, and v2 (a new import path) is not eligible: no_candidate.
package hello

import "stockade.test/greet"

// Message greets name.
func Message(name string) string { return greet.Hello(name) }
