// Package lib is the test-build-error fixture: it builds, its test does not.
package lib

import "stockade.test/greet"

// Name returns a name.
func Name() string { return greet.Hello("lib") }
