package big

import (
	"bytes"
	"os"
	"testing"
)

// outputBytes is how much TestFlood writes to stdout: 100 MiB.
const outputBytes = 100 << 20

func TestFlood(t *testing.T) {
	chunk := bytes.Repeat([]byte(Line()), 64)
	for n := 0; n < outputBytes; n += len(chunk) {
		if _, err := os.Stdout.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
}
