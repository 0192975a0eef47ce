package toolchain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// A toolchain image's GOROOT, read through the engine's storage driver,
// can be far slower than the same files on the engine's own disk: on
// fuse-overlayfs every stat and read of an image file goes through a FUSE
// daemon, and the go command stats and hashes GOROOT's sources on every
// invocation. So every toolchain container mounts, read-only over the
// image's GOROOT, a named volume holding a copy of it, made once per image
// and engine (GoRoot): the engine copies the image's directory into the
// empty volume when a container first mounts it ("copy-up"), and from
// then on the files are read from the volume's directory on the engine's
// disk. The copy is the image's own files, byte for byte, at the same
// path, so the go command, its cache keys and the build-cache seed see
// the same GOROOT.
//
// The volume holds no secret and nothing of a repository's, and no
// container ever mounts it writable: it is made by copy-up in a container
// that only checks it is there, and only then published. Publishing is a
// second, empty volume, the marker, whose label names the content volume:
// labels cannot change after a create, and the engine answers a create of
// an existing name with the existing volume, so of two processes that
// filled a content volume at once, the first marker wins and the other's
// volume is removed. A content volume is used only once its marker names
// it, so a copy cut short by a crash is never mounted; the next copy of
// the same image removes it (sweepCopies).
//
// GOROOT volumes carry no owner and no data directory: like the images
// they copy, they are the engine's, shared by every run and process. A
// copy goes with its image: once the image is gone, or superseded (one of
// Stockade's images left without a tag, because a newer build took it),
// SweepGoRoots removes both, from `stockade reap` and from the run that
// publishes a copy of the newer image.

// Values of label.Role on GOROOT volumes.
const (
	RoleGoRoot       = "goroot"        // a copy of an image's GOROOT
	RoleGoRootMarker = "goroot-marker" // names the published copy
)

// goRootCopyTimeout bounds the container that copies an image's GOROOT
// into its volume and checks it: about 250 MB from the image's layers.
const goRootCopyTimeout = 5 * time.Minute

// goRootPrefix starts the names of GOROOT volumes: the marker's is the
// prefix and the image's ID digest; a copy's adds a random token.
const goRootPrefix = "stockade-goroot-"

// GoRootEngine is what GoRoot needs of the engine.
type GoRootEngine interface {
	container.Engine
	ImageInspect(ctx context.Context, ref string) (dockerapi.Image, error)
	ImageRemove(ctx context.Context, ref string, force bool) error
	VolumeCreate(ctx context.Context, v dockerapi.VolumeCreate) (dockerapi.Volume, error)
	VolumeList(ctx context.Context, filters dockerapi.Filters) ([]dockerapi.Volume, error)
	VolumeRemove(ctx context.Context, name string, force bool) error
}

