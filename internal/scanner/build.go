package scanner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/lockfile"
	"github.com/stockade/stockade/internal/toolchain"
)

// Layout of the data directory.
const (
	// ScannersDir holds one directory per built scanner, named by Key.
	ScannersDir = "scanners"
	// MetaFile, inside a scanner's directory, records what was built and
	// its sha256; its presence marks the scanner complete.
	MetaFile = "scanner.json"
	// format versions the layout and the recipe; a change makes new keys.
	format = "stockade-scanner-1"
)

// Budgets of a build.
const (
	// DefaultBuildTimeout bounds Ensure's build: downloading the pinned
	// modules and compiling them (three minutes unloaded on two CPUs).
	DefaultBuildTimeout = 20 * time.Minute
	// probeBudget bounds the mount probe of the build's run.
	probeBudget = 2 * time.Minute
	// maxBinary is the largest scanner binary the host copies, in bytes.
	maxBinary = 256 << 20
)

// Paths inside the Tool container, under its writable toolchain.ToolsDir.
const (
	recipeDir = toolchain.ToolsDir + "/src" // the generated module
	outDir    = toolchain.ToolsDir + "/out" // go build -o
)

// ErrBuild reports a scanner build whose go command failed.
var ErrBuild = errors.New("scanner: build failed")

// Config says which scanner Ensure makes.
type Config struct {
	// DataDir is the data directory; scanners live in DataDir/ScannersDir.
	// Required.
	DataDir string
	// DefaultDataDir says DataDir is the default location
	// (toolchain.Options.DefaultDataDir).
	DefaultDataDir bool
	// Image is the toolchain image by ID, exactly as scans run it. Required.
	Image string
	// GoVersion is the image's Go version, such as "go1.26.8". Required.
	GoVersion string
	// Owner labels the build's containers; empty means toolchain's default.
	Owner string
	// LockTimeout is how long to wait for another run on DataDir.
	LockTimeout time.Duration
	// Timeout bounds the build; zero means DefaultBuildTimeout.
	Timeout time.Duration
	// Logger receives progress; nil discards.
	Logger *slog.Logger
}

