package private

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
)

func TestHello(t *testing.T) {
	if Hello() != "hello, team" {
		t.Fatalf("Hello() = %q", Hello())
	}
}

// TestNoCredentials: none of the proxy's credentials is in the
// environment, the credentials' directory is not mounted, and no netrc is
// in the home directory.
func TestNoCredentials(t *testing.T) {
	for _, kv := range os.Environ() {
		if strings.Contains(kv, "s3cret") || strings.HasPrefix(kv, "NETRC=") || strings.HasPrefix(kv, "SSL_CERT_DIR=") || strings.HasPrefix(kv, "GOAUTH=") && kv != "GOAUTH=off" {
			t.Errorf("the environment has %q", kv)
		}
	}
	home, _ := os.UserHomeDir()
	for _, p := range []string{"/stockade-auth", home + "/.netrc"} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is here: %v", p, err)
		}
	}
}
