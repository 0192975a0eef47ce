// Package nextgo is a fixture dependency; v0.2.0 says go 1.99.
package nextgo

// Answer returns 42.
func Answer() int { return 42 }
