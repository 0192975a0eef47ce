package version

import (
	"strings"
	"testing"
)

// TestBuiltByItsMinor fails unless the go 1.26 directive got a go1.26 toolchain.
func TestBuiltByItsMinor(t *testing.T) {
	if v := Go(); !strings.HasPrefix(v, "go1.26.") {
		t.Errorf("built by %s; want go1.26", v)
	}
}
