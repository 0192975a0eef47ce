package toolchain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/image"
)

// probeTimeout bounds the probe container's command.
const probeTimeout = time.Minute

// ProbeMarkerPrefix starts the name of every probe marker file; the rest is
// a nonce new for each probe, because some engines cache path lookups and a
// reused name could report a stale result.
const ProbeMarkerPrefix = ".stockade-probe-"

// ErrMountInvisible reports a host directory the engine does not see: a
// bind mount of it would silently be empty. The error is a *ProbeError.
var ErrMountInvisible = errors.New("toolchain: the engine does not see a directory the run mounts")

// ProbeError names the directories whose markers the probe container did
// not find.
type ProbeError struct {
	Dirs []string // host directories, sorted
}

func (e *ProbeError) Error() string {
	return fmt.Sprintf("toolchain: the container engine does not see %s (a bind mount of it would be empty; share it with the engine's VM or use a data directory under your home directory)", strings.Join(e.Dirs, ", "))
}

// Is matches ErrMountInvisible.
func (e *ProbeError) Is(target error) bool { return target == ErrMountInvisible }

// Probe checks, before any profile runs, that the engine sees every host
// directory the run has made so far (the run directory and each snapshot,
// cache and staging directory in it, and the copies of configured
// directories), plus extra. It writes a uniquely named marker into each,
// starts one container that mounts them all read-only and lists the
// markers, and fails with a *ProbeError naming each directory whose marker
// is missing. Directories made later live inside the probed run directory.
// Run and Start refuse to start before a Probe has passed. Pass in extra
// the directories outside the run that jobs mount (Job.ReadOnly); the host
// must be able to write a marker into each, and the container user to
// search it (mode o+x).
func (r *Runner) Probe(ctx context.Context, extra ...string) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	dirs := []string{r.runDir}
	for d := range r.dirs {
		dirs = append(dirs, d)
	}
	r.mu.Unlock()
	sort.Strings(dirs[1:])
	for _, d := range extra {
		if !cleanAbs(d) {
			return fmt.Errorf("toolchain: probe: %q is not an absolute clean path", d)
		}
		dirs = append(dirs, d)
	}
	marker := ProbeMarkerPrefix + container.RandomHex(12)
	for _, d := range dirs {
		p := filepath.Join(d, marker)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			removeMarkers(dirs, marker)
			return fmt.Errorf("toolchain: probe: write marker: %w", err)
		}
		defer os.Remove(p)
	}
	const base = "/probe"
	// The image's root is listed too: a listing without it did not run
	// (no ls in the image, say), which says nothing about the mounts.
	args := []string{"ls", "-1d", "/"}
	for i := range dirs {
		args = append(args, fmt.Sprintf("%s/%d/%s", base, i, marker))
	}
	spec, err := container.ToolchainSpec(scopeOf(r.cfg), container.PurposeProbe, r.cfg.Image, probeTimeout, args)
	if err != nil {
		return fmt.Errorf("toolchain: probe: %w", err)
	}
	spec.Env = map[string]string{"PATH": image.GoPath}
	// Execute's runtime: what it sees of the mounts is what must be
	// checked (gVisor reaches them through its gofer).
	spec.Runtime = r.cfg.Runtime
	for i, d := range dirs {
		spec.Mounts = append(spec.Mounts, container.Mount{Type: container.Bind, Source: d, Target: fmt.Sprintf("%s/%d", base, i)})
	}
	o := r.runOptions("probe", probeTimeout)
	o.OutputCap = 1 << 20
	res, err := container.Run(ctx, r.eng, spec, o)
	if err != nil {
		return fmt.Errorf("toolchain: probe: %w", err)
	}
	if res.TimedOut || res.Truncated() {
		return fmt.Errorf("toolchain: probe container timed out or flooded its output")
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(string(res.Stdout), "\n") {
		seen[strings.TrimSpace(l)] = true
	}
	if !seen["/"] {
		return fmt.Errorf("toolchain: probe: the listing did not run in image %s (exit %d): %s", r.cfg.Image, res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	var missing []string
	for i, d := range dirs {
		if !seen[fmt.Sprintf("%s/%d/%s", base, i, marker)] {
			missing = append(missing, d)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return &ProbeError{Dirs: missing}
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("toolchain: probe container exited %d: %s", res.ExitCode, res.Stderr)
	}
	r.mu.Lock()
	r.probed = true
	for _, d := range extra {
		r.extra[d] = true
	}
	r.mu.Unlock()
	r.log.Debug("probe passed", "dirs", len(dirs))
	return nil
}

func removeMarkers(dirs []string, marker string) {
	for _, d := range dirs {
		os.Remove(filepath.Join(d, marker))
	}
}
