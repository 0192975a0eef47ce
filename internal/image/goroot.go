package image

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// goEnvTimeout bounds `go env GOROOT` when Options.GoRoot is empty.
const goEnvTimeout = 30 * time.Second

// maxVersionFile is the most read of GOROOT/VERSION, in bytes.
const maxVersionFile = 4 << 10

// Caps on the Go layer: a release GOROOT holds about 240 MB in 12,000
// files after trimming. A directory far past these is not a toolchain
// (a -goroot pointing at a home directory, say), and is refused before
// anything is uploaded.
const (
	maxGoRootBytes   = 2 << 30 // bytes of file content
	maxGoRootEntries = 200_000 // files, directories and links
)

// skipTop are GOROOT's top-level entries the image leaves out: the API
// compatibility lists, the compiler's regression tests and the release
// notes are about 30 MB that no build, vet or test of a user's module reads.
// VCS metadata and build droppings appear only in source checkouts.
var skipTop = map[string]bool{
	"api":  true,
	"doc":  true,
	"test": true,
	".git": true,
}

// ErrNoGoCommand reports a host without the go command where composing a
// toolchain image needs it: to copy the host's GOROOT, or to fetch another
// Go release (FetchGo runs it). Runs that find their image in the engine
// never need it.
var ErrNoGoCommand = errors.New("image: no go command on PATH")

// goCommand is the host's go command with args, or ErrNoGoCommand with
// what to do instead.
func goCommand(ctx context.Context, args ...string) (*exec.Cmd, error) {
	path, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("%w: composing a toolchain image copies the host's Go, and fetching another release runs it; install Go (https://go.dev/dl/) and run again, build the image where Go is installed against the same engine (stockade image build [-go VERSION]), or name an image the engine has with -image", ErrNoGoCommand)
	}
	return exec.CommandContext(ctx, path, args...), nil
}

// DefaultGoRoot returns the GOROOT of the `go` command on PATH. It runs
// `go env GOROOT` outside any module with GOTOOLCHAIN=local, so neither a
// go.mod in the working directory nor a toolchain switch picks another Go.
func DefaultGoRoot(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, goEnvTimeout)
	defer cancel()
	cmd, err := goCommand(ctx, "env", "GOROOT")
	if err != nil {
		return "", err
	}
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("image: go env GOROOT: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", errors.New("image: go env GOROOT printed nothing")
	}
	return dir, nil
}

// toolchain is what the image learns about a GOROOT before copying it.
type toolchain struct {
	dir     string // absolute host path
	version string // "go1.26.8"
	goos    string // always "linux": the image runs on a Linux engine
	goarch  string // from bin/go's ELF header
}

// inspectGoRoot checks that dir holds a Linux Go toolchain and finds its
// version and architecture without running anything from it.
func inspectGoRoot(dir string) (*toolchain, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("image: goroot %s: %w", dir, err)
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, fmt.Errorf("image: goroot: %w", err)
	}
	goBin := filepath.Join(abs, "bin", "go")
	arch, err := elfArch(goBin)
	if err != nil {
		return nil, fmt.Errorf("image: goroot %s: %w", abs, err)
	}
	version, err := goVersion(abs, goBin)
	if err != nil {
		return nil, fmt.Errorf("image: goroot %s: %w", abs, err)
	}
	tc := &toolchain{dir: abs, version: version, goos: "linux", goarch: arch}
	if fi, err := os.Stat(filepath.Join(abs, "pkg", "tool", tc.platform())); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("image: goroot %s: no pkg/tool/%s (go vet and go test need it)", abs, tc.platform())
	}
	if fi, err := os.Stat(filepath.Join(abs, "src", "runtime")); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("image: goroot %s: no src/runtime", abs)
	}
	return tc, nil
}

func (tc *toolchain) platform() string { return tc.goos + "_" + tc.goarch }

// goVersion reads the release's VERSION file, falling back to the version
// recorded in bin/go (a source build without VERSION).
func goVersion(goroot, goBin string) (string, error) {
	if b, err := readCapped(filepath.Join(goroot, "VERSION"), maxVersionFile); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		if v := strings.TrimSpace(line); strings.HasPrefix(v, "go") {
			return v, nil
		}
	}
	bi, err := buildinfo.ReadFile(goBin)
	if err != nil {
		return "", fmt.Errorf("no VERSION and %w", err)
	}
	return bi.GoVersion, nil
}

func readCapped(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: longer than %d bytes", name, max)
	}
	return b, nil
}

// elfArchs maps ELF machines to GOARCH values the image config accepts.
var elfArchs = map[elf.Machine]string{
	elf.EM_X86_64:    "amd64",
	elf.EM_AARCH64:   "arm64",
	elf.EM_386:       "386",
	elf.EM_ARM:       "arm",
	elf.EM_RISCV:     "riscv64",
	elf.EM_S390:      "s390x",
	elf.EM_LOONGARCH: "loong64",
}

