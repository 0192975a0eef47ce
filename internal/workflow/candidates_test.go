package workflow

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"

	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/validate"
)

func TestMajorPaths(t *testing.T) {
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"example.com/m", []string{"example.com/m/v2", "example.com/m/v3", "example.com/m/v4"}},
		{"example.com/m/v2", []string{"example.com/m/v3", "example.com/m/v4", "example.com/m/v5"}},
		{"gopkg.in/yaml.v2", []string{"gopkg.in/yaml.v3", "gopkg.in/yaml.v4", "gopkg.in/yaml.v5"}},
	} {
		if got := majorPaths(tc.path); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("majorPaths(%s) = %v; want %v", tc.path, got, tc.want)
		}
	}
}

// fakeExec answers commands by their argv, joined with spaces.
type fakeExec map[string]validate.Output

func (f fakeExec) Exec(_ context.Context, argv []string, _ time.Duration) (validate.Output, error) {
	o, ok := f[strings.Join(argv, " ")]
	if !ok {
		return validate.Output{}, fmt.Errorf("unexpected command %q", argv)
	}
	return o, nil
}

// TestCandidates replays what go 1.26 printed for the fixture proxy.
func TestCandidates(t *testing.T) {
	ex := fakeExec{
		"go list -m -e -versions -json stockade.test/greet stockade.test/greet/v2 stockade.test/greet/v3 stockade.test/greet/v4 stockade.test/nextgo stockade.test/nextgo/v2 stockade.test/nextgo/v3 stockade.test/nextgo/v4": {Stdout: []byte(`{
	"Path": "stockade.test/greet",
	"Version": "v1.0.0",
	"Versions": ["v1.0.0", "v1.0.1", "v1.1.0", "v1.2.0-rc.1"]
}
{
	"Path": "stockade.test/greet/v2",
	"Versions": ["v2.0.0"]
}
{
	"Path": "stockade.test/greet/v3",
	"Error": {"Err": "module stockade.test/greet/v3: reading file:///fixture-proxy/stockade.test/greet/v3/@v/list: no such file or directory"}
}
{"Path": "stockade.test/greet/v4", "Error": {"Err": "x"}}
{"Path": "stockade.test/nextgo", "Version": "v0.1.0", "Versions": ["v0.1.0", "v0.2.0"]}
{"Path": "stockade.test/nextgo/v2", "Error": {"Err": "x"}}
{"Path": "stockade.test/nextgo/v3", "Error": {"Err": "x"}}
{"Path": "stockade.test/nextgo/v4", "Error": {"Err": "x"}}
`)},
		"go mod download -json stockade.test/greet@v1.0.1 stockade.test/greet@v1.1.0 stockade.test/greet/v2@v2.0.0 stockade.test/nextgo@v0.2.0": {ExitCode: 1, Stdout: []byte(`{"Path": "stockade.test/greet", "Version": "v1.0.1"}
{"Path": "stockade.test/greet", "Version": "v1.1.0"}
{"Path": "stockade.test/greet/v2", "Version": "v2.0.0"}
{
	"Path": "stockade.test/nextgo",
	"Version": "v0.2.0",
	"Error": "stockade.test/nextgo@v0.2.0 requires go \u003e= 1.99 (running go 1.26.8; GOTOOLCHAIN=local)"
}
`)},
	}
	got, _, err := Candidates(context.Background(), ex, []module.Version{{Path: "stockade.test/greet", Version: "v1.0.0"}, {Path: "stockade.test/nextgo", Version: "v0.1.0"}}, Cooldown{})
	if err != nil {
		t.Fatal(err)
	}
	want := []report.Candidate{
		{Path: "stockade.test/greet", Current: "v1.0.0", Version: "v1.0.1", Class: "patch"},
		{Path: "stockade.test/greet", Current: "v1.0.0", Version: "v1.1.0", Class: "minor"},
		{Path: "stockade.test/greet/v2", Current: "v1.0.0", Version: "v2.0.0", Class: "major"},
		{Path: "stockade.test/nextgo", Current: "v0.1.0", Version: "v0.2.0", Class: "minor", RequiresNewerToolchain: true, GoVersion: "1.99"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Candidates =\n%+v\nwant\n%+v", got, want)
	}
}

// TestCandidates_RequirementNotListedIsAnError: a direct requirement the go
// command could not list (here: its retractions could not be verified, the
// checksum database being unreachable) is an error, never "no candidates".
func TestCandidates_RequirementNotListedIsAnError(t *testing.T) {
	ex := fakeExec{"go list -m -e -versions -json m m/v2 m/v3 m/v4": {Stdout: []byte(`{"Path": "m", "Version": "v1.0.0",
	"Error": {"Err": "loading module retractions for m@v1.0.0: verifying go.mod: m@v1.1.0/go.mod: Get \"https://sum.golang.org/lookup/m@v1.1.0\": dial tcp: lookup sum.golang.org: no such host"}}
{"Path": "m/v2", "Error": {"Err": "not found"}}
{"Path": "m/v3", "Error": {"Err": "not found"}}
{"Path": "m/v4", "Error": {"Err": "not found"}}
`)}}
	if _, _, err := Candidates(context.Background(), ex, []module.Version{{Path: "m", Version: "v1.0.0"}}, Cooldown{}); err == nil || !strings.Contains(err.Error(), "retractions for m@v1.0.0") {
		t.Errorf("Candidates = %v; want an error naming the unlisted requirement", err)
	}
}

func TestCandidates_ListFailureIsAnError(t *testing.T) {
	ex := fakeExec{"go list -m -e -versions -json m m/v2 m/v3 m/v4": {ExitCode: 1, Stderr: []byte("go: boom")}}
	if _, _, err := Candidates(context.Background(), ex, []module.Version{{Path: "m", Version: "v1.0.0"}}, Cooldown{}); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Candidates = %v; want an error naming the failure", err)
	}
}

