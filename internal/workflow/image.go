package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"

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

// ErrNoImage reports that the toolchain image a run needs is not there and
// cannot be made: an -image the engine lacks, or a build that failed.
var ErrNoImage = errors.New("workflow: no toolchain image available")

// ErrBadImageRef reports an explicit image that is neither an image ID
// ("sha256:" and 64 hex digits) nor a registry reference pinned by digest
// (name@sha256:...).
var ErrBadImageRef = errors.New("workflow: -image must be an image ID or a reference pinned by digest (name@sha256:...)")

// ImageRequest says which toolchain image a run needs. Inspect and
// maintain fill it from go.mod and the same flags, so both pick the same
// image for the same tree.
type ImageRequest struct {
	// Table lists the Go releases the module proxy serves; nil means
	// imagetable.Default(). The host's Go is added to it.
	Table *imagetable.Table
	// Directive and Toolchain are go.mod's go and toolchain lines.
	Directive, Toolchain string
	// Image, when set, is the image to use instead of choosing one: an
	// image ID, or a registry reference pinned by digest.
	Image string
	// Pull pulls Image when the engine does not have it; without Image
	// it does nothing.
	Pull bool
	// DataDir holds the releases fetched from the module proxy and the C
	// toolchain's packages (ToolchainCache); empty means DefaultDataDir().
	DataDir string
	// Cgo picks (or builds) an image with the C toolchain layer, where
	// cgo is on by default; without it, an image without (CGO_ENABLED=0).
	Cgo bool
	// AptPackages are Debian packages ("name" or "name=version") the C
	// toolchain layer carries besides its own, with what they depend on
	// (image.ResolvePackages, from the host's apt); they need Cgo.
	AptPackages []string
}

// SelectImage returns the image for req: the explicit image, or the one
// imagetable.SelectFor chooses among the images Stockade built that the
// engine has, the host's Go and the module proxy's releases. An image that
// is not there yet is built (the host's Go, or a release fetched from the
// module proxy) and noted: note, when not empty, says what was done or
// assumed on the way. A module newer than every available release is a
// *imagetable.TooNewError naming the command that builds its image. It
// never pulls, but for an explicit image with req.Pull. log nil discards.
func SelectImage(ctx context.Context, eng ImageEngine, req ImageRequest, log *slog.Logger) (img report.Image, note string, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if req.Image != "" {
		return explicitImage(ctx, eng, req, log)
	}
	table := req.Table
	if table == nil {
		table = releases(ctx, req.DataDir)
	} else {
		table, _ = withHostGo(ctx, table, log)
	}
	// An image with the C toolchain qualifies only with this Stockade's
	// package set: one built from an older list is passed over (and a new
	// one built), as it may lack what the list now carries.
	if len(req.AptPackages) > 0 && !req.Cgo {
		return report.Image{}, "", fmt.Errorf("%w: Debian packages need the C toolchain (cgo)", image.ErrAptPackage)
	}
	apt, err := image.ResolvePackages(ctx, req.AptPackages)
	if err != nil {
		return report.Image{}, "", err
	}
	set, err := image.WithPackages(apt)
	if err != nil {
		return report.Image{}, "", err
	}
	cset := image.CPackagesDigest(set)
	tags := map[string][]string{}
	// choose picks among the images the engine has and the releases.
	choose := func() (imagetable.Choice, error) {
		infos, err := image.List(ctx, eng)
		if err != nil {
			return imagetable.Choice{}, err
		}
		var locals []imagetable.Local
		for _, in := range infos {
			// An image without a shell (no busybox) cannot run the
			// workflows' steps; one built that way is passed over, and a
			// new one built.
			if in.GoVersion != "" && in.Busybox != "" && (in.CToolchain != "") == req.Cgo && (!req.Cgo || in.CPackages == cset) {
				locals = append(locals, imagetable.Local{ID: in.ID, Go: in.GoVersion})
				tags[in.ID] = in.Tags
			}
		}
		return table.SelectFor(req.Directive, req.Toolchain, locals)
	}
	c, err := choose()
	if err != nil {
		return report.Image{}, "", err
	}
	var notes []string // what was done or assumed on the way
	var cacheDir string
	built := false
	if !c.Local {
		// Always a cache: besides a release and the C toolchain, a host
		// without a static busybox has Debian's fetched into it.
		if cacheDir, err = ToolchainCache(req.DataDir); err != nil {
			return report.Image{}, "", err
		}
		// Builds on one data directory take turns (LockImageBuilds): a
		// run that waited finds the image the other built.
		lock, err := LockImageBuilds(ctx, cacheDir)
		if err != nil {
			return report.Image{}, "", err
		}
		defer lock.Unlock()
		if c, err = choose(); err != nil {
			return report.Image{}, "", err
		}
	}
	if !c.Local {
		opts := image.Options{Logger: log, CToolchain: req.Cgo, AptPackages: apt, CacheDir: cacheDir}
		from := "the host's go" + c.Go
		if c.Source == imagetable.SourceProxy {
			opts.GoVersion = c.Go
			from = "go" + c.Go + " fetched from the module proxy"
		}
		res, err := image.Build(ctx, eng, opts)
		if err != nil {
			return report.Image{}, "", fmt.Errorf("%w for go %s: building it from %s failed: %w", ErrNoImage, c.Want, from, err)
		}
		if res.GoVersion != "go"+c.Go {
			return report.Image{}, "", fmt.Errorf("%w for go %s: the build from %s holds %s", ErrNoImage, c.Want, from, res.GoVersion)
		}
		c.Image, tags[res.ID] = res.ID, res.Tags
		built = true
		notes = append(notes, fmt.Sprintf("no toolchain image for go %s was present; built %s from %s", c.Want, firstTag(res.Tags, res.ID), from))
	}
	img = report.Image{Ref: firstTag(tags[c.Image], c.Image), ID: c.Image, GoVersion: "go" + c.Go, Minor: c.Minor, Local: true, StandIn: c.StoodIn, Built: built, CToolchain: req.Cgo}
	for _, p := range apt {
		img.AptPackages = append(img.AptPackages, p.String())
	}
	if c.StoodIn {
		notes = append(notes, standInNote(c))
	}
	return img, strings.Join(notes, "; "), nil
}