// elfArch returns the GOARCH of a Linux executable. A Mach-O or PE file
// (a macOS or Windows GOROOT) is an error: it could not run in the image.
func elfArch(name string) (string, error) {
	f, err := elf.Open(name)
	if err != nil {
		return "", fmt.Errorf("%s is not a Linux executable: %w", name, err)
	}
	defer f.Close()
	if f.Machine == elf.EM_PPC64 {
		if f.ByteOrder.String() == "LittleEndian" {
			return "ppc64le", nil
		}
		return "ppc64", nil
	}
	arch, ok := elfArchs[f.Machine]
	if !ok {
		return "", fmt.Errorf("%s: unsupported machine %v", name, f.Machine)
	}
	return arch, nil
}

// isStatic reports whether the ELF file name has no program interpreter,
// that is, whether it runs in an image without a libc.
func isStatic(name string) (bool, error) {
	f, err := elf.Open(name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// goLayer plans the layer holding tc at GoRootInImage: parent directories,
// then GOROOT in lexical order, less skipTop and the pkg/tool directories
// of other platforms.
func goLayer(ctx context.Context, tc *toolchain) (*layer, error) {
	l := &layer{what: "go"}
	root := strings.TrimPrefix(GoRootInImage, "/")
	for _, d := range parents(path.Dir(root)) { // the walk adds root itself
		l.entries = append(l.entries, entry{name: d + "/", typ: tar.TypeDir, mode: 0o755})
	}
	skip := func(rel string) bool { return skipGoRoot(rel, tc) }
	if err := addTree(ctx, l, tc.dir, root, skip, maxGoRootBytes, maxGoRootEntries); err != nil {
		return nil, fmt.Errorf("image: goroot: %w; not a Go toolchain?", err)
	}
	return l, nil
}

// addTree appends the host tree dir to l, in lexical order, at root inside
// the image ("" for the image's root, whose directory is then not
// written), less the slash paths relative to dir that skip names. Modes
// are normalised (fileMode), owners and times dropped. More than
// maxBytes of file content or maxEntries entries is an error: not what
// the caller meant to copy.
func addTree(ctx context.Context, l *layer, dir, root string, skip func(rel string) bool, maxBytes int64, maxEntries int) error {
	var total int64 // bytes of file content so far
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel != "." && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		name := root
		if rel != "." {
			name = path.Join(root, rel)
		}
		if name == "" {
			return nil // the image's root directory
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if len(l.entries) >= maxEntries {
			return fmt.Errorf("%s: more than %d entries", dir, maxEntries)
		}
		switch m := fi.Mode(); {
		case m.IsDir():
			l.entries = append(l.entries, entry{name: name + "/", typ: tar.TypeDir, mode: 0o755})
		case m.IsRegular():
			if total += fi.Size(); total > maxBytes {
				return fmt.Errorf("%s: more than %d bytes", dir, maxBytes)
			}
			l.entries = append(l.entries, entry{name: name, typ: tar.TypeReg, mode: fileMode(m), size: fi.Size(), src: p})
		case m&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			l.entries = append(l.entries, entry{name: name, typ: tar.TypeSymlink, mode: 0o777, link: target})
		default:
			return fmt.Errorf("%s: unsupported file type %v", p, m.Type())
		}
		return nil
	})
}

// skipGoRoot reports whether the GOROOT-relative slash path rel stays out
// of the image.
func skipGoRoot(rel string, tc *toolchain) bool {
	top, rest, _ := strings.Cut(rel, "/")
	if skipTop[top] {
		return true
	}
	if top != "pkg" {
		return false
	}
	// pkg/tool/<other platform> is a cross toolchain's; pkg/obj holds a
	// source build's intermediates.
	sub, rest, _ := strings.Cut(rest, "/")
	if sub == "obj" {
		return true
	}
	if sub == "tool" && rest != "" {
		plat, _, _ := strings.Cut(rest, "/")
		return plat != tc.platform()
	}
	return false
}

// fileMode normalises a host file mode: executable by all when any execute
// bit is set, else readable by all. Umasks differ between machines; the
// image ID must not.
func fileMode(m fs.FileMode) int64 {
	if m&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

// parents returns the directories leading to and including p ("a/b/c"
// gives "a", "a/b", "a/b/c").
func parents(p string) []string {
	var out []string
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return append(out, p)
}

// HostGoVersion returns the release of the go command on PATH, such as
// "go1.26.8": what Build makes an image of when Options.GoRoot and
// GoVersion are empty.
func HostGoVersion(ctx context.Context) (string, error) {
	dir, err := DefaultGoRoot(ctx)
	if err != nil {
		return "", err
	}
	tc, err := inspectGoRoot(dir)
	if err != nil {
		return "", err
	}
	return tc.version, nil
}
