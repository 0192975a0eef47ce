package image

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// fetchTimeout bounds fetching one Go release through the module proxy:
// about 70 MB to download, verify and unzip.
const fetchTimeout = 10 * time.Minute

// maxFetchStderr caps the go command's stderr kept in a FetchError, in bytes.
const maxFetchStderr = 4 << 10

// ErrFetch reports that a Go release could not be fetched through the
// module proxy: the proxy does not serve it, the network is down, or its
// checksum did not verify. Match it with errors.Is; the error is a
// *FetchError.
var ErrFetch = errors.New("image: go release not fetched from the module proxy")

// ErrBadRelease reports a Go release that is not of the form 1.N.P,
// 1.NrcK or 1.NbetaK.
var ErrBadRelease = errors.New("image: malformed go release")

// ErrNoChecksumDB reports a host whose go command has GOSUMDB=off: a
// toolchain fetched then would be trusted on the proxy's word alone.
var ErrNoChecksumDB = errors.New("image: GOSUMDB is off; a toolchain is fetched only when the checksum database verifies it")

// FetchError says why the go command did not fetch a release.
type FetchError struct {
	Version string // "1.27.3"
	Stderr  string // the go command's, capped at maxFetchStderr
	Err     error  // the go command's exit, or the check that failed
}

func (e *FetchError) Error() string {
	s := fmt.Sprintf("image: fetch go%s through the module proxy: %v", e.Version, e.Err)
	if e.Stderr != "" {
		s += ": " + e.Stderr
	}
	return s
}

// Is makes errors.Is(err, ErrFetch) true.
func (e *FetchError) Is(target error) bool { return target == ErrFetch }

func (e *FetchError) Unwrap() error { return e.Err }

// releaseRE is a Go release as the toolchain module names it.
var releaseRE = regexp.MustCompile(`^1\.(0|[1-9][0-9]{0,3})(\.(0|[1-9][0-9]{0,3})|(rc|beta)[1-9][0-9]{0,3})$`)

// CleanRelease returns version ("1.27.3" or "go1.27.3") without "go", or
// an error matching ErrBadRelease.
func CleanRelease(version string) (string, error) {
	v := strings.TrimPrefix(version, "go")
	if !releaseRE.MatchString(v) {
		return "", fmt.Errorf("%w: %q: want a release such as 1.27.3", ErrBadRelease, version)
	}
	return v, nil
}

// toolchainModule returns the module version of golang.org/toolchain that
// holds release v for linux/goarch, as the go command names it.
func toolchainModule(v, goarch string) string {
	return "v0.0.1-go" + v + ".linux-" + goarch
}

// FetchedGoRoot is the GOROOT that FetchGo leaves under cacheDir for
// release version, whether or not it is there yet.
func FetchedGoRoot(cacheDir, version string) string {
	return filepath.Join(cacheDir, "gopath", "pkg", "mod", "golang.org", "toolchain@"+toolchainModule(strings.TrimPrefix(version, "go"), runtime.GOARCH))
}

