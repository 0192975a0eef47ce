package validate

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/imagetable"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// fakeImages is an engine holding the images in have (by reference or
// ID) and the local images in locals; a pull adds the reference.
type fakeImages struct {
	have   map[string]string // reference -> image ID
	locals []dockerapi.ImageSummary
	pulled []string
}

func (f *fakeImages) ImageInspect(_ context.Context, ref string) (dockerapi.Image, error) {
	if id, ok := f.have[ref]; ok {
		im := dockerapi.Image{ID: id}
		im.Config.Env = []string{"PATH=/usr/local/go/bin", "GOLANG_VERSION=1.24.13"}
		return im, nil
	}
	return dockerapi.Image{}, &dockerapi.Error{StatusCode: 404, Message: "no such image"}
}

func (f *fakeImages) ImageLoad(context.Context, io.Reader) (dockerapi.LoadResult, error) {
	panic("pickImage must not build an image in this test")
}

func (f *fakeImages) ImageTag(context.Context, string, string, string) error {
	panic("pickImage must not tag an image in this test")
}

func (f *fakeImages) ImageList(context.Context, dockerapi.Filters) ([]dockerapi.ImageSummary, error) {
	return f.locals, nil
}

func (f *fakeImages) ImagePull(_ context.Context, ref string) error {
	f.pulled = append(f.pulled, ref)
	f.have[ref] = "sha256:" + strings.Repeat("b", 64)
	return nil
}

func localImage(goVersion string, hex byte) dockerapi.ImageSummary {
	return dockerapi.ImageSummary{
		ID:       "sha256:" + strings.Repeat(string(hex), 64),
		RepoTags: []string{"stockade/go:" + strings.TrimPrefix(goVersion, "go") + "-local"},
		Labels:   map[string]string{label.Managed: label.ManagedValue, label.Kind: label.KindImage, image.LabelGoVersion: goVersion, image.LabelBusybox: "sha256:bb"},
	}
}

