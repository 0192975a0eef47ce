// Package brk is a fixture dependency: v1.0.0 has Old.
package brk

// Old returns its argument.
func Old(s string) string { return s }
