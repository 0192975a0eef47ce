package dockerapi

import "testing"

func TestShortRef(t *testing.T) {
	tests := []struct{ ref, want string }{
		{"stockade/go:1.26.8-local", "stockade/go:1.26.8-local"},
		{"localhost/stockade/go:1.26.8-local", "stockade/go:1.26.8-local"}, // Podman
		{"localhost/stockade/base:local", "stockade/base:local"},
		{"docker.io/library/golang:1.26", "golang:1.26"},
		{"docker.io/stockade/go:1.26", "stockade/go:1.26"},
		{"golang", "golang:latest"},
		{"localhost/golang", "golang:latest"},
		{"localhost:5000/golang:1.26", "localhost:5000/golang:1.26"}, // a registry, kept
		{"localhost:5000/golang", "localhost:5000/golang:latest"},
		{"golang@sha256:abcd", "golang@sha256:abcd"},
		{"docker.io/library/golang:1.26@sha256:abcd", "golang:1.26@sha256:abcd"},
		{"sha256:0354bbb41a30", "sha256:0354bbb41a30"},
	}
	for _, tt := range tests {
		if got := ShortRef(tt.ref); got != tt.want {
			t.Errorf("ShortRef(%q) = %q; want %q", tt.ref, got, tt.want)
		}
	}
	if !SameRef("localhost/stockade/go:1.26.8-local", "stockade/go:1.26.8-local") || SameRef("stockade/go:1.26.8-local", "stockade/go:1.26.7-local") {
		t.Errorf("SameRef: want the Podman and Docker names of one image equal, two tags not")
	}
}