// TestCandidates_Cooldown: with a minimum age, a version published too
// recently is held back (with when it ages in) and the newest old enough
// one of its class is the candidate; a version the proxy gives no time
// for is held back too. The proxy's Origin links a candidate.
func TestCandidates_Cooldown(t *testing.T) {
	day := 24 * time.Hour
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ex := fakeExec{
		"go list -m -e -versions -json example.com/m example.com/m/v2 example.com/m/v3 example.com/m/v4": {Stdout: []byte(`{"Path": "example.com/m", "Version": "v1.0.0", "Versions": ["v1.0.0", "v1.0.1", "v1.0.2", "v1.1.0"]}
{"Path": "example.com/m/v2", "Versions": ["v2.0.0"]}
{"Path": "example.com/m/v3", "Error": {"Err": "x"}}
{"Path": "example.com/m/v4", "Error": {"Err": "x"}}
`)},
		"go list -m -e -json example.com/m@v1.0.1 example.com/m@v1.0.2 example.com/m@v1.1.0 example.com/m/v2@v2.0.0": {Stdout: []byte(`{"Path": "example.com/m", "Version": "v1.0.1", "Time": "2026-01-02T00:00:00Z"}
{"Path": "example.com/m", "Version": "v1.0.2", "Time": "2026-01-09T00:00:00Z"}
{"Path": "example.com/m", "Version": "v1.1.0", "Time": "2026-01-03T00:00:00Z"}
{"Path": "example.com/m/v2", "Version": "v2.0.0", "Error": {"Err": "no time"}}
`)},
		"go mod download -json example.com/m@v1.0.1 example.com/m@v1.1.0": {Stdout: []byte(`{"Path": "example.com/m", "Version": "v1.0.1"}
{"Path": "example.com/m", "Version": "v1.1.0", "Origin": {"VCS": "git", "URL": "https://github.com/o/m", "Ref": "refs/tags/v1.1.0", "Hash": "0123"}}
`)},
	}
	cool := Cooldown{MinAge: 7 * day, Now: func() time.Time { return base.Add(10 * day) }}
	got, held, err := Candidates(context.Background(), ex, []module.Version{{Path: "example.com/m", Version: "v1.0.0"}}, cool)
	if err != nil {
		t.Fatal(err)
	}
	want := []report.Candidate{
		{Path: "example.com/m", Current: "v1.0.0", Version: "v1.0.1", Class: "patch"},
		// The proxy's Origin links the repository and the changes.
		{Path: "example.com/m", Current: "v1.0.0", Version: "v1.1.0", Class: "minor", Repo: "https://github.com/o/m", Compare: "https://github.com/o/m/compare/v1.0.0...v1.1.0"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("candidates %+v; want %+v", got, want)
	}
	wantHeld := []report.HeldBack{
		{Path: "example.com/m", Current: "v1.0.0", Version: "v1.0.2", Class: "patch", Published: base.Add(8 * day), Until: base.Add(15 * day)},
		{Path: "example.com/m/v2", Current: "v1.0.0", Version: "v2.0.0", Class: "major", Reason: "the module proxy gives no publication time"},
	}
	if !reflect.DeepEqual(held, wantHeld) {
		t.Errorf("held back %+v; want %+v", held, wantHeld)
	}
}
