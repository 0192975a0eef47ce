package validate

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

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
