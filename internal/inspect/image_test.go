package inspect

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/validate"
	"github.com/stockade/stockade/internal/workflow"
)

// proxyRelease is the release the module proxy serves on our machines
// besides the host's Go.
const proxyRelease = "1.27.3"

// proxyImage builds the image of proxyRelease with the C toolchain,
// fetched into a toolchain cache the engine tests share across runs
// (internal/image's tests use the same one), so the downloads happen once
// per machine. The tests that use it share its build-cache seed too.
func proxyImage(t *testing.T, eng image.Engine) image.Result {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no cache directory: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := image.Build(ctx, eng, image.Options{GoVersion: proxyRelease, CToolchain: true, CacheDir: filepath.Join(base, "stockade-test", "toolchains")})
	if err != nil {
		t.Fatalf("building the go%s image: %v", proxyRelease, err)
	}
	t.Logf("go%s image %s in %v (loaded %v)", proxyRelease, res.ID, time.Since(start), res.Loaded)
	return res
}

// TestInspect_DirectiveMinor validates a go 1.27 module in the go1.27.3
// image the test builds, and a go 1.26 module in the host's go1.26 image
// although a go1.27.3 one is present: each test fails unless it ran on its
// own minor. (go 1.27 runs with the C toolchain, go 1.26 without, so that
// only the seeds TestInspect_Cgo and the fixtures need are built.)
func TestInspect_DirectiveMinor(t *testing.T) {
	eng, proxy, dataDir := engine(t)
	img127 := proxyImage(t, eng)
	for _, tc := range []struct {
		repo, goVersion string
		cgo             bool
	}{
		{"go127", "go" + proxyRelease, true},
		{"go126", "", false}, // the host's go1.26
	} {
		t.Run(tc.repo, func(t *testing.T) {
			dir, err := filepath.Abs(filepath.Join(repos, tc.repo))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Inspect(context.Background(), eng, Options{Options: workflow.Options{Dir: dir, FixtureProxy: proxy, DataDir: dataDir, LockTimeout: workflow.DefaultLockTimeout, Cgo: tc.cgo}})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Verdict != report.Clean || rep.Image == nil {
				t.Fatalf("verdict %s, image %+v, refusal %+v, checks %+v; want clean", rep.Verdict, rep.Image, rep.Refusal, rep.Checks)
			}
			if rep.Image.StandIn {
				t.Errorf("image %+v stands in; want the directive's own minor", rep.Image)
			}
			if tc.goVersion != "" && (rep.Image.ID != img127.ID || rep.Image.GoVersion != tc.goVersion) {
				t.Errorf("image %+v; want %s (%s)", rep.Image, img127.ID, tc.goVersion)
			}
			if tc.goVersion == "" && (rep.Image.ID == img127.ID || !strings.HasPrefix(rep.Image.GoVersion, "go1.26.")) {
				t.Errorf("image %+v; want a go1.26 image, not %s", rep.Image, img127.ID)
			}
		})
	}
}

// TestInspect_Cgo validates cgo modules in the image with the C toolchain:
// one whose C compiles is clean, one whose C does not is failing with the
// compiler's message, and one that needs a header beyond libc is failing
// with a finding of its own kind naming the header. The fixtures say go
// 1.27: the go1.27.3 image and its seed are TestInspect_DirectiveMinor's.
func TestInspect_Cgo(t *testing.T) {
	eng, proxy, dataDir := engine(t)
	img := proxyImage(t, eng)
	for _, tc := range []struct {
		repo    string
		verdict report.Verdict
		kind    string // a finding of this kind, with message
		message string
	}{
		{"cgo", report.Clean, "", ""},
		{"cgo-broken", report.Failing, "build", "expected expression before ';' token"},
		{"cgo-missing-header", report.Failing, validate.KindMissingCHeader, "sqlite3.h"},
	} {
		t.Run(tc.repo, func(t *testing.T) {
			dir, err := filepath.Abs(filepath.Join(repos, tc.repo))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			rep, err := Inspect(context.Background(), eng, Options{Options: workflow.Options{Dir: dir, FixtureProxy: proxy, DataDir: dataDir, LockTimeout: workflow.DefaultLockTimeout, Cgo: true}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("inspect %s: %v, notes %q", tc.repo, time.Since(start), rep.Notes)
			if rep.Verdict != tc.verdict || rep.Image == nil || !rep.Image.CToolchain || rep.Image.ID != img.ID {
				t.Fatalf("verdict %s, image %+v, refusal %+v, checks %+v; want %s in the C toolchain image", rep.Verdict, rep.Image, rep.Refusal, rep.Checks, tc.verdict)
			}
			if tc.kind == "" {
				return
			}
			found := false
			for _, c := range rep.Checks {
				for _, f := range c.Findings {
					t.Logf("%s: %s %s:%d %q", c.Name, f.Kind, f.File, f.Line, f.Message)
					found = found || f.Kind == tc.kind && strings.Contains(f.Message, tc.message)
				}
			}
			if !found {
				t.Errorf("no %s finding with %q in %+v", tc.kind, tc.message, rep.Checks)
			}
		})
	}
}

// TestInspect_AptPackages validates a module that includes zlib.h and
// links -lz in the host's C toolchain image: without the package the
// missing header is a finding of its own kind; with -apt-packages
// zlib1g-dev (resolved by the host's apt, composed into an image of its
// own) the module is clean and the report names the package.
func TestInspect_AptPackages(t *testing.T) {
	eng, proxy, dataDir := engine(t)
	dir, err := filepath.Abs(filepath.Join(repos, "cgo-zlib"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		apt  []string
	}{
		{"without", nil},
		{"with zlib1g-dev", []string{"zlib1g-dev"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			rep, err := Inspect(context.Background(), eng, Options{Options: workflow.Options{Dir: dir, FixtureProxy: proxy, DataDir: dataDir, LockTimeout: workflow.DefaultLockTimeout, Cgo: true, AptPackages: tc.apt}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("inspect %s: %v, image %+v, notes %q", tc.name, time.Since(start), rep.Image, rep.Notes)
			if rep.Image == nil || !rep.Image.CToolchain {
				t.Fatalf("image %+v; want the C toolchain image", rep.Image)
			}
			if tc.apt == nil {
				found := false
				for _, c := range rep.Checks {
					for _, f := range c.Findings {
						found = found || f.Kind == validate.KindMissingCHeader && strings.Contains(f.Message, "zlib.h")
					}
				}
				if rep.Verdict != report.Failing || !found || len(rep.Image.AptPackages) != 0 {
					t.Errorf("verdict %s, image %+v, checks %+v; want failing with a %s finding naming zlib.h", rep.Verdict, rep.Image, rep.Checks, validate.KindMissingCHeader)
				}
				return
			}
			if rep.Verdict != report.Clean || len(rep.Image.AptPackages) != 1 || !strings.HasPrefix(rep.Image.AptPackages[0], "zlib1g-dev=") {
				t.Errorf("verdict %s, image %+v, checks %+v; want clean in an image naming zlib1g-dev", rep.Verdict, rep.Image, rep.Checks)
			}
		})
	}
}
