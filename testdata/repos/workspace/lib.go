// Package lib is the workspace fixture: a go.work workspace, refused.
package lib

import "stockade.test/greet"

// Hi greets.
func Hi() string { return greet.Hello("workspace") }
