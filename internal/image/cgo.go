package image

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// ctoolchainList is the C toolchain layer's package set, one
// "name=version" a line; see the file's comment.
//
//go:embed ctoolchain.txt
var ctoolchainList string

// Budgets of fetching and unpacking Debian packages.
const (
	// aptTimeout bounds apt-cache show and apt-get download of one set:
	// the C toolchain's is about 56 MB from a Debian mirror.
	aptTimeout = 10 * time.Minute
	// extractTimeout bounds unpacking every package of a set with dpkg-deb.
	extractTimeout = 5 * time.Minute
	// maxAptOutput caps what apt-cache show prints, in bytes.
	maxAptOutput = 16 << 20
)

// Caps on the C toolchain layer: the bookworm set unpacks to about 200 MB
// in 6,000 files before the documentation is left out.
const (
	maxCBytes   = 1 << 30
	maxCEntries = 50_000
)

// skipC are the unpacked packages' directories the image leaves out:
// documentation, manuals, translations and Debian's own metadata, which no
// build reads.
var skipC = []string{
	"usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale",
	"usr/share/lintian", "usr/share/bug", "usr/share/gdb",
}

// ErrDebChecksum reports a downloaded package whose SHA256 differs from
// the one apt's verified metadata gives.
var ErrDebChecksum = errors.New("image: Debian package checksum mismatch")

// ErrNoDebian reports a host without apt-get, apt-cache or dpkg-deb, or
// whose apt metadata lacks a package version asked for: the C toolchain's
// set, or BusyboxPackage.
var ErrNoDebian = errors.New("image: cannot fetch the Debian packages")

// DebPackage is one Debian package at an exact version.
type DebPackage struct {
	Name    string // "gcc-12"
	Version string // "12.2.0-14+deb12u1"; may carry an epoch ("1:4.4.33-2")
}

func (p DebPackage) String() string { return p.Name + "=" + p.Version }

// debNameRE and debVersionRE are Debian's package name and version syntax.
var (
	debNameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	debVersionRE = regexp.MustCompile(`^([0-9]+:)?[0-9][A-Za-z0-9.+~-]*$`)
)

// CToolchainPackages returns the C toolchain layer's packages, sorted by
// name.
func CToolchainPackages() []DebPackage {
	pkgs, err := parsePackages(ctoolchainList)
	if err != nil {
		panic(err) // the embedded list is checked by the package's tests
	}
	return pkgs
}

// ErrAptPackage reports an extra Debian package that cannot be added: a
// malformed name or version, one apt does not know, or one the C
// toolchain layer already holds at another version.
var ErrAptPackage = errors.New("image: cannot add the Debian package")

