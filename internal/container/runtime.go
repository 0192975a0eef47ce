package container

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Runtimes an engine may offer besides its default.
const (
	// RuntimeRunsc is gVisor's runtime, as scripts/runsc-up registers it
	// with Docker: every system call of the container is served by
	// gVisor's own kernel (the Sentry, in user space), not the host's.
	RuntimeRunsc = "runsc"
)

// ErrRuntimeUnavailable reports a runtime the engine does not offer (not
// in its /info Runtimes). Nothing falls back to another runtime: a
// container asked to run under gVisor never runs under runc instead.
var ErrRuntimeUnavailable = errors.New("container: the engine does not offer that runtime")

// maxRuntimeName bounds a runtime's name, in bytes.
const maxRuntimeName = 64

// CheckRuntimeName refuses a runtime name no engine could mean: more than
// 64 bytes, or anything but letters, digits, '.', '_' and '-' ("" is the
// engine's default and passes). Errors match ErrInvalidSpec.
func CheckRuntimeName(name string) error {
	if len(name) > maxRuntimeName {
		return fmt.Errorf("%w: runtime name of %d bytes", ErrInvalidSpec, len(name))
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: runtime name %q", ErrInvalidSpec, name)
		}
	}
	return nil
}

// Runtimes remembers which runtimes an engine has been seen to offer, to
// check a container's before it is made. The zero value is ready to use
// and safe for concurrent use. A runtime found is remembered; one not
// found is asked about again next time (it may be registered since:
// the engine reloads its runtimes without a restart). One that goes away
// after it was found makes the engine refuse the create, so nothing ever
// runs under another runtime than the one asked.
type Runtimes struct {
	mu   sync.Mutex
	seen map[string]bool
}

// Check returns nil when name is "" (the engine's default) or one of
// eng's runtimes, else an error matching ErrRuntimeUnavailable that names
// the ones it has.
func (r *Runtimes) Check(ctx context.Context, eng Infoer, name string) error {
	if name == "" {
		return nil
	}
	if err := CheckRuntimeName(name); err != nil {
		return err
	}
	r.mu.Lock()
	ok := r.seen[name]
	r.mu.Unlock()
	if ok {
		return nil
	}
	info, err := eng.Info(ctx)
	if err != nil {
		return fmt.Errorf("container: ask the engine's runtimes: %w", err)
	}
	if _, ok := info.Runtimes[name]; !ok {
		have := make([]string, 0, len(info.Runtimes))
		for n := range info.Runtimes {
			have = append(have, n)
		}
		sort.Strings(have)
		return fmt.Errorf("%w: %q is not one of the engine's runtimes (%s); register it (scripts/runsc-up for runsc)", ErrRuntimeUnavailable, name, strings.Join(have, ", "))
	}
	r.mu.Lock()
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	r.seen[name] = true
	r.mu.Unlock()
	return nil
}
