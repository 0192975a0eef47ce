// Package image builds Stockade's toolchain images offline, from what the
// machine already has: the Go toolchain (a GOROOT), a static busybox and
// the CA certificates. What the machine lacks (another Go release, the C
// toolchain, a static busybox) is fetched at pinned versions and verified:
// Go through the module proxy, Debian packages with apt.
//
// Threat model: the images run untrusted code, so they hold nothing but
// the toolchain, a shell, the public CA certificates (so that module
// downloads over TLS verify) and two users, and default to the
// unprivileged one (65534). They are built without a registry: machines behind an air
// gap, and ours, cannot pull. Their contents are the inputs and nothing
// else (fixed times, root-owned files, normalised modes), so the same
// inputs give the same image ID on every machine, and callers pin the image
// by that ID as they would pin a registry digest.
//
// The archive is composed here and streamed to the engine's image load;
// GOROOT is never held in memory.
package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/stockade/stockade/internal/imagetable"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// GoRootInImage is where the toolchain sits in the image; its bin is on PATH.
const GoRootInImage = "/usr/local/go"

// The PATH of the images this package composes, spelled once: Path in an
// image without Go, GoPath (GOROOT's bin first) in a toolchain image. The
// image's config carries it, and every container Stockade runs in a
// toolchain image sets GoPath (GoEnv).
const (
	Path   = "/usr/local/bin:/usr/bin:/bin"
	GoPath = GoRootInImage + "/bin:" + Path
)

// GoEnv returns the environment every go command Stockade runs in a
// toolchain image starts from, built from scratch: the image's PATH, the
// image's toolchain only (GOTOOLCHAIN=local), no telemetry, no private
// modules, and /tmp (a tmpfs in every toolchain container) as home and
// temporary directory. Callers add their caches and module settings:
// internal/toolchain's Env for the profiles, internal/cacheseed for the
// seed's build.
func GoEnv() map[string]string {
	return map[string]string{
		"PATH":        GoPath,
		"GOTOOLCHAIN": "local",
		"GOTELEMETRY": "off",
		"GOPRIVATE":   "",
		"HOME":        "/tmp",
		"TMPDIR":      "/tmp",
	}
}

// DefaultBusybox is where Debian's busybox-static installs busybox.
const DefaultBusybox = "/bin/busybox"

// DefaultCABundle is where Debian's ca-certificates keeps the bundle, and
// where Go's crypto/x509 looks first on Linux; the image has it there too.
const DefaultCABundle = "/etc/ssl/certs/ca-certificates.crt"

// BaseTag is the default tag of an image built with NoGo.
const BaseTag = "stockade/base:local"

// Labels on every image Build makes, besides label.Managed and label.Kind
// (KindImage). They are part of the config, so part of the ID.
const (
	// LabelGoVersion is the Go version, such as "go1.26.8"; absent with NoGo.
	LabelGoVersion = "io.stockade.image.go-version"
	// LabelGoRoot is the sha256 of the Go layer as composed (the toolchain
	// after trimming); absent with NoGo.
	LabelGoRoot = "io.stockade.image.goroot"
	// LabelBusybox is the sha256 of the busybox binary; absent without one.
	LabelBusybox = "io.stockade.image.busybox"
	// LabelCABundle is the sha256 of the CA bundle; absent without one.
	LabelCABundle = "io.stockade.image.ca-bundle"
	// LabelProgram is the sha256 of Options.Program; absent without one.
	LabelProgram = "io.stockade.image.program"
	// LabelCToolchain is the sha256 of the C toolchain's package set (names,
	// versions and each package's SHA256); absent without one.
	LabelCToolchain = "io.stockade.image.c-toolchain"
	// LabelCPackages is CPackagesDigest of the C toolchain's package set
	// (names and versions only, so it is known without asking apt); absent
	// without one. Choosing an image compares it with the set this
	// Stockade carries, so an image of an older set is not used.
	LabelCPackages = "io.stockade.image.c-packages"
	// LabelInputs digests the inputs together with the layout version: two
	// images with the same value were built from the same things.
	LabelInputs = "io.stockade.image.inputs"
	// LabelFormat is the version of the layout Build composes.
	LabelFormat = "io.stockade.image.format"
)

