// Package cacheseed gives every validation a fresh build cache that starts
// warm: the standard library already compiled and vetted, by the toolchain
// image alone, before any repository is looked at.
//
// Threat model: validations run hostile code that can write anything its
// container can reach, including its own GOCACHE. The seed's rule is that code
// one validation runs can never shape another's result, so each validation
// gets its own fresh, randomly named GOCACHE. A seed keeps that rule and
// removes the cost of recompiling the standard library each time:
//
//   - The seed is produced by Ensure in a container that mounts no repository
//     and runs no repository code (network none, the hardening of
//     internal/container): only the toolchain, the standard library and a
//     module this package generates. Its content is therefore what an empty
//     cache would have computed for the same actions.
//   - It is stored under the data directory, owned by the host user, files
//     0444 and directories 0555, and every validation mounts it read-only.
//     The kernel refuses any write, chmod, rename or unlink through a
//     read-only mount, whatever the container user owns or tries.
//   - The validation's GOCACHE is its own fresh directory. The go command
//     reaches the seed through GOCACHEPROG, a small program (./cacheprog)
//     that answers from the fresh cache, then from the seed, and writes only
//     to the fresh cache.
//
// docs/design/seed.md states the argument in full, and
// TestSeedSurvivesHostileValidation proves it against a real engine.
//
// Use:
//
//	seed, err := cacheseed.Ensure(ctx, eng, cacheseed.Config{DataDir: d, Image: id, GoVersion: v, Settings: s})
//	spec.ReadOnly = append(spec.ReadOnly, seed.Mounts()...) // the seed at SeedTarget
//	maps.Copy(spec.Env, seed.Env())                          // GOCACHEPROG
//
// with GOCACHE the container's own fresh cache (toolchain.Runner's
// NewBuildCache).
//
// The zero Seed is "no seed": its Mounts and Env are empty, so a caller that
// could not get one runs with an empty fresh cache.
package cacheseed

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/internal/lockfile"
)

// progSource is the GOCACHEPROG program, built inside the toolchain image.
//
//go:embed cacheprog/main.go
var progSource []byte

// Where the seed appears in a validation container, and the program the go
// command starts as GOCACHEPROG.
const (
	// SeedTarget is the read-only mount point of the seed directory.
	SeedTarget = "/stockade/seed"
	// ProgPath is the GOCACHEPROG program inside SeedTarget.
	ProgPath = SeedTarget + "/bin/cacheprog"
	// CacheTarget is the seed's cache directory inside SeedTarget.
	CacheTarget = SeedTarget + "/cache"
)

// Layout of the data directory.
const (
	// SeedsDir is the directory under the data directory that holds seeds,
	// one subdirectory per key, and their locks.
	SeedsDir = "seeds"
	// metaFile records, inside a finished seed, what it was built from. Its
	// presence marks the seed complete.
	metaFile = "seed.json"
)

// format versions the seed's layout and the recipe that fills it; a change
// to either changes every key, so old seeds are never read by new code.
const format = "stockade-cacheseed-3"

// MinGoVersion is the oldest toolchain with GOCACHEPROG on by default.
const MinGoVersion = "go1.24"

// Budgets of a seed build.
const (
	// DefaultBuildTimeout bounds the whole of Ensure's build, waiting for
	// another process's lock included. A build cut short resumes from
	// where it stopped on the next Ensure.
	DefaultBuildTimeout = 60 * time.Minute
	// hostGrace is how much longer than a step's in-container timeout the
	// host waits before it kills the container itself.
	hostGrace = 10 * time.Second
	// listCap bounds the output of `go list std`, in bytes.
	listCap = 1 << 20
)

// Errors callers branch on.
var (
	// ErrUnsupported reports a toolchain that cannot use a seed (older than
	// MinGoVersion); the caller runs with an empty fresh cache instead.
	ErrUnsupported = errors.New("cacheseed: toolchain does not support GOCACHEPROG")
	// ErrBuild reports a seed build whose toolchain step failed.
	ErrBuild = errors.New("cacheseed: seed build failed")
)

// Settings are everything besides the image that changes the go command's
// cache keys for the standard library. Validations must run with the same
// values for the seed to hit; a mismatch only costs time, never correctness,
// because every cache key covers its inputs.
type Settings struct {
	// GOFLAGS as validations set it, such as "-mod=mod".
	GOFLAGS string
	// CGOEnabled is CGO_ENABLED: "0", "1", or empty for the toolchain's
	// default (off in images without a C compiler).
	CGOEnabled string
	// GOOS and GOARCH; empty means the image's own.
	GOOS, GOARCH string
	// GOEXPERIMENT and GOAMD64 (or another GO$GOARCH level), empty for the
	// defaults.
	GOEXPERIMENT, GOAMD64 string
	// VetFlags are the analyzer flags validations pass to `go vet` (such as
	// "-printf=false"); empty means vet's default set.
	VetFlags []string
	// TestVet is the -vet flag validations pass to `go test`; empty means
	// go test's default set. "off" skips warming go test's vet.
	TestVet string
}

