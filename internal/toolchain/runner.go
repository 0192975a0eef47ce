package toolchain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/lockfile"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// DefaultOwner is the label owner of CLI runs.
const DefaultOwner = "stockade"

// ErrNotProbed reports a container asked for before Probe succeeded: no
// profile runs until the mount probe has shown the engine sees the run's
// directories.
var ErrNotProbed = errors.New("toolchain: the mount probe has not passed")

// ErrClosed reports a Runner used after Close.
var ErrClosed = errors.New("toolchain: runner is closed")

// ErrNotOwned reports a Job naming a host directory the Runner did not
// create for that use (a user's checkout, another validation's cache).
var ErrNotOwned = errors.New("toolchain: directory not made by this run for this use")

// Result is what one command did: exit code, TimedOut, OOMKilled, capped
// output and truncation flags, phase durations. It is data about the
// untrusted code, never a failure of Stockade's.
type Result = container.Result

// Engine is the part of the engine client a Runner uses;
// *dockerapi.Client implements it.
type Engine interface {
	container.Engine
	ContainerList(ctx context.Context, opts dockerapi.ListOptions) ([]dockerapi.ContainerSummary, error)
	ExecCreate(ctx context.Context, containerID string, cfg dockerapi.ExecConfig) (string, error)
	ExecStart(ctx context.Context, execID string, stdout, stderr io.Writer) error
	ExecInspect(ctx context.Context, execID string) (dockerapi.ExecInspect, error)
	Info(ctx context.Context) (dockerapi.Info, error)
	// The run's egress gates' networks (internal/egress).
	NetworkCreate(ctx context.Context, n dockerapi.NetworkCreate) (string, error)
	NetworkList(ctx context.Context, filters dockerapi.Filters) ([]dockerapi.Network, error)
	NetworkRemove(ctx context.Context, id string) error
	NetworkConnect(ctx context.Context, network, container string, aliases ...string) error
	// The image's GOROOT volume (GoRoot, SweepGoRoots).
	ImageInspect(ctx context.Context, ref string) (dockerapi.Image, error)
	ImageRemove(ctx context.Context, ref string, force bool) error
	VolumeCreate(ctx context.Context, v dockerapi.VolumeCreate) (dockerapi.Volume, error)
	VolumeList(ctx context.Context, filters dockerapi.Filters) ([]dockerapi.Volume, error)
	VolumeRemove(ctx context.Context, name string, force bool) error
}

// Options configure Open.
type Options struct {
	// DataDir is the data directory: created owner-only (0700) and marked
	// if missing or empty; an existing one must carry the marker
	// (PrepareDataDir). Required.
	DataDir string
	// DefaultDataDir says DataDir is the default location, which earlier
	// versions made without a marker (PrepareDefaultDataDir).
	DefaultDataDir bool
	// Owner labels the run's containers; empty means DefaultOwner. Tests
	// use unique owners and data directories.
	Owner string
	// Config is the run's configuration; Owner, RunID and DataDirID are
	// filled in by Open.
	Config Config
	// LockTimeout is how long Open waits for another run on the same data
	// directory to finish; zero or negative refuses at once (ErrLocked).
	LockTimeout time.Duration
	// OnLockWait, when not nil, is called once if Open has to wait, with
	// what the lock file says of the holder.
	OnLockWait func(holder string)
	// Budgets bound each engine phase of every container (create, start,
	// kill, logs, remove); a zero field takes container's default.
	Budgets container.Budgets
	// Logger receives progress; nil discards.
	Logger *slog.Logger
}

// dirKind says what a directory of the run is for; a Job may mount a
// directory only in the role it was made for.
type dirKind int

const (
	kindSnapshot dirKind = iota + 1
	kindModCache
	kindModBuild   // Acquire and Mutate's build cache; Execute never mounts it
	kindBuildCache // a fresh Execute build cache
	kindStaging
	kindToolMod
	kindToolBuild
	kindToolBin
	kindImport   // a copy of a configured directory (fixture proxy, scan)
	kindWorkTree // an Execute container's throwaway working tree
)

