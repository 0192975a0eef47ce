// Package group is the maintain -group fixture: of its four eligible
// candidates brk v1.1.0 breaks the build alone, greet v1.1.0 is safe, and
// pairone v1.1.0 and pairtwo v1.1.0 each pass alone but fail
// TestLevels together.
package group

import (
	"stockade.test/brk"
	"stockade.test/greet"
	"stockade.test/pairone"
	"stockade.test/pairtwo"
)

// Message greets name.
func Message(name string) string { return brk.Old(greet.Hello(name)) }

// Levels is the sum of the pair's levels.
func Levels() int { return pairone.Level() + pairtwo.Level() }