// Meta is what MetaFile records.
type Meta struct {
	Format    string `json:"format"`
	Key       string `json:"key"`
	Module    string `json:"module"`
	Version   string `json:"version"`
	Recipe    string `json:"recipe"`
	Image     string `json:"image"`
	GoVersion string `json:"go_version"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	// SHA256 is the binary's hex digest, computed by the host as it copied
	// the binary out of the build's output directory.
	SHA256 string `json:"sha256"`
	// BuildMS is how long the build's container ran, in milliseconds.
	BuildMS int64 `json:"build_ms"`
}

// Want returns what a copy of this scanner must be (Verify).
func (m Meta) Want() (Want, error) {
	pin, err := PinFor(m.GoVersion)
	if err != nil {
		return Want{}, err
	}
	if pin.Version != m.Version || pin.Recipe != m.Recipe {
		return Want{}, fmt.Errorf("%w: recorded %s (%s), the table pins %s (%s)", ErrUnverified, m.Version, m.Recipe, pin.Version, pin.Recipe)
	}
	return Want{SHA256: m.SHA256, Pin: pin, GoVersion: m.GoVersion, GOOS: m.GOOS, GOARCH: m.GOARCH}, nil
}

// Scanner is a built scanner on the host.
type Scanner struct {
	// Dir holds BinaryName and MetaFile; mount it at toolchain.ToolsDir
	// (toolchain.Config.ScanTools).
	Dir   string
	Meta  Meta
	Built bool // built by this call
	// Egress is what the build's egress gate recorded (the tool profile
	// reaches only proxy.golang.org and sum.golang.org, through it), and
	// EgressLost how many records its bound dropped; empty unless Built.
	Egress     []domain.EgressRecord
	EgressLost int64
}

// Binary is the scanner's path on the host.
func (s Scanner) Binary() string { return filepath.Join(s.Dir, BinaryName) }

// Key names a scanner of version for image: "<version>-<image hex>".
func Key(version, image string) string {
	return version + "-" + strings.TrimPrefix(image, "sha256:")
}

// Ensure returns the pinned scanner for cfg.Image, building it on first
// use: in a toolchain run of its own on cfg.DataDir, in the Tool profile,
// with the generated module and its committed go.sum, one build per key at
// a time (a lock file beside its directory).
// The host copies the binary into DataDir/ScannersDir/Key, records its
// sha256, and verifies it before it is kept. A stored scanner is returned
// as it is: callers Verify the copy they mount before every use.
func Ensure(ctx context.Context, eng toolchain.Engine, cfg Config) (Scanner, error) {
	if cfg.Image == "" || cfg.GoVersion == "" || cfg.DataDir == "" {
		return Scanner{}, errors.New("scanner: data directory, image and Go version are required")
	}
	pin, err := PinFor(cfg.GoVersion)
	if err != nil {
		return Scanner{}, err
	}
	key := Key(pin.Version, cfg.Image)
	if strings.ContainsAny(key, "/\\") || key != filepath.Clean(key) {
		return Scanner{}, fmt.Errorf("scanner: image %q does not make a directory name", cfg.Image)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	prepare := toolchain.PrepareDataDir
	if cfg.DefaultDataDir {
		prepare = toolchain.PrepareDefaultDataDir
	}
	dataDir, err := prepare(cfg.DataDir)
	if err != nil {
		return Scanner{}, err
	}
	dir := filepath.Join(dataDir, ScannersDir, key)
	if s, err := open(dir, key); err == nil {
		return s, nil
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultBuildTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// One build per key at a time, in any number of processes: the
	// others wait for it (its build budget at most) and find its scanner.
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return Scanner{}, fmt.Errorf("scanner: %w", err)
	}
	lock, err := lockfile.Acquire(ctx, dir+".lock", timeout, "scanner "+key, nil)
	if err != nil {
		return Scanner{}, fmt.Errorf("scanner: waiting for another build of %s: %w", key, err)
	}
	defer lock.Unlock()
	if s, err := open(dir, key); err == nil {
		return s, nil
	}
	r, err := toolchain.Open(ctx, eng, toolchain.Options{
		DataDir: dataDir, DefaultDataDir: cfg.DefaultDataDir, Owner: cfg.Owner,
		Config: toolchain.Config{Image: cfg.Image}, LockTimeout: cfg.LockTimeout, Logger: log,
	})
	if err != nil {
		return Scanner{}, err
	}
	defer r.Close(context.WithoutCancel(ctx))
	pctx, pcancel := context.WithTimeout(ctx, probeBudget)
	err = r.Probe(pctx)
	pcancel()
	if err != nil {
		return Scanner{}, err
	}
	meta, err := build(ctx, r, pin, cfg, key, dir, timeout)
	if err != nil {
		return Scanner{}, err
	}
	recs, lost, err := r.TakeEgress(ctx)
	if err != nil {
		return Scanner{}, fmt.Errorf("scanner: the build's egress record: %w", err)
	}
	log.Info("built the scanner", "version", pin.Version, "image", cfg.Image, "dur", time.Duration(meta.BuildMS)*time.Millisecond)
	return Scanner{Dir: dir, Meta: meta, Built: true, Egress: recs, EgressLost: lost}, nil
}

// build runs the Tool job and stores its binary in dir.
func build(ctx context.Context, r *toolchain.Runner, pin Pin, cfg Config, key, dir string, timeout time.Duration) (Meta, error) {
	td, err := r.NewToolDirs()
	if err != nil {
		return Meta{}, err
	}
	gomod, err := pin.GoMod()
	if err != nil {
		return Meta{}, fmt.Errorf("scanner: %w", err)
	}
	gosum, err := pin.GoSum()
	if err != nil {
		return Meta{}, fmt.Errorf("scanner: %w", err)
	}
	src, out := filepath.Join(td.Bin, "src"), filepath.Join(td.Bin, "out")
	if err := os.Mkdir(src, 0o755); err != nil {
		return Meta{}, fmt.Errorf("scanner: %w", err)
	}
	if err := os.Mkdir(out, toolchain.CacheDirMode); err != nil {
		return Meta{}, fmt.Errorf("scanner: %w", err)
	}
	if err := os.Chmod(out, toolchain.CacheDirMode); err != nil { // past the umask
		return Meta{}, fmt.Errorf("scanner: %w", err)
	}
	for name, b := range map[string][]byte{"go.mod": gomod, "go.sum": gosum} {
		if err := os.WriteFile(filepath.Join(src, name), b, 0o444); err != nil {
			return Meta{}, fmt.Errorf("scanner: %w", err)
		}
	}
	goos, goarch := "linux", runtime.GOARCH
	// -mod=readonly overrides the profile's -mod=mod: a module missing from
	// the committed go.sum, or one whose hash differs, fails the build
	// instead of being added.
	res, err := r.Run(ctx, toolchain.Job{
		Profile: toolchain.Tool,
		Cmd:     []string{"go", "build", "-mod=readonly", "-trimpath", "-o", outDir + "/" + BinaryName, Tool},
		Dir:     recipeDir, ModCache: td.ModCache, BuildCache: td.BuildCache, Tools: td.Bin,
		Env:     map[string]string{"CGO_ENABLED": "0", "GOOS": goos, "GOARCH": goarch},
		Timeout: timeout - toolchain.HostGrace,
	})
	if err != nil {
		return Meta{}, fmt.Errorf("scanner: build: %w", err)
	}
	if res.ExitCode != 0 || res.TimedOut || res.OOMKilled {
		return Meta{}, fmt.Errorf("%w: go build exit %d (timed out %v, oom %v): %s", ErrBuild, res.ExitCode, res.TimedOut, res.OOMKilled, tail(res.Stderr, 2000))
	}
	meta := Meta{
		Format: format, Key: key, Module: pin.Module, Version: pin.Version, Recipe: pin.Recipe,
		Image: cfg.Image, GoVersion: cfg.GoVersion, GOOS: goos, GOARCH: goarch, BuildMS: res.Phases.Wait.Milliseconds(),
	}
	return meta, store(filepath.Join(out, BinaryName), dir, &meta)
}

// store copies the built binary into a temporary directory beside dir,
// records its sha256, verifies it, makes it read-only and renames it to dir.
func store(bin, dir string, meta *Meta) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("scanner: %w", err)
	}
	tmp, err := container.MkdirFresh(parent, ".build", 0o700)
	if err != nil {
		return err
	}
	defer func() {
		os.Chmod(tmp, 0o700)
		os.RemoveAll(tmp)
	}()
	sum, err := copyBinary(bin, filepath.Join(tmp, BinaryName))
	if err != nil {
		return err
	}
	meta.SHA256 = sum
	want, err := meta.Want()
	if err != nil {
		return err
	}
	if err := Verify(filepath.Join(tmp, BinaryName), want); err != nil {
		return err
	}
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fmt.Errorf("scanner: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, MetaFile), append(b, '\n'), 0o444); err != nil {
		return fmt.Errorf("scanner: %w", err)
	}
	if err := os.Chmod(tmp, 0o555); err != nil {
		return fmt.Errorf("scanner: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("scanner: %w", err)
	}
	return nil
}

// copyBinary copies what the container wrote at src (a regular file, not a
// link, at most maxBinary bytes) to dst, mode 0555, and returns its sha256.
func copyBinary(src, dst string) (string, error) {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", fmt.Errorf("scanner: built binary: %w", err)
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxBinary {
		return "", fmt.Errorf("%w: the built binary is not a regular file under %d bytes", ErrBuild, maxBinary)
	}
	outf, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o555)
	if err != nil {
		return "", fmt.Errorf("scanner: %w", err)
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(outf, h), io.LimitReader(in, maxBinary))
	if cerr := outf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("scanner: copy the built binary: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// open returns the stored scanner in dir, recorded under key (any key
// when key is empty).
func open(dir, key string) (Scanner, error) {
	b, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if err != nil {
		return Scanner{}, err
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return Scanner{}, fmt.Errorf("scanner: %s: %w", dir, err)
	}
	if m.Format != format || (key != "" && m.Key != key) || m.SHA256 == "" {
		return Scanner{}, fmt.Errorf("scanner: %s records %s %s", dir, m.Format, m.Key)
	}
	return Scanner{Dir: dir, Meta: m}, nil
}

// Open returns the scanner stored in dir (a directory Ensure made, or a
// copy of one), without verifying its binary.
func Open(dir string) (Scanner, error) { return open(dir, "") }

// VerifyCopy checks the binary in dir (a copy of s, such as the one a run
// mounts) against what s recorded at build.
func (s Scanner) VerifyCopy(dir string) error {
	want, err := s.Meta.Want()
	if err != nil {
		return err
	}
	return Verify(filepath.Join(dir, BinaryName), want)
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
