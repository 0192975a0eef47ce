package gomod

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/mod/module"

	"github.com/stockade/stockade/internal/imagetable"
)

var repos = filepath.Join("..", "..", "testdata", "repos")

func mv(p, v string) module.Version { return module.Version{Path: p, Version: v} }

// TestCheck_Fixtures runs Check on every fixture repository: the supported
// ones load, each unsupported one is refused for its own reason.
func TestCheck_Fixtures(t *testing.T) {
	tests := []struct {
		repo       string
		wantReason Reason // "" means supported
		wantPath   string
		wantGo     string
		stoodIn    bool
	}{
		// The table has go 1.26.8 (host) and 1.27.3 (proxy): a 1.24 module
		// is served by the 1.26 image, which stands in for the missing 1.24.
		{repo: "clean", wantGo: "1.24", stoodIn: true},
		{repo: "failing-test", wantGo: "1.24", stoodIn: true},
		{repo: "build-error", wantGo: "1.24", stoodIn: true},
		{repo: "vet-finding", wantGo: "1.24", stoodIn: true},
		{repo: "test-build-error", wantGo: "1.24", stoodIn: true},
		{repo: "hang", wantGo: "1.24", stoodIn: true},
		{repo: "big-output", wantGo: "1.24", stoodIn: true},
		{repo: "writes-tree", wantGo: "1.24", stoodIn: true},
		{repo: "loopback", wantGo: "1.24", stoodIn: true},
		{repo: "host-service", wantGo: "1.24", stoodIn: true},
		{repo: "missing-sum", wantGo: "1.24", stoodIn: true},
		// No go line: the host's minor serves it, as for uuid and
		// go-homedir in the fidelity corpus.
		{repo: "no-go-line", wantGo: "", stoodIn: true},
		// The maintain fixtures (testdata/README.md): all supported.
		{repo: "maintain-patch", wantGo: "1.24", stoodIn: true},
		{repo: "maintain-build-break", wantGo: "1.24", stoodIn: true},
		{repo: "maintain-test-break", wantGo: "1.24", stoodIn: true},
		{repo: "maintain-flaky", wantGo: "1.24", stoodIn: true},
		{repo: "maintain-newlang", wantGo: "1.24", stoodIn: true},
		{repo: "maintain-newer-go", wantGo: "1.24", stoodIn: true},
		{repo: "maintain-current", wantGo: "1.24", stoodIn: true},
		{repo: "maintain-each", wantGo: "1.24", stoodIn: true},
		{repo: "maintain-group", wantGo: "1.24", stoodIn: true},
		{repo: "maintain-untidy", wantGo: "1.24", stoodIn: true},
		{repo: "maintain-hang", wantGo: "1.24", stoodIn: true},
		// The scan fixtures (testdata/README.md).
		{repo: "vuln", wantGo: "1.24", stoodIn: true},
		{repo: "maintain-vuln", wantGo: "1.24", stoodIn: true},
		{repo: "old-go", wantGo: "1.16", stoodIn: true},
		// A minor the table has is served by itself.
		{repo: "go126", wantGo: "1.26"},
		{repo: "go127", wantGo: "1.27"},
		{repo: "cgo", wantGo: "1.27"},
		{repo: "cgo-broken", wantGo: "1.27"},
		{repo: "cgo-missing-header", wantGo: "1.27"},
		{repo: "cgo-zlib", wantGo: "1.26"},
		{repo: "newer-go", wantReason: ReasonGoVersion, wantPath: "go.mod"},
		{repo: "workspace", wantReason: ReasonWorkspace, wantPath: "go.work"},
		{repo: "vendored", wantReason: ReasonVendor, wantPath: "vendor"},
		{repo: "nested-module", wantReason: ReasonNestedModule, wantPath: "tools/go.mod"},
		{repo: "local-replace", wantReason: ReasonLocalReplace, wantPath: "go.mod"},
		{repo: "submodule", wantReason: ReasonSubmodule, wantPath: ".gitmodules"},
		{repo: "symlink-escape", wantReason: ReasonSymlinkEscape, wantPath: "outside"},
	}
	table := testTable(t)
	seen := make(map[string]bool)
	for _, tt := range tests {
		seen[tt.repo] = true
		t.Run(tt.repo, func(t *testing.T) {
			m, c, err := Check(filepath.Join(repos, tt.repo), table, nil)
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("Check = %v; want nil", err)
				}
				if m.Go != tt.wantGo || c.StoodIn != tt.stoodIn || m.Path != "stockade.test/repo/"+tt.repo {
					t.Errorf("Check = {Path %s, Go %q}, StoodIn %v; want {stockade.test/repo/%s, %q}, %v", m.Path, m.Go, c.StoodIn, tt.repo, tt.wantGo, tt.stoodIn)
				}
				return
			}
			var ue *UnsupportedError
			if !errors.As(err, &ue) || !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Check = %v; want *UnsupportedError", err)
			}
			if ue.Reason != tt.wantReason || ue.Path != tt.wantPath {
				t.Errorf("Check = {%s, %q}; want {%s, %q}", ue.Reason, ue.Path, tt.wantReason, tt.wantPath)
			}
		})
	}
	ents, err := os.ReadDir(repos)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !seen[e.Name()] {
			t.Errorf("fixture %s has no case here", e.Name())
		}
	}
}

