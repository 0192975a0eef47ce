package gomod

import (
	"errors"
	"reflect"
	"testing"

	"golang.org/x/mod/module"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		from, to module.Version
		want     Kind
		wantErr  error
	}{
		{mv("example.test/m", "v1.0.0"), mv("example.test/m", "v1.0.1"), Patch, nil},
		{mv("example.test/m", "v1.0.0-rc.1"), mv("example.test/m", "v1.0.0"), Patch, nil},
		{mv("example.test/m", "v1.0.1"), mv("example.test/m", "v1.1.0"), Minor, nil},
		{mv("example.test/m", "v0.1.0"), mv("example.test/m", "v0.2.0"), Minor, nil},
		{mv("example.test/m", "v0.9.0"), mv("example.test/m", "v1.0.0"), Major, nil},
		{mv("example.test/m", "v1.4.0"), mv("example.test/m/v2", "v2.0.0"), Major, nil},
		{mv("example.test/m/v2", "v2.3.0"), mv("example.test/m/v4", "v4.1.0"), Major, nil},
		{mv("example.test/m", "v1.4.0"), mv("example.test/m", "v2.0.0+incompatible"), Major, nil},
		{mv("gopkg.in/yaml.v2", "v2.4.0"), mv("gopkg.in/yaml.v3", "v3.0.1"), Major, nil},
		{mv("example.test/m", "v1.1.0"), mv("example.test/m", "v1.1.0"), "", ErrNotUpgrade},
		{mv("example.test/m", "v1.1.0"), mv("example.test/m", "v1.0.9"), "", ErrNotUpgrade},
		{mv("example.test/m/v3", "v3.0.0"), mv("example.test/m/v2", "v2.9.0"), "", ErrNotUpgrade},
		{mv("example.test/m", "v1.0.0"), mv("example.test/n", "v1.0.1"), "", ErrNotUpgrade},
		{mv("example.test/m", "v1.0.0"), mv("example.test/m/v2", "v1.0.1"), "", ErrNotUpgrade},
		{mv("example.test/m", "1.0.0"), mv("example.test/m", "v1.0.1"), "", ErrNotUpgrade},
	}
	for _, tt := range tests {
		got, err := Classify(tt.from, tt.to)
		if got != tt.want || !errors.Is(err, tt.wantErr) {
			t.Errorf("Classify(%v, %v) = %q, %v; want %q, %v", tt.from, tt.to, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestCandidates(t *testing.T) {
	// The fixture proxy's greet versions, plus a pre-release.
	avail := []module.Version{
		mv("stockade.test/greet/v2", "v2.0.0"),
		mv("stockade.test/greet", "v1.0.0"),
		mv("stockade.test/greet", "v1.1.0"),
		mv("stockade.test/greet", "v1.0.1"),
		mv("stockade.test/greet", "v1.2.0-rc.1"),
	}
	got := Candidates(mv("stockade.test/greet", "v1.0.0"), avail)
	want := []Candidate{
		{mv("stockade.test/greet", "v1.0.1"), Patch},
		{mv("stockade.test/greet", "v1.1.0"), Minor},
		{mv("stockade.test/greet/v2", "v2.0.0"), Major},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Candidates(v1.0.0) = %v; want %v", got, want)
	}
	if got := Candidates(mv("stockade.test/greet/v2", "v2.0.0"), avail); len(got) != 0 {
		t.Errorf("Candidates(v2.0.0) = %v; want none", got)
	}
	got = Candidates(mv("stockade.test/nextgo", "v0.1.0"), []module.Version{mv("stockade.test/nextgo", "v0.2.0")})
	if want := []Candidate{{mv("stockade.test/nextgo", "v0.2.0"), Minor}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Candidates(nextgo v0.1.0) = %v; want %v", got, want)
	}
}

func TestNextMajorPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"example.test/m", "example.test/m/v2"},
		{"example.test/m/v2", "example.test/m/v3"},
		{"example.test/m/v9", "example.test/m/v10"},
		{"gopkg.in/yaml.v2", "gopkg.in/yaml.v3"},
	}
	for _, tt := range tests {
		if got, err := NextMajorPath(tt.in); got != tt.want || err != nil {
			t.Errorf("NextMajorPath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := NextMajorPath("example.test/m/v1"); err == nil {
		t.Error("NextMajorPath(.../v1) = nil error; want an error")
	}
}
