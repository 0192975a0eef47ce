package validate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/imagetable"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// ImageEngine is what image selection needs from the engine.
type ImageEngine interface {
	image.Engine
	image.Lister
	ImagePull(ctx context.Context, ref string) error
}

// ErrNoImage reports that no toolchain image for the module is present,
// none may be pulled, and the host's Go cannot build one that fits.
var ErrNoImage = errors.New("validate: no toolchain image available")

// imageChoice is the image a run uses and what inspect did to get it.
type imageChoice struct {
	img  report.Image
	note string // set when inspect pulled or built the image
}

// selectImage picks the image for directive among the images present in
// the engine: the table's pinned images the engine has, and local images
// from `stockade image build`. When none fits, it pulls the pinned image
// (only with pull) or builds the local image from the host's Go. It never
// pulls otherwise.
func selectImage(ctx context.Context, eng ImageEngine, table *imagetable.Table, directive string, pull bool, log *slog.Logger) (imageChoice, error) {
	choose := func() (imagetable.Choice, map[string]image.Info, error) {
		present, err := presentTable(ctx, eng, table)
		if err != nil {
			return imagetable.Choice{}, nil, err
		}
		infos, err := image.List(ctx, eng)
		if err != nil {
			return imagetable.Choice{}, nil, err
		}
		var locals []imagetable.Local
		byID := map[string]image.Info{}
		for _, in := range infos {
			if in.GoVersion != "" {
				locals = append(locals, imagetable.Local{ID: in.ID, Go: in.GoVersion})
				byID[in.ID] = in
			}
		}
		if len(present.Entries()) == 0 && len(locals) == 0 {
			return imagetable.Choice{}, byID, imagetable.ErrTooNew // nothing present fits
		}
		c, err := present.Select(directive, locals)
		return c, byID, err
	}

	c, locals, err := choose()
	var note string
	if errors.Is(err, imagetable.ErrTooNew) {
		// Nothing present fits. The full table says what would.
		want, terr := table.Select(directive, nil)
		switch {
		case terr == nil && pull:
			log.Info("pulling", "image", want.Image)
			if err := eng.ImagePull(ctx, want.Image); err != nil {
				return imageChoice{}, fmt.Errorf("validate: pull %s: %w", want.Image, err)
			}
			note = "pulled " + want.Image
		default:
			res, berr := image.Build(ctx, eng, image.Options{Logger: log})
			if berr != nil {
				return imageChoice{}, fmt.Errorf("%w for go %s: building one from the host's Go failed: %v (run 'stockade image build', or -pull)", ErrNoImage, directive, berr)
			}
			if ok, _ := imagetable.Fits(directive, res.GoVersion); !ok {
				return imageChoice{}, fmt.Errorf("%w for go %s: the host's %s is too old (use -pull)", ErrNoImage, directive, res.GoVersion)
			}
			note = fmt.Sprintf("no toolchain image for go %s was present; built %s from the host's %s", directive, firstTag(res.Tags, res.ID), res.GoVersion)
		}
		c, locals, err = choose()
	}
	if err != nil {
		return imageChoice{}, err
	}
	img := report.Image{Ref: c.Image, ID: c.Image, GoVersion: "go" + c.Go, Minor: c.Minor, Local: c.Local, StandIn: c.StoodIn}
	if c.Local {
		img.Ref = firstTag(locals[c.Image].Tags, c.Image)
		img.Built = note != "" && !pull
	} else {
		in, err := eng.ImageInspect(ctx, c.Image)
		if err != nil {
			return imageChoice{}, fmt.Errorf("validate: inspect %s: %w", c.Image, err)
		}
		img.ID = in.ID
	}
	return imageChoice{img: img, note: note}, nil
}

func firstTag(tags []string, id string) string {
	if len(tags) > 0 {
		return tags[0]
	}
	return id
}

// presentTable returns the entries of table whose pinned image the engine
// has, as a table. With none, it is the zero Table, which selects among
// local images only.
func presentTable(ctx context.Context, eng ImageEngine, table *imagetable.Table) (*imagetable.Table, error) {
	var present []imagetable.Entry
	for _, e := range table.Entries() {
		_, err := eng.ImageInspect(ctx, e.Ref())
		switch {
		case err == nil:
			present = append(present, e)
		case errors.Is(err, dockerapi.ErrNotFound):
		default:
			return nil, fmt.Errorf("validate: inspect %s: %w", e.Ref(), err)
		}
	}
	if len(present) == 0 {
		return &imagetable.Table{}, nil
	}
	b, err := json.Marshal(map[string]any{"images": present})
	if err != nil {
		return nil, err
	}
	return imagetable.Parse(b)
}

// ToolchainCache returns the directory where Go releases fetched through
// the module proxy are kept: toolchains/ in dataDir (empty means
// DefaultDataDir()), which is prepared as a data directory first
// (toolchain.PrepareDataDir), so a foreign directory is refused before
// anything is written into it.
func ToolchainCache(dataDir string) (string, error) {
	var dir string
	var err error
	if dataDir == "" {
		if dataDir, err = DefaultDataDir(); err != nil {
			return "", err
		}
		dir, err = toolchain.PrepareDefaultDataDir(dataDir)
	} else {
		dir, err = toolchain.PrepareDataDir(dataDir)
	}
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "toolchains"), nil
}
