package zlibver

import (
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	if v := Version(); !strings.HasPrefix(v, "1.") {
		t.Errorf("Version() = %q; want a zlib 1.x", v)
	}
}
