package modproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stockade/stockade/internal/hosttest"
)

// fixtures is the repository's fixture module source tree.
var fixtures = filepath.Join("..", "..", "testdata", "modules")

// snapshot returns every file under dir, keyed by slash path.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := make(map[string][]byte)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGenerate_Deterministic(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, d := range []string{a, b} {
		if err := Generate(fixtures, d); err != nil {
			t.Fatalf("Generate(%s) = %v", d, err)
		}
	}
	sa, sb := snapshot(t, a), snapshot(t, b)
	if len(sa) != len(sb) {
		t.Fatalf("generations differ in file count: %d vs %d", len(sa), len(sb))
	}
	for name, data := range sa {
		if !bytes.Equal(data, sb[name]) {
			t.Errorf("%s differs between generations", name)
		}
	}
	for _, want := range []string{
		"stockade.test/greet/@v/list",
		"stockade.test/greet/@v/v1.0.1.zip",
		"stockade.test/greet/@latest",
		"stockade.test/greet/v2/@v/v2.0.0.info",
		"stockade.test/nextgo/@v/v0.2.0.mod",
	} {
		if _, ok := sa[want]; !ok {
			t.Errorf("missing %s", want)
		}
	}
	if got, want := string(sa["stockade.test/greet/@v/list"]), "v1.0.0\nv1.0.1\nv1.1.0\n"; got != want {
		t.Errorf("greet list = %q; want %q", got, want)
	}
	if got, want := string(sa["stockade.test/greet/@latest"]), `{"Version":"v1.1.0","Time":"2026-01-03T00:00:00Z"}`+"\n"; got != want {
		t.Errorf("greet @latest = %q; want %q", got, want)
	}
}

// TestGenerate_StableHashes pins the go.sum hashes of the fixtures. The
// fixture repositories' go.sum files record these; if this fails, either the
// sources changed (update the go.sum files too) or generation stopped being
// stable.
func TestGenerate_StableHashes(t *testing.T) {
	out := t.TempDir()
	if err := Generate(fixtures, out); err != nil {
		t.Fatal(err)
	}
	mods, err := Scan(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, m := range mods {
		lines, err := GoSumLines(out, m.Version)
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString(lines)
	}
	golden := filepath.Join("testdata", "fixtures.sum")
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("go.sum lines changed (run with -update if intended):\n got:\n%s\nwant:\n%s", got.String(), want)
	}
}

func TestGenerate_RefusesNonEmptyOutput(t *testing.T) {
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Generate(fixtures, out); !errors.Is(err, ErrOutputExists) {
		t.Errorf("Generate(into non-empty dir) = %v; want ErrOutputExists", err)
	}
}

