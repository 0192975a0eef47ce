package cacheseed

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/hosttest"
	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

func TestKey(t *testing.T) {
	base := Config{Image: "sha256:aa", GoVersion: "go1.26.8", Settings: Settings{GOFLAGS: "-mod=mod"}}
	if Key(base) != Key(base) {
		t.Fatal("Key is not deterministic")
	}
	if got := len(Key(base)); got != 32 {
		t.Errorf("len(Key) = %d; want 32", got)
	}
	// Everything that changes cache keys changes the seed's key.
	for name, mut := range map[string]func(*Config){
		"image":        func(c *Config) { c.Image = "sha256:bb" },
		"go":           func(c *Config) { c.GoVersion = "go1.26.9" },
		"GOFLAGS":      func(c *Config) { c.Settings.GOFLAGS = "-mod=readonly" },
		"CGO_ENABLED":  func(c *Config) { c.Settings.CGOEnabled = "1" },
		"GOOS":         func(c *Config) { c.Settings.GOOS = "darwin" },
		"GOARCH":       func(c *Config) { c.Settings.GOARCH = "arm64" },
		"GOEXPERIMENT": func(c *Config) { c.Settings.GOEXPERIMENT = "x" },
		"GOAMD64":      func(c *Config) { c.Settings.GOAMD64 = "v3" },
		"vetflags":     func(c *Config) { c.Settings.VetFlags = []string{"-printf=false"} },
		"testvet":      func(c *Config) { c.Settings.TestVet = "off" },
	} {
		c := base
		mut(&c)
		if Key(c) == Key(base) {
			t.Errorf("changing %s does not change the key", name)
		}
	}
	// What does not change cache keys does not change the seed's key.
	c := base
	c.DataDir, c.Owner, c.Run, c.Timeout = "/x", "o", "r", time.Second
	if Key(c) != Key(base) {
		t.Error("DataDir, Owner, Run or Timeout changed the key")
	}
}

func TestSupported(t *testing.T) {
	for v, want := range map[string]error{
		"go1.26.8":  nil,
		"go1.24":    nil,
		"go1.25rc1": nil,
		"go2.0":     nil,
		"go1.23.4":  ErrUnsupported,
		"go1.21":    ErrUnsupported,
	} {
		if err := supported(v); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("supported(%q) = %v; want %v", v, err, want)
		}
	}
	for _, v := range []string{"", "1.26", "go", "gox.y"} {
		if err := supported(v); err == nil {
			t.Errorf("supported(%q) = nil; want an error", v)
		}
	}
}

func TestStdPackages(t *testing.T) {
	out := "archive/tar\ncrypto/internal/fips140\ninternal/abi\nnet/http\nruntime/cgo\nsyscall/js ERR\nvendor/golang.org/x/net/dns/dnsmessage\nnet/http/internal\nfmt\n\n"
	got := strings.Join(stdPackages([]byte(out)), " ")
	if want := "archive/tar fmt net/http"; got != want {
		t.Errorf("stdPackages = %q; want %q", got, want)
	}
}

func TestWarmFiles(t *testing.T) {
	f := warmFiles("go1.26.8", []string{"fmt", "net/http"})
	if got, want := string(f["go.mod"]), "module stockade.local/seedwarm\n\ngo 1.26\n"; got != want {
		t.Errorf("go.mod = %q; want %q", got, want)
	}
	if !strings.Contains(string(f["warm.go"]), "\t_ \"net/http\"\n") {
		t.Errorf("warm.go does not import net/http:\n%s", f["warm.go"])
	}
	if _, ok := f["warm_test.go"]; !ok {
		t.Error("no test file: go test would not build a test main")
	}
}

