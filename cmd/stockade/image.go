package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/imagetable"
	"github.com/stockade/stockade/internal/workflow"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// imageBuildTimeout bounds `image build`: composing and uploading a GOROOT
// takes seconds on a local engine; a VM-backed one over a slow disk more.
const imageBuildTimeout = 10 * time.Minute

// imageListTimeout bounds `image list`.
const imageListTimeout = time.Minute

func init() {
	register(&command{
		name:    "image",
		summary: "build the offline Go toolchain image, list Stockade's images",
		usage: `usage: stockade image build [-goroot DIR | -go RELEASE] [-cgo=false] [-data-dir DIR] [-busybox PATH | -no-busybox] [-ca-bundle PATH | -no-ca-bundle] [-base | -gate] [-tag NAME:TAG] [-json] [-v]
       stockade image list [-json]

Build makes a Go toolchain image from what this machine has, without a
registry: the Go toolchain (the GOROOT of the go command on PATH, or
-goroot) at /usr/local/go, a static busybox for /bin/sh, tar and timeout
when the host has one (Debian's busybox-static, /bin/busybox), the host's
CA certificates (/etc/ssl/certs/ca-certificates.crt, or -ca-bundle) so that
the module proxy's TLS verifies, /etc/passwd with the unprivileged user
nobody (65534), and a world-writable sticky /tmp.
The image runs as 65534 by default and has GOTOOLCHAIN=local.

-go RELEASE (such as 1.27.3) builds the image of that Go release instead:
the host's go command fetches it from the module proxy the way it fetches
a toolchain when GOTOOLCHAIN names one (golang.org/toolchain, verified
against the checksum database), into a module cache of its own under the
data directory (-data-dir, default $XDG_CACHE_HOME/stockade). A release
already fetched is not downloaded again.

The image also carries a C toolchain (gcc, binutils, libc6-dev and what
they need: Debian bookworm packages at the exact versions Stockade lists),
so the go command enables cgo by default, as on a developer's machine with a
C compiler. The packages are fetched with apt-get download into the data
directory, checked against the SHA256 of apt's signed metadata, and
unpacked with dpkg-deb into one layer; the same versions give the same
image ID. -cgo=false builds the smaller image without it (CGO_ENABLED=0),
tagged without "-cgo".

The same inputs always give the same image ID (sha256:...), on any machine:
refer to the image by that ID. Build prints it, tags the image
stockade/go:<version>-local (stockade/base:local with -base), and does not
upload anything when the engine already has the image.

-gate builds the egress gate's image instead (cmd/stockade-gate compiled
with the host's go command over the base layer, tagged stockade/gate:local),
as the Docker backend does on first use; with -o it is the archive
scripts/kube-up imports into the Kubernetes node.

List shows the images Stockade built, with their Go version, whether they
carry the C toolchain, and the digest of the inputs they were built from.

The engine is found like the docker CLI finds it: DOCKER_HOST, else the
usual socket paths.

Examples:

	stockade image build
	stockade image build -goroot ~/sdk/go1.26.8 -json
	stockade image build -go 1.27.3
	stockade image build -cgo=false
	stockade image build -base
	stockade image build -gate -o gate.tar
	stockade image list`,
		flags: imageFlags,
	})
}

// imageOpts are the flags of both subcommands; list takes only -json.
type imageOpts struct {
	goroot, busybox, tag string
	goRelease, dataDir   string
	cgo                  bool
	caBundle             string
	noBusybox, base      bool
	gate                 bool // -gate: the egress gate's image
	noCABundle           bool
	json, verbose        bool
	out                  string // -o: write the archive here instead of loading
}

