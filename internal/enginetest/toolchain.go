package enginetest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/modproxy"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// toolchain is what Toolchain makes once per test process.
var toolchain struct {
	once    sync.Once
	err     error
	proxy   string
	dataDir string
	tmp     string
}

// Toolchain gives the toolchain face's engine tests what they share, made
// once per test process: the engine client, a GOPROXY directory generated
// from the module sources in modules (modproxy, the repository's
// testdata/modules), the data directory every package shares
// (SharedDataDir) and the toolchain image of the host's Go, built when the
// engine lacks it. It skips with -short, and without an engine as Client
// does. RemoveToolchain removes the proxy when the tests are done.
func Toolchain(t testing.TB, modules string) (c *dockerapi.Client, proxy, dataDir string) {
	t.Helper()
	if testing.Short() {
		t.Skip("engine-backed workflows take minutes; skipped with -short")
	}
	c = Client(t)
	toolchain.once.Do(func() {
		if toolchain.tmp, toolchain.err = os.MkdirTemp("", "stockade-fixtures-"); toolchain.err != nil {
			return
		}
		toolchain.proxy = filepath.Join(toolchain.tmp, "proxy")
		if toolchain.err = modproxy.Generate(modules, toolchain.proxy); toolchain.err != nil {
			return
		}
		if toolchain.dataDir, toolchain.err = SharedDataDir(); toolchain.err != nil {
			return
		}
		cache, err := ImageCacheDir()
		if err != nil {
			toolchain.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		_, toolchain.err = image.Build(ctx, c, image.Options{CacheDir: cache})
	})
	if toolchain.err != nil {
		t.Fatalf("preparing the shared engine fixtures: %v", toolchain.err)
	}
	return c, toolchain.proxy, toolchain.dataDir
}

// RemoveToolchain removes what Toolchain made on the host for this
// process (the proxy), making what is read-only in it writable first;
// TestMain calls it after the tests.
func RemoveToolchain() {
	if toolchain.tmp == "" {
		return
	}
	filepath.WalkDir(toolchain.tmp, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	os.RemoveAll(toolchain.tmp)
}