// standInNote says that a newer Go validated the module, what that may
// cause, and how to have the module's own: no image of its minor is
// present, and the releases inspect builds on its own (the host's Go, the
// table's) have none; the go command can fetch any release from the module
// proxy, which 'stockade image build -go' does on request. Inspect does
// not fetch one by itself: that is a download of ~70 MiB and a build of
// minutes, and the table lists only releases tried here.
func standInNote(c imagetable.Choice) string {
	minor := c.Want
	if v := strings.SplitN(c.Want, ".", 3); len(v) >= 2 {
		minor = v[0] + "." + v[1]
	}
	return fmt.Sprintf("no image of go %s is present and none is built on demand (only the host's Go and the releases Stockade lists are): go%s stood in, and a dependency that fails to build may be failing on the newer Go, not on this module; 'stockade image build -go %s.N' builds a release of go %s from the module proxy", minor, c.Go, minor, minor)
}

// withHostGo returns table with the host's Go added (SourceHost); a host
// without a usable go command adds nothing.
func withHostGo(ctx context.Context, table *imagetable.Table, log *slog.Logger) (*imagetable.Table, error) {
	v, err := image.HostGoVersion(ctx)
	if err != nil {
		log.Warn("the host's Go cannot build an image", "err", err)
		return table, nil
	}
	t, err := table.With(imagetable.Entry{Go: v, Source: imagetable.SourceHost})
	if err != nil {
		// A development build ("devel go1.27-abcdef") is not a release.
		log.Warn("the host's Go is not a release", "go", v, "err", err)
		return table, nil
	}
	return t, nil
}

// releases returns the Go releases a workflow can use without any image
// present: the module proxy's (imagetable.Default()), those already
// fetched into dataDir's toolchain cache (by `stockade image build -go`;
// empty dataDir means DefaultDataDir()), and the host's Go. The layout
// check refuses a module newer than all of them. It reads and creates
// nothing but what exists.
func releases(ctx context.Context, dataDir string) *imagetable.Table {
	t := imagetable.Default()
	if dataDir == "" {
		dataDir, _ = DefaultDataDir()
	}
	if dataDir != "" {
		for _, v := range image.FetchedReleases(filepath.Join(dataDir, toolchain.ToolchainsDir)) {
			if more, err := t.With(imagetable.Entry{Go: v}); err == nil {
				t = more // a release also in the table is there already
			}
		}
	}
	t, _ = withHostGo(ctx, t, slog.New(slog.DiscardHandler))
	return t
}

var imageIDRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// explicitImage returns the image req.Image names, pulling it first when
// the engine lacks it and req.Pull is set. Its Go version comes from
// Stockade's label or, for golang images, GOLANG_VERSION; it must satisfy
// the module as a chosen image would.
func explicitImage(ctx context.Context, eng ImageEngine, req ImageRequest, log *slog.Logger) (report.Image, string, error) {
	ref := req.Image
	isID := imageIDRE.MatchString(ref)
	if !isID && !imagetable.IsPinnedRef(ref) {
		return report.Image{}, "", fmt.Errorf("%w: %q", ErrBadImageRef, ref)
	}
	var notes []string // what was done or assumed on the way
	im, err := eng.ImageInspect(ctx, ref)
	if errors.Is(err, dockerapi.ErrNotFound) && !isID && req.Pull {
		log.Info("pulling", "image", ref)
		if err := eng.ImagePull(ctx, ref); err != nil {
			return report.Image{}, "", fmt.Errorf("workflow: pull %s: %w", ref, err)
		}
		notes = append(notes, "pulled "+ref)
		im, err = eng.ImageInspect(ctx, ref)
	}
	if errors.Is(err, dockerapi.ErrNotFound) {
		hint := ""
		if !isID {
			hint = " (-pull pulls it)"
		}
		return report.Image{}, "", fmt.Errorf("%w: the engine has no image %s%s", ErrNoImage, ref, hint)
	}
	if err != nil {
		return report.Image{}, "", fmt.Errorf("workflow: inspect %s: %w", ref, err)
	}
	goV := imageGoVersion(im)
	if goV == "" {
		return report.Image{}, "", fmt.Errorf("%w: cannot tell the Go release in %s: no %s label, no GOLANG_VERSION", ErrNoImage, ref, image.LabelGoVersion)
	}
	c, err := (&imagetable.Table{}).SelectFor(req.Directive, req.Toolchain, []imagetable.Local{{ID: im.ID, Go: goV}})
	if err != nil {
		return report.Image{}, "", err
	}
	img := report.Image{Ref: ref, ID: im.ID, GoVersion: "go" + c.Go, Minor: c.Minor, Local: im.Config.Labels[image.LabelGoVersion] != "", StandIn: c.StoodIn,
		CToolchain: im.Config.Labels[image.LabelCToolchain] != "" || !hasEnv(im.Config.Env, "CGO_ENABLED=0")}
	if c.StoodIn {
		notes = append(notes, standInNote(c))
	}
	return img, strings.Join(notes, "; "), nil
}

// imageGoVersion returns the Go release an image holds, such as "1.24.3",
// from Stockade's label or the golang images' GOLANG_VERSION; "" when
// neither says.
func imageGoVersion(im dockerapi.Image) string {
	if v := im.Config.Labels[image.LabelGoVersion]; v != "" {
		return strings.TrimPrefix(v, "go")
	}
	for _, e := range im.Config.Env {
		if v, ok := strings.CutPrefix(e, "GOLANG_VERSION="); ok {
			return strings.TrimPrefix(v, "go")
		}
	}
	return ""
}

func hasEnv(env []string, kv string) bool {
	for _, e := range env {
		if e == kv {
			return true
		}
	}
	return false
}

func firstTag(tags []string, id string) string {
	if len(tags) > 0 {
		return tags[0]
	}
	return id
}

// LockImageBuilds takes the lock of the image builds that use the
// toolchain cache cacheDir (ToolchainCache): one build at a time fetches
// into it and loads into the engine, so two first runs on one data
// directory do not both build the same image. It waits until ctx ends;
// Unlock releases it (the kernel does, if the process dies).
func LockImageBuilds(ctx context.Context, cacheDir string) (*toolchain.Lock, error) {
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("workflow: %w", err)
	}
	// The wait for another run's build: a build takes minutes, ImageBudget
	// bounds each.
	lock, err := toolchain.LockDataDir(ctx, cacheDir, 2*ImageBudget.D, "image-build", nil)
	if err != nil {
		return nil, fmt.Errorf("workflow: waiting for another run's image build: %w", err)
	}
	return lock, nil
}

// ToolchainCache returns the directory where image builds keep what they
// fetch (image.Options.CacheDir: Go releases from the module proxy, Debian
// packages): toolchain.ToolchainsDir in dataDir (empty means
// DefaultDataDir()), which is prepared as a data directory first
// (toolchain.PrepareDataDir), so a foreign directory is refused before
// anything is written into it.
func ToolchainCache(dataDir string) (string, error) {
	dataDir, isDefault, err := DataDir(dataDir)
	if err != nil {
		return "", err
	}
	prepare := toolchain.PrepareDataDir
	if isDefault {
		prepare = toolchain.PrepareDefaultDataDir
	}
	dir, err := prepare(dataDir)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, toolchain.ToolchainsDir), nil
}
