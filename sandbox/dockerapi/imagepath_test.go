package dockerapi_test

import (
	"errors"
	"testing"

	"github.com/stockade/stockade/sandbox/dockerapi"
)

// TestImagePath: an image reference becomes its route with each part
// escaped, so it cannot reach another route or add a query; one that
// cannot name an image is ErrInvalidRef before any request.
func TestImagePath(t *testing.T) {
	for _, tc := range []struct {
		ref, want string
	}{
		{"alpine:3", "/images/alpine:3"},
		{"docker.io/library/alpine:3.20", "/images/docker.io/library/alpine:3.20"},
		{"localhost:5000/a/b@sha256:0123abcd", "/images/localhost:5000/a/b@sha256:0123abcd"},
		{"sha256:0123abcd", "/images/sha256:0123abcd"},
		{"a?force=1", "/images/a%3Fforce=1"},
		{"a#frag", "/images/a%23frag"},
		{"a b", "/images/a%20b"},
		{"", ""},
		{"../containers/x", ""},
		{"a/../../containers/x", ""},
		{"a//b", ""},
		{"a/./b", ""},
		{"a/", ""},
	} {
		got, err := dockerapi.ImagePath(tc.ref)
		if tc.want == "" {
			if !errors.Is(err, dockerapi.ErrInvalidRef) {
				t.Errorf("ImagePath(%q) = %q, %v; want ErrInvalidRef", tc.ref, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ImagePath(%q) = %q, %v; want %q", tc.ref, got, err, tc.want)
		}
	}
}
