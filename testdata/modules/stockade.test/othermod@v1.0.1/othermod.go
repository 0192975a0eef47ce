// Package othermod has a module-level advisory at v1.0.0 (no packages
// named: every symbol is affected), fixed in v1.0.1.
package othermod

// Hello greets (v1.0.1).
func Hello() string { return "hello" }
