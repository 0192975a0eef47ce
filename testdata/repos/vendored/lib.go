// Package lib is the vendored fixture: a vendor directory, refused.
package lib

import "stockade.test/greet"

// Hi greets.
func Hi() string { return greet.Hello("vendored") }
