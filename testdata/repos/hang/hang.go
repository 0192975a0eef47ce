// Package hang is the hang fixture: its test never returns.
package hang

import "stockade.test/greet"

// Hi greets.
func Hi() string { return greet.Hello("hang") }