// WithPackages returns the C toolchain layer's set with extra added,
// sorted by name: the set of an image built with Options.AptPackages. A
// package the layer already has must come at its version.
func WithPackages(extra []DebPackage) ([]DebPackage, error) {
	base := CToolchainPackages()
	have := map[string]string{}
	for _, p := range base {
		have[p.Name] = p.Version
	}
	out := base
	for _, p := range extra {
		if !debNameRE.MatchString(p.Name) || !debVersionRE.MatchString(p.Version) {
			return nil, fmt.Errorf("%w: %q: want name=version", ErrAptPackage, p)
		}
		if v, ok := have[p.Name]; ok {
			if v != p.Version {
				return nil, fmt.Errorf("%w: %s: the C toolchain layer holds %s=%s", ErrAptPackage, p, p.Name, v)
			}
			continue
		}
		have[p.Name] = p.Version
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// aptDependsArgs is what ResolvePackages asks apt-cache depends: what a
// package needs to be unpacked and run, nothing it merely recommends
// (the C toolchain layer's list was made the same way).
var aptDependsArgs = []string{"depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"}

// ResolvePackages turns specs ("name" or "name=version") into the exact
// packages to add to the C toolchain layer (Options.AptPackages): each
// named package and everything it depends on, recursively, that the layer
// lacks; a version given is kept, the others are apt's candidate. It asks
// the host's apt (apt-cache depends and policy); the same apt metadata
// gives the same packages, and so the same image.
func ResolvePackages(ctx context.Context, specs []string) ([]DebPackage, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	pinned := map[string]string{}
	var names []string
	for _, s := range specs {
		name, version, hasVersion := strings.Cut(strings.TrimSpace(s), "=")
		if !debNameRE.MatchString(name) || hasVersion && !debVersionRE.MatchString(version) {
			return nil, fmt.Errorf("%w: %q: want name or name=version", ErrAptPackage, s)
		}
		if hasVersion {
			pinned[name] = version
		}
		names = append(names, name)
	}
	actx, cancel := context.WithTimeout(ctx, aptTimeout)
	defer cancel()
	deps, err := aptOutput(actx, append(slices.Clone(aptDependsArgs), names...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: apt-cache depends %s: %v", ErrAptPackage, strings.Join(names, " "), err)
	}
	have := map[string]bool{}
	for _, p := range CToolchainPackages() {
		have[p.Name] = true
	}
	need := map[string]bool{}
	for _, line := range strings.Split(deps, "\n") {
		// Packages start a line; their relations are indented; a virtual
		// package is <name> and is provided by one listed anyway.
		if line == "" || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "<") {
			continue
		}
		if name := strings.TrimSpace(line); debNameRE.MatchString(name) && !have[name] {
			need[name] = true
		}
	}
	var out []DebPackage
	var ask []string
	for name := range need {
		if v, ok := pinned[name]; ok {
			out = append(out, DebPackage{Name: name, Version: v})
		} else {
			ask = append(ask, name)
		}
	}
	for name, v := range pinned {
		if have[name] {
			out = append(out, DebPackage{Name: name, Version: v}) // WithPackages checks it
		}
	}
	if len(ask) > 0 {
		sort.Strings(ask)
		pol, err := aptOutput(actx, append([]string{"policy"}, ask...)...)
		if err != nil {
			return nil, fmt.Errorf("%w: apt-cache policy: %v", ErrAptPackage, err)
		}
		cands := parseCandidates(pol)
		for _, name := range ask {
			v := cands[name]
			if v == "" || v == "(none)" {
				return nil, fmt.Errorf("%w: apt has no candidate version of %s (apt-get update?)", ErrAptPackage, name)
			}
			out = append(out, DebPackage{Name: name, Version: v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if _, err := WithPackages(out); err != nil {
		return nil, err
	}
	return out, nil
}

// parseCandidates reads apt-cache policy's "name:" and "  Candidate: v"
// lines.
func parseCandidates(s string) map[string]string {
	out := map[string]string{}
	cur := ""
	for _, line := range strings.Split(s, "\n") {
		switch {
		case line != "" && !strings.HasPrefix(line, " ") && strings.HasSuffix(line, ":"):
			cur = strings.TrimSuffix(line, ":")
		case strings.HasPrefix(strings.TrimSpace(line), "Candidate: ") && cur != "":
			out[cur] = strings.TrimPrefix(strings.TrimSpace(line), "Candidate: ")
		}
	}
	return out
}

// aptOutput runs apt-cache with args and returns its standard output, at
// most maxAptOutput bytes.
func aptOutput(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "apt-cache", args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	b, _ := io.ReadAll(io.LimitReader(out, maxAptOutput+1))
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return "", fmt.Errorf("%v: %s", err, capString(strings.TrimSpace(stderr.String()), maxFetchStderr))
	}
	if len(b) > maxAptOutput {
		return "", fmt.Errorf("more than %d bytes of output", maxAptOutput)
	}
	return string(b), nil
}

// CPackagesDigest is the "sha256:" of pkgs' "name=version" lines, sorted:
// LabelCPackages of an image whose C toolchain layer is that set.
func CPackagesDigest(pkgs []DebPackage) string {
	lines := make([]string, len(pkgs))
	for i, p := range pkgs {
		lines[i] = p.String() + "\n"
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		io.WriteString(h, l)
	}
	return digest(h)
}

// parsePackages reads "name=version" lines; # starts a comment.
func parsePackages(s string) ([]DebPackage, error) {
	var out []DebPackage
	seen := map[string]bool{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, version, ok := strings.Cut(line, "=")
		if !ok || !debNameRE.MatchString(name) || !debVersionRE.MatchString(version) {
			return nil, fmt.Errorf("image: package %q: want name=version", line)
		}
		if seen[name] {
			return nil, fmt.Errorf("image: package %s twice", name)
		}
		seen[name] = true
		out = append(out, DebPackage{Name: name, Version: version})
	}
	if len(out) == 0 {
		return nil, errors.New("image: no packages")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// cToolchainArch is the Debian architecture ctoolchain.txt lists packages
// for.
const cToolchainArch = "amd64"

// debArch maps GOARCH to Debian's architecture names.
var debArch = map[string]string{
	"amd64": "amd64", "arm64": "arm64", "386": "i386", "arm": "armhf",
	"ppc64le": "ppc64el", "s390x": "s390x", "riscv64": "riscv64",
}

// deb is a fetched, verified package file.
type deb struct {
	pkg    DebPackage
	path   string
	sha256 string // hex
}

// cToolchain is the unpacked C toolchain, ready to be copied.
type cToolchain struct {
	dir    string // the unpacked tree
	digest string // "sha256:" of the package set and the packages' SHA256
	pkgs   []DebPackage
}

// prepareC fetches pkgs for goarch into cacheDir (fetchDebPackages) and
// unpacks them all into one tree (c-<digest>/), reused while the set is
// the same.
func prepareC(ctx context.Context, pkgs []DebPackage, goarch, cacheDir string) (*cToolchain, error) {
	arch, ok := debArch[goarch]
	if !ok || arch != cToolchainArch {
		// binutils-x86-64-linux-gnu and friends: the set is per architecture.
		return nil, fmt.Errorf("%w: the package set is for %s, the toolchain is %s", ErrNoDebian, cToolchainArch, goarch)
	}
	if cacheDir == "" {
		return nil, errors.New("image: the C toolchain needs a cache directory")
	}
	dir, sum, err := unpackedDebPackages(ctx, pkgs, arch, cacheDir, "c-")
	if err != nil {
		return nil, err
	}
	return &cToolchain{dir: dir, digest: sum, pkgs: pkgs}, nil
}

// unpackedDebPackages fetches pkgs for the Debian architecture arch into
// cacheDir (fetchDebPackages) and unpacks them all into one tree,
// cacheDir/<prefix><16 hex of the digest>, reused while the set and the
// packages' SHA256 are the same. It returns the tree and the digest
// ("sha256:") of the packages' names, versions and SHA256.
func unpackedDebPackages(ctx context.Context, pkgs []DebPackage, arch, cacheDir, prefix string) (dir, sum string, err error) {
	debs, err := fetchDebPackages(ctx, pkgs, arch, cacheDir)
	if err != nil {
		return "", "", err
	}
	h := sha256.New()
	for _, d := range debs {
		fmt.Fprintf(h, "%s %s %s\n", d.pkg.Name, d.pkg.Version, d.sha256)
	}
	sum = digest(h)
	dir = filepath.Join(cacheDir, prefix+strings.TrimPrefix(sum, "sha256:")[:16])
	if _, err := os.Stat(dir); err == nil {
		return dir, sum, nil
	}
	xctx, cancel := context.WithTimeout(ctx, extractTimeout)
	defer cancel()
	tmp, err := os.MkdirTemp(cacheDir, prefix+"unpacking-")
	if err != nil {
		return "", "", fmt.Errorf("image: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, d := range debs {
		if err := run(xctx, "", "dpkg-deb", "-x", d.path, tmp); err != nil {
			return "", "", fmt.Errorf("%w: unpack %s: %v", ErrNoDebian, d.pkg, err)
		}
	}
	// Renamed whole: a tree that exists is complete.
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return "", "", fmt.Errorf("image: %w", err)
		}
	}
	return dir, sum, nil
}

// fetchDebPackages is the one way this package fetches Debian packages:
// pkgs for the Debian architecture arch, into cacheDir/debs (one file per
// package version, kept across builds), each checked against the SHA256
// apt's verified metadata gives (ErrDebChecksum).
func fetchDebPackages(ctx context.Context, pkgs []DebPackage, arch, cacheDir string) ([]deb, error) {
	debDir := filepath.Join(cacheDir, "debs")
	if err := os.MkdirAll(debDir, 0o700); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	actx, cancel := context.WithTimeout(ctx, aptTimeout)
	defer cancel()
	sums, err := aptSHA256(actx, pkgs, arch)
	if err != nil {
		return nil, err
	}
	return fetchDebs(actx, debDir, pkgs, sums)
}

// aptMeta is what apt's metadata says of one package version.
type aptMeta struct {
	sha256 string // hex
	arch   string // the requested architecture, or "all"
}

// aptSHA256 returns the SHA256 apt's metadata gives each package of pkgs
// for arch (or "all"), from one apt-cache show. apt verified that metadata
// against the archive's signed Release file.
func aptSHA256(ctx context.Context, pkgs []DebPackage, arch string) (map[DebPackage]aptMeta, error) {
	args := []string{"show"}
	for _, p := range pkgs {
		args = append(args, p.String())
	}
	cmd := exec.CommandContext(ctx, "apt-cache", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: apt-cache: %v", ErrNoDebian, err)
	}
	sums := map[DebPackage]aptMeta{}
	var cur DebPackage
	var curArch, curSum string
	flush := func() {
		if cur.Name != "" && curSum != "" && (curArch == arch || curArch == "all") {
			if _, ok := sums[cur]; !ok {
				sums[cur] = aptMeta{sha256: curSum, arch: curArch}
			}
		}
		cur, curArch, curSum = DebPackage{}, "", ""
	}
	sc := bufio.NewScanner(io.LimitReader(out, maxAptOutput))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			flush()
			continue
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		switch k {
		case "Package":
			cur.Name = v
		case "Version":
			cur.Version = v
		case "Architecture":
			curArch = v
		case "SHA256":
			curSum = v
		}
	}
	flush()
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("%w: apt-cache show: %v: %s", ErrNoDebian, err, strings.TrimSpace(stderr.String()))
	}
	for _, p := range pkgs {
		if len(sums[p].sha256) != 64 {
			return nil, fmt.Errorf("%w: apt has no %s for %s (apt-get update, or the mirror dropped that version)", ErrNoDebian, p, arch)
		}
	}
	return sums, nil
}

// debFile is the name apt-get download gives a package's file.
func debFile(p DebPackage, arch string) string {
	return p.Name + "_" + strings.ReplaceAll(p.Version, ":", "%3a") + "_" + arch + ".deb"
}

// fetchDebs returns pkgs' files in debDir, downloading with one apt-get
// download those missing or not matching sums; every file is checked.
func fetchDebs(ctx context.Context, debDir string, pkgs []DebPackage, sums map[DebPackage]aptMeta) ([]deb, error) {
	var missing []string
	for _, p := range pkgs {
		name := filepath.Join(debDir, debFile(p, sums[p].arch))
		if sha, err := fileSHA256(name); err != nil || sha != sums[p].sha256 {
			os.Remove(name)
			missing = append(missing, p.String())
		}
	}
	if len(missing) > 0 {
		args := append([]string{"download", "-q"}, missing...)
		if err := run(ctx, debDir, "apt-get", args...); err != nil {
			return nil, fmt.Errorf("%w: apt-get download: %v", ErrNoDebian, err)
		}
	}
	out := make([]deb, 0, len(pkgs))
	for _, p := range pkgs {
		name := filepath.Join(debDir, debFile(p, sums[p].arch))
		sha, err := fileSHA256(name)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrNoDebian, p, err)
		}
		if sha != sums[p].sha256 {
			os.Remove(name)
			return nil, fmt.Errorf("%w: %s: %s, apt says %s", ErrDebChecksum, p, sha, sums[p].sha256)
		}
		out = append(out, deb{pkg: p, path: name, sha256: sha})
	}
	return out, nil
}

func fileSHA256(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// run runs a host command in dir with the environment of this process and
// a C locale, returning its stderr in the error.
func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v: %s", err, capString(strings.TrimSpace(stderr.String()), maxFetchStderr))
	}
	return nil
}

// cLayer plans the layer holding the unpacked C toolchain at the image's
// root, less skipC.
func cLayer(ctx context.Context, c *cToolchain) (*layer, error) {
	l := &layer{what: "c"}
	skip := func(rel string) bool {
		for _, s := range skipC {
			if rel == s || strings.HasPrefix(rel, s+"/") {
				return true
			}
		}
		return false
	}
	if err := addTree(ctx, l, c.dir, "", skip, maxCBytes, maxCEntries); err != nil {
		return nil, fmt.Errorf("image: C toolchain: %w", err)
	}
	return l, nil
}
