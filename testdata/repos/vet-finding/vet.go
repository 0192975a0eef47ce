// Package vet is the vet-finding fixture.
package vet

import "stockade.test/greet"

// Greeting returns a greeting, assigning a variable to itself on the way.
func Greeting(name string) string {
	name = name
	return greet.Hello(name)
}
