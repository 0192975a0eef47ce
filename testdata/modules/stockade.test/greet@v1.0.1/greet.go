// Package greet is a fixture dependency: v1.0.1, a patch release.
package greet

import "strings"

// Hello returns a greeting for name, trimmed of surrounding space.
func Hello(name string) string { return "hello, " + strings.TrimSpace(name) }
