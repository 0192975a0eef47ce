package stockade_test

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// These tests keep the tree honest: dependencies are the ones
// docs/DEPENDENCIES.md justifies, go.mod is tidy, files are gofmt'ed and vet
// is clean. They run the go command of the test's own toolchain.

func goTool(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// allowedDeps reads the module paths listed in docs/DEPENDENCIES.md as
// "- `module/path`: reason" lines.
func allowedDeps(t *testing.T) map[string]bool {
	f, err := os.Open("docs/DEPENDENCIES.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	re := regexp.MustCompile("^- `([^`]+)`: .{10,}")
	allowed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			allowed[m[1]] = true
		}
	}
	return allowed
}

func TestDependenciesAreJustified(t *testing.T) {
	allowed := allowedDeps(t)
	// The modules whose packages the build and the tests use (go list -m all
	// would also name modules that only appear in dependencies' go.mod files).
	out := goTool(t, "list", "-deps", "-test", "-f", "{{with .Module}}{{if not .Main}}{{.Path}}{{end}}{{end}}", "./...")
	seen := map[string]bool{}
	for _, mod := range strings.Fields(out) {
		if seen[mod] {
			continue
		}
		seen[mod] = true
		if !allowed[mod] {
			t.Errorf("module %s is a dependency but docs/DEPENDENCIES.md does not justify it", mod)
		}
	}
	// The engine client stays dependency-free: nothing outside the standard
	// library and this module.
	out = goTool(t, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./sandbox/dockerapi")
	for _, p := range strings.Fields(out) {
		if !strings.HasPrefix(p, "github.com/stockade/stockade/") {
			t.Errorf("sandbox/dockerapi depends on %s; it must use only the standard library", p)
		}
	}
}

// TestTelemetryStaysInTheGate: the OpenTelemetry SDK, its exporters and
// what they pull (gRPC among them) are linked only by the gate's program
// and its telemetry packages, never by the session library or the CLI.
func TestTelemetryStaysInTheGate(t *testing.T) {
	allowed := map[string]bool{
		"github.com/stockade/stockade/cmd/stockade-gate":       true,
		"github.com/stockade/stockade/internal/gate/telemetry": true,
		"github.com/stockade/stockade/internal/gate/otlptest":  true,
	}
	out := goTool(t, "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./...")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		pkg, deps, _ := strings.Cut(line, " ")
		for _, d := range strings.Fields(deps) {
			if (strings.HasPrefix(d, "go.opentelemetry.io/") || strings.HasPrefix(d, "google.golang.org/grpc")) && !allowed[pkg] {
				t.Errorf("%s links %s; only the gate's packages may", pkg, d)
				break
			}
		}
	}
}

func TestModTidy(t *testing.T) {
	cmd := exec.Command("go", "mod", "tidy", "-diff")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("go mod tidy would change go.mod/go.sum:\n%s", out)
	}
}

func TestGofmt(t *testing.T) {
	out, err := exec.Command("gofmt", "-l", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("gofmt: %v\n%s", err, out)
	}
	var bad []string
	for _, f := range strings.Fields(string(out)) {
		if !strings.HasPrefix(f, "testdata/") && !strings.Contains(f, "/testdata/") {
			bad = append(bad, f)
		}
	}
	if len(bad) > 0 {
		t.Errorf("files not gofmt'ed: %v", bad)
	}
}

func TestVet(t *testing.T) {
	goTool(t, "vet", "./...")
}