// Options say what to build. The zero value builds the Go toolchain image
// from the `go` on PATH, with the host's static busybox; a host without
// one needs CacheDir (see Busybox).
type Options struct {
	// GoRoot is the host directory of a Linux Go toolchain, copied to
	// GoRootInImage. Empty means the GOROOT of the `go` command on PATH.
	// It must be empty when NoGo is set.
	GoRoot string

	// GoVersion is a Go release, such as "1.27.3", fetched through the
	// module proxy with FetchGo into CacheDir and copied like GoRoot.
	// Empty means GoRoot. It excludes GoRoot and NoGo.
	GoVersion string

	// CacheDir holds what GoVersion, CToolchain and a missing host busybox
	// (see Busybox) fetch: a module cache of its own, the Debian packages
	// and their unpacked trees. Required with GoVersion or CToolchain, and
	// on a host without a static busybox unless Busybox or NoBusybox is
	// set.
	CacheDir string

	// CToolchain adds a layer with a C toolchain (gcc, binutils, libc6-dev
	// and what they need) from Debian's packages at the exact versions of
	// CToolchainPackages, fetched with apt-get into CacheDir and checked
	// against apt's SHA256; the go command then enables cgo by default.
	// Without it the image sets CGO_ENABLED=0. It needs Go.
	CToolchain bool

	// AptPackages are Debian packages added to the C toolchain layer at
	// these exact versions (ResolvePackages makes them from names, with
	// what they depend on), fetched, checked and composed like the rest:
	// the same set gives the same image ID. The image is tagged
	// "-cgo-<12 hex of the set's digest>-local". It needs CToolchain.
	AptPackages []DebPackage

	// NoGo builds the base image only: /etc, /tmp and busybox. Tests of the
	// session sandboxes use it; it needs a busybox.
	NoGo bool

	// Program is the host path of a static Linux executable, copied to
	// ProgramDir under its base name and made the image's command: with
	// NoGo, an image that runs one program of Stockade's (the egress
	// gate's, see BuildGate). Empty means none.
	Program string

	// Busybox is the host path of a static busybox, linked as /bin/sh and
	// the other applets. Empty means DefaultBusybox if it is a static
	// executable of the toolchain's architecture; otherwise Debian's
	// busybox-static at the version BusyboxPackage pins, fetched with
	// apt-get into CacheDir and checked against apt's SHA256 like the C
	// toolchain's packages, and ErrNoBusybox when that fails. A path that
	// is not a static executable of the toolchain's architecture is an
	// error.
	Busybox string

	// NoBusybox leaves busybox out even when the host has one: the image
	// has no shell and runs argv only.
	NoBusybox bool

	// CABundle is the host path of a PEM bundle of CA certificates, copied
	// to DefaultCABundle so that TLS (the module proxy) verifies. Empty
	// means DefaultCABundle if the host has it; otherwise the image has no
	// CA certificates. A file that is not PEM certificates only, or is
	// larger than maxCABundleBytes, is an error.
	CABundle string

	// NoCABundle leaves the CA certificates out even when the host has
	// them: every TLS connection from the image then fails to verify.
	NoCABundle bool

	// Tag is the name:tag the loaded image gets. Empty means
	// "stockade/go:<version>-local" ("-cgo-local" with CToolchain), or
	// BaseTag with NoGo.
	Tag string

	// Logger receives progress (keys image, phase, dur); nil discards.
	Logger *slog.Logger
}

// Result describes a built image.
type Result struct {
	ID         string   // "sha256:<hex>", the digest of the config: pin this
	Tags       []string // name:tag the image was loaded with
	GoVersion  string   // "go1.26.8"; empty with NoGo
	Platform   string   // "linux/amd64"
	GoRoot     string   // host directory copied; empty with NoGo
	CToolchain string   // LabelCToolchain; empty without the C toolchain
	Busybox    string   // host path of the busybox copied; empty for none
	CABundle   string   // host path of the CA bundle copied; empty for none
	Inputs     string   // value of LabelInputs
	Size       int64    // bytes, as the engine counts the image
	Loaded     bool     // false when the engine already had the image
}

// Engine is what Build needs from an engine client; *dockerapi.Client
// implements it.
type Engine interface {
	ImageInspect(ctx context.Context, ref string) (dockerapi.Image, error)
	ImageLoad(ctx context.Context, r io.Reader) (dockerapi.LoadResult, error)
	// ImageTag restores a tag on an image the engine already has, which
	// is cheaper than loading it again.
	ImageTag(ctx context.Context, ref, repo, tag string) error
}

