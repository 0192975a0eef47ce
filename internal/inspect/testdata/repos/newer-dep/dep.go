// Package newerdep needs a dependency whose go.mod asks for a Go newer
// than any toolchain image: acquisition fails under GOTOOLCHAIN=local.
package newerdep

import "stockade.test/nextgo"

// Answer is the dependency's answer.
func Answer() int { return nextgo.Answer() }