func imageFlags(fs *flag.FlagSet) func(ctx context.Context, env *cmdEnv, args []string) error {
	var o imageOpts
	fs.StringVar(&o.goroot, "goroot", "", "Go toolchain `DIR` to copy (default: go env GOROOT)")
	fs.StringVar(&o.goRelease, "go", "", "Go `RELEASE` to fetch through the module proxy, such as 1.27.3 (default: the host's Go)")
	fs.StringVar(&o.dataDir, "data-dir", "", "`DIR` whose toolchains/ keeps what -go, -cgo and a missing busybox fetch: new, empty or one Stockade marked; default $XDG_CACHE_HOME/stockade")
	fs.BoolVar(&o.cgo, "cgo", true, "add the C toolchain layer (cgo on); -cgo=false: no C compiler, CGO_ENABLED=0")
	fs.StringVar(&o.busybox, "busybox", "", "static busybox `PATH` (default: "+image.DefaultBusybox+" when it is static, else Debian's busybox-static "+image.BusyboxPackage().Version+" fetched with apt)")
	fs.BoolVar(&o.noBusybox, "no-busybox", false, "leave busybox out: the image runs argv only")
	fs.StringVar(&o.caBundle, "ca-bundle", "", "PEM CA certificates `PATH` (default: "+image.DefaultCABundle+" when it exists)")
	fs.BoolVar(&o.noCABundle, "no-ca-bundle", false, "leave the CA certificates out: TLS from the image fails to verify")
	fs.BoolVar(&o.base, "base", false, "build the base image only: busybox, /etc, /tmp, no Go")
	fs.BoolVar(&o.gate, "gate", false, "build the egress gate's image (cmd/stockade-gate over the base layer) instead of a toolchain image")
	fs.StringVar(&o.tag, "tag", "", "tag the image `NAME:TAG` (default: stockade/go:<version>-local)")
	fs.StringVar(&o.out, "o", "", "write the image as a docker-archive to `FILE` instead of loading it into the engine (for `ctr images import`)")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	fs.BoolVar(&o.verbose, "v", false, "log progress to standard error")
	return func(ctx context.Context, env *cmdEnv, args []string) error {
		if len(args) == 0 {
			return usagef("image", "stockade image: want a subcommand: build or list")
		}
		sub := args[0]
		// Flags may follow the subcommand; the same set parses them.
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return &exitError{code: exitUnsupported} // the flag package said why
		}
		if fs.NArg() > 0 {
			return usagef("image", "stockade image %s: unexpected arguments %q", sub, fs.Args())
		}
		switch sub {
		case "build":
			return imageBuild(ctx, env, o)
		case "list":
			var bad []string
			fs.Visit(func(f *flag.Flag) {
				if f.Name != "json" {
					bad = append(bad, "-"+f.Name)
				}
			})
			if len(bad) > 0 {
				return usagef("image", "stockade image list: %s apply to build only", strings.Join(bad, ", "))
			}
			return imageList(ctx, env, o)
		default:
			return usagef("image", "stockade image: unknown subcommand %q: want build or list", sub)
		}
	}
}

// buildOutput is the -json form of a build.
type buildOutput struct {
	ID         string   `json:"id"`
	Tags       []string `json:"tags"`
	GoVersion  string   `json:"go_version,omitempty"`
	Platform   string   `json:"platform"`
	GoRoot     string   `json:"goroot,omitempty"`
	CToolchain string   `json:"c_toolchain,omitempty"`
	Busybox    string   `json:"busybox,omitempty"`
	CABundle   string   `json:"ca_bundle,omitempty"`
	Inputs     string   `json:"inputs"`
	SizeBytes  int64    `json:"size_bytes"`
	Loaded     bool     `json:"loaded"`
	Seconds    float64  `json:"seconds"`
}

func imageBuild(ctx context.Context, env *cmdEnv, o imageOpts) error {
	if o.base && o.goroot != "" {
		return usagef("image", "stockade image build: -goroot and -base exclude each other")
	}
	if o.gate && (o.base || o.goroot != "" || o.goRelease != "") {
		return usagef("image", "stockade image build: -gate excludes -base, -goroot and -go")
	}
	if o.gate {
		o.cgo = false // the gate image has no Go
	}
	if o.goRelease != "" && (o.base || o.goroot != "") {
		return usagef("image", "stockade image build: -go excludes -goroot and -base")
	}
	if o.base {
		o.cgo = false // the base image has no Go to use it
	}
	if o.goRelease != "" {
		if _, err := image.CleanRelease(o.goRelease); err != nil {
			return usagef("image", "stockade image build: -go: %v", err)
		}
	}
	if o.noBusybox && o.busybox != "" {
		return usagef("image", "stockade image build: -busybox and -no-busybox exclude each other")
	}
	if o.noCABundle && o.caBundle != "" {
		return usagef("image", "stockade image build: -ca-bundle and -no-ca-bundle exclude each other")
	}
	ctx, cancel := context.WithTimeout(ctx, imageBuildTimeout)
	defer cancel()
	var cacheDir string
	var err error
	// A host without a static busybox has Debian's fetched into the cache
	// too, unless one is given or none wanted.
	if o.goRelease != "" || o.cgo || o.busybox == "" && !o.noBusybox {
		if cacheDir, err = workflow.ToolchainCache(o.dataDir); err != nil {
			return err
		}
		// As inspect's builds: one at a time per data directory.
		lock, err := workflow.LockImageBuilds(ctx, cacheDir)
		if err != nil {
			return err
		}
		defer lock.Unlock()
	}
	opts := image.Options{GoRoot: o.goroot, GoVersion: o.goRelease, CacheDir: cacheDir, CToolchain: o.cgo, NoGo: o.base, Busybox: o.busybox, NoBusybox: o.noBusybox, CABundle: o.caBundle, NoCABundle: o.noCABundle, Tag: o.tag}
	if o.verbose {
		opts.Logger = slog.New(slog.NewTextHandler(env.stderr, nil))
	}
	start := time.Now()
	var r image.Result
	if o.out != "" {
		r, err = imageWriteArchive(ctx, opts, o.out, o.gate)
	} else {
		r, err = imageBuildLoad(ctx, opts, o.gate)
	}
	if err != nil {
		return err
	}
	dur := time.Since(start)
	if o.json {
		out := buildOutput{
			ID: r.ID, Tags: r.Tags, GoVersion: r.GoVersion, Platform: r.Platform,
			GoRoot: r.GoRoot, CToolchain: r.CToolchain, Busybox: r.Busybox, CABundle: r.CABundle, Inputs: r.Inputs,
			SizeBytes: r.Size, Loaded: r.Loaded, Seconds: dur.Seconds(),
		}
		return imageWriteJSON(env, out)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "image\t%s\n", r.ID)
	fmt.Fprintf(tw, "tags\t%s\n", strings.Join(r.Tags, " "))
	if r.GoVersion != "" {
		fmt.Fprintf(tw, "go\t%s from %s\n", r.GoVersion, r.GoRoot)
	}
	if r.CToolchain != "" {
		fmt.Fprintf(tw, "c toolchain\t%d Debian packages, %s\n", len(image.CToolchainPackages()), r.CToolchain)
	} else if r.GoVersion != "" {
		fmt.Fprintf(tw, "c toolchain\tnone (CGO_ENABLED=0)\n")
	}
	bb := r.Busybox
	if bb == "" {
		bb = "none (argv only)"
	}
	fmt.Fprintf(tw, "busybox\t%s\n", bb)
	ca := r.CABundle
	if ca == "" {
		ca = "none (TLS does not verify)"
	}
	fmt.Fprintf(tw, "ca bundle\t%s\n", ca)
	fmt.Fprintf(tw, "platform\t%s\n", r.Platform)
	fmt.Fprintf(tw, "inputs\t%s\n", r.Inputs)
	if o.out == "" {
		fmt.Fprintf(tw, "size\t%s\n", imageBytes(r.Size))
	}
	switch {
	case o.out != "":
		fmt.Fprintf(tw, "written\t%s, in %.1fs\n", o.out, dur.Seconds())
	case r.Loaded:
		fmt.Fprintf(tw, "loaded\tyes, in %.1fs\n", dur.Seconds())
	default:
		fmt.Fprintf(tw, "loaded\tno, the engine had it (%.1fs)\n", dur.Seconds())
	}
	tw.Flush()
	return nil
}