func TestPickImage(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	const ref = "golang:1.24-bookworm@sha256:0ae225dec8ae7e6d97a664c8a6b641e82202e0dcb8b06da3ef604d817d2616b1"
	id := func(hex byte) string { return "sha256:" + strings.Repeat(string(hex), 64) }
	present := []dockerapi.ImageSummary{localImage("go1.26.8", 'a'), localImage("go1.27.3", 'c')}

	t.Run("present image of the directive's minor", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{}, locals: present}
		c, err := pickImage(ctx, eng, ImageRequest{Directive: "1.27"}, log)
		if err != nil {
			t.Fatal(err)
		}
		if c.img.ID != id('c') || c.img.GoVersion != "go1.27.3" || c.img.StandIn || c.img.Built || c.img.Ref != "stockade/go:1.27.3-local" || c.note != "" {
			t.Errorf("pickImage(go 1.27) = %+v; want the present go1.27.3 image as it is", c)
		}
	})
	t.Run("an older minor does not use the newer image", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{}, locals: present}
		c, err := pickImage(ctx, eng, ImageRequest{Directive: "1.26"}, log)
		if err != nil {
			t.Fatal(err)
		}
		if c.img.ID != id('a') || c.img.StandIn {
			t.Errorf("pickImage(go 1.26) = %+v; want the go1.26.8 image", c)
		}
	})
	t.Run("toolchain line is honoured", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{}, locals: present}
		c, err := pickImage(ctx, eng, ImageRequest{Directive: "1.26", Toolchain: "go1.27.1"}, log)
		if err != nil {
			t.Fatal(err)
		}
		if c.img.ID != id('c') {
			t.Errorf("pickImage(go 1.26, toolchain go1.27.1) = %+v; want the go1.27.3 image", c)
		}
	})
	t.Run("stand-in says so", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{}, locals: present}
		c, err := pickImage(ctx, eng, ImageRequest{Directive: "1.16"}, log)
		if err != nil {
			t.Fatal(err)
		}
		if c.img.ID != id('a') || !c.img.StandIn || !strings.Contains(c.note, "go1.26.8 stood in") {
			t.Errorf("pickImage(go 1.16) = %+v; want go1.26.8 standing in, noted", c)
		}
		// What is true: a release of go 1.16 can be had, on request.
		if strings.Contains(c.note, "could be had") || !strings.Contains(c.note, "'stockade image build -go 1.16.N'") {
			t.Errorf("note %q; want it to say how to build a go 1.16 image, not that none can be had", c.note)
		}
	})
	t.Run("a cgo image of another package set is passed over", func(t *testing.T) {
		cgoImage := func(hex byte, set string) dockerapi.ImageSummary {
			im := localImage("go1.26.8", hex)
			im.Labels[image.LabelCToolchain], im.Labels[image.LabelCPackages] = "sha256:x", set
			return im
		}
		current := image.CPackagesDigest(image.CToolchainPackages())
		// 'b' sorts first: an older set (or one from before the label)
		// must not win by order.
		eng := &fakeImages{have: map[string]string{}, locals: []dockerapi.ImageSummary{cgoImage('b', ""), cgoImage('d', "sha256:older"), cgoImage('e', current), localImage("go1.26.8", 'a')}}
		c, err := pickImage(ctx, eng, ImageRequest{Directive: "1.26", Cgo: true}, log)
		if err != nil {
			t.Fatal(err)
		}
		if c.img.ID != id('e') || !c.img.CToolchain {
			t.Errorf("pickImage(go 1.26, cgo) = %+v; want the image of the current package set", c)
		}
	})
	t.Run("an image without busybox is passed over", func(t *testing.T) {
		shellless := localImage("go1.26.8", 'b')
		delete(shellless.Labels, image.LabelBusybox)
		// 'b' sorts before 'd': it must not win by order.
		eng := &fakeImages{have: map[string]string{}, locals: []dockerapi.ImageSummary{shellless, localImage("go1.26.8", 'd')}}
		c, err := pickImage(ctx, eng, ImageRequest{Directive: "1.26"}, log)
		if err != nil {
			t.Fatal(err)
		}
		if c.img.ID != id('d') {
			t.Errorf("pickImage(go 1.26) = %+v; want the image with a busybox", c)
		}
	})
	t.Run("newer than every release names the build command", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{}, locals: present}
		_, err := pickImage(ctx, eng, ImageRequest{Directive: "1.99"}, log)
		var tn *imagetable.TooNewError
		if !errors.As(err, &tn) || !strings.Contains(err.Error(), "stockade image build -go 1.99.0") {
			t.Errorf("pickImage(go 1.99) = %v; want a *TooNewError naming 'stockade image build -go 1.99.0'", err)
		}
	})
	t.Run("explicit pinned image present", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{ref: id('d')}, locals: present}
		c, err := pickImage(ctx, eng, ImageRequest{Directive: "1.24", Image: ref}, log)
		if err != nil {
			t.Fatal(err)
		}
		if c.img.Ref != ref || c.img.ID != id('d') || c.img.Local || c.img.GoVersion != "go1.24.13" || len(eng.pulled) != 0 {
			t.Errorf("pickImage(-image) = %+v, pulls %v; want %s as it is", c, eng.pulled, ref)
		}
	})
	t.Run("explicit image pulled only with pull", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{}}
		if _, err := pickImage(ctx, eng, ImageRequest{Directive: "1.24", Image: ref}, log); !errors.Is(err, ErrNoImage) || len(eng.pulled) != 0 {
			t.Errorf("pickImage(-image, absent) = %v after pulls %v; want ErrNoImage, no pull", err, eng.pulled)
		}
		c, err := pickImage(ctx, eng, ImageRequest{Directive: "1.24", Image: ref, Pull: true}, log)
		if err != nil {
			t.Fatal(err)
		}
		if len(eng.pulled) != 1 || eng.pulled[0] != ref || !strings.Contains(c.note, "pulled "+ref) {
			t.Errorf("pickImage(-image -pull) = %+v after pulls %v; want one pull of %s, noted", c, eng.pulled, ref)
		}
	})
	t.Run("explicit image too old", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{ref: id('d')}}
		if _, err := pickImage(ctx, eng, ImageRequest{Directive: "1.26", Image: ref}, log); !errors.Is(err, imagetable.ErrTooNew) {
			t.Errorf("pickImage(go 1.26, -image go1.24.13) = %v; want ErrTooNew", err)
		}
	})
	t.Run("explicit image not pinned", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{}}
		for _, bad := range []string{"golang:1.24-bookworm", "golang@sha256:abc", "sha256:abc"} {
			if _, err := pickImage(ctx, eng, ImageRequest{Directive: "1.24", Image: bad}, log); !errors.Is(err, ErrBadImageRef) {
				t.Errorf("pickImage(-image %s) = %v; want ErrBadImageRef", bad, err)
			}
		}
	})
}

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
			rep, err := Inspect(context.Background(), eng, InspectOptions{Dir: dir, FixtureProxy: proxy, DataDir: dataDir, LockTimeout: DefaultLockTimeout, Cgo: tc.cgo})
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
		{"cgo-missing-header", report.Failing, KindMissingCHeader, "sqlite3.h"},
	} {
		t.Run(tc.repo, func(t *testing.T) {
			dir, err := filepath.Abs(filepath.Join(repos, tc.repo))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			rep, err := Inspect(context.Background(), eng, InspectOptions{Dir: dir, FixtureProxy: proxy, DataDir: dataDir, LockTimeout: DefaultLockTimeout, Cgo: true})
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
			rep, err := Inspect(context.Background(), eng, InspectOptions{Dir: dir, FixtureProxy: proxy, DataDir: dataDir, LockTimeout: DefaultLockTimeout, Cgo: true, AptPackages: tc.apt})
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
						found = found || f.Kind == KindMissingCHeader && strings.Contains(f.Message, "zlib.h")
					}
				}
				if rep.Verdict != report.Failing || !found || len(rep.Image.AptPackages) != 0 {
					t.Errorf("verdict %s, image %+v, checks %+v; want failing with a %s finding naming zlib.h", rep.Verdict, rep.Image, rep.Checks, KindMissingCHeader)
				}
				return
			}
			if rep.Verdict != report.Clean || len(rep.Image.AptPackages) != 1 || !strings.HasPrefix(rep.Image.AptPackages[0], "zlib1g-dev=") {
				t.Errorf("verdict %s, image %+v, checks %+v; want clean in an image naming zlib1g-dev", rep.Verdict, rep.Image, rep.Checks)
			}
		})
	}
}

