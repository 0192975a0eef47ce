// Package hello is the maintain-patch fixture: greet v1.0.0 -> v1.0.1 is
// a safe patch upgrade.
package hello

import "stockade.test/greet"

// Message greets name.
func Message(name string) string { return greet.Hello(name) }
