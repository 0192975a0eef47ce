package container

import (
	"fmt"
	"strconv"
	"time"

	"github.com/stockade/stockade/internal/defaults"
	"github.com/stockade/stockade/internal/label"
)

// The named specs: every container Stockade creates starts from one of the
// constructors in this file, which fix what its kind must carry (the labels
// a sweep finds it by, the user, the default limits, and, for toolchain
// containers, the in-container timeout). Callers add mounts, environment
// and network; Spec.Config refuses a spec without Stockade's labels.

// Purposes of toolchain containers besides the four profiles (acquire,
// mutate, execute, tool); each becomes the label.Profile value.
const (
	PurposeProbe     = "probe"   // the mount probe
	PurposeCleanup   = "cleanup" // removes what the container user wrote
	PurposeSeedBuild = "seed"    // builds the trusted build-cache seed
	PurposeGate      = "gate"    // the run's egress gate (internal/egress)
	PurposeGoRoot    = "goroot"  // copies an image's GOROOT into its volume (toolchain.GoRoot)
)

// Scope says whose a toolchain container is; every field becomes a label
// and is required.
type Scope struct {
	Owner string // label.Owner
	Run   string // label.Run: the run that made it
	// DataDir is label.DataDir, the data directory's ID (label.DataDirID),
	// so that reaping that directory finds the container after a crash.
	DataDir string
}

// ToolchainSpec returns the start of every toolchain container: a
// profile's, the mount probe's, the cleanup's and the seed build's. It runs
// argv as defaults.NobodyUser under an in-container timeout of lifetime (busybox
// timeout -s KILL, so the container ends by itself even if Stockade is
// gone), with docker-init as PID 1, ToolchainLimits, an exec-enabled tmpfs
// /tmp of defaults.ToolchainTmpBytes, and the labels of sc and purpose.
func ToolchainSpec(sc Scope, purpose, image string, lifetime time.Duration, argv []string) (Spec, error) {
	if sc.Owner == "" || sc.Run == "" || sc.DataDir == "" {
		return Spec{}, fmt.Errorf("%w: a toolchain container needs an owner, a run and a data directory to be labelled with (have %+v)", ErrInvalidSpec, sc)
	}
	if purpose == "" || len(argv) == 0 || lifetime <= 0 {
		return Spec{}, fmt.Errorf("%w: a toolchain container needs a purpose, a command and a lifetime", ErrInvalidSpec)
	}
	l := label.Base(sc.Owner, label.KindToolchain)
	l[label.Run], l[label.DataDir], l[label.Profile] = sc.Run, sc.DataDir, purpose
	return Spec{
		Image:    image,
		Cmd:      TimeoutCmd(lifetime, argv),
		User:     defaults.NobodyUser,
		Workdir:  "/tmp",
		Limits:   ToolchainLimits(),
		Init:     true,
		Hostname: "stockade",
		Labels:   l,
		Mounts:   []Mount{{Type: Tmpfs, Target: "/tmp", Exec: true, SizeBytes: defaults.ToolchainTmpBytes}},
	}, nil
}

// SessionSpec returns the start of a session sandbox's container, session
// of owner: the labels (label.Session included), user uid, SessionLimits,
// docker-init as PID 1, and a main process that sleeps until the container
// is removed. A session has no in-container timeout: it lives until the
// platform reaps it (sandbox.Provider.Reap), and holds no command of its
// own; each Exec has its timeout. The main process is Stockade's, as its
// Entrypoint: an image's ENTRYPOINT and CMD play no part in a sandbox,
// whose commands never go through them (an entrypoint that did not run
// its arguments would leave the sandbox dead on arrival).
func SessionSpec(owner, session string, uid int64) Spec {
	l := label.Base(owner, label.KindSession)
	l[label.Session] = session
	return Spec{
		Entrypoint: []string{"/bin/sh", "-c", "while :; do sleep 86400 || exit 3; done"},
		User:       userString(uid),
		Limits:     SessionLimits(),
		Init:       true,
		Labels:     l,
	}
}

