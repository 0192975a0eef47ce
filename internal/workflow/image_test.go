package workflow

import (
	"context"
	"errors"
	"io"
	"log/slog"
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
	panic("SelectImage must not build an image in this test")
}

func (f *fakeImages) ImageTag(context.Context, string, string, string) error {
	panic("SelectImage must not tag an image in this test")
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

func TestSelectImage(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	const ref = "golang:1.24-bookworm@sha256:0ae225dec8ae7e6d97a664c8a6b641e82202e0dcb8b06da3ef604d817d2616b1"
	id := func(hex byte) string { return "sha256:" + strings.Repeat(string(hex), 64) }
	present := []dockerapi.ImageSummary{localImage("go1.26.8", 'a'), localImage("go1.27.3", 'c')}

	t.Run("present image of the directive's minor", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{}, locals: present}
		img, note, err := SelectImage(ctx, eng, ImageRequest{Directive: "1.27"}, log)
		if err != nil {
			t.Fatal(err)
		}
		if img.ID != id('c') || img.GoVersion != "go1.27.3" || img.StandIn || img.Built || img.Ref != "stockade/go:1.27.3-local" || note != "" {
			t.Errorf("SelectImage(go 1.27) = %+v, %q; want the present go1.27.3 image as it is", img, note)
		}
	})
	t.Run("an older minor does not use the newer image", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{}, locals: present}
		img, note, err := SelectImage(ctx, eng, ImageRequest{Directive: "1.26"}, log)
		if err != nil {
			t.Fatal(err)
		}
		if img.ID != id('a') || img.StandIn {
			t.Errorf("SelectImage(go 1.26) = %+v, %q; want the go1.26.8 image", img, note)
		}
	})
	t.Run("toolchain line is honoured", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{}, locals: present}
		img, note, err := SelectImage(ctx, eng, ImageRequest{Directive: "1.26", Toolchain: "go1.27.1"}, log)
		if err != nil {
			t.Fatal(err)
		}
		if img.ID != id('c') {
			t.Errorf("SelectImage(go 1.26, toolchain go1.27.1) = %+v, %q; want the go1.27.3 image", img, note)
		}
	})
	t.Run("stand-in says so", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{}, locals: present}
		img, note, err := SelectImage(ctx, eng, ImageRequest{Directive: "1.16"}, log)
		if err != nil {
			t.Fatal(err)
		}
		if img.ID != id('a') || !img.StandIn || !strings.Contains(note, "go1.26.8 stood in") {
			t.Errorf("SelectImage(go 1.16) = %+v, %q; want go1.26.8 standing in, noted", img, note)
		}
		// What is true: a release of go 1.16 can be had, on request.
		if strings.Contains(note, "could be had") || !strings.Contains(note, "'stockade image build -go 1.16.N'") {
			t.Errorf("note %q; want it to say how to build a go 1.16 image, not that none can be had", note)
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
		img, note, err := SelectImage(ctx, eng, ImageRequest{Directive: "1.26", Cgo: true}, log)
		if err != nil {
			t.Fatal(err)
		}
		if img.ID != id('e') || !img.CToolchain {
			t.Errorf("SelectImage(go 1.26, cgo) = %+v, %q; want the image of the current package set", img, note)
		}
	})
	t.Run("an image without busybox is passed over", func(t *testing.T) {
		shellless := localImage("go1.26.8", 'b')
		delete(shellless.Labels, image.LabelBusybox)
		// 'b' sorts before 'd': it must not win by order.
		eng := &fakeImages{have: map[string]string{}, locals: []dockerapi.ImageSummary{shellless, localImage("go1.26.8", 'd')}}
		img, note, err := SelectImage(ctx, eng, ImageRequest{Directive: "1.26"}, log)
		if err != nil {
			t.Fatal(err)
		}
		if img.ID != id('d') {
			t.Errorf("SelectImage(go 1.26) = %+v, %q; want the image with a busybox", img, note)
		}
	})
	t.Run("newer than every release names the build command", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{}, locals: present}
		_, _, err := SelectImage(ctx, eng, ImageRequest{Directive: "1.99"}, log)
		var tn *imagetable.TooNewError
		if !errors.As(err, &tn) || !strings.Contains(err.Error(), "stockade image build -go 1.99.0") {
			t.Errorf("SelectImage(go 1.99) = %v; want a *TooNewError naming 'stockade image build -go 1.99.0'", err)
		}
	})
	t.Run("explicit pinned image present", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{ref: id('d')}, locals: present}
		img, note, err := SelectImage(ctx, eng, ImageRequest{Directive: "1.24", Image: ref}, log)
		if err != nil {
			t.Fatal(err)
		}
		if img.Ref != ref || img.ID != id('d') || img.Local || img.GoVersion != "go1.24.13" || len(eng.pulled) != 0 {
			t.Errorf("SelectImage(-image) = %+v, %q, pulls %v; want %s as it is", img, note, eng.pulled, ref)
		}
	})
	t.Run("explicit image pulled only with pull", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{}}
		if _, _, err := SelectImage(ctx, eng, ImageRequest{Directive: "1.24", Image: ref}, log); !errors.Is(err, ErrNoImage) || len(eng.pulled) != 0 {
			t.Errorf("SelectImage(-image, absent) = %v after pulls %v; want ErrNoImage, no pull", err, eng.pulled)
		}
		img, note, err := SelectImage(ctx, eng, ImageRequest{Directive: "1.24", Image: ref, Pull: true}, log)
		if err != nil {
			t.Fatal(err)
		}
		if len(eng.pulled) != 1 || eng.pulled[0] != ref || !strings.Contains(note, "pulled "+ref) {
			t.Errorf("SelectImage(-image -pull) = %+v, %q after pulls %v; want one pull of %s, noted", img, note, eng.pulled, ref)
		}
	})
	t.Run("explicit image too old", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{ref: id('d')}}
		if _, _, err := SelectImage(ctx, eng, ImageRequest{Directive: "1.26", Image: ref}, log); !errors.Is(err, imagetable.ErrTooNew) {
			t.Errorf("SelectImage(go 1.26, -image go1.24.13) = %v; want ErrTooNew", err)
		}
	})
	t.Run("explicit image not pinned", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{}}
		for _, bad := range []string{"golang:1.24-bookworm", "golang@sha256:abc", "sha256:abc"} {
			if _, _, err := SelectImage(ctx, eng, ImageRequest{Directive: "1.24", Image: bad}, log); !errors.Is(err, ErrBadImageRef) {
				t.Errorf("SelectImage(-image %s) = %v; want ErrBadImageRef", bad, err)
			}
		}
	})
}

// lockedImages is fakeImages safe for a test that changes its images
// while SelectImage runs.
type lockedImages struct {
	mu sync.Mutex
	fakeImages
}

func (f *lockedImages) ImageList(ctx context.Context, fl dockerapi.Filters) ([]dockerapi.ImageSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]dockerapi.ImageSummary(nil), f.locals...), nil
}

// TestSelectImage_BuildsTakeTurns: two first runs on one data directory do
// not both build the image: a run that needs one waits for the build lock
// another run holds, then finds the image that run built and builds
// nothing (the fake engine panics on a build).
func TestSelectImage_BuildsTakeTurns(t *testing.T) {
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
	var got report.Image
	go func() {
		var err error
		got, _, err = SelectImage(ctx, eng, ImageRequest{Table: &imagetable.Table{}, Directive: "1.26", DataDir: data}, slog.New(slog.DiscardHandler))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("SelectImage returned while another run's build held the lock: %v", err)
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
	if got.ID != "sha256:"+strings.Repeat("a", 64) || got.Built {
		t.Errorf("SelectImage = %+v; want the image the other run built, not a build of its own", got)
	}
}
