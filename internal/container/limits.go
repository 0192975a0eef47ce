package container

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/stockade/stockade/internal/defaults"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// Limits are a container's resource limits. A zero field takes the
// default of the set it is completed with (Or); Spec.Config completes with
// SessionLimits.
type Limits struct {
	NanoCPUs    int64 // billionths of a CPU
	MemoryBytes int64 // bytes, swap disabled
	PidsLimit   int64 // processes and threads
}

// SessionLimits are the defaults of a session sandbox.
func SessionLimits() Limits {
	return Limits{NanoCPUs: defaults.SessionNanoCPUs, MemoryBytes: defaults.SessionMemoryBytes, PidsLimit: defaults.SessionPidsLimit}
}

// ToolchainLimits are the defaults of every toolchain container.
func ToolchainLimits() Limits {
	return Limits{NanoCPUs: defaults.ToolchainNanoCPUs, MemoryBytes: defaults.ToolchainMemoryBytes, PidsLimit: defaults.ToolchainPidsLimit}
}

// Or returns l with each zero (or negative) field taken from def.
func (l Limits) Or(def Limits) Limits {
	if l.NanoCPUs <= 0 {
		l.NanoCPUs = def.NanoCPUs
	}
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = def.MemoryBytes
	}
	if l.PidsLimit <= 0 {
		l.PidsLimit = def.PidsLimit
	}
	return l
}

// Clamp bounds l.NanoCPUs to what an engine with ncpu CPUs can give: the
// engine refuses a NanoCPUs above its CPU count. A zero ncpu (unknown)
// clamps nothing.
func (l Limits) Clamp(ncpu int) Limits {
	if max := int64(ncpu) * 1_000_000_000; ncpu > 0 && l.NanoCPUs > max {
		l.NanoCPUs = max
	}
	return l
}

// Infoer is the part of the engine client CPUs uses.
type Infoer interface {
	Info(ctx context.Context) (dockerapi.Info, error)
}

// CPUs remembers an engine's CPU count, asked once, to clamp limits with.
// The zero value is ready to use.
type CPUs struct {
	mu sync.Mutex
	n  int
}

// Clamp returns l clamped to eng's CPUs (see Limits.Clamp), asking the
// engine the first time.
func (c *CPUs) Clamp(ctx context.Context, eng Infoer, l Limits) (Limits, error) {
	c.mu.Lock()
	n := c.n
	c.mu.Unlock()
	if n == 0 {
		info, err := eng.Info(ctx)
		if err != nil {
			return l, fmt.Errorf("container: ask the engine's CPU count: %w", err)
		}
		n = info.NCPU
		c.mu.Lock()
		c.n = n
		c.mu.Unlock()
	}
	return l.Clamp(n), nil
}

// ulimits are the explicit rlimits of every container.
func ulimits() []dockerapi.Ulimit {
	return []dockerapi.Ulimit{{Name: "nofile", Soft: defaults.OpenFiles, Hard: defaults.OpenFiles}, {Name: "nproc", Soft: defaults.Processes, Hard: defaults.Processes}}
}

// userString renders a uid as "uid:gid" with gid equal to uid.
func userString(uid int64) string {
	u := strconv.FormatInt(uid, 10)
	return u + ":" + u
}
