package hang

import (
	"testing"
	"time"
)

func TestQuick(t *testing.T) {
	if Hi() == "" {
		t.Fatal("empty")
	}
}

// TestForever sleeps until the test binary's -timeout (or the sandbox's
// timeout) kills it. A sleep, not select{}, so the runtime cannot report a
// deadlock instead.
func TestForever(t *testing.T) {
	t.Log("sleeping forever")
	for {
		time.Sleep(time.Hour)
	}
}
