// Package checksummismatch records a go.sum hash that the dependency's
// content does not have: acquisition fails, a finding about the
// repository.
package checksummismatch

import "stockade.test/greet"

// Hello greets.
func Hello() string { return greet.Hello("you") }
