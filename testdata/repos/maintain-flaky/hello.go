// Package hello is the maintain-flaky fixture: TestFlaky fails one run in
// two on both sides of the greet v1.0.0 -> v1.0.1 upgrade (its state is a
// counter in the container's /tmp, which lives as long as the container),
// starting with a pass before the upgrade and a failure after it.
package hello

import "stockade.test/greet"

// Message greets name.
func Message(name string) string { return greet.Hello(name) }