// Env returns the environment variables s sets, for the seed container and
// for validations alike; empty settings are left out.
func (s Settings) Env() map[string]string {
	env := map[string]string{}
	set := func(k, v string) {
		if v != "" {
			env[k] = v
		}
	}
	set("GOFLAGS", s.GOFLAGS)
	set("CGO_ENABLED", s.CGOEnabled)
	set("GOOS", s.GOOS)
	set("GOARCH", s.GOARCH)
	set("GOEXPERIMENT", s.GOEXPERIMENT)
	set("GOAMD64", s.GOAMD64)
	return env
}

func (s Settings) validate() error {
	for k, v := range s.Env() {
		if strings.ContainsAny(v, "\x00\n") {
			return fmt.Errorf("cacheseed: setting %s has a NUL or newline", k)
		}
	}
	for _, f := range s.VetFlags {
		if !strings.HasPrefix(f, "-") || strings.ContainsAny(f, "\x00\n") {
			return fmt.Errorf("cacheseed: vet flag %q is not a flag", f)
		}
	}
	if strings.ContainsAny(s.TestVet, " \x00\n") {
		return fmt.Errorf("cacheseed: TestVet %q", s.TestVet)
	}
	return nil
}

// Config says which seed Ensure makes.
type Config struct {
	// DataDir is Stockade's data directory (owner-only); seeds live in
	// DataDir/SeedsDir. Required.
	DataDir string
	// Image is the toolchain image, by ID, exactly as validations run it.
	// Required.
	Image string
	// GoVersion is the image's Go version, such as "go1.26.8". Required.
	GoVersion string
	// Settings must match the validations'.
	Settings Settings
	// Owner and Run fill label.Owner and label.Run on the seed containers,
	// so a sweep can find them; empty Owner means "cacheseed".
	Owner, Run string
	// Labels are added to the seed containers' labels; they cannot replace
	// Stockade's own (the data directory's ID among them).
	Labels map[string]string
	// Limits of the seed container; zero fields take
	// container.ToolchainLimits (CPUs clamped to the engine's).
	Limits container.Limits
	// Timeout bounds the build; 0 means DefaultBuildTimeout.
	Timeout time.Duration
	// Logger receives progress (keys image, phase, dur); nil discards.
	Logger *slog.Logger
}

// Seed is a finished seed on the host. The zero Seed is no seed.
type Seed struct {
	// Dir is the seed's host directory: cache/ (a GOCACHE the toolchain
	// filled), bin/cacheprog and seed.json; everything in it is read-only.
	Dir string
	// Key identifies the seed: a digest of the image, Go version, settings
	// and this package's recipe.
	Key string
	// Built is true when this Ensure call built the seed, false when it
	// found it.
	Built bool
	// Meta is what seed.json records.
	Meta Meta
}

// Meta is the record a seed keeps of itself in seed.json.
type Meta struct {
	Key       string
	Image     string
	GoVersion string
	Settings  Settings
	Packages  int           // standard packages the recipe imported
	Files     int           // files in cache/
	Bytes     int64         // bytes in cache/
	Created   time.Time     // when the build finished
	BuildTime time.Duration // wall time of the build, containers included
}

// Valid reports whether s is a seed rather than the zero Seed.
func (s Seed) Valid() bool { return s.Dir != "" }

// Mounts returns the read-only mount of the seed at SeedTarget, or nothing for
// the zero Seed.
func (s Seed) Mounts() []container.Mount {
	if !s.Valid() {
		return nil
	}
	return []container.Mount{{Type: container.Bind, Source: s.Dir, Target: SeedTarget}}
}

// Env returns GOCACHEPROG for a container that mounts s (Mounts) and sets
// GOCACHE to its own fresh, writable cache; nothing for the zero Seed.
func (s Seed) Env() map[string]string {
	if !s.Valid() {
		return nil
	}
	return map[string]string{"GOCACHEPROG": ProgPath + " " + CacheTarget}
}

