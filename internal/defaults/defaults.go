// Package defaults is the one home of what every container Stockade makes
// starts from unless told otherwise: the unprivileged user, the default
// limits of sessions and of toolchain containers, the rlimits, and the
// environment an engine would otherwise choose. Sessions (package sandbox's
// DefaultCPUMillis and DefaultPidsLimit are these) and toolchain containers
// (profiles, probe, cleanup, seed build) each have one set; nothing else
// writes a limit down.
//
// It imports nothing, so that the public session API (package sandbox) can
// state its defaults without linking the engine client that
// internal/container, which applies them, needs.
package defaults

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

// Env returns what internal/container puts in every container's
// environment unless the container's spec names it: the variables an engine
// would otherwise choose. Podman adds container=podman and TERM=xterm to
// every container, Docker neither; set here, the environment, and so what
// code in the container sees, is the same on both. container is the
// systemd container interface's name of the implementation; TERM=dumb says
// what a command's output is: a pipe, no terminal.
func Env() map[string]string {
	return map[string]string{"container": "stockade", "TERM": "dumb"}
}
