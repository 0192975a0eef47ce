// Package greet is a fixture dependency: v2.0.0, a major release at the
// /v2 module path with an incompatible Hello.
package greet

import "strings"

// Hello returns a greeting for name in the given language ("en" or "fr").
func Hello(lang, name string) string {
	if lang == "fr" {
		return "bonjour, " + strings.TrimSpace(name)
	}
	return "hello, " + strings.TrimSpace(name)
}