// testTable is the host's Go as this machine has it (1.26.8) and the
// embedded releases (1.27.3 from the module proxy).
func testTable(t *testing.T) *imagetable.Table {
	t.Helper()
	table, err := imagetable.Default().With(imagetable.Entry{Go: "1.26.8", Source: imagetable.SourceHost})
	if err != nil {
		t.Fatal(err)
	}
	return table
}

func TestCheck_GoVersionWrapsTableError(t *testing.T) {
	_, _, err := Check(filepath.Join(repos, "newer-go"), testTable(t), nil)
	var tn *imagetable.TooNewError
	if !errors.As(err, &tn) || tn.Directive != "1.99" {
		t.Fatalf("Check(newer-go) = %v; want it to wrap *imagetable.TooNewError for 1.99", err)
	}
	if !strings.Contains(err.Error(), "available (go 1.26.8, 1.27.3)") || !strings.Contains(err.Error(), "stockade image build -go 1.99.0") {
		t.Errorf("message %q does not name the releases available and how to make one", err)
	}
}

func TestLoad_Requirements(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "go.mod", `module example.test/m

go 1.23.4

toolchain go1.26.1

require (
	example.test/a v1.2.3
	example.test/b v0.1.0 // indirect
)

require example.test/c/v2 v2.0.1

replace example.test/a => example.test/a-fork v1.2.4
`)
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Path != "example.test/m" || m.Go != "1.23.4" || m.Toolchain != "go1.26.1" {
		t.Errorf("Load = %+v", m)
	}
	want := []module.Version{mv("example.test/a", "v1.2.3"), mv("example.test/c/v2", "v2.0.1")}
	if got := m.Direct(); !reflect.DeepEqual(got, want) {
		t.Errorf("Direct() = %v; want %v", got, want)
	}
	if len(m.Requires) != 3 || !m.Requires[1].Indirect {
		t.Errorf("Requires = %+v; want 3 with the second indirect", m.Requires)
	}
}

