// Package vuln is the scan fixture: it calls a vulnerable symbol that has a
// fix (a.Bad, by two paths), one that has none (a.Worse), a vulnerable
// standard-library symbol (strings.ToUpper in the fixture database), and a
// module whose advisory names no package (othermod); it imports package b
// without calling its vulnerable Unused, and requires vulnlib, whose
// package c it never imports.
package vuln

import (
	"strings"

	"stockade.test/othermod"
	"stockade.test/vulnlib/a"
	"stockade.test/vulnlib/b"
)

// Shout reaches a.Bad and strings.ToUpper.
func Shout(s string) string { return strings.ToUpper(a.Bad(s)) }

// Again is a second, longer path to a.Bad.
func Again() string { return Shout("again") }

// Count calls b.Used, never b.Unused, and a.Worse.
func Count() int { return b.Used() + a.Worse() }

// Greet calls into othermod.
func Greet() string { return othermod.Hello() }
