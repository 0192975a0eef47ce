package validate

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/gomod"
	"github.com/stockade/stockade/internal/report"
)

func TestParseList(t *testing.T) {
	twoPkgs := `{"ImportPath": "example.com/m", "Name": "m"}
{"ImportPath": "example.com/m/cmd/x", "Name": "main"}
`
	for _, tc := range []struct {
		name     string
		out      Output
		status   report.Status
		reasons  int
		pkgs     int
		findings int
	}{
		{"clean", Output{Stdout: []byte(twoPkgs)}, report.StatusPass, 0, 2, 0},
		{"timeout", Output{Stdout: []byte(twoPkgs), TimedOut: true, ExitCode: 137}, report.StatusInconclusive, 1, 0, 0},
		{"truncated", Output{Stdout: []byte(twoPkgs), Truncated: true}, report.StatusInconclusive, 1, 0, 0},
		{"not json", Output{Stdout: []byte(twoPkgs + "hello\n")}, report.StatusInconclusive, 1, 0, 0},
		{"no packages", Output{}, report.StatusInconclusive, 1, 0, 0},
		{"package error", Output{Stdout: []byte(`{"ImportPath": "example.com/m", "Name": "m", "Error": {"Pos": "m.go:3:1", "Err": "m.go:3:1: expected declaration, found x"}}`)}, report.StatusFail, 0, 1, 1},
		{"load failure", Output{ExitCode: 1, Stderr: []byte("go: errors parsing go.mod")}, report.StatusFail, 0, 0, 1},
		{"silent failure", Output{ExitCode: 1, Stdout: []byte(twoPkgs)}, report.StatusInconclusive, 1, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := parseList(tc.out)
			if c.Status != tc.status || len(c.Reasons) != tc.reasons || c.Packages != tc.pkgs || len(c.Findings) != tc.findings {
				t.Errorf("parseList = %s %q, %d packages, %d findings; want %s with %d reasons, %d, %d",
					c.Status, c.Reasons, c.Packages, len(c.Findings), tc.status, tc.reasons, tc.pkgs, tc.findings)
			}
		})
	}
}

func TestParseList_FindingPosition(t *testing.T) {
	c, _ := parseList(Output{Stdout: []byte(`{"ImportPath": "example.com/m", "Name": "m", "Error": {"Pos": "/src/m.go:3:1", "Err": "/src/m.go:3:1: expected declaration"}}`)})
	f := c.Findings[0]
	if f.File != "m.go" || f.Line != 3 || f.Col != 1 || f.Message != "expected declaration" || f.Package != "example.com/m" || f.Kind != "build" {
		t.Errorf("finding = %+v", f)
	}
	d, _ := parseList(Output{Stdout: []byte(`{"ImportPath": "example.com/m", "Name": "m", "Error": {"Pos": "/src/m.go:9:4", "Err": "/src/m.go:9:4: expected declaration"}}`)})
	if d.Findings[0].Key != f.Key {
		t.Errorf("the same error on another line has key %s, not %s", d.Findings[0].Key, f.Key)
	}
}

func TestBuildArgv(t *testing.T) {
	lib := []Package{{ImportPath: "m", Name: "m"}}
	cmd := append(lib, Package{ImportPath: "m/cmd/x", Name: "main"})
	if got, want := buildArgv(lib), []string{"go", "build", "-mod=readonly", "./..."}; !reflect.DeepEqual(got, want) {
		t.Errorf("buildArgv(library) = %q; want %q", got, want)
	}
	if got, want := buildArgv(cmd), []string{"go", "build", "-mod=readonly", "-o", "/tmp/stockade-build/", "./..."}; !reflect.DeepEqual(got, want) {
		t.Errorf("buildArgv(with main) = %q; want %q", got, want)
	}
}

// slowExec times out every command after the first.
type slowExec struct{ n int }

func (s *slowExec) Exec(ctx context.Context, argv []string, timeout time.Duration) (Output, error) {
	s.n++
	if s.n == 1 {
		return Output{Stdout: []byte(`{"ImportPath": "m", "Name": "m"}`)}, nil
	}
	time.Sleep(timeout)
	return Output{TimedOut: true, ExitCode: 137}, nil
}

