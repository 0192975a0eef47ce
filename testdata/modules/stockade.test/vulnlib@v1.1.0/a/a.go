// Package a is the fixture's vulnerable package: at v1.0.0 the advisories
// of the scan fixtures name Bad (fixed in v1.1.0) and Worse (no fix).
package a

// Bad is vulnerable at v1.0.0 (v1.1.0).
func Bad(s string) string { return "bad:" + s }

// Worse has an advisory with no fix.
func Worse() int { return 2 }