func TestZeroSeed(t *testing.T) {
	var s Seed
	if s.Valid() || s.Mounts() != nil || s.Env() != nil {
		t.Errorf("zero Seed: Valid %v, Mounts %v, Env %v; want false, nil, nil", s.Valid(), s.Mounts(), s.Env())
	}
	f, err := NewFresh(s, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Env("/cache"); len(got) != 1 || got["GOCACHE"] != "/cache" {
		t.Errorf("Env = %v; want only GOCACHE", got)
	}
	if got := f.Mounts("/cache"); len(got) != 1 || !got[0].Writable {
		t.Errorf("Mounts = %+v; want the fresh cache alone, writable", got)
	}
}

func TestNewFresh(t *testing.T) {
	parent := t.TempDir()
	seed := Seed{Dir: "/data/seeds/k", Key: "k"}
	a, err := NewFresh(seed, parent)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewFresh(seed, parent)
	if err != nil {
		t.Fatal(err)
	}
	if a.Dir == b.Dir {
		t.Fatal("two fresh caches share a directory")
	}
	fi, err := os.Stat(a.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o777 {
		t.Errorf("mode = %v; want 0777", fi.Mode().Perm())
	}
	ms := a.Mounts("/cache")
	if len(ms) != 2 {
		t.Fatalf("Mounts = %+v; want the cache and the seed", ms)
	}
	if m := ms[1]; m.Source != seed.Dir || m.Target != SeedTarget || m.Writable {
		t.Errorf("seed mount = %+v; want %s read-only at %s", m, seed.Dir, SeedTarget)
	}
	env := a.Env("/cache")
	if env["GOCACHE"] != "/cache" || env["GOCACHEPROG"] != ProgPath+" "+CacheTarget {
		t.Errorf("Env = %v", env)
	}
	if _, err := NewFresh(seed, "relative"); err == nil {
		t.Error("NewFresh with a relative parent succeeded")
	}
}

// engineSeed is what the engine tests share: one image and one seed, built
// once per test binary, in a data directory kept across runs (a second run
// reuses the seed, as a second inspect would).
type engineSeed struct {
	eng     *dockerapi.Client
	img     image.Result
	cfg     Config
	seed    Seed
	dataDir string
}

// testSettings are the settings validations run with
// (validate.SeedSettings), so that the seed the tests check is
// the one the shared data directory already holds when scripts/test
// prepared it.
var testSettings = Settings{GOFLAGS: "-mod=mod"}

// testDataDir is stockade-test/cacheseed under the user's cache directory
// (which a VM-backed engine sees; the seed survives the run), a data
// directory of this package's own: the containers these tests run carry
// its ID, so no toolchain run of another package's tests on the shared
// data directory reaps them. The seeds the shared one holds
// (enginetest.SharedDataDir, where scripts/test prepared them) are
// hard-linked in first, so the seed checked is the one prepared, and
// built here only when there is none.
func testDataDir(t testing.TB) string {
	t.Helper()
	shared, err := enginetest.SharedDataDir()
	if err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(filepath.Dir(shared), "cacheseed")
	if err := os.MkdirAll(filepath.Join(d, SeedsDir), 0o700); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(shared, SeedsDir))
	for _, e := range ents {
		src, dst := filepath.Join(shared, SeedsDir, e.Name()), filepath.Join(d, SeedsDir, e.Name())
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if _, err := os.Stat(filepath.Join(src, "seed.json")); err != nil {
			continue // not finished
		}
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		tmp := filepath.Join(d, SeedsDir, ".link-"+e.Name()+"-"+container.RandomHex(4))
		if err := hosttest.LinkTree(src, tmp); err != nil {
			os.RemoveAll(tmp)
			t.Logf("linking the shared seed %s: %v (it is built here instead)", e.Name(), err)
			continue
		}
		if err := os.Rename(tmp, dst); err != nil {
			chmodTree(tmp)
			os.RemoveAll(tmp)
		}
	}
	return d
}

// chmodTree makes the directories under dir writable, so they can go.
func chmodTree(dir string) {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
}

func setupEngine(t testing.TB) *engineSeed {
	t.Helper()
	if testing.Short() && !enginetest.Required() {
		t.Skip("builds a seed (minutes on a cold data directory); runs without -short or with " + enginetest.RequireEnv + "=1")
	}
	eng := enginetest.Client(t)
	ctx := context.Background()
	cache, err := enginetest.ImageCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	img, err := image.Build(ctx, eng, image.Options{CacheDir: cache})
	if err != nil {
		t.Fatalf("image.Build: %v", err)
	}
	cfg := Config{
		DataDir:   testDataDir(t),
		Image:     img.ID,
		GoVersion: img.GoVersion,
		Settings:  testSettings,
		Owner:     enginetest.Owner(t),
	}
	if testing.Verbose() {
		cfg.Logger = testLogger(t)
	}
	seed, err := Ensure(ctx, eng, cfg)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	return &engineSeed{eng: eng, img: img, cfg: cfg, seed: seed, dataDir: cfg.DataDir}
}

func TestEnsure_BuildsOnceAndIsReadOnly(t *testing.T) {
	es := setupEngine(t)
	t.Logf("seed %s: built %v, %d packages, %d files, %d bytes, build time %v", es.seed.Key, es.seed.Built, es.seed.Meta.Packages, es.seed.Meta.Files, es.seed.Meta.Bytes, es.seed.Meta.BuildTime)
	if es.seed.Meta.Packages < 100 || es.seed.Meta.Files < 1000 {
		t.Errorf("seed holds %d packages, %d files; want the standard library", es.seed.Meta.Packages, es.seed.Meta.Files)
	}
	// A second Ensure, as a second run would make, finds it.
	start := time.Now()
	again, err := Ensure(context.Background(), es.eng, es.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if again.Built || again.Dir != es.seed.Dir {
		t.Errorf("second Ensure: Built %v, Dir %s; want false, %s", again.Built, again.Dir, es.seed.Dir)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("second Ensure took %v", d)
	}
	// Everything in it is read-only: files 0444 (the program 0555),
	// directories 0555.
	err = filepath.WalkDir(es.seed.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o222 != 0 {
			t.Errorf("%s is writable: %v", p, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// No build directories are left behind.
	left, _ := filepath.Glob(filepath.Join(es.dataDir, SeedsDir, ".*"))
	if len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// runIn runs argv in a validation-like container: the execute profile's
// settings, the fresh cache at /cache, the module at /src read-only.
func runIn(t testing.TB, es *engineSeed, fresh Fresh, src string, argv ...string) container.Result {
	t.Helper()
	env := map[string]string{
		"GOTOOLCHAIN": "local", "GOPROXY": "off", "GOSUMDB": "off", "GOTELEMETRY": "off",
		"HOME": "/tmp/home", "TMPDIR": "/tmp", "GOPATH": "/tmp/gopath",
		"PATH": "/usr/local/go/bin:/usr/bin:/bin",
	}
	for k, v := range testSettings.Env() {
		env[k] = v
	}
	for k, v := range fresh.Env("/cache") {
		env[k] = v
	}
	spec, err := container.ToolchainSpec(es.cfg.scope(), "test", es.img.ID, 10*time.Minute, argv)
	if err != nil {
		t.Fatal(err)
	}
	spec.Env = env
	spec.Mounts = append(spec.Mounts, fresh.Mounts("/cache")...)
	if src != "" {
		spec.Mounts = append(spec.Mounts, container.Mount{Type: container.Bind, Source: src, Target: "/src"})
		spec.Workdir = "/src"
	}
	res, err := container.Run(context.Background(), es.eng, spec, container.RunOptions{Timeout: 11 * time.Minute})
	if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	return res
}

// removeFresh removes a fresh cache: a container empties what the container
// user wrote when the host user cannot.
func removeFresh(t testing.TB, es *engineSeed, f Fresh) {
	t.Helper()
	if err := os.RemoveAll(f.Dir); err == nil {
		return
	}
	runIn(t, es, Fresh{Dir: f.Dir}, "", "go", "clean", "-cache", "-fuzzcache")
	if err := os.RemoveAll(f.Dir); err != nil {
		t.Errorf("fresh cache left behind: %v", err)
	}
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{t}, nil))
}

// A copy of the seed that a build killed mid-copy left is removed by the
// next build of that key, read-only parts included; other keys' are not.
func TestRemoveStaleCopies(t *testing.T) {
	seeds := t.TempDir()
	stale := filepath.Join(seeds, ".seed-k1-123")
	other := filepath.Join(seeds, ".seed-k2-456")
	for _, d := range []string{filepath.Join(stale, "cache", "00"), other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(stale, "cache", "00", "x-a"), []byte("x"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := readOnly(stale); err != nil {
		t.Fatal(err)
	}
	removeStaleCopies(seeds, "k1", slog.New(slog.DiscardHandler))
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale copy of k1: %v; want it removed", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("copy of k2: %v; want it kept", err)
	}
}
