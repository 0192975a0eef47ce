// Package nogo is a module whose go.mod has no go line and a requirement:
// the go command adds a go line to go.mod to download the requirement, as
// it does on a developer's machine.
package nogo

import "stockade.test/greet"

// Hi greets the world.
func Hi() string { return greet.Hello("world") }