// imageBuildLoad builds the image into the engine DOCKER_HOST names.
func imageBuildLoad(ctx context.Context, opts image.Options, gate bool) (image.Result, error) {
	c, err := dockerapi.New("")
	if err != nil {
		return image.Result{}, err
	}
	defer c.Close()
	if gate {
		return image.BuildGate(ctx, c, opts)
	}
	return image.Build(ctx, c, opts)
}

// imageWriteArchive writes the image to the file name, atomically: a
// failed build leaves no partial archive behind.
func imageWriteArchive(ctx context.Context, opts image.Options, name string, gate bool) (image.Result, error) {
	var r image.Result
	err := writeAtomic(name, func(w io.Writer) error {
		var err error
		if gate {
			r, err = image.WriteGateArchive(ctx, opts, w)
		} else {
			r, err = image.WriteArchive(ctx, opts, w)
		}
		return err
	})
	return r, err
}

// listOutput is the -json form of one listed image.
type listOutput struct {
	ID         string   `json:"id"`
	Tags       []string `json:"tags"`
	GoVersion  string   `json:"go_version,omitempty"`
	SizeBytes  int64    `json:"size_bytes"`
	Inputs     string   `json:"inputs,omitempty"`
	CToolchain string   `json:"c_toolchain,omitempty"`
	Pinned     string   `json:"pinned,omitempty"`
}

func imageList(ctx context.Context, env *cmdEnv, o imageOpts) error {
	c, err := dockerapi.New("")
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, imageListTimeout)
	defer cancel()
	infos, err := image.List(ctx, c)
	if err != nil {
		return err
	}
	pinned, err := image.ListPinned(ctx, c, imagetable.Default())
	if err != nil {
		return err
	}
	infos = append(infos, pinned...)
	if o.json {
		out := make([]listOutput, 0, len(infos))
		for _, in := range infos {
			out = append(out, listOutput{ID: in.ID, Tags: in.Tags, GoVersion: in.GoVersion, SizeBytes: in.Size, Inputs: in.Inputs, CToolchain: in.CToolchain, Pinned: in.Pinned})
		}
		return imageWriteJSON(env, out)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTAGS\tGO\tCGO\tSIZE\tBUILT FROM")
	for _, in := range infos {
		tags := strings.Join(in.Tags, ",")
		if tags == "" {
			tags = "-"
		}
		gov := in.GoVersion
		if gov == "" {
			gov = "-"
		}
		from := "inputs " + imageShortID(in.Inputs)
		if in.Pinned != "" {
			from = "pinned " + in.Pinned
		}
		cgo := "-"
		switch {
		case in.CToolchain != "":
			cgo = "yes"
		case in.GoVersion != "" && in.Pinned == "":
			cgo = "no"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", imageShortID(in.ID), tags, gov, cgo, imageBytes(in.Size), from)
	}
	tw.Flush()
	return nil
}

func imageWriteJSON(env *cmdEnv, v any) error {
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	return nil
}

// imageShortID keeps "sha256:" and 12 hex digits, as docker images does.
func imageShortID(id string) string {
	if hex, ok := strings.CutPrefix(id, "sha256:"); ok && len(hex) > 12 {
		return "sha256:" + hex[:12]
	}
	return id
}

// imageBytes renders n bytes in decimal units, as docker images does.
func imageBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