// Key returns the key of the seed cfg describes, without building anything.
func Key(cfg Config) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", format)
	fmt.Fprintf(h, "image %q\ngo %q\n", cfg.Image, cfg.GoVersion)
	s := cfg.Settings
	fmt.Fprintf(h, "GOFLAGS %q\nCGO_ENABLED %q\nGOOS %q\nGOARCH %q\nGOEXPERIMENT %q\nGOAMD64 %q\n",
		s.GOFLAGS, s.CGOEnabled, s.GOOS, s.GOARCH, s.GOEXPERIMENT, s.GOAMD64)
	fmt.Fprintf(h, "vetflags %q\ntestvet %q\n", s.VetFlags, s.TestVet)
	fmt.Fprintf(h, "prog %x\n", sha256.Sum256(progSource))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Ensure returns the seed cfg describes, building it first if the data
// directory does not hold it yet. Builds are serialized by a lock file per
// key, so concurrent callers in any number of processes build a seed once
// and all get it.
func Ensure(ctx context.Context, eng container.Engine, cfg Config) (Seed, error) {
	if cfg.DataDir == "" || !filepath.IsAbs(cfg.DataDir) {
		return Seed{}, fmt.Errorf("cacheseed: data directory %q is not absolute", cfg.DataDir)
	}
	if cfg.Image == "" {
		return Seed{}, errors.New("cacheseed: no image")
	}
	if err := supported(cfg.GoVersion); err != nil {
		return Seed{}, err
	}
	if err := cfg.Settings.validate(); err != nil {
		return Seed{}, err
	}
	// 0711: the container user must search the seeds directory (the mount
	// probe checks a marker in it) but never list it.
	seeds := filepath.Join(cfg.DataDir, SeedsDir)
	if err := os.MkdirAll(seeds, 0o711); err != nil {
		return Seed{}, fmt.Errorf("cacheseed: %w", err)
	}
	if err := os.Chmod(seeds, 0o711); err != nil {
		return Seed{}, fmt.Errorf("cacheseed: %w", err)
	}
	key := Key(cfg)
	dir := filepath.Join(seeds, key)
	if s, err := open(dir, key); err == nil {
		return s, nil
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultBuildTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// One build per key at a time, in any number of processes; a crashed
	// build's lock goes with its process.
	lock, err := lockfile.Acquire(ctx, filepath.Join(seeds, key+".lock"), timeout, "seed "+key, nil)
	if err != nil {
		return Seed{}, fmt.Errorf("cacheseed: waiting for another build of the seed: %w", err)
	}
	defer lock.Unlock()
	// Another process may have built it while we waited.
	if s, err := open(dir, key); err == nil {
		return s, nil
	}
	meta, err := build(ctx, eng, cfg, key, dir)
	if err != nil {
		return Seed{}, err
	}
	return Seed{Dir: dir, Key: key, Built: true, Meta: meta}, nil
}

// open returns the finished seed in dir, or an error if it is not there.
func open(dir, key string) (Seed, error) {
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return Seed{}, err
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return Seed{}, fmt.Errorf("cacheseed: %s: %w", dir, err)
	}
	if m.Key != key {
		return Seed{}, fmt.Errorf("cacheseed: %s records key %s", dir, m.Key)
	}
	if _, err := os.Stat(filepath.Join(dir, "bin", "cacheprog")); err != nil {
		return Seed{}, err
	}
	return Seed{Dir: dir, Key: key, Meta: m}, nil
}

// supported checks that v ("go1.26.8") is at least MinGoVersion.
func supported(v string) error {
	if v == "" {
		return errors.New("cacheseed: no Go version")
	}
	maj, min, ok := goMinor(v)
	if !ok {
		return fmt.Errorf("cacheseed: Go version %q", v)
	}
	if maj < 1 || maj == 1 && min < 24 {
		return fmt.Errorf("%w: %s", ErrUnsupported, v)
	}
	return nil
}

// goMinor parses "go1.26.8", "go1.26", "go1.26rc1" into 1, 26.
func goMinor(v string) (major, minor int, ok bool) {
	rest, ok := strings.CutPrefix(v, "go")
	if !ok {
		return 0, 0, false
	}
	majS, rest, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, 0, false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	maj, err1 := strconv.Atoi(majS)
	min, err2 := strconv.Atoi(rest[:i])
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return maj, min, true
}

// scope is whose the seed containers are: their labels.
func (cfg Config) scope() container.Scope {
	owner, run := cfg.Owner, cfg.Run
	if owner == "" {
		owner = "cacheseed"
	}
	if run == "" {
		run = "seed"
	}
	return container.Scope{Owner: owner, Run: run, DataDir: label.DataDirID(cfg.DataDir)}
}