// FetchGo returns the GOROOT of Go release version for this machine's
// architecture, fetched through the module proxy the way the go command
// fetches a toolchain when GOTOOLCHAIN names one: the host's go runs
// `go version` with GOTOOLCHAIN=go<version>, so it downloads the module
// golang.org/toolchain@v0.0.1-go<version>.linux-<arch>, verifies it
// against the checksum database and unpacks it into a module cache of its
// own under cacheDir. No other download site is involved; a machine behind
// a module mirror uses its mirror (the host's GOPROXY and GOSUMDB).
//
// A release already unpacked there is returned without a download: the
// module cache is written only after verification.
func FetchGo(ctx context.Context, version, cacheDir string) (string, error) {
	v, err := CleanRelease(version)
	if err != nil {
		return "", err
	}
	if cacheDir == "" {
		return "", errors.New("image: FetchGo: no cache directory")
	}
	cacheDir, err = filepath.Abs(cacheDir)
	if err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	dir := FetchedGoRoot(cacheDir, v)
	if fetched(dir, v) {
		return dir, nil
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	proxy, sumdb, err := hostModuleEnv(ctx)
	if err != nil {
		return "", err
	}
	gopath := filepath.Join(cacheDir, "gopath")
	work := filepath.Join(cacheDir, "work") // no go.mod: outside any module
	for _, d := range []string{gopath, work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", fmt.Errorf("image: %w", err)
		}
	}
	cmd, err := goCommand(ctx, "version")
	if err != nil {
		return "", err
	}
	cmd.Dir = work
	// From scratch but for PATH and HOME: no GOFLAGS, GONOSUMDB,
	// GOINSECURE or go env file can weaken the verification.
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"GOENV=off",
		"GOFLAGS=",
		"GOWORK=off",
		"GOPATH=" + gopath,
		"GOMODCACHE=" + filepath.Join(gopath, "pkg", "mod"),
		"GOCACHE=" + filepath.Join(cacheDir, "gocache"),
		"GOTOOLCHAIN=go" + v,
		"GOPROXY=" + proxy,
		"GOSUMDB=" + sumdb,
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", &FetchError{Version: v, Stderr: capString(strings.TrimSpace(stderr.String()), maxFetchStderr), Err: err}
	}
	if got := strings.TrimSpace(stdout.String()); !strings.HasPrefix(got, "go version go"+v+" ") {
		return "", &FetchError{Version: v, Err: fmt.Errorf("go version printed %q", got)}
	}
	if !fetched(dir, v) {
		return "", &FetchError{Version: v, Err: fmt.Errorf("no toolchain at %s after the go command ran it", dir)}
	}
	return dir, nil
}

// fetched reports whether dir holds release v, unpacked and made
// executable by the go command.
func fetched(dir, v string) bool {
	b, err := readCapped(filepath.Join(dir, "VERSION"), maxVersionFile)
	if err != nil {
		return false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if strings.TrimSpace(line) != "go"+v {
		return false
	}
	fi, err := os.Stat(filepath.Join(dir, "bin", "go"))
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// hostModuleEnv returns the GOPROXY and GOSUMDB the host's go command
// uses (environment and go env file), refusing GOSUMDB=off.
func hostModuleEnv(ctx context.Context) (proxy, sumdb string, err error) {
	cmd, err := goCommand(ctx, "env", "-json", "GOPROXY", "GOSUMDB")
	if err != nil {
		return "", "", err
	}
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("image: go env: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var env struct{ GOPROXY, GOSUMDB string }
	if err := json.Unmarshal(out, &env); err != nil {
		return "", "", fmt.Errorf("image: go env: %w", err)
	}
	if env.GOSUMDB == "" || env.GOSUMDB == "off" {
		return "", "", ErrNoChecksumDB
	}
	if env.GOPROXY == "" {
		env.GOPROXY = "https://proxy.golang.org,direct"
	}
	return env.GOPROXY, env.GOSUMDB, nil
}

func capString(s string, max int) string {
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// FetchedReleases returns the releases FetchGo has left under cacheDir for
// this machine's architecture, such as ["1.27.3"], in directory order; a
// missing cacheDir has none.
func FetchedReleases(cacheDir string) []string {
	parent := filepath.Dir(FetchedGoRoot(cacheDir, "1.0.0"))
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var out []string
	suffix := ".linux-" + runtime.GOARCH
	for _, e := range ents {
		v, ok := strings.CutPrefix(e.Name(), "toolchain@v0.0.1-go")
		if !ok || !strings.HasSuffix(v, suffix) {
			continue
		}
		v = strings.TrimSuffix(v, suffix)
		if _, err := CleanRelease(v); err == nil && fetched(filepath.Join(parent, e.Name()), v) {
			out = append(out, v)
		}
	}
	return out
}
