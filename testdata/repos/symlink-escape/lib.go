// Package lib is the symlink-escape fixture: a symlink that leaves the repository, refused.
package lib

import "stockade.test/greet"

// Hi greets.
func Hi() string { return greet.Hello("symlink-escape") }
