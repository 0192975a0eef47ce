// Package workflow is what the toolchain face's workflows (inspect, scan:
// internal/inspect; maintain: internal/maintain) share: the runner of
// their named steps against one deadline (Steps, Do, each step's Budget,
// a *DeadlineError when time runs out), their common options (Options)
// and their common prelude (Prepare): check the layout, choose the image,
// ensure the scanner, open the run on the locked data directory, snapshot
// and check again, ensure the build-cache seed, probe the mounts, acquire
// the modules. Each workflow is then a short list of steps over what
// Prepare returns, and builds its report from the steps' results.
//
// Threat model: the repository is hostile, as for every workflow. Nothing
// here runs its code: the prelude reads its tree on the host (the layout
// check refuses before any engine call), and runs only module commands in
// the acquire and mutate profiles, behind the run's egress gate
// (internal/toolchain); the validation (internal/validate) is the first
// thing that runs the repository's code, in the execute profile.
package workflow

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/stockade/stockade/internal/toolchain"
)

// Defaults of Options.
const (
	// DefaultLockTimeout is how long a workflow waits for the data
	// directory's lock (held by a run while it starts, or a reap).
	DefaultLockTimeout = 10 * time.Minute
	// DefaultProxy is the module proxy acquisition uses.
	DefaultProxy = toolchain.DefaultProxy
)

// Engine is what the workflows need from the engine client;
// *dockerapi.Client implements it.
type Engine interface {
	toolchain.Engine
	ImageEngine
}

// Options are what every workflow (inspect, scan, maintain) is given; each
// embeds them in its own. Dir is required; the zero value of every other
// field is the default.
type Options struct {
	// Dir is the module's directory, absolute. It is only read (maintain
	// writes its proposal ref, nothing else).
	Dir string
	// FixtureProxy is a host directory in GOPROXY file layout to acquire
	// modules from with no network; Proxy must then be empty.
	FixtureProxy string
	// Proxy is GOPROXY for acquisition; empty means DefaultProxy.
	Proxy string
	// GateNetwork names the network the run's egress gates reach the
	// module proxy on (toolchain.Config.GateNetwork); empty means the
	// engine's "bridge".
	GateNetwork string
	// GateAllowPrivate lists the private ranges the run's egress gates
	// may reach (a proxy on an internal network); nil refuses every
	// private destination (toolchain.Config.GateAllowPrivate).
	GateAllowPrivate []netip.Prefix
	// SumDB is GOSUMDB for acquisition (toolchain.Config.SumDB); empty
	// means sum.golang.org.
	SumDB string
	// Access is how acquisition reaches private modules
	// (toolchain.Config.Access): patterns, and credentials only the
	// profiles that fetch see. The zero value is public modules only.
	Access toolchain.ModuleAccess
	// Runtime is the engine's OCI runtime of the containers the
	// repository's code runs in (toolchain.Config.Runtime): "runsc" for
	// gVisor; empty means the engine's default.
	Runtime string
	// Timeout bounds the workflow's main step: inspect's validation,
	// scan's scanner, each of maintain's validations; zero means that
	// workflow's default.
	Timeout time.Duration
	// Deadline bounds the whole workflow; zero means that workflow's
	// default. Each step gets min(its budget, what is left); when too
	// little is left for a step, the result is inconclusive and names it
	// (DeadlineError).
	Deadline time.Duration
	// DataDir holds caches, snapshots and the lock; empty means
	// DefaultDataDir(). A directory given here must be new, empty or
	// already marked as Stockade's (toolchain.PrepareDataDir).
	DataDir string
	// LockTimeout is how long to wait for another run on DataDir (within
	// the deadline); zero refuses at once.
	LockTimeout time.Duration
	// Image, when set, is the toolchain image to use instead of choosing
	// one: an image ID, or a registry reference pinned by digest
	// (name@sha256:...). Its Go must still satisfy the module.
	Image string
	// Pull pulls Image when the engine does not have it; without Image it
	// does nothing.
	Pull bool
	// Cgo chooses (or builds) an image with the C toolchain layer (gcc,
	// binutils, libc headers from Debian packages at exact versions),
	// where cgo is on as on a developer's machine with a C compiler; the
	// CLI sets it unless -cgo=false. Without it the image has no C
	// compiler (CGO_ENABLED=0).
	Cgo bool
	// AptPackages are Debian packages ("name" or "name=version") to add
	// to the C toolchain layer, with what they depend on
	// (image.ResolvePackages, from the host's apt). They need Cgo; the
	// image with them is built once and chosen again for the same set.
	AptPackages []string
	// Owner labels the run's containers; empty means toolchain's default.
	Owner string
	// Logger receives debug detail; nil discards.
	Logger *slog.Logger
	// Progress, when not nil, is called as each step starts, with its
	// name; the CLI shows it on a terminal.
	Progress func(step string)
	// OnLockWait, when not nil, is called once if another run holds the
	// data directory, with what its lock file says.
	OnLockWait func(holder string)
	// VulnDB, when set, is a vulnerability database in the Go
	// vulnerability database layout (a directory, or a .zip of one): the
	// prelude ensures the pinned scanner (internal/scanner) and the run
	// carries the database, for the workflow's scans. A path that is not
	// one is an error matching vulndb.ErrInvalid before any engine call.
	VulnDB string
	// Cooldown holds back candidate versions the module proxy published
	// less than its MinAge ago; the zero value holds back none.
	Cooldown Cooldown
}

// TimeoutOr is Timeout, or the workflow's default def when Timeout is
// not positive.
func (o Options) TimeoutOr(def time.Duration) time.Duration { return orDefault(o.Timeout, def) }

// DeadlineOr is Deadline, or the workflow's default def when Deadline is
// not positive.
func (o Options) DeadlineOr(def time.Duration) time.Duration { return orDefault(o.Deadline, def) }

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// DefaultDataDir returns $XDG_CACHE_HOME/stockade (os.UserCacheDir). It is
// under the home directory, which VM-backed engines share by default.
func DefaultDataDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("workflow: no default data directory: %w", err)
	}
	return filepath.Join(d, "stockade"), nil
}

// DataDir returns the data directory dir names, DefaultDataDir() when dir
// is empty, and whether it is that default (toolchain.Options.DefaultDataDir).
func DataDir(dir string) (path string, isDefault bool, err error) {
	if dir != "" {
		return dir, false, nil
	}
	path, err = DefaultDataDir()
	return path, true, err
}