// GoRoot returns the name of the volume holding a copy of toolchain image
// img's GOROOT (an image ID), making and publishing it when there is none
// yet, or "" for an image without Go (no image.LabelGoVersion). sc labels
// the container that makes the copy, as the run's. Budgets bound its
// engine calls.
func GoRoot(ctx context.Context, eng GoRootEngine, img string, sc container.Scope, b container.Budgets) (string, error) {
	info, err := eng.ImageInspect(ctx, img)
	if err != nil {
		return "", fmt.Errorf("toolchain: goroot: inspect image: %w", err)
	}
	if info.Config.Labels[image.LabelGoVersion] == "" {
		return "", nil
	}
	digest := strings.TrimPrefix(info.ID, "sha256:")
	marker := goRootPrefix + digest
	if name, ok, err := published(ctx, eng, marker, info.ID); err != nil || ok {
		return name, err
	}
	name := marker + "-" + container.RandomHex(6)
	labels := map[string]string{label.Managed: label.ManagedValue, label.Kind: label.KindImage, label.Role: RoleGoRoot, LabelGoRootImage: info.ID}
	if _, err := eng.VolumeCreate(ctx, dockerapi.VolumeCreate{Name: name, Driver: "local", Labels: labels}); err != nil {
		return "", fmt.Errorf("toolchain: goroot: create %s: %w", name, err)
	}
	keep := false
	defer func() {
		if !keep {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.OrDefaults().Remove)
			eng.VolumeRemove(rctx, name, true)
			cancel()
		}
	}()
	// The copy-up happens as the container is created (Docker) or started
	// (Podman); the command then checks the copy has the go command.
	check := []string{"ls", "-1d", image.GoRootInImage + "/bin/go", image.GoRootInImage + "/VERSION"}
	spec, err := container.ToolchainSpec(sc, container.PurposeGoRoot, img, goRootCopyTimeout, check)
	if err != nil {
		return "", fmt.Errorf("toolchain: goroot: %w", err)
	}
	spec.Env = map[string]string{"PATH": image.GoPath}
	spec.Mounts = append(spec.Mounts, container.Mount{Type: container.Volume, Source: name, Target: image.GoRootInImage, CopyUp: true})
	// Docker copies while it creates the container: the create's budget
	// is the copy's.
	cb := b.OrDefaults()
	cb.Create = max(cb.Create, goRootCopyTimeout)
	res, err := container.Run(ctx, eng, spec, container.RunOptions{
		Name: container.RandomName("tc-goroot"), Timeout: goRootCopyTimeout, OutputCap: 64 << 10, Budgets: cb,
	})
	if err != nil {
		return "", fmt.Errorf("toolchain: goroot: copy: %w", err)
	}
	if res.ExitCode != 0 || res.TimedOut || res.Truncated() {
		return "", fmt.Errorf("%w: the copy of %s's GOROOT lacks the go command (exit %d): %s", ErrGoRoot, img, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	ml := map[string]string{label.Managed: label.ManagedValue, label.Kind: label.KindImage, label.Role: RoleGoRootMarker, LabelGoRootImage: info.ID, LabelGoRootVolume: name}
	m, err := eng.VolumeCreate(ctx, dockerapi.VolumeCreate{Name: marker, Driver: "local", Labels: ml})
	if errors.Is(err, dockerapi.ErrConflict) {
		// An engine that refuses to create a name twice (Podman): the
		// marker that is there is the one that counts.
		got, ok, lerr := published(ctx, eng, marker, info.ID)
		if lerr != nil || !ok {
			return "", fmt.Errorf("toolchain: goroot: marker %s: %w", marker, errors.Join(err, lerr))
		}
		return got, nil
	}
	if err != nil {
		return "", fmt.Errorf("toolchain: goroot: marker %s: %w", marker, err)
	}
	if won := m.Labels[LabelGoRootVolume]; won != name {
		// Another process published its copy first: use that one.
		if m.Labels[label.Managed] != label.ManagedValue || m.Labels[LabelGoRootImage] != info.ID || !strings.HasPrefix(won, marker+"-") {
			return "", fmt.Errorf("%w: volume %s is not a GOROOT marker of %s", ErrGoRoot, marker, img)
		}
		return won, nil
	}
	keep = true
	sweepCopies(ctx, eng, info.ID, name, b)
	// A new image's first copy is when an older one may have been
	// superseded: sweep those too. A failure only leaves disk in use.
	SweepGoRoots(ctx, eng, b)
	return name, nil
}

// SweepGoRoots removes the GOROOT volumes (copies and markers) of images
// that are gone from the engine, and of Stockade's toolchain images that
// lost their last tag to a newer build (superseded), removing such an
// image first. Nothing in use is removed: the engine refuses to remove an
// image a container was made from, or a volume a container mounts, and
// those stay for a later sweep. Markers go before their copies, so a copy
// is never published without its content. It returns how many volumes it
// removed, and what the engine refused or failed besides "in use".
func SweepGoRoots(ctx context.Context, eng GoRootEngine, b container.Budgets) (int, error) {
	budget := b.OrDefaults().Remove
	lctx, cancel := context.WithTimeout(ctx, budget)
	vs, err := eng.VolumeList(lctx, dockerapi.Filters{"label": {label.Managed + "=" + label.ManagedValue, LabelGoRootImage}})
	cancel()
	if err != nil {
		return 0, fmt.Errorf("toolchain: goroot sweep: list volumes: %w", err)
	}
	byImage := map[string][]dockerapi.Volume{}
	for _, v := range vs {
		if r := v.Labels[label.Role]; v.Labels[label.Managed] == label.ManagedValue && (r == RoleGoRoot || r == RoleGoRootMarker) {
			byImage[v.Labels[LabelGoRootImage]] = append(byImage[v.Labels[LabelGoRootImage]], v)
		}
	}
	n := 0
	var errs []error
	for img, vols := range byImage {
		gone, err := imageGone(ctx, eng, img, budget)
		if err != nil {
			errs = append(errs, err)
		}
		if !gone {
			continue
		}
		// Markers first.
		slices.SortFunc(vols, func(a, b dockerapi.Volume) int {
			return cmp.Compare(b.Labels[label.Role], a.Labels[label.Role])
		})
		for _, v := range vols {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
			err := eng.VolumeRemove(rctx, v.Name, false)
			cancel()
			switch {
			case err == nil:
				n++
			case errors.Is(err, dockerapi.ErrNotFound), errors.Is(err, dockerapi.ErrConflict):
				// Gone already, or in use: a later sweep.
			default:
				errs = append(errs, fmt.Errorf("toolchain: goroot sweep: remove %s: %w", v.Name, err))
			}
		}
	}
	return n, errors.Join(errs...)
}

// imageGone reports whether image id is gone from the engine, removing it
// first when it is one of Stockade's toolchain images without a tag
// (superseded) and nothing uses it.
func imageGone(ctx context.Context, eng GoRootEngine, id string, budget time.Duration) (bool, error) {
	ictx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	info, err := eng.ImageInspect(ictx, id)
	if errors.Is(err, dockerapi.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("toolchain: goroot sweep: inspect %s: %w", id, err)
	}
	if len(info.RepoTags) > 0 || info.Config.Labels[label.Managed] != label.ManagedValue || info.Config.Labels[image.LabelGoVersion] == "" {
		return false, nil
	}
	switch err := eng.ImageRemove(ictx, info.ID, false); {
	case err == nil, errors.Is(err, dockerapi.ErrNotFound):
		return true, nil
	case errors.Is(err, dockerapi.ErrConflict):
		return false, nil // a container still uses it
	default:
		return false, fmt.Errorf("toolchain: goroot sweep: remove superseded image %s: %w", id, err)
	}
}

// sweepCopies removes the copies of image id's GOROOT other than the
// published one that are older than any copy still being made can be:
// what a process that died while copying left. A copy in use stays.
func sweepCopies(ctx context.Context, eng GoRootEngine, id, published string, b container.Budgets) {
	vs, err := eng.VolumeList(ctx, dockerapi.Filters{"label": {label.Role + "=" + RoleGoRoot, LabelGoRootImage + "=" + id}})
	if err != nil {
		return
	}
	for _, v := range vs {
		made, err := time.Parse(time.RFC3339, v.CreatedAt)
		if v.Name == published || v.Labels[label.Managed] != label.ManagedValue || err != nil || time.Since(made) < 2*goRootCopyTimeout {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, b.OrDefaults().Remove)
		eng.VolumeRemove(rctx, v.Name, false)
		cancel()
	}
}

// published returns the copy marker names, when marker is a GOROOT
// marker of image id whose copy is there.
func published(ctx context.Context, eng GoRootEngine, marker, id string) (string, bool, error) {
	vs, err := eng.VolumeList(ctx, dockerapi.Filters{"name": {marker}})
	if err != nil {
		return "", false, fmt.Errorf("toolchain: goroot: list volumes: %w", err)
	}
	for _, v := range vs {
		if v.Name != marker {
			continue // the name filter matches substrings
		}
		name := v.Labels[LabelGoRootVolume]
		if v.Labels[label.Managed] != label.ManagedValue || v.Labels[LabelGoRootImage] != id || !strings.HasPrefix(name, marker+"-") {
			return "", false, fmt.Errorf("%w: volume %s is not a GOROOT marker of %s", ErrGoRoot, marker, id)
		}
		cs, err := eng.VolumeList(ctx, dockerapi.Filters{"name": {name}})
		if err != nil {
			return "", false, fmt.Errorf("toolchain: goroot: list volumes: %w", err)
		}
		for _, c := range cs {
			if c.Name == name && c.Labels[label.Role] == RoleGoRoot && c.Labels[LabelGoRootImage] == id {
				return name, true, nil
			}
		}
		return "", false, fmt.Errorf("%w: marker %s names %s, which is gone", ErrGoRoot, marker, name)
	}
	return "", false, nil
}

// Labels of GOROOT volumes.
const (
	// LabelGoRootImage is the image ID whose GOROOT a copy (or marker)
	// is of.
	LabelGoRootImage = "io.stockade.goroot.image"
	// LabelGoRootVolume, on a marker, names the published copy.
	LabelGoRootVolume = "io.stockade.goroot.volume"
)

// ErrGoRoot reports a GOROOT volume that cannot be used: a copy without
// the go command, a marker that is not Stockade's or names a copy that is
// gone. Remove the volumes named (their labels say they are Stockade's)
// and run again.
var ErrGoRoot = errors.New("toolchain: goroot volume unusable")