// Runner is one toolchain run on a locked data directory. It is safe for
// concurrent use.
type Runner struct {
	eng     Engine
	cfg     Config
	dataDir string
	runDir  string
	runLock *lockfile.Lock // held for the run's life: the run is live
	budgets container.Budgets
	log     *slog.Logger

	modCache, modBuild string

	mu     sync.Mutex
	dirs   map[string]dirKind
	extra  map[string]bool // directories outside the run's that passed a Probe
	used   map[string]bool // Execute build caches already given to a Start
	probed bool
	live   map[*Container]bool
	closed bool

	gateMu  sync.Mutex // held while a gate starts
	gates   []runGate  // the run's egress gates, one per policy
	gateImg string     // the gate image built for the run
}

// Open validates o.Config (refusing any weakening before a container
// exists), prepares and locks the data directory, reaps what a crashed run
// on it left behind (containers and run directories), and creates this
// run's directory with its module cache and its Acquire/Mutate build cache.
// Configured directories (fixture proxy, scan tools, vulnerability
// database) are copied into the run directory, so the probe never writes
// outside it. Close releases everything.
func Open(ctx context.Context, eng Engine, o Options) (*Runner, error) {
	cfg := o.Config
	cfg.Owner = o.Owner
	if cfg.Owner == "" {
		cfg.Owner = DefaultOwner
	}
	cfg.RunID = container.RandomHex(6)
	cfg.DataDirID = "pending"
	for _, f := range []*string{&cfg.FixtureProxy, &cfg.ScanTools, &cfg.ScanVulnDB} {
		if *f != "" {
			abs, err := filepath.Abs(*f)
			if err != nil {
				return nil, configErr("FixtureProxy", "%v", err)
			}
			*f = abs
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Never another runtime than the one asked.
	var rts container.Runtimes
	if err := rts.Check(ctx, eng, cfg.Runtime); err != nil {
		return nil, fmt.Errorf("toolchain: %w", err)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	prepare := PrepareDataDir
	if o.DefaultDataDir {
		prepare = PrepareDefaultDataDir
	}
	dir, err := prepare(o.DataDir)
	if err != nil {
		return nil, err
	}
	cfg.DataDirID = DataDirID(dir)
	// The data directory's lock orders this run's start against reaps:
	// held while the run makes its directory and takes the run's own lock
	// (from then on a reap sees the run live), and while it reaps what
	// crashed runs left; released before any of the run's containers.
	lock, err := LockDataDir(ctx, dir, o.LockTimeout, "run="+cfg.RunID, o.OnLockWait)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	r := &Runner{
		eng: eng, cfg: cfg, dataDir: dir, budgets: o.Budgets, log: log.With("run", cfg.RunID),
		dirs: map[string]dirKind{}, used: map[string]bool{}, live: map[*Container]bool{}, extra: map[string]bool{},
	}
	fail := func(err error) (*Runner, error) {
		r.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	// The run directory is searchable (not listable) by the container user,
	// so the probe can reach its marker; the 0700 data directory above it
	// keeps other host users out.
	runDir := filepath.Join(dir, runPrefix+"-"+cfg.RunID)
	if err := os.Mkdir(runDir, RunDirMode); err != nil {
		return fail(fmt.Errorf("toolchain: %w", err))
	}
	r.runDir = runDir
	if err := os.Chmod(runDir, RunDirMode); err != nil { // past the umask
		return fail(fmt.Errorf("toolchain: %w", err))
	}
	if r.runLock, err = lockfile.TryAcquire(filepath.Join(runDir, RunLockFile), "run="+cfg.RunID); err != nil {
		return fail(fmt.Errorf("toolchain: the run's lock: %w", err))
	}
	var cpus container.CPUs
	if lim, err := cpus.Clamp(ctx, eng, r.cfg.Limits.Or(container.ToolchainLimits())); err == nil {
		r.cfg.Limits = lim
	}
	if n, err := Reap(ctx, eng, dir); err != nil {
		return fail(err)
	} else if n > 0 {
		r.log.Info("reaped orphans", "containers", n)
	}
	if n, err := r.removeStaleRuns(ctx); err != nil {
		return fail(err)
	} else if n > 0 {
		r.log.Info("removed crashed runs' directories", "dirs", n)
	}
	if err := lock.Unlock(); err != nil {
		return fail(fmt.Errorf("toolchain: %w", err))
	}
	// The image's GOROOT from a volume is only faster: when it cannot be
	// had, containers read the image's own, as they would without it.
	if v, err := GoRoot(ctx, eng, r.cfg.Image, scopeOf(r.cfg), r.budgets); err != nil {
		r.log.Warn("no GOROOT volume: containers read the image's GOROOT", "err", err)
	} else {
		r.cfg.GoRoot = v
	}
	if r.modCache, err = r.mkdir("modcache", kindModCache); err != nil {
		return fail(err)
	}
	if r.modBuild, err = r.mkdir("gocache-mod", kindModBuild); err != nil {
		return fail(err)
	}
	for _, f := range []*string{&r.cfg.FixtureProxy, &r.cfg.ScanTools, &r.cfg.ScanVulnDB} {
		if *f == "" {
			continue
		}
		dst, err := r.mkdir("import", kindImport)
		if err != nil {
			return fail(err)
		}
		if err := copyTree(*f, dst, nil); err != nil {
			return fail(fmt.Errorf("toolchain: copy %s: %w", *f, err))
		}
		*f = dst
	}
	if r.cfg.Access.credentials() {
		if r.cfg.AuthCopy, err = r.copyAuth(r.cfg.Access); err != nil {
			return fail(err)
		}
	}
	return r, nil
}

// maxAuthFile bounds a credential file Open copies, in bytes.
const maxAuthFile = 16 << 20

// copyAuth copies a's credential files into a directory of the run laid
// out as AuthDir: netrc, helper (executable), ca/ca.pem. The data
// directory (0700) keeps other host users away from them; the run's
// Close removes them, and a crashed run's are removed with its directory.
func (r *Runner) copyAuth(a ModuleAccess) (string, error) {
	dst, err := r.mkdir("auth", kindImport)
	if err != nil {
		return "", err
	}
	for _, f := range []struct {
		src, name string
		mode      os.FileMode
	}{{a.Netrc, "netrc", 0o644}, {a.AuthHelper, "helper", 0o755}, {a.ProxyCA, "ca/ca.pem", 0o644}} {
		if f.src == "" {
			continue
		}
		b, err := readRegular(f.src, maxAuthFile)
		if err != nil {
			return "", fmt.Errorf("%w: credentials: %v", ErrInvalidConfig, err)
		}
		p := filepath.Join(dst, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", fmt.Errorf("toolchain: %w", err)
		}
		// The container user reads them: not the host user.
		if err := os.WriteFile(p, b, f.mode); err != nil {
			return "", fmt.Errorf("toolchain: %w", err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			return "", fmt.Errorf("toolchain: %w", err)
		}
	}
	return dst, nil
}

// Config returns the run's configuration as containers get it: identity
// filled in, configured directories replaced by their copies.
func (r *Runner) Config() Config { return r.cfg }

// DataDir returns the data directory (absolute, symlinks resolved).
func (r *Runner) DataDir() string { return r.dataDir }

// RunID returns the run's ID (label.Run).
func (r *Runner) RunID() string { return r.cfg.RunID }

// ModCache returns the run's module cache: writable in Acquire and Mutate,
// read-only in Execute.
func (r *Runner) ModCache() string { return r.modCache }

// mkdir makes a fresh directory of kind in the run directory.
func (r *Runner) mkdir(prefix string, k dirKind) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return "", ErrClosed
	}
	mode := os.FileMode(CacheDirMode)
	if k == kindSnapshot || k == kindImport {
		mode = 0o755
	}
	p, err := container.MkdirFresh(r.runDir, prefix, mode)
	if err != nil {
		return "", err
	}
	r.dirs[p] = k
	return p, nil
}

// NewBuildCache returns a fresh, empty, randomly named build cache for one
// validation in Execute. Never give one validation's cache to another.
func (r *Runner) NewBuildCache() (string, error) { return r.mkdir("gocache", kindBuildCache) }

// forget removes dir, one of the run's directories, and forgets it; Close
// would remove it anyway. It works on its own budgets even when ctx has
// ended.
func (r *Runner) forget(ctx context.Context, dir string) error {
	err := r.removeAll(context.WithoutCancel(ctx), dir)
	if err == nil {
		r.mu.Lock()
		delete(r.dirs, dir)
		r.mu.Unlock()
	}
	return err
}

// ToolDirs are the Tool profile's own fresh directories.
type ToolDirs struct {
	ModCache, BuildCache string
	Bin                  string // mounted writable at ToolsDir (GOBIN)
}

// NewToolDirs returns fresh directories for one Tool job.
func (r *Runner) NewToolDirs() (ToolDirs, error) {
	var d ToolDirs
	var err error
	if d.ModCache, err = r.mkdir("tool-modcache", kindToolMod); err != nil {
		return d, err
	}
	if d.BuildCache, err = r.mkdir("tool-gocache", kindToolBuild); err != nil {
		return d, err
	}
	d.Bin, err = r.mkdir("tool-bin", kindToolBin)
	return d, err
}

// claimDirs fills in the run's own caches and refuses directories the run
// did not make for that role.
func (r *Runner) claimDirs(j *Job) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if !r.probed {
		return ErrNotProbed
	}
	own := func(field, p string, k dirKind) error {
		if p == "" {
			return nil
		}
		if r.dirs[p] != k {
			return fmt.Errorf("%w: %s %s", ErrNotOwned, field, p)
		}
		return nil
	}
	switch j.Profile {
	case Acquire, Mutate:
		if j.ModCache == "" {
			j.ModCache = r.modCache
		}
		if j.BuildCache == "" {
			j.BuildCache = r.modBuild
		}
		if err := own("BuildCache", j.BuildCache, kindModBuild); err != nil {
			return err
		}
		if err := own("Staging", j.Staging, kindStaging); err != nil {
			return err
		}
		if err := own("ModCache", j.ModCache, kindModCache); err != nil {
			return err
		}
	case Execute:
		if j.ModCache == "" {
			j.ModCache = r.modCache
		}
		if err := own("ModCache", j.ModCache, kindModCache); err != nil {
			return err
		}
		if err := own("WorkTree", j.WorkTree, kindWorkTree); err != nil {
			return err
		}
		if j.BuildCache != "" {
			if err := own("BuildCache", j.BuildCache, kindBuildCache); err != nil {
				return fmt.Errorf("%w (%w)", err, ErrNoBuildCache)
			}
		}
	case Tool:
		for _, c := range []struct {
			f, p string
			k    dirKind
		}{{"ModCache", j.ModCache, kindToolMod}, {"BuildCache", j.BuildCache, kindToolBuild}, {"Tools", j.Tools, kindToolBin}} {
			if err := own(c.f, c.p, c.k); err != nil {
				return err
			}
		}
	}
	for _, m := range j.ReadOnly {
		if !r.probedExtra(m.Source) {
			return fmt.Errorf("%w: ReadOnly %s has not passed the probe", ErrNotOwned, m.Source)
		}
	}
	return own("Source", j.Source, kindSnapshot)
}

// probedExtra reports whether p is, or is inside, a directory given to a
// Probe that passed. Called with r.mu held.
func (r *Runner) probedExtra(p string) bool {
	for d := range r.extra {
		if container.Within(d, p) {
			return true
		}
	}
	return false
}

// runOptions are container.Run's options for the helper containers
// (probe, cleanup), which run no repository code and print little.
func (r *Runner) runOptions(p Profile, timeout time.Duration) container.RunOptions {
	return container.RunOptions{
		Name:      container.RandomName("tc-" + string(p)),
		Timeout:   timeout + HostGrace,
		OutputCap: 1 << 20,
		Budgets:   r.budgets,
		Logger:    r.log.With("profile", string(p)),
	}
}

// Run runs job in a one-shot container of its profile and removes the
// container (container.Run: output streamed live into capped buffers, and
// kill, output collection and removal each on their own budget, detached
// from ctx). The command runs under an in-container `timeout -s KILL`; the
// host kills the container HostGrace later if it is still running.
// Result.TimedOut is set by either.
func (r *Runner) Run(ctx context.Context, job Job) (Result, error) {
	return r.run(ctx, job, false)
}

// run is Run; keep leaves the container in place (tests use it to leave an
// orphan as a crashed process would).
func (r *Runner) run(ctx context.Context, job Job, keep bool) (Result, error) {
	if job.WorkTree != "" {
		return Result{}, jobErr("WorkTree", "a working tree is made and filled by Start; a one-shot execute sees the snapshot read-only")
	}
	if err := r.claimDirs(&job); err != nil {
		return Result{}, err
	}
	if err := r.gate(ctx, &job); err != nil {
		return Result{}, err
	}
	spec, err := NewSpec(r.cfg, job)
	if err != nil {
		return Result{}, err
	}
	timeout := timeoutOf(r.cfg, job)
	o := r.runOptions(job.Profile, timeout)
	o.OutputCap = r.cfg.OutputCap
	if o.OutputCap <= 0 {
		o.OutputCap = DefaultOutputCap
	}
	o.Keep = keep
	res, err := container.Run(ctx, r.eng, spec, o)
	markTimeout(&res, timeout, res.Phases.Wait)
	return res, err
}

// gate puts a checked job of a profile with network behind the run's
// egress gate for its policy, starting the gate on first need.
func (r *Runner) gate(ctx context.Context, job *Job) error {
	pol, networked := GatePolicy(job.Profile, r.cfg)
	if !networked {
		return nil
	}
	g, err := r.gateFor(ctx, pol)
	if err != nil {
		return err
	}
	job.gateNet = g.Network()
	return nil
}

// markTimeout sets TimedOut when the in-container timeout killed the
// command: SIGKILL's 137 at or after the timeout, not for memory.
func markTimeout(res *Result, timeout, ran time.Duration) {
	if !res.TimedOut && res.ExitCode == 137 && !res.OOMKilled && ran+time.Second >= timeout {
		res.TimedOut = true
	}
}

// Close removes the run's live containers, its egress gates and their
// networks, and every directory the run made
// (through a container when the host user cannot remove what the container
// user wrote), and releases the data directory's lock. It works on its own
// budgets even when ctx has ended, returns every failure joined, and
// releases the lock regardless. It is safe to call more than once.
func (r *Runner) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	live := make([]*Container, 0, len(r.live))
	for c := range r.live {
		live = append(live, c)
	}
	r.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	var errs []error
	for _, c := range live {
		errs = append(errs, c.Close(ctx))
	}
	errs = append(errs, r.closeGates(ctx))
	if _, err := reap(ctx, r.eng, r.cfg.DataDirID, r.cfg.RunID); err != nil {
		errs = append(errs, err)
	}
	if r.runDir != "" {
		if err := r.removeAll(ctx, r.runDir); err != nil {
			errs = append(errs, err)
		}
	}
	// Last: until here a reap sees the run live.
	errs = append(errs, r.runLock.Unlock())
	return errors.Join(errs...)
}

// removeStaleRuns removes the run directories of crashed runs (ReapRuns)
// and the scratch directories of processes that died (Scratch), and
// returns how many: those whose lock file (RunLockFile) no one holds.
// Call it with the data directory's lock held, so no run is between
// making its directory and taking its lock.
func (r *Runner) removeStaleRuns(ctx context.Context) (int, error) {
	ents, err := os.ReadDir(r.dataDir)
	if err != nil {
		return 0, fmt.Errorf("toolchain: %w", err)
	}
	n := 0
	for _, e := range ents {
		// DirEntry's type is Lstat's: a symlink named run-x is not
		// followed, and is left alone.
		if !e.IsDir() || !strings.HasPrefix(e.Name(), runPrefix+"-") && !strings.HasPrefix(e.Name(), scratchPrefix+"-") {
			continue
		}
		dir := filepath.Join(r.dataDir, e.Name())
		if live, err := lockfile.Held(filepath.Join(dir, RunLockFile)); err != nil || live {
			continue // a live run's (this one's among them) or scratch
		}
		if err := r.removeAll(ctx, dir); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
