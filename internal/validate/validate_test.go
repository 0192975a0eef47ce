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
		reason   string
		pkgs     int
		findings int
	}{
		{"clean", Output{Stdout: []byte(twoPkgs)}, report.StatusPass, "", 2, 0},
		{"timeout", Output{Stdout: []byte(twoPkgs), TimedOut: true, ExitCode: 137}, report.StatusInconclusive, "timeout", 0, 0},
		{"truncated", Output{Stdout: []byte(twoPkgs), Truncated: true}, report.StatusInconclusive, "truncated", 0, 0},
		{"not json", Output{Stdout: []byte(twoPkgs + "hello\n")}, report.StatusInconclusive, "non_json", 0, 0},
		{"no packages", Output{}, report.StatusInconclusive, "no_packages", 0, 0},
		{"package error", Output{Stdout: []byte(`{"ImportPath": "example.com/m", "Name": "m", "Error": {"Pos": "m.go:3:1", "Err": "m.go:3:1: expected declaration, found x"}}`)}, report.StatusFail, "", 1, 1},
		{"load failure", Output{ExitCode: 1, Stderr: []byte("go: errors parsing go.mod")}, report.StatusFail, "", 0, 1},
		{"silent failure", Output{ExitCode: 1, Stdout: []byte(twoPkgs)}, report.StatusInconclusive, "unexplained_exit", 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := parseList(tc.out)
			if c.Status != tc.status || c.Reason != tc.reason || c.Packages != tc.pkgs || len(c.Findings) != tc.findings {
				t.Errorf("parseList = %s/%q, %d packages, %d findings; want %s/%q, %d, %d",
					c.Status, c.Reason, c.Packages, len(c.Findings), tc.status, tc.reason, tc.pkgs, tc.findings)
			}
		})
	}
}

func TestParseList_FindingPosition(t *testing.T) {
	c, _ := parseList(Output{Stdout: []byte(`{"ImportPath": "example.com/m", "Name": "m", "Error": {"Pos": "/src/m.go:3:1", "Err": "/src/m.go:3:1: expected declaration"}}`)})
	f := c.Findings[0]
	if f.File != "m.go" || f.Line != 3 || f.Message != "expected declaration" || f.Package != "example.com/m" {
		t.Errorf("finding = %+v", f)
	}
}

func TestNewFinding_KeyIgnoresVolatileParts(t *testing.T) {
	a := newFinding("test", "p", "TestX", "x_test.go", 10, "x_test.go:10: got 0xc000012345 after 1.5s")
	b := newFinding("test", "p", "TestX", "x_test.go", 12, "x_test.go:12: got 0xc000099999 after 2s")
	c := newFinding("test", "p", "TestX", "x_test.go", 10, "x_test.go:10: got nil")
	if a.Key != b.Key {
		t.Errorf("keys differ for the same problem: %s vs %s", a.Key, b.Key)
	}
	if a.Key == c.Key {
		t.Errorf("keys equal for different problems: %s", a.Key)
	}
}

func TestBuildArgv(t *testing.T) {
	lib := []Package{{ImportPath: "m", Name: "m"}}
	cmd := append(lib, Package{ImportPath: "m/cmd/x", Name: "main"})
	if got, want := buildArgv(lib), []string{"go", "build", "./..."}; !reflect.DeepEqual(got, want) {
		t.Errorf("buildArgv(library) = %q; want %q", got, want)
	}
	if got, want := buildArgv(cmd), []string{"go", "build", "-o", "/tmp/stockade-build/", "./..."}; !reflect.DeepEqual(got, want) {
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
		got = append(got, c.Name+"="+string(c.Status)+"/"+c.Reason)
	}
	want := "list=pass/ build=inconclusive/timeout vet=not_run/ test=not_run/"
	if strings.Join(got, " ") != want {
		t.Errorf("checks = %s; want %s", strings.Join(got, " "), want)
	}
}
