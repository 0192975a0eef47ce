// Package greet is a fixture dependency: v1.1.0, a minor release.
package greet

import "strings"

// Hello returns a greeting for name, trimmed of surrounding space.
func Hello(name string) string { return "hello, " + strings.TrimSpace(name) }

// Goodbye returns a farewell for name; new in v1.1.0.
func Goodbye(name string) string { return "goodbye, " + strings.TrimSpace(name) }
