// Package greet is a fixture dependency: v1.0.0, the first release.
package greet

// Hello returns a greeting for name.
func Hello(name string) string { return "hello, " + name }