func TestScan_BadSources(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
	}{
		{"empty", map[string]string{"README": "x"}},
		{"non-canonical version", map[string]string{"ex.test/m@v1.0/go.mod": "module ex.test/m\n"}},
		{"module line mismatch", map[string]string{"ex.test/m@v1.0.0/go.mod": "module ex.test/other\n"}},
		{"missing go.mod", map[string]string{"ex.test/m@v1.0.0/m.go": "package m\n"}},
		{"major suffix mismatch", map[string]string{"ex.test/m@v2.0.0/go.mod": "module ex.test/m\n"}},
		{"at in parent", map[string]string{"ex.test/a@b/m@v1.0.0/go.mod": "module ex.test/a@b/m\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := t.TempDir()
			for name, body := range tt.files {
				p := filepath.Join(src, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := Scan(src); !errors.Is(err, ErrSource) {
				t.Errorf("Scan = %v; want ErrSource", err)
			}
		})
	}
}

// TestGenerate_GoModDownload runs the host's go command against a generated
// proxy with no network: it must download and verify every fixture version.
func TestGenerate_GoModDownload(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	if testing.Short() {
		t.Skip("runs the go command")
	}
	proxy := filepath.Join(t.TempDir(), "proxy")
	if err := Generate(fixtures, proxy); err != nil {
		t.Fatal(err)
	}
	mods, err := Scan(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	args := []string{"mod", "download", "-json"}
	for _, m := range mods {
		args = append(args, m.Path+"@"+m.Version.Version)
	}
	cmd := exec.Command(goBin, args...)
	cmd.Dir = work
	cmd.Env = goEnv(t, proxy)
	// go mod download exits non-zero because nextgo v0.2.0 needs go 1.99;
	// every other version must download, and every sum must be ours.
	out, _ := cmd.Output()
	dec := json.NewDecoder(bytes.NewReader(out))
	got := make(map[string]string)
	for {
		var r struct{ Path, Version, Error, Sum, GoModSum string }
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go mod download -json: %v\n%s", err, out)
		}
		wantErr := ""
		if r.Path == "stockade.test/nextgo" && r.Version == "v0.2.0" {
			wantErr = "requires go >= 1.99"
		}
		if (wantErr == "") != (r.Error == "") || !strings.Contains(r.Error, wantErr) {
			t.Errorf("go mod download %s@%s: error %q; want %q", r.Path, r.Version, r.Error, wantErr)
		}
		got[r.Path+"@"+r.Version] = r.Sum + " " + r.GoModSum
	}
	for _, m := range mods {
		z, err := HashZip(proxy, m.Version)
		if err != nil {
			t.Fatal(err)
		}
		h, err := HashMod(proxy, m.Version)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := got[m.Version.String()], z+" "+h; g != w {
			t.Errorf("go mod download %s sums = %q; want %q", m.Version, g, w)
		}
	}

	// The "latest" query goes through @v/list, and a version that needs a
	// newer Go fails at go get under GOTOOLCHAIN=local.
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte("module stockade.test/probe\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		arg     string
		wantErr string
	}{
		{"stockade.test/greet@latest", ""},
		{"stockade.test/nextgo@v0.2.0", "requires go >= 1.99"},
	} {
		cmd := exec.Command(goBin, "get", tt.arg)
		cmd.Dir = work
		cmd.Env = goEnv(t, proxy)
		out, err := cmd.CombinedOutput()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("go get %s: %v\n%s", tt.arg, err, out)
		case tt.wantErr != "" && (err == nil || !strings.Contains(string(out), tt.wantErr)):
			t.Errorf("go get %s = %v, %q; want failure containing %q", tt.arg, err, out, tt.wantErr)
		}
	}
}

// goEnv is an environment built from scratch for the host go command: the
// file proxy only, no checksum database, a private module cache.
func goEnv(t *testing.T, proxy string) []string {
	t.Helper()
	home := hosttest.QuietHome(t)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = t.TempDir()
	}
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"GOENV=off",
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"GOFLAGS=-mod=mod -modcacherw",
		"GOPROXY=" + fileURL(proxy),
		"GOSUMDB=off",
		"GOPRIVATE=",
		"GOMODCACHE=" + filepath.Join(home, "modcache"),
		"GOCACHE=" + filepath.Join(cache, "go-build"),
		"CGO_ENABLED=0",
	}
}

func fileURL(dir string) string {
	return "file://" + filepath.ToSlash(dir)
}

// TestFixtureRepos_GoSumMatches checks every go.sum line of the fixture
// repositories against the generated proxy, so the fixtures verify offline
// with the checksum database off and a read-only source tree.
func TestFixtureRepos_GoSumMatches(t *testing.T) {
	out := t.TempDir()
	if err := Generate(fixtures, out); err != nil {
		t.Fatal(err)
	}
	mods, err := Scan(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	valid := make(map[string]bool)
	for _, m := range mods {
		lines, err := GoSumLines(out, m.Version)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
			valid[l] = true
		}
	}
	sums, err := filepath.Glob(filepath.Join("..", "..", "testdata", "repos", "*", "go.sum"))
	if err != nil || len(sums) == 0 {
		t.Fatalf("no fixture go.sum files: %v", err)
	}
	for _, p := range sums {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if !valid[l] {
				t.Errorf("%s: %q does not match the fixture proxy", p, l)
			}
		}
	}
}

func TestGenerate_EscapesPaths(t *testing.T) {
	src := t.TempDir()
	dir := filepath.Join(src, "stockade.test", "Upper@v1.0.0-Beta.1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module stockade.test/Upper\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "p")
	if err := Generate(src, out); err != nil {
		t.Fatal(err)
	}
	got := snapshot(t, out)
	for _, want := range []string{"stockade.test/!upper/@v/v1.0.0-!beta.1.zip", "stockade.test/!upper/@v/list", "stockade.test/!upper/@latest"} {
		if _, ok := got[want]; !ok {
			t.Errorf("missing %s; have %v", want, keysOf(got))
		}
	}
	if l := string(got["stockade.test/!upper/@v/list"]); l != "v1.0.0-Beta.1\n" {
		t.Errorf("list = %q; want the unescaped version", l)
	}
}

func keysOf(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
