package version

import (
	"strings"
	"testing"
)

// TestBuiltByItsMinor fails unless the go 1.27 directive got a go1.27 toolchain.
func TestBuiltByItsMinor(t *testing.T) {
	if v := Go(); !strings.HasPrefix(v, "go1.27.") {
		t.Errorf("built by %s; want go1.27", v)
	}
}
