package container

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/stockade/stockade/domain"
)

// RuntimeRunsc is gVisor's runtime (domain.RuntimeRunsc).
const RuntimeRunsc = domain.RuntimeRunsc

// ErrRuntimeUnavailable reports a runtime the engine does not offer (not
// in its /info Runtimes): domain.ErrRuntimeUnavailable. Nothing falls back
// to another runtime.
var ErrRuntimeUnavailable = domain.ErrRuntimeUnavailable

// CheckRuntimeName is domain.CheckRuntimeName for a container's spec: its
// errors match ErrInvalidSpec too.
func CheckRuntimeName(name string) error {
	if err := domain.CheckRuntimeName(name); err != nil {
		return fmt.Errorf("%w: runtime: %w", ErrInvalidSpec, err)
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
