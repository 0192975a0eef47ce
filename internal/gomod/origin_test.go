package gomod

import "testing"

func TestLinks(t *testing.T) {
	for _, tc := range []struct {
		path, from, to string
		o              *Origin
		repo, compare  string
	}{
		{"github.com/spf13/pflag", "v1.0.5", "v1.0.6", nil,
			"https://github.com/spf13/pflag", "https://github.com/spf13/pflag/compare/v1.0.5...v1.0.6"},
		{"github.com/cpuguy83/go-md2man/v2", "v2.0.4", "v2.0.7", nil,
			"https://github.com/cpuguy83/go-md2man", "https://github.com/cpuguy83/go-md2man/compare/v2.0.4...v2.0.7"},
		{"github.com/Azure/go-autorest/autorest", "v0.11.1", "v0.11.2", nil,
			"https://github.com/Azure/go-autorest", "https://github.com/Azure/go-autorest/compare/autorest/v0.11.1...autorest/v0.11.2"},
		{"github.com/docker/docker", "v17.12.0+incompatible", "v20.10.0+incompatible", nil,
			"https://github.com/docker/docker", "https://github.com/docker/docker/compare/v17.12.0...v20.10.0"},
		{"gitlab.com/o/r", "v1.0.0", "v1.1.0", nil, "https://gitlab.com/o/r", "https://gitlab.com/o/r/-/compare/v1.0.0...v1.1.0"},
		{"golang.org/x/text", "v0.20.0", "v0.21.0", nil, "https://go.googlesource.com/text", "https://go.googlesource.com/text/+log/v0.20.0..v0.21.0"},
		{"gopkg.in/yaml.v3", "v3.0.1", "v3.0.2", nil, "", ""},
		{"stockade.test/greet", "v1.0.0", "v1.1.0", nil, "", ""},
		// The proxy's Origin wins over the path: a vanity path.
		{"go.uber.org/zap", "v1.26.0", "v1.27.0", &Origin{VCS: "git", URL: "https://github.com/uber-go/zap", Ref: "refs/tags/v1.27.0"},
			"https://github.com/uber-go/zap", "https://github.com/uber-go/zap/compare/v1.26.0...v1.27.0"},
		{"example.com/m/sub", "v1.0.0", "v1.0.1", &Origin{VCS: "git", URL: "https://gitlab.com/o/m.git", Subdir: "sub"},
			"https://gitlab.com/o/m", "https://gitlab.com/o/m/-/compare/sub/v1.0.0...sub/v1.0.1"},
		{"example.com/m", "v1.0.0", "v1.0.1", &Origin{VCS: "git", URL: "https://git.example.com/m"}, "https://git.example.com/m", ""},
		{"example.com/m", "v1.0.0", "v1.0.1", &Origin{VCS: "git", URL: "ssh://git.example.com/m"}, "", ""},
	} {
		repo, compare := Links(tc.path, tc.from, tc.to, tc.o)
		if repo != tc.repo || compare != tc.compare {
			t.Errorf("Links(%s, %s, %s) = %q, %q; want %q, %q", tc.path, tc.from, tc.to, repo, compare, tc.repo, tc.compare)
		}
	}
}
