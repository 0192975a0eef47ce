// Package broken is the build-error fixture.
package broken

import "stockade.test/greet"

// Hello calls a function greet v1.0.0 does not have.
func Hello() string { return greet.Goodbye("x") }

// Count returns a string where an int is due.
func Count() int { return "three" }