// lockedImages is fakeImages safe for a test that changes its images
// while pickImage runs.
type lockedImages struct {
	mu sync.Mutex
	fakeImages
}

func (f *lockedImages) ImageList(ctx context.Context, fl dockerapi.Filters) ([]dockerapi.ImageSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]dockerapi.ImageSummary(nil), f.locals...), nil
}

// TestPickImage_BuildsTakeTurns: two first runs on one data directory do
// not both build the image: a run that needs one waits for the build lock
// another run holds, then finds the image that run built and builds
// nothing (the fake engine panics on a build).
func TestPickImage_BuildsTakeTurns(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	cache, err := ToolchainCache(data)
	if err != nil {
		t.Fatal(err)
	}
	held, err := LockImageBuilds(ctx, cache)
	if err != nil {
		t.Fatal(err)
	}
	eng := &lockedImages{fakeImages: fakeImages{have: map[string]string{}}}
	done := make(chan error, 1)
	var got imageChoice
	go func() {
		var err error
		got, err = pickImage(ctx, eng, ImageRequest{Table: &imagetable.Table{}, Directive: "1.26", DataDir: data}, slog.New(slog.DiscardHandler))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("pickImage returned while another run's build held the lock: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	// The other run's build ends: its image is there.
	eng.mu.Lock()
	eng.locals = []dockerapi.ImageSummary{localImage("go1.26.8", 'a')}
	eng.mu.Unlock()
	held.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got.img.ID != "sha256:"+strings.Repeat("a", 64) || got.img.Built {
		t.Errorf("pickImage = %+v; want the image the other run built, not a build of its own", got.img)
	}
}
