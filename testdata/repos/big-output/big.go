// Package big is the big-output fixture: its test prints 100 MiB.
package big

import (
	"strings"

	"stockade.test/greet"
)

// LineBytes is the length of one output line, newline included: long lines
// keep the -json stream (one event a line) near the size of the raw output.
const LineBytes = 1 << 10

// Line returns one line of output, LineBytes long, newline included.
func Line() string {
	h := greet.Hello("big") + " "
	return h + strings.Repeat("x", LineBytes-len(h)-1) + "\n"
}
