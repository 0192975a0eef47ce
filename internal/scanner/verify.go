package scanner

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrUnverified reports a scanner binary that is not the one recorded at
// build or whose build info is not the pinned build's. The error is a
// *VerifyError.
var ErrUnverified = errors.New("scanner: binary failed verification")

// VerifyError says why a scanner binary was refused.
type VerifyError struct {
	Path   string
	Reason string // such as "sha256 is ..., recorded ..."
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrUnverified, e.Path, e.Reason)
}

// Is matches ErrUnverified.
func (e *VerifyError) Is(target error) bool { return target == ErrUnverified }

// Want is what a scanner binary must be.
type Want struct {
	// SHA256 is the hex digest recorded when the binary was built.
	SHA256 string
	// Pin is the pinned scanner; every module in the build info must have
	// the hash its go.sum records.
	Pin Pin
	// GoVersion is the image's Go version, such as "go1.26.8".
	GoVersion string
	// GOOS and GOARCH the binary must be built for.
	GOOS, GOARCH string
}

// Verify checks the binary at path against w: its sha256, then its build
// info. Any mismatch is a *VerifyError (ErrUnverified) saying which; other
// errors are I/O failures.
func Verify(path string, w Want) error {
	refuse := func(format string, args ...any) error {
		return &VerifyError{Path: path, Reason: fmt.Sprintf(format, args...)}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("scanner: verify: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("scanner: verify: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return refuse("not a regular file")
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("scanner: verify: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != w.SHA256 {
		return refuse("sha256 is %s, recorded at build %s", got, w.SHA256)
	}
	bi, err := buildinfo.Read(f)
	if err != nil {
		return refuse("no readable build info: %v", err)
	}
	gosum, err := w.Pin.GoSum()
	if err != nil {
		return fmt.Errorf("scanner: verify: %w", err)
	}
	pinned := sums(gosum)
	switch {
	case bi.Path != Tool:
		return refuse("builds %q, not %s", bi.Path, Tool)
	case bi.Main.Path != w.Pin.Module || bi.Main.Version != w.Pin.Version:
		return refuse("module %s@%s, pinned %s@%s", bi.Main.Path, bi.Main.Version, w.Pin.Module, w.Pin.Version)
	case bi.Main.Replace != nil:
		return refuse("module %s is replaced by %s", bi.Main.Path, bi.Main.Replace.Path)
	case bi.Main.Sum != pinned[bi.Main.Path+" "+bi.Main.Version]:
		return refuse("module %s@%s has hash %q, go.sum pins %q", bi.Main.Path, bi.Main.Version, bi.Main.Sum, pinned[bi.Main.Path+" "+bi.Main.Version])
	case bi.GoVersion != w.GoVersion:
		return refuse("built by %s, the image has %s", bi.GoVersion, w.GoVersion)
	}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			return refuse("dependency %s@%s is replaced by %s", d.Path, d.Version, d.Replace.Path)
		}
		if want := pinned[d.Path+" "+d.Version]; want == "" || d.Sum != want {
			return refuse("dependency %s@%s has hash %q, go.sum pins %q", d.Path, d.Version, d.Sum, want)
		}
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	for k, v := range map[string]string{"-trimpath": "true", "CGO_ENABLED": "0", "GOOS": w.GOOS, "GOARCH": w.GOARCH, "-buildmode": "exe"} {
		if settings[k] != v {
			return refuse("build setting %s is %q, want %q", k, settings[k], v)
		}
	}
	for _, k := range []string{"-ldflags", "-gcflags", "-asmflags", "-tags", "-toolexec", "-overlay"} {
		if v, ok := settings[k]; ok {
			return refuse("built with %s=%q", k, v)
		}
	}
	return nil
}

// SHA256 returns b's hex digest, as Meta.SHA256 records it.
func SHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