// Limits of a session's keeper, which only sleeps to keep the session's
// tmpfs volumes mounted while the session container is stopped or
// restarted.
const (
	KeeperNanoCPUs    = 100_000_000 // a tenth of a CPU (a hundredth made starting it take 2 s)
	KeeperMemoryBytes = 16 << 20    // bytes; a shell and sleep
	KeeperPidsLimit   = 8           // docker-init, sh, sleep, and room
)

// KeeperSpec returns the start of session's keeper container: a session
// container (SessionSpec's labels and main process) as nobody, with no
// network, the keeper's limits and "/" as its working directory. The caller
// adds the image and the session's volumes, read-only.
func KeeperSpec(owner, session string) Spec {
	s := SessionSpec(owner, session, defaults.UID)
	s.Workdir, s.Network = "/", "none"
	s.Limits = Limits{NanoCPUs: KeeperNanoCPUs, MemoryBytes: KeeperMemoryBytes, PidsLimit: KeeperPidsLimit}
	return s
}

// TimeoutCmd wraps argv in the image's busybox timeout, which SIGKILLs the
// command after d (rounded up to whole seconds, at least one). Exit status
// 137 after d means the timeout fired.
func TimeoutCmd(d time.Duration, argv []string) []string {
	secs := int64((d + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	return append([]string{"timeout", "-s", "KILL", strconv.FormatInt(secs, 10)}, argv...)
}

// Limits of a session's egress gate (cmd/stockade-gate), a Go proxy: one
// CPU so a download through it is not slowed, memory for its buffers and
// record, threads for the Go runtime.
const (
	GateNanoCPUs    = defaults.SessionNanoCPUs
	GateMemoryBytes = 128 << 20 // bytes
	GatePidsLimit   = 64
	// GateStopSeconds is how long a stop waits between SIGTERM and
	// SIGKILL, in seconds: room for the gate's telemetry flush
	// (internal/gate/telemetry.ShutdownBudget, 3 s; a test keeps them in
	// step).
	GateStopSeconds = 5
)

// GateSpec returns the start of session's egress gate container: the
// session's labels with label.Role = label.RoleGate (gateSpec).
func GateSpec(owner, session string) Spec {
	l := label.Base(owner, label.KindSession)
	l[label.Session] = session
	return gateSpec(l)
}

// ToolchainGateSpec returns the start of a toolchain run's egress gate
// container (the gate of its acquire, mutate and tool containers): the
// labels of a toolchain container of sc with purpose PurposeGate, so the
// run's cleanup and its data directory's reap remove it, and
// label.Role = label.RoleGate (gateSpec).
func ToolchainGateSpec(sc Scope) (Spec, error) {
	if sc.Owner == "" || sc.Run == "" || sc.DataDir == "" {
		return Spec{}, fmt.Errorf("%w: a toolchain gate needs an owner, a run and a data directory to be labelled with (have %+v)", ErrInvalidSpec, sc)
	}
	l := label.Base(sc.Owner, label.KindToolchain)
	l[label.Run], l[label.DataDir], l[label.Profile] = sc.Run, sc.DataDir, PurposeGate
	return gateSpec(l), nil
}

// gateSpec is every gate's start: labels l with label.Role =
// label.RoleGate, nobody, docker-init as PID 1, the gate's limits and stop
// timeout and the image's own command (the gate). The caller adds the image, the gate's
// environment and its networks (internal/egress).
func gateSpec(l map[string]string) Spec {
	l[label.Role] = label.RoleGate
	return Spec{
		User:        defaults.NobodyUser,
		Limits:      Limits{NanoCPUs: GateNanoCPUs, MemoryBytes: GateMemoryBytes, PidsLimit: GatePidsLimit},
		Init:        true,
		Labels:      l,
		StopTimeout: GateStopSeconds,
	}
}
