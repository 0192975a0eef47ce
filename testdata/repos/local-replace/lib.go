// Package lib is the local-replace fixture: a replace with a local directory target, refused.
package lib

import "stockade.test/greet"

// Hi greets.
func Hi() string { return greet.Hello("local-replace") }