func TestLoad_Layouts(t *testing.T) {
	const gomod = "module example.test/m\n\ngo 1.24\n"
	tests := []struct {
		name   string
		setup  func(t *testing.T, dir string)
		want   Reason // "" means accepted
		path   string
		detail string // substring of Detail
	}{
		{"plain", func(t *testing.T, dir string) {}, "", "", ""},
		{"testdata module ignored", func(t *testing.T, dir string) { write(t, dir, "testdata/x/go.mod", gomod) }, "", "", ""},
		{"underscore module ignored", func(t *testing.T, dir string) { write(t, dir, "_tools/go.mod", gomod) }, "", "", ""},
		{"dot module ignored", func(t *testing.T, dir string) { write(t, dir, ".github/go.mod", gomod) }, "", "", ""},
		{"root .git", func(t *testing.T, dir string) { write(t, dir, ".git/HEAD", "ref: x\n") }, "", "", ""},
		{"inner symlink", func(t *testing.T, dir string) {
			write(t, dir, "a/b.go", "package a\n")
			link(t, dir, "../a/b.go", "c/d.go")
		}, "", "", ""},
		{"dangling inside", func(t *testing.T, dir string) { link(t, dir, "nothing/here", "x") }, "", "", ""},
		{"deep nested module", func(t *testing.T, dir string) { write(t, dir, "a/b/go.mod", gomod) }, ReasonNestedModule, "a/b/go.mod", ""},
		{"nested go.mod symlink", func(t *testing.T, dir string) { link(t, dir, "../go.mod", "sub/go.mod") }, ReasonNestedModule, "sub/go.mod", ""},
		{"vendor file", func(t *testing.T, dir string) { write(t, dir, "vendor", "") }, ReasonVendor, "vendor", ""},
		{"go.work", func(t *testing.T, dir string) { write(t, dir, "go.work", "go 1.24\n") }, ReasonWorkspace, "go.work", ""},
		{"root .git symlink out", func(t *testing.T, dir string) { link(t, dir, "../elsewhere/.git", ".git") }, ReasonSymlinkEscape, ".git", "outside"},
		{"nested .git symlink", func(t *testing.T, dir string) { link(t, dir, "../y", "lib/x/.git") }, ReasonSubmodule, "lib/x/.git", ""},
		{"nested .git file", func(t *testing.T, dir string) { write(t, dir, "lib/x/.git", "gitdir: ../../.git/modules/x\n") }, ReasonSubmodule, "lib/x/.git", ""},
		{"absolute symlink", func(t *testing.T, dir string) { link(t, dir, "/etc/passwd", "p") }, ReasonSymlinkEscape, "p", "absolute"},
		{"parent symlink", func(t *testing.T, dir string) { link(t, dir, "..", "up") }, ReasonSymlinkEscape, "up", "outside"},
		{"deep parent symlink", func(t *testing.T, dir string) { link(t, dir, "../../../x", "a/b/c") }, ReasonSymlinkEscape, "a/b/c", "outside"},
		{"escape through self link", func(t *testing.T, dir string) {
			link(t, dir, ".", "here")
			link(t, dir, "here/../secret", "x") // looks inside, resolves above root
		}, ReasonSymlinkEscape, "x", "outside"},
		{"chain escapes", func(t *testing.T, dir string) {
			link(t, dir, "b", "a")
			link(t, dir, "../..", "b")
		}, ReasonSymlinkEscape, "a", "outside"},
		// A loop resolves nowhere: the go command skips it, as a
		// dangling link (TestLoad_SymlinkLoopAsTheGoCommand).
		{"loop", func(t *testing.T, dir string) {
			link(t, dir, "l2", "l1")
			link(t, dir, "l1", "l2")
		}, "", "", ""},
		{"self loop", func(t *testing.T, dir string) { link(t, dir, "self", "self") }, "", "", ""},
		{"loop through a directory", func(t *testing.T, dir string) {
			link(t, dir, "x", "d/x")
			link(t, dir, "x/../../../out", "d/up") // would leave, through the loop
		}, "", "", ""},
		{"fifo", func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
				t.Skip("mkfifo:", err)
			}
		}, ReasonIrregularFile, "pipe", ""},
		{"local replace", func(t *testing.T, dir string) {
			write(t, dir, "go.mod", gomod+"replace example.test/x => ./x\n")
		}, ReasonLocalReplace, "go.mod", "=> ./x"},
		{"local replace absolute", func(t *testing.T, dir string) {
			write(t, dir, "go.mod", gomod+"replace example.test/x v1.0.0 => /src/x\n")
		}, ReasonLocalReplace, "go.mod", "/src/x"},
		{"huge go.mod", func(t *testing.T, dir string) {
			write(t, dir, "go.mod", gomod+strings.Repeat("// padding\n", MaxGoModBytes/10))
		}, ReasonTooLarge, "go.mod", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "go.mod", gomod)
			tt.setup(t, dir)
			_, err := Load(dir)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Load = %v; want nil", err)
				}
				return
			}
			var ue *UnsupportedError
			if !errors.As(err, &ue) || !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Load = %v; want *UnsupportedError", err)
			}
			if ue.Reason != tt.want || ue.Path != tt.path || !strings.Contains(ue.Detail, tt.detail) {
				t.Errorf("Load = %+v; want reason %s path %q detail containing %q", ue, tt.want, tt.path, tt.detail)
			}
		})
	}
}

func TestLoad_Malformed(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  error
	}{
		{"no go.mod", func(t *testing.T, dir string) {}, ErrNoModule},
		{"syntax", func(t *testing.T, dir string) { write(t, dir, "go.mod", "module example.test/m\nrequire (\n") }, ErrMalformed},
		{"bad go line", func(t *testing.T, dir string) { write(t, dir, "go.mod", "module example.test/m\ngo one.two\n") }, ErrMalformed},
		{"bad version", func(t *testing.T, dir string) {
			write(t, dir, "go.mod", "module example.test/m\nrequire example.test/a 1.0\n")
		}, ErrMalformed},
		{"no module line", func(t *testing.T, dir string) { write(t, dir, "go.mod", "go 1.24\n") }, ErrMalformed},
		{"go.mod is a directory", func(t *testing.T, dir string) { write(t, dir, "go.mod/x", "") }, ErrMalformed},
		{"go.mod is an inner symlink", func(t *testing.T, dir string) {
			write(t, dir, "real.mod", "module example.test/m\n")
			link(t, dir, "real.mod", "go.mod")
		}, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			_, err := Load(dir)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Load = %v; want %v", err, tt.want)
			}
			if errors.Is(err, ErrUnsupported) {
				t.Errorf("Load = %v; a malformed module is not an unsupported layout", err)
			}
			var me *MalformedError
			if tt.want == ErrMalformed && (!errors.As(err, &me) || me.Path != "go.mod") {
				t.Errorf("Load = %#v; want *MalformedError for go.mod", err)
			}
		})
	}
}

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func link(t *testing.T, dir, target, name string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// TestLoad_SymlinkLoopAsTheGoCommand: a module with a symlink loop is
// accepted, as the go command builds it.
func TestLoad_SymlinkLoopAsTheGoCommand(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	dir := t.TempDir()
	write(t, dir, "go.mod", "module example.test/m\n\ngo 1.24\n")
	write(t, dir, "m.go", "package m\n")
	link(t, dir, "l2", "l1")
	link(t, dir, "l1", "l2")
	if _, err := Load(dir); err != nil {
		t.Errorf("Load = %v; want the loop accepted", err)
	}
	cmd := exec.Command("go", "build", "./...")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("go build with the loop: %v\n%s", err, out)
	}
}
