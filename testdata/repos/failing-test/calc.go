// Package calc is the failing-test fixture: Add is wrong on purpose.
package calc

import "stockade.test/greet"

// Add returns a+b, except that it does not.
func Add(a, b int) int { return a - b }

// Hi greets the calculator.
func Hi() string { return greet.Hello("calc") }
