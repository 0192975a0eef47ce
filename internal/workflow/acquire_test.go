package workflow

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/gomod"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/validate"
)

// fakeAcq answers each command with the next output and records argv.
type fakeAcq struct {
	outs []validate.Output
	argv [][]string
}

func (f *fakeAcq) Exec(ctx context.Context, argv []string, timeout time.Duration) (validate.Output, error) {
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
		got, err := acquireModules(context.Background(), &fakeAcq{outs: []validate.Output{{ExitCode: 1, Stderr: []byte(tc.stderr)}, {ExitCode: 1}}}, &gomod.Module{}, report.Image{}, true)
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
		get    validate.Output
		update string
	}{
		{validate.Output{}, ""},
		{validate.Output{ExitCode: 1, Stderr: []byte("go: updating go.sum: open /src/go.sum: permission denied\n")}, "go: updating go.sum: open /src/go.sum: permission denied"},
		{validate.Output{ExitCode: 1, Stderr: []byte("go: finding module for package x.test/y\ncannot find module providing package x.test/y\n")}, ""},
	} {
		f := &fakeAcq{outs: []validate.Output{{}, tc.get}}
		got, err := acquireModules(context.Background(), f, &gomod.Module{}, report.Image{}, true)
		if err != nil || got.update != tc.update || (got.Failure != nil) != (tc.update != "") {
			t.Errorf("go get %q: %+v, %v; want update %q", tc.get.Stderr, got, err, tc.update)
		}
		if len(f.argv) != 2 || !slices.Equal(f.argv[1], completeArgv) {
			t.Errorf("commands %q; want go mod download, then %q", f.argv, completeArgv)
		}
	}
	// A go.sum that has every module's hash: go get (which asks the
	// checksum database whatever it finds) does not run.
	f := &fakeAcq{outs: []validate.Output{{}}}
	if got, err := acquireModules(context.Background(), f, &gomod.Module{}, report.Image{}, false); err != nil || got.Failure != nil || len(f.argv) != 1 {
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
		if got := sumsIncomplete(dir); got != tc.want {
			t.Errorf("%s: sumsIncomplete = %v; want %v", tc.name, got, tc.want)
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
