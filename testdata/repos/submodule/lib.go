// Package lib is the submodule fixture: a git submodule, refused.
package lib

import "stockade.test/greet"

// Hi greets.
func Hi() string { return greet.Hello("submodule") }
