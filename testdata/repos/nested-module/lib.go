// Package lib is the nested-module fixture: a nested module, refused.
package lib

import "stockade.test/greet"

// Hi greets.
func Hi() string { return greet.Hello("nested-module") }
