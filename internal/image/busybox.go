package image

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
)

// busyboxList pins the Debian package an image takes its busybox from when
// the host has none; see the file's comment.
//
//go:embed busybox.txt
var busyboxList string

// busyboxArch is the Debian architecture busybox.txt pins its version for:
// a binary rebuild ("+b1") is numbered per architecture.
const busyboxArch = "amd64"

// busyboxInPackage is where busybox-static's files put the binary,
// relative to the unpacked tree.
const busyboxInPackage = "bin/busybox"

// hostBusyboxPath is where findBusybox looks for the host's static busybox:
// DefaultBusybox. Tests point it at a missing file to take the Debian
// path on a host that has one.
var hostBusyboxPath = DefaultBusybox

// ErrNoBusybox reports an image that needs a busybox (neither Busybox nor
// NoBusybox set) on a host without a static one at DefaultBusybox, when
// Debian's busybox-static cannot be fetched either. The error wraps the
// fetch's (ErrNoDebian, ErrDebChecksum).
var ErrNoBusybox = errors.New("image: no static busybox: install Debian's busybox-static, or pass a static busybox (-busybox, Options.Busybox)")

// BusyboxPackage returns the Debian package, at its exact version, an
// image takes its busybox from when the host has no static busybox.
func BusyboxPackage() DebPackage {
	pkgs, err := parsePackages(busyboxList)
	if err != nil || len(pkgs) != 1 {
		panic(fmt.Sprintf("image: busybox.txt: %v, %d packages", err, len(pkgs))) // checked by the package's tests
	}
	return pkgs[0]
}

// findBusybox returns the busybox opts ask for, or nil for NoBusybox:
// Options.Busybox; else the host's at hostBusyboxPath when it is static and,
// with a toolchain, of goarch; else BusyboxPackage's, fetched into
// opts.CacheDir (debianBusybox). goarch is the toolchain's GOARCH, empty
// for an image without Go.
func findBusybox(ctx context.Context, opts Options, goarch string) (*staticExe, error) {
	if opts.NoBusybox {
		return nil, nil
	}
	if opts.Busybox != "" {
		bb, err := checkBusybox(opts.Busybox, goarch)
		if err != nil {
			return nil, fmt.Errorf("image: busybox: %w", err)
		}
		return bb, nil
	}
	bb, hostErr := checkBusybox(hostBusyboxPath, goarch)
	if hostErr == nil {
		return bb, nil
	}
	// A dynamic busybox (Debian's "busybox" package) or none: an image
	// without a shell would fail every run that needs one, so take
	// Debian's static build instead.
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	bb, err := debianBusybox(ctx, goarch, opts.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("%w: the host's: %v; Debian's %s: %w", ErrNoBusybox, hostErr, BusyboxPackage(), err)
	}
	return bb, nil
}

// checkBusybox inspects name (inspectStatic) and, when goarch is not
// empty, checks it is of that architecture.
func checkBusybox(name, goarch string) (*staticExe, error) {
	bb, err := inspectStatic(name)
	if err != nil {
		return nil, err
	}
	if goarch != "" && bb.arch != goarch {
		return nil, fmt.Errorf("%s is %s, the toolchain %s", name, bb.arch, goarch)
	}
	return bb, nil
}

// debianBusybox returns the busybox of BusyboxPackage for goarch: the
// package fetched into cacheDir and checked like the C toolchain's
// (unpackedDebPackages; a second call fetches nothing), its bin/busybox
// checked by inspectStatic.
func debianBusybox(ctx context.Context, goarch, cacheDir string) (*staticExe, error) {
	pkg := BusyboxPackage()
	if cacheDir == "" {
		return nil, errors.New("no cache directory (Options.CacheDir) to fetch it into")
	}
	if arch := debArch[goarch]; arch != busyboxArch {
		return nil, fmt.Errorf("%w: %s is pinned for %s, the image is %s", ErrNoDebian, pkg, busyboxArch, goarch)
	}
	dir, _, err := unpackedDebPackages(ctx, []DebPackage{pkg}, busyboxArch, cacheDir, "busybox-")
	if err != nil {
		return nil, err
	}
	return checkBusybox(filepath.Join(dir, busyboxInPackage), goarch)
}
