// Package next is the maintain-newer-go fixture: nextgo v0.2.0 needs go
// 1.99, which no toolchain image has.
package next

import "stockade.test/nextgo"

// Answer is nextgo's answer.
func Answer() int { return nextgo.Answer() }