func TestRun_TimeoutMakesLaterChecksNotRun(t *testing.T) {
	res, err := Run(context.Background(), &slowExec{}, Options{Timeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range res.Checks {
		got = append(got, c.Name+"="+string(c.Status))
	}
	want := "list=pass build=inconclusive vet=not_run test=not_run"
	if strings.Join(got, " ") != want {
		t.Errorf("checks = %s; want %s", strings.Join(got, " "), want)
	}
}

// fakeAcq answers each command with the next output and records argv.
type fakeAcq struct {
	outs []Output
	argv [][]string
}

func (f *fakeAcq) Exec(ctx context.Context, argv []string, timeout time.Duration) (Output, error) {
	f.argv = append(f.argv, argv)
	o := f.outs[0]
	f.outs = f.outs[1:]
	return o, nil
}

// TestAcquireModules_ManifestUpdate: the go command refusing to update the
// read-only go.mod is a failure that carries its message, for
// AcquireSnapshot to redo on a staging copy; other failures do not.
func TestAcquireModules_ManifestUpdate(t *testing.T) {
	for _, tc := range []struct {
		stderr, update string
	}{
		{"go: updating go.mod: open /src/go.mod: permission denied\n", "go: updating go.mod: open /src/go.mod: permission denied"},
		{"go: updating go.sum: open /src/go.sum: read-only file system\n", "go: updating go.sum: open /src/go.sum: read-only file system"},
		{"go: updating go.mod: open /elsewhere/go.mod: permission denied\n", ""},
		{"verifying x@v1.0.0: checksum mismatch\n", ""},
	} {
		got, err := AcquireModules(context.Background(), &fakeAcq{outs: []Output{{ExitCode: 1, Stderr: []byte(tc.stderr)}, {ExitCode: 1}}}, &gomod.Module{}, report.Image{}, true)
		if err != nil || got.Failure == nil || got.update != tc.update {
			t.Errorf("%q: %+v, %v; want a failure with update %q", tc.stderr, got, err, tc.update)
		}
	}
}

// TestAcquireModules_CompletesSums: after go mod download, go get -t
// ./... adds what go.sum lacks for the checks; its refusal to write the
// read-only manifests is the update AcquireSnapshot stages, any other
// failure is left to the checks.
func TestAcquireModules_CompletesSums(t *testing.T) {
	for _, tc := range []struct {
		get    Output
		update string
	}{
		{Output{}, ""},
		{Output{ExitCode: 1, Stderr: []byte("go: updating go.sum: open /src/go.sum: permission denied\n")}, "go: updating go.sum: open /src/go.sum: permission denied"},
		{Output{ExitCode: 1, Stderr: []byte("go: finding module for package x.test/y\ncannot find module providing package x.test/y\n")}, ""},
	} {
		f := &fakeAcq{outs: []Output{{}, tc.get}}
		got, err := AcquireModules(context.Background(), f, &gomod.Module{}, report.Image{}, true)
		if err != nil || got.update != tc.update || (got.Failure != nil) != (tc.update != "") {
			t.Errorf("go get %q: %+v, %v; want update %q", tc.get.Stderr, got, err, tc.update)
		}
		if len(f.argv) != 2 || !slices.Equal(f.argv[1], completeArgv) {
			t.Errorf("commands %q; want go mod download, then %q", f.argv, completeArgv)
		}
	}
	// A go.sum that has every module's hash: go get (which asks the
	// checksum database whatever it finds) does not run.
	f := &fakeAcq{outs: []Output{{}}}
	if got, err := AcquireModules(context.Background(), f, &gomod.Module{}, report.Image{}, false); err != nil || got.Failure != nil || len(f.argv) != 1 {
		t.Errorf("complete go.sum: %+v, %v, commands %q; want go mod download alone", got, err, f.argv)
	}
}

// TestSumsIncomplete: a go.sum lacks what the checks need when a required
// module (or its replacement) has no h1: line.
func TestSumsIncomplete(t *testing.T) {
	const greet = "stockade.test/greet v1.0.0 h1:oAG+WYaKo+ycCRQlJAenqXN+tDfJlfXZAYbSVlerF+U=\nstockade.test/greet v1.0.0/go.mod h1:uSSI1rd5dkqwJ0PWcvGMuffyChKW+HXyyFltBtKmsQw=\n"
	for _, tc := range []struct {
		name, goMod, goSum string
		want               bool
	}{
		{"complete", "module m\nrequire stockade.test/greet v1.0.0\n", greet, false},
		{"no requirements, no go.sum", "module m\n", "", false},
		{"no go.sum", "module m\nrequire stockade.test/greet v1.0.0\n", "", true},
		{"only the go.mod hash", "module m\nrequire stockade.test/greet v1.0.0\n", "stockade.test/greet v1.0.0/go.mod h1:uSSI1rd5dkqwJ0PWcvGMuffyChKW+HXyyFltBtKmsQw=\n", true},
		{"the replacement's hash", "module m\nrequire stockade.test/x v1.0.0\nreplace stockade.test/x => stockade.test/greet v1.0.0\n", greet, false},
		{"not go.mod", "module m\nrequire (\n", greet, true},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "go.mod"), []byte(tc.goMod), 0o644)
		if tc.goSum != "" {
			os.WriteFile(filepath.Join(dir, "go.sum"), []byte(tc.goSum), 0o644)
		}
		if got := SumsIncomplete(dir); got != tc.want {
			t.Errorf("%s: SumsIncomplete = %v; want %v", tc.name, got, tc.want)
		}
	}
}

func TestWithModFile(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"go", "mod", "download"}, []string{"go", "mod", "download", "-modfile=/staging/go.mod"}},
		{[]string{"go", "mod", "download", "-json", "a@v1"}, []string{"go", "mod", "download", "-modfile=/staging/go.mod", "-json", "a@v1"}},
		{[]string{"go", "list", "-m", "-u", "all"}, []string{"go", "list", "-modfile=/staging/go.mod", "-m", "-u", "all"}},
	} {
		if got := withModFile(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("withModFile(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}