// ErrNothingToBuild reports Options with NoGo, no busybox and no Program.
var ErrNothingToBuild = errors.New("image: nothing to build: no Go, no busybox, no program")

// ErrInvalidTag reports an Options.Tag that is not a lowercase name:tag.
var ErrInvalidTag = errors.New("image: invalid tag")

// tagRE is a name:tag without a registry host: lowercase path components,
// then an explicit tag.
var tagRE = regexp.MustCompile(`^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// loadCheckTimeout bounds the inspect that confirms a load and the tag
// call, run even when ctx was cancelled after the upload ended.
const loadCheckTimeout = 30 * time.Second

// Build composes the image opts describe and loads it into eng unless eng
// already has an image with that ID. Composing reads every input file
// once to hash it; loading reads them again while streaming.
func Build(ctx context.Context, eng Engine, opts Options) (Result, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	p, err := prepare(ctx, opts)
	if err != nil {
		return Result{}, err
	}
	res := p.result()
	log.Info("composed", "image", res.ID, "phase", "compose", "dur", time.Since(start))

	img, err := eng.ImageInspect(ctx, p.id)
	switch {
	case err == nil:
		if !hasAll(img.RepoTags, p.tags) {
			if err := tagAll(ctx, eng, p.id, p.tags); err != nil {
				return Result{}, err
			}
		}
		res.Size = img.Size
		log.Info("already loaded", "image", res.ID, "phase", "inspect")
		return res, nil
	case !errors.Is(err, dockerapi.ErrNotFound):
		return Result{}, fmt.Errorf("image: inspect %s: %w", p.id, err)
	}

	start = time.Now()
	if err := load(ctx, eng, p); err != nil {
		return Result{}, err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadCheckTimeout)
	defer cancel()
	img, err = eng.ImageInspect(cctx, p.id)
	if err != nil {
		return Result{}, fmt.Errorf("image: loaded, but %s is not there: %w", p.id, err)
	}
	res.Size = img.Size
	res.Loaded = true
	log.Info("loaded", "image", res.ID, "phase", "load", "dur", time.Since(start))
	return res, nil
}

// errStoppedReading is what the archive writer sees when the engine
// stopped reading before the end.
var errStoppedReading = errors.New("image: engine stopped reading the archive")

// load streams p's archive to the engine through a pipe.
func load(ctx context.Context, eng Engine, p *plan) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := p.writeArchive(ctx, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	_, loadErr := eng.ImageLoad(ctx, pr)
	// The engine may stop reading early (an error); unblock the writer.
	pr.CloseWithError(errStoppedReading)
	writeErr := <-done
	stopped := errors.Is(writeErr, errStoppedReading) || errors.Is(writeErr, io.ErrClosedPipe)
	if writeErr != nil && !stopped {
		// The writer's failure (a changed file, a cancel) is the cause;
		// the engine's answer to a cut archive only follows from it.
		return writeErr
	}
	if loadErr != nil {
		return fmt.Errorf("image: load %s: %w", p.id, loadErr)
	}
	// The engine answered success, perhaps before reading the archive's
	// zero padding; the inspect that follows confirms the load.
	return nil
}

func tagAll(ctx context.Context, t Engine, id string, tags []string) error {
	for _, nt := range tags {
		i := strings.LastIndex(nt, ":")
		if err := t.ImageTag(ctx, id, nt[:i], nt[i+1:]); err != nil {
			return fmt.Errorf("image: tag %s as %s: %w", id, nt, err)
		}
	}
	return nil
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || dockerapi.SameRef(h, w)
		}
		if !found {
			return false
		}
	}
	return true
}

// prepare checks opts, finds the inputs and composes the image.
func prepare(ctx context.Context, opts Options) (*plan, error) {
	if opts.NoGo && opts.GoRoot != "" {
		return nil, errors.New("image: GoRoot set with NoGo")
	}
	if opts.GoVersion != "" && (opts.NoGo || opts.GoRoot != "") {
		return nil, errors.New("image: GoVersion set with GoRoot or NoGo")
	}
	if opts.CToolchain && opts.NoGo {
		return nil, errors.New("image: CToolchain set with NoGo")
	}
	if len(opts.AptPackages) > 0 && !opts.CToolchain {
		return nil, fmt.Errorf("%w: Debian packages go into the C toolchain layer, which CToolchain adds", ErrAptPackage)
	}
	if opts.NoBusybox && opts.Busybox != "" {
		return nil, errors.New("image: Busybox set with NoBusybox")
	}
	if opts.NoCABundle && opts.CABundle != "" {
		return nil, errors.New("image: CABundle set with NoCABundle")
	}
	if opts.Tag != "" && !tagRE.MatchString(opts.Tag) {
		return nil, fmt.Errorf("%w: %q: want lowercase name:tag", ErrInvalidTag, opts.Tag)
	}
	var tc *toolchain
	if !opts.NoGo {
		dir := opts.GoRoot
		var err error
		switch {
		case opts.GoVersion != "":
			if dir, err = FetchGo(ctx, opts.GoVersion, opts.CacheDir); err != nil {
				return nil, err
			}
		case dir == "":
			if dir, err = DefaultGoRoot(ctx); err != nil {
				return nil, err
			}
		}
		if tc, err = inspectGoRoot(dir); err != nil {
			return nil, err
		}
		if opts.GoVersion != "" && tc.version != "go"+strings.TrimPrefix(opts.GoVersion, "go") {
			return nil, fmt.Errorf("image: fetched go%s, but %s holds %s", strings.TrimPrefix(opts.GoVersion, "go"), dir, tc.version)
		}
	}
	goarch := ""
	if tc != nil {
		goarch = tc.goarch
	}
	bb, err := findBusybox(ctx, opts, goarch)
	if err != nil {
		return nil, err
	}
	ca, err := findCABundle(opts)
	if err != nil {
		return nil, err
	}
	var c *cToolchain
	if opts.CToolchain {
		pkgs, err := WithPackages(opts.AptPackages)
		if err != nil {
			return nil, err
		}
		if c, err = prepareC(ctx, pkgs, tc.goarch, opts.CacheDir); err != nil {
			return nil, err
		}
	}
	var prog *staticExe
	if opts.Program != "" {
		if prog, err = inspectStatic(opts.Program); err != nil {
			return nil, fmt.Errorf("image: program: %w", err)
		}
		if bb != nil && prog.arch != bb.arch || tc != nil && prog.arch != tc.goarch {
			return nil, fmt.Errorf("image: program %s is %s, the rest of the image is not", opts.Program, prog.arch)
		}
	}
	if tc == nil && bb == nil && prog == nil {
		return nil, ErrNothingToBuild
	}
	tag := opts.Tag
	if tag == "" {
		tag = BaseTag
		if tc != nil {
			tag = goTag(tc.version)
		}
		switch {
		case c != nil && len(opts.AptPackages) > 0:
			tag = strings.TrimSuffix(tag, "-local") + "-cgo-" + strings.TrimPrefix(CPackagesDigest(c.pkgs), "sha256:")[:12] + "-local"
		case c != nil:
			tag = strings.TrimSuffix(tag, "-local") + "-cgo-local"
		}
	}
	return compose(ctx, tc, c, bb, ca, prog, tag)
}

// findCABundle returns the CA bundle opts ask for, or nil for none.
func findCABundle(opts Options) (*caBundle, error) {
	if opts.NoCABundle {
		return nil, nil
	}
	name := opts.CABundle
	if name == "" {
		if _, err := os.Stat(DefaultCABundle); err != nil {
			return nil, nil
		}
		name = DefaultCABundle
	}
	ca, err := readCABundle(name)
	if err != nil {
		// Unlike a dynamic busybox, a host bundle that is not one is a
		// surprise worth stopping for; NoCABundle is the way out.
		return nil, fmt.Errorf("image: CA bundle: %w", err)
	}
	return ca, nil
}

// goTag returns the default tag for a Go version: "go1.26.8" gives
// "stockade/go:1.26.8-local". A development version is reduced to the tag
// alphabet.
func goTag(version string) string {
	t := strings.TrimPrefix(version, "go")
	b := []byte(t)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '-'
		}
	}
	t = strings.Trim(string(b), ".-")
	if len(t) > 100 {
		t = t[:100]
	}
	if t == "" {
		t = "unknown"
	}
	return "stockade/go:" + t + "-local"
}

func (p *plan) result() Result {
	r := Result{ID: p.id, Tags: p.tags, Busybox: p.busybox, CABundle: p.caPath, Inputs: p.inputs, Platform: "linux/" + p.arch}
	if p.tc != nil {
		r.GoVersion, r.GoRoot = p.tc.version, p.tc.dir
	}
	if p.c != nil {
		r.CToolchain = p.c.digest
	}
	return r
}

// Info is one image in List.
type Info struct {
	ID        string   // "sha256:<hex>"
	Tags      []string // sorted
	GoVersion string   // "go1.26.8"; empty for a base image
	Inputs    string   // LabelInputs; empty for a pinned image
	// CToolchain is LabelCToolchain: empty for an image without the C
	// toolchain.
	CToolchain string
	// CPackages is LabelCPackages: empty without the C toolchain, and for
	// images built before the label existed.
	CPackages string
	// Busybox is LabelBusybox: empty for an image without a shell
	// (NoBusybox, or built on a host without busybox before Build fetched
	// Debian's).
	Busybox string
	// Pinned is the registry reference (name@digest) of an image
	// Stockade uses but did not build; empty for images Build made.
	Pinned string
	Size   int64 // bytes
}

// Lister is what List needs from an engine client; *dockerapi.Client
// implements it.
type Lister interface {
	ImageList(ctx context.Context, filters dockerapi.Filters) ([]dockerapi.ImageSummary, error)
}

// List returns the images Build made (label.Kind=KindImage) that the
// engine has, sorted by Go version, then ID.
func List(ctx context.Context, eng Lister) ([]Info, error) {
	imgs, err := eng.ImageList(ctx, dockerapi.LabelFilter(label.Managed+"="+label.ManagedValue, label.Kind+"="+label.KindImage))
	if err != nil {
		return nil, fmt.Errorf("image: list: %w", err)
	}
	out := make([]Info, 0, len(imgs))
	for _, im := range imgs {
		out = append(out, Info{ID: im.ID, Tags: cleanTags(im.RepoTags), GoVersion: im.Labels[LabelGoVersion], Inputs: im.Labels[LabelInputs], CToolchain: im.Labels[LabelCToolchain], CPackages: im.Labels[LabelCPackages], Busybox: im.Labels[LabelBusybox], Size: im.Size})
	}
	sortInfos(out)
	return out, nil
}

// Inspector is what ListPinned needs from an engine client;
// *dockerapi.Client implements it.
type Inspector interface {
	ImageInspect(ctx context.Context, ref string) (dockerapi.Image, error)
}

// ListPinned returns the registry images of table (named by digest, such
// as those given to inspect -image) that the engine has, with Pinned set,
// sorted like List. imagetable.Default() names none: no registry digest
// could be verified here.
func ListPinned(ctx context.Context, eng Inspector, table *imagetable.Table) ([]Info, error) {
	var out []Info
	for _, e := range table.Entries() {
		if e.Ref == "" {
			continue // built here, listed by List
		}
		im, err := eng.ImageInspect(ctx, e.Ref)
		if errors.Is(err, dockerapi.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("image: inspect %s: %w", e.Ref, err)
		}
		out = append(out, Info{ID: im.ID, Tags: cleanTags(im.RepoTags), GoVersion: "go" + e.Go, Pinned: e.Ref, Size: im.Size})
	}
	sortInfos(out)
	return out, nil
}

func sortInfos(infos []Info) {
	sort.Slice(infos, func(i, j int) bool {
		if infos[i].GoVersion != infos[j].GoVersion {
			return infos[i].GoVersion < infos[j].GoVersion
		}
		return infos[i].ID < infos[j].ID
	})
}

// cleanTags drops the engine's "<none>:<none>", spells each tag as
// dockerapi.ShortRef does (one spelling on every engine), and sorts.
func cleanTags(tags []string) []string {
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		if t != "<none>:<none>" {
			out = append(out, dockerapi.ShortRef(t))
		}
	}
	sort.Strings(out)
	return out
}

// WriteArchive composes the image opts describe and writes it to w as a
// docker-archive (what `docker save` writes and `docker load`, Podman and
// `ctr images import` read) instead of loading it into an engine: the way
// to hand the same image to an engine Stockade has no client for (the
// Kubernetes node's containerd). The Result has no Size and Loaded is
// false. Opts.Logger is not used.
func WriteArchive(ctx context.Context, opts Options, w io.Writer) (Result, error) {
	p, err := prepare(ctx, opts)
	if err != nil {
		return Result{}, err
	}
	if err := p.writeArchive(ctx, w); err != nil {
		return Result{}, err
	}
	return p.result(), nil
}
