package scanner

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

func TestPinFor(t *testing.T) {
	for _, tc := range []struct {
		goVersion, version string
		err                error
	}{
		{"go1.26.8", "v1.9.0", nil},
		{"1.26", "v1.9.0", nil},
		{"go1.27.3", "v1.9.0", nil},
		{"go1.24.5", "", ErrNoPin},
		{"go1.99.0", "", ErrNoPin},
	} {
		p, err := PinFor(tc.goVersion)
		if !errors.Is(err, tc.err) || p.Version != tc.version {
			t.Errorf("PinFor(%s) = %s, %v; want %s, %v", tc.goVersion, p.Version, err, tc.version, tc.err)
		}
	}
}

// TestPins_RecipesComplete: every recipe's go.mod builds the tool from the
// pinned module version, and its go.sum pins every module the go.mod
// requires (zip and go.mod hashes), so go build -mod=readonly can check
// each download.
func TestPins_RecipesComplete(t *testing.T) {
	pins, err := Pins()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pins {
		gomod, err := p.GoMod()
		if err != nil {
			t.Fatal(err)
		}
		gosum, err := p.GoSum()
		if err != nil {
			t.Fatal(err)
		}
		f, err := modfile.Parse(p.Recipe+".mod", gomod, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Tool) != 1 || f.Tool[0].Path != Tool {
			t.Errorf("%s: tool directives %v; want exactly %s", p.Recipe, f.Tool, Tool)
		}
		if len(f.Replace) > 0 || len(f.Exclude) > 0 {
			t.Errorf("%s: replace or exclude directives", p.Recipe)
		}
		zips := sums(gosum)
		found := false
		for _, r := range f.Require {
			key := r.Mod.Path + " " + r.Mod.Version
			if zips[key] == "" || !strings.Contains(string(gosum), key+"/go.mod h1:") {
				t.Errorf("%s: go.sum does not pin %s", p.Recipe, key)
			}
			if r.Mod.Path == p.Module && r.Mod.Version == p.Version {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: does not require %s@%s", p.Recipe, p.Module, p.Version)
		}
	}
}
