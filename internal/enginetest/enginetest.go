// Package enginetest gives tests a real engine client. Without a reachable
// engine the test is skipped, unless STOCKADE_REQUIRE_ENGINE=1, when it fails:
// CI sets it so engine tests can never silently pass by skipping.
package enginetest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// RequireEnv is the variable that turns a missing engine into a failure.
const RequireEnv = "STOCKADE_REQUIRE_ENGINE"

// Required reports whether RequireEnv is set to 1.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Client returns a client for the engine New finds, after a ping. It skips or
// fails t when there is none.
func Client(t testing.TB) *dockerapi.Client {
	t.Helper()
	c, err := dockerapi.New("")
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = c.Ping(ctx)
		cancel()
	}
	if err != nil {
		if Required() {
			t.Fatalf("engine required (%s=1) but not reachable: %v", RequireEnv, err)
		}
		t.Skipf("no engine reachable (set %s=1 to fail instead): %v", RequireEnv, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Owner returns a label owner unique to this test process and name, so
// concurrent test packages never sweep each other's objects.
func Owner(t testing.TB) string {
	return "test-" + sanitize(t.Name()) + "-" + time.Now().Format("150405.000000")
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 60 {
		b = b[:60]
	}
	return string(b)
}

var (
	baseOnce sync.Once
	baseID   string
	baseErr  error
)

// BaseImage returns the ID of the busybox-only image internal/image builds
// (the engine stores it once; building it again is a cheap check), building
// it on the first call of the test process.
func BaseImage(t testing.TB, c *dockerapi.Client) string {
	t.Helper()
	baseOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var res image.Result
		var cache string
		if cache, baseErr = ImageCacheDir(); baseErr != nil {
			return
		}
		res, baseErr = image.Build(ctx, c, image.Options{NoGo: true, CacheDir: cache})
		baseID = res.ID
	})
	if baseErr != nil {
		t.Fatalf("building the base image: %v", baseErr)
	}
	return baseID
}

// ImageCacheDir is the image.Options.CacheDir of the tests' image builds:
// stockade-test/toolchains under the user's cache directory, shared across
// runs so that what builds fetch (Go releases, Debian packages, a busybox
// on a host without one) is fetched once. internal/image's own tests use
// the same directory.
func ImageCacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "stockade-test", "toolchains"), nil
}

// DataDirEnv names the variable that overrides SharedDataDir.
const DataDirEnv = "STOCKADE_TEST_DATADIR"

// SharedDataDir is the data directory the engine tests of every package
// share across runs, so one build-cache seed and one scanner per image
// serve them all (the data directory's lock serializes their runs):
// $STOCKADE_TEST_DATADIR, or stockade-test/validate under the user's cache
// directory (under the home directory, which VM-backed engines see).
func SharedDataDir() (string, error) {
	if d := os.Getenv(DataDirEnv); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "stockade-test", "validate"), nil
}

// Leftovers lists the containers (in any state), volumes and networks
// that carry labels, such as an owner's or a data directory's: what a test
// expects its code to have removed.
func Leftovers(ctx context.Context, c *dockerapi.Client, labels map[string]string) ([]string, error) {
	f := dockerapi.LabelsFilter(labels)
	var out []string
	cs, err := c.ContainerList(ctx, dockerapi.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, err
	}
	for _, x := range cs {
		out = append(out, "container "+strings.Join(x.Names, ",")+" ("+x.State+")")
	}
	vs, err := c.VolumeList(ctx, f)
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		out = append(out, "volume "+v.Name)
	}
	ns, err := c.NetworkList(ctx, f)
	if err != nil {
		return nil, err
	}
	for _, n := range ns {
		out = append(out, "network "+n.Name)
	}
	return out, nil
}

// Podman reports whether c's engine is Podman, whose differences the
// backends refuse rather than absorb (NetUnrestricted, gate networks).
func Podman(t testing.TB, c *dockerapi.Client) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := c.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return v.Podman()
}
