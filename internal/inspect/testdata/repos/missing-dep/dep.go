// Package missingdep requires a version of its dependency that the module
// proxy does not have: acquisition fails, a finding about the repository.
package missingdep

import "stockade.test/greet"

// Hello greets.
func Hello() string { return greet.Hello("you") }
