package enginetest

import (
	"context"
	"strings"
	"sync"

	"github.com/stockade/stockade/sandbox/dockerapi"
)

// Hang is a real engine that never sees some containers end: the first
// wait for each container whose name starts with Prefix blocks until its
// context ends, as an engine that hangs would. Everything else is the
// engine's.
type Hang struct {
	*dockerapi.Client
	Prefix string // such as "stockade-tc-probe-"

	mu   sync.Mutex
	ids  map[string]bool // containers not waited for yet
	hung bool
}

// Hung reports whether a wait blocked.
func (h *Hang) Hung() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hung
}

func (h *Hang) ContainerCreate(ctx context.Context, name string, cfg dockerapi.ContainerConfig) (string, error) {
	id, err := h.Client.ContainerCreate(ctx, name, cfg)
	if err == nil && strings.HasPrefix(name, h.Prefix) {
		h.mu.Lock()
		if h.ids == nil {
			h.ids = map[string]bool{}
		}
		h.ids[id] = true
		h.mu.Unlock()
	}
	return id, err
}

func (h *Hang) ContainerWait(ctx context.Context, id, condition string) (dockerapi.WaitResult, error) {
	h.mu.Lock()
	hang := h.ids[id]
	delete(h.ids, id)
	h.hung = h.hung || hang
	h.mu.Unlock()
	if hang {
		<-ctx.Done()
		return dockerapi.WaitResult{}, ctx.Err()
	}
	return h.Client.ContainerWait(ctx, id, condition)
}
