package container

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/stockade/stockade/sandbox/dockerapi"
)

// The one home of Stockade's default limits and of the unprivileged user.
// Sessions (package sandbox's DefaultCPUMillis and DefaultPidsLimit are
// these) and toolchain containers (profiles, probe, cleanup, seed build)
// each have one set; nothing else writes a limit down.
const (
	// UID is the unprivileged user (and group) every container runs as
	// unless told otherwise: nobody.
	UID = 65534
	// NobodyUser is UID as the engine's "uid:gid".
	NobodyUser = "65534:65534"

	// SessionNanoCPUs is a session sandbox's CPU limit: one CPU, in
	// billionths of a CPU.
	SessionNanoCPUs = 1_000_000_000
	// SessionMemoryBytes is a session sandbox's memory, swap disabled.
	SessionMemoryBytes = 1 << 30
	// SessionPidsLimit bounds a session's processes and threads.
	SessionPidsLimit = 256

	// ToolchainNanoCPUs is two CPUs, clamped to what the engine has: the
	// go command compiles packages in parallel.
	ToolchainNanoCPUs = 2_000_000_000
	// ToolchainMemoryBytes includes the /tmp tmpfs the kernel charges to
	// the container (the toolchain links test binaries there), and covers
	// vetting the largest standard packages (the seed build).
	ToolchainMemoryBytes = 3 << 30
	// ToolchainPidsLimit: go test runs a compiler per package and a test
	// binary per package in parallel.
	ToolchainPidsLimit = 1024
	// ToolchainTmpBytes is the size of a toolchain container's /tmp.
	ToolchainTmpBytes = 1 << 30

	// Processes is every container's RLIMIT_NPROC (soft and hard), set
	// explicitly so no engine's default decides it (Podman's is above what
	// a process on machines of this kind may raise it to, and the container
	// then fails to start). The kernel counts it per uid across the host,
	// and every container runs as uid 65534, so it is a host-wide ceiling
	// for Stockade's processes, far above what the pids cgroups
	// (Limits.PidsLimit) let the containers run together; those are the
	// per-container bound. Below the hard limit a Podman service runs with
	// on machines of this kind (32768).
	Processes = 16384
	// OpenFiles is every container's open-files limit (RLIMIT_NOFILE, soft
	// and hard), set explicitly so no engine's default decides it; below
	// the hard limit engines on machines of this kind run with (20000).
	OpenFiles = 16384
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
	return Limits{NanoCPUs: SessionNanoCPUs, MemoryBytes: SessionMemoryBytes, PidsLimit: SessionPidsLimit}
}

// ToolchainLimits are the defaults of every toolchain container.
func ToolchainLimits() Limits {
	return Limits{NanoCPUs: ToolchainNanoCPUs, MemoryBytes: ToolchainMemoryBytes, PidsLimit: ToolchainPidsLimit}
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
	return []dockerapi.Ulimit{{Name: "nofile", Soft: OpenFiles, Hard: OpenFiles}, {Name: "nproc", Soft: Processes, Hard: Processes}}
}

// userString renders a uid as "uid:gid" with gid equal to uid.
func userString(uid int64) string {
	u := strconv.FormatInt(uid, 10)
	return u + ":" + u
}
