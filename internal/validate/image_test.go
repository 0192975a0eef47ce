package validate

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/imagetable"
	"github.com/stockade/stockade/internal/label"
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
		return dockerapi.Image{ID: id}, nil
	}
	return dockerapi.Image{}, &dockerapi.Error{StatusCode: 404, Message: "no such image"}
}

func (f *fakeImages) ImageLoad(context.Context, io.Reader) (dockerapi.LoadResult, error) {
	panic("selectImage must not build an image in this test")
}

func (f *fakeImages) ImageTag(context.Context, string, string, string) error {
	panic("selectImage must not tag an image in this test")
}

func (f *fakeImages) ImageList(context.Context, dockerapi.Filters) ([]dockerapi.ImageSummary, error) {
	return f.locals, nil
}

func (f *fakeImages) ImagePull(_ context.Context, ref string) error {
	f.pulled = append(f.pulled, ref)
	f.have[ref] = "sha256:" + strings.Repeat("b", 64)
	return nil
}

func localImage(goVersion string) dockerapi.ImageSummary {
	return dockerapi.ImageSummary{
		ID:       "sha256:" + strings.Repeat("a", 64),
		RepoTags: []string{"stockade/go:" + strings.TrimPrefix(goVersion, "go") + "-local"},
		Labels:   map[string]string{label.Managed: label.ManagedValue, label.Kind: label.KindImage, image.LabelGoVersion: goVersion},
	}
}

func TestSelectImage(t *testing.T) {
	table := imagetable.Default()
	pinned124 := ""
	for _, e := range table.Entries() {
		if e.Minor == "1.24" {
			pinned124 = e.Ref()
		}
	}
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()

	t.Run("local stands in when no pinned image is present", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{}, locals: []dockerapi.ImageSummary{localImage("go1.26.8")}}
		c, err := selectImage(ctx, eng, table, "1.24", false, log)
		if err != nil {
			t.Fatal(err)
		}
		if !c.img.Local || !c.img.StandIn || c.img.Minor != "1.26" || c.img.Ref != "stockade/go:1.26.8-local" || c.note != "" {
			t.Errorf("selectImage = %+v; want the local 1.26 image standing in, nothing built", c)
		}
		if len(eng.pulled) != 0 {
			t.Errorf("pulled %v without -pull", eng.pulled)
		}
	})
	t.Run("present pinned image of the minor wins", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{pinned124: "sha256:" + strings.Repeat("c", 64)}, locals: []dockerapi.ImageSummary{localImage("go1.26.8")}}
		c, err := selectImage(ctx, eng, table, "1.24", false, log)
		if err != nil {
			t.Fatal(err)
		}
		if c.img.Local || c.img.StandIn || c.img.Ref != pinned124 || c.img.ID != "sha256:"+strings.Repeat("c", 64) {
			t.Errorf("selectImage = %+v; want the pinned 1.24 image", c)
		}
	})
	t.Run("pull fetches the pinned image once", func(t *testing.T) {
		eng := &fakeImages{have: map[string]string{}}
		c, err := selectImage(ctx, eng, table, "1.24", true, log)
		if err != nil {
			t.Fatal(err)
		}
		if len(eng.pulled) != 1 || eng.pulled[0] != pinned124 || c.img.Ref != pinned124 || c.img.Local {
			t.Errorf("selectImage = %+v after pulls %v; want one pull of %s", c, eng.pulled, pinned124)
		}
		if !strings.Contains(c.note, "pulled") {
			t.Errorf("note %q does not say the image was pulled", c.note)
		}
	})
}
