// Package brk is a fixture dependency: v1.1.0, a minor release that
// removes Old (a breaking change under a minor version).
package brk

// New returns its argument.
func New(s string) string { return s }
