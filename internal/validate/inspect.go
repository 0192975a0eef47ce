package validate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stockade/stockade/internal/cacheseed"
	"github.com/stockade/stockade/internal/gomod"
	"github.com/stockade/stockade/internal/imagetable"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/scanner"
	"github.com/stockade/stockade/internal/testjson"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/vulndb"
)

// Defaults of InspectOptions.
const (
	// DefaultDeadline bounds a whole inspect: every phase, from the layout
	// check to the candidate listing, fits in it.
	DefaultDeadline = time.Hour
	// DefaultLockTimeout is how long inspect waits for the data
	// directory's lock (held by a run while it starts, or a reap).
	DefaultLockTimeout = 10 * time.Minute
	// DefaultProxy is the module proxy acquisition uses.
	DefaultProxy = toolchain.DefaultProxy
	// containerSlack is how much longer the validation's container lives
	// than the validation's timeout: its own exec overhead.
	containerSlack = 2 * time.Minute
)

// Budgets of inspect's phases. Each phase gets min(its budget, what is
// left of InspectOptions.Deadline); the lock wait's budget is LockTimeout
// and the validation's is Timeout.
const (
	// imageBudget covers choosing the toolchain image, or building the
	// local one from the host's Go.
	imageBudget = 10 * time.Minute
	// openBudget covers opening the run past the lock wait: reaping what a
	// crashed run left, copying the configured directories.
	openBudget = 5 * time.Minute
	// seedBudget covers building the build-cache seed on first use: it
	// compiles the standard library.
	seedBudget = 20 * time.Minute
	// probeBudget covers the mount probe's container.
	probeBudget = 2 * time.Minute
	// acquireBudget covers downloading the modules go.mod requires.
	acquireBudget = 10 * time.Minute
	// candidatesBudget covers listing and downloading upgrade candidates.
	candidatesBudget = 10 * time.Minute
	// scannerBudget covers building the pinned vulnerability scanner on
	// first use for an image (internal/scanner), the lock wait included.
	scannerBudget = 25 * time.Minute
	// scanBudget covers the vulnerability scan of the snapshot.
	scanBudget = 10 * time.Minute
	// hostGrace is how much longer the host waits for a phase that runs
	// containers than the phase's own in-container timeouts: creating,
	// starting, collecting output and removing.
	hostGrace = 2 * time.Minute
	// minPhase is the least time a phase needs to start: in-container
	// timeouts have a resolution of one second.
	minPhase = time.Second
)

// budget is what is left of inspect's overall deadline.
type budget struct {
	deadline time.Time
	now      func() time.Time
}

// phase returns how long a phase whose own budget is max may take:
// min(max, what is left). ok is false when less than minPhase is left:
// the phase must not start, and inspect has timed out.
func (b budget) phase(max time.Duration) (d time.Duration, ok bool) {
	d = b.deadline.Sub(b.now())
	if max < d {
		d = max
	}
	return d, d >= minPhase
}

// DefaultDataDir returns $XDG_CACHE_HOME/stockade (os.UserCacheDir). It is
// under the home directory, which VM-backed engines share by default.
func DefaultDataDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("validate: no default data directory: %w", err)
	}
	return filepath.Join(d, "stockade"), nil
}

// InspectOptions configure Inspect. Dir is required; the zero value of
// every other field is the default.
type InspectOptions struct {
	// Dir is the module directory, absolute. It is only read.
	Dir string
	// Worktree validates the working tree of a git checkout, uncommitted
	// changes included, instead of the committed tree.
	Worktree bool
	// FixtureProxy is a host directory in GOPROXY file layout to acquire
	// modules from with no network; Proxy must then be empty.
	FixtureProxy string
	// Proxy is GOPROXY for acquisition; empty means DefaultProxy.
	Proxy string
	// Timeout bounds the validation (list, build, vet and test together);
	// zero means DefaultTimeout. It is the validation phase's budget within
	// Deadline.
	Timeout time.Duration
	// Deadline bounds the whole inspect; zero means DefaultDeadline. Each
	// phase gets min(its budget, what is left); when too little is left
	// for a phase, the report is inconclusive and names it (TimedOut).
	Deadline time.Duration
	// DataDir holds caches, snapshots and the lock; empty means
	// DefaultDataDir(). A directory given here must be new, empty or
	// already marked as Stockade's (toolchain.PrepareDataDir).
	DataDir string
	// LockTimeout is how long to wait for another run on DataDir; zero
	// refuses at once.
	LockTimeout time.Duration
	// Image, when set, is the toolchain image to use instead of choosing
	// one: an image ID, or a registry reference pinned by digest
	// (name@sha256:...). Its Go must still satisfy the module.
	Image string
	// Pull pulls Image when the engine does not have it.
	Pull bool
	// Cgo validates in an image with the C toolchain layer (gcc, binutils,
	// libc headers from Debian packages at exact versions), where cgo is on
	// as on a developer's machine with a C compiler; the CLI sets it unless
	// -cgo=false. Without it the image has no C compiler (CGO_ENABLED=0).
	Cgo bool
	// AptPackages are Debian packages ("name" or "name=version") to add
	// to the C toolchain layer, with what they depend on
	// (image.ResolvePackages, from the host's apt): a library's -dev
	// package for a module that needs it. They need Cgo; the image with
	// them is built once and chosen again for the same set.
	AptPackages []string
	// Owner labels the run's containers; empty means toolchain's default.
	Owner string
	// Logger receives debug detail; nil discards.
	Logger *slog.Logger
	// Progress, when not nil, is called as each phase starts, with its
	// name; the CLI shows it on a terminal.
	Progress func(phase string)
	// OnLockWait, when not nil, is called once if another run holds the
	// data directory, with what its lock file says.
	OnLockWait func(holder string)
	// VulnDB, when set, is a vulnerability database in the Go
	// vulnerability database layout (a directory, or a .zip of one): the
	// report's Vulns is a scan of the snapshot with the pinned scanner
	// (internal/scanner) against it. A path that is not one is an error
	// matching vulndb.ErrInvalid before any engine call.
	VulnDB string
	// ScanOnly is `stockade scan`: the validation and the candidate
	// listing are skipped, and the verdict is the scan's
	// (report.FinishScan). It needs VulnDB.
	ScanOnly bool
	// ScanOutputCap is how many bytes of each of the scanner's streams
	// the scan keeps (scanner.Options.OutputCap); zero means
	// scanner.DefaultOutputCap.
	ScanOutputCap int64
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
}

// ErrScanNeedsDB reports ScanOnly without a VulnDB.
var ErrScanNeedsDB = errors.New("validate: a scan needs a vulnerability database (-vulndb or " + vulndb.EnvDefault + ")")

// Refuse checks, without an engine, the layout of the tree of dir that
// inspect validates (checkTree), against the releases dataDir (empty:
// DefaultDataDir()) and the host have: it returns a finished report and
// true when the module is refused (an unsupported layout, or a go
// directive no image can build) or its go.mod does not parse (failing),
// and nil and false when it may be inspected; err is an input that cannot
// be read (toolchain.ErrSnapshot) or Stockade's failure. Inspect makes the
// same check first, and again on the snapshot it validates.
func Refuse(ctx context.Context, dir string, worktree bool, dataDir string) (*report.Report, bool, error) {
	start := time.Now()
	rep := report.New(dir)
	m, src, err := checkTree(ctx, dir, worktree, dataDir)
	if !refusal(rep, m, err) {
		return nil, false, err
	}
	rep.Source = src
	rep.Finish(time.Since(start))
	return rep, true, nil
}

// checkTree checks the layout of the tree inspect validates: for a
// directory in a git checkout (its top, or below it: a module of a
// monorepo) its committed tree (with worktree, the files git would commit
// from the working tree), so an ignored node_modules or .venv symlink
// refuses nothing, and a submodule below it is refused; for any other
// directory the directory. A checkout's
// tree is copied into a scratch directory of the data directory dataDir
// (empty: DefaultDataDir()) for the check and removed after
// (toolchain.Scratch). The go directive must be one of the releases the
// host and dataDir have (Releases). It also says which tree that is.
func checkTree(ctx context.Context, dir string, worktree bool, dataDir string) (*gomod.Module, *report.Source, error) {
	if _, _, git := toolchain.GitWorkTree(ctx, dir); !git {
		m, _, err := gomod.Check(dir, Releases(ctx, dataDir), nil)
		return m, &report.Source{Kind: "directory"}, err
	}
	defaultDir := dataDir == ""
	if defaultDir {
		var err error
		if dataDir, err = DefaultDataDir(); err != nil {
			return nil, nil, err
		}
	}
	tmp, err := toolchain.NewScratch(dataDir, defaultDir)
	if err != nil {
		return nil, nil, err
	}
	defer tmp.Close()
	snap, err := toolchain.SnapshotTo(ctx, dir, tmp.Dir, toolchain.SnapshotOptions{Worktree: worktree})
	if errors.Is(err, toolchain.ErrTooLarge) {
		return nil, nil, &gomod.UnsupportedError{Reason: gomod.ReasonTooLarge, Path: ".", Err: err}
	}
	if err != nil {
		return nil, nil, err
	}
	m, _, err := gomod.Check(snap.Dir, Releases(ctx, dataDir), nil)
	if err == nil && len(snap.Submodules) > 0 {
		// Its content is not in the repository: what would run is not
		// what a clone with submodules has.
		err = &gomod.UnsupportedError{Reason: gomod.ReasonSubmodule, Path: snap.Submodules[0]}
	}
	return m, sourceOf(snap), err
}

// refusal fills rep's refusal (and module facts) from a gomod.Check error;
// it reports whether err was a refusal.
func refusal(rep *report.Report, m *gomod.Module, err error) bool {
	if m != nil {
		rep.Module, rep.Go = m.Path, m.Go
	}
	var ue *gomod.UnsupportedError
	var me *gomod.MalformedError
	var tn *imagetable.TooNewError
	switch {
	case errors.As(err, &tn):
		rep.Refusal = &report.Refusal{Kind: "requires_newer_toolchain", Reason: tn.Error()}
	case errors.As(err, &ue):
		rep.Refusal = &report.Refusal{Kind: string(ue.Reason), Reason: refusalText(ue)}
	case errors.As(err, &me):
		rep.Refusal = &report.Refusal{Kind: report.RefusalMalformedGoMod, Reason: me.Error()}
	case errors.Is(err, gomod.ErrNoModule):
		rep.Refusal = &report.Refusal{Kind: "no_module", Reason: "no go.mod at the top of the directory"}
	default:
		return false
	}
	return true
}

// refusalText says why a layout is refused, in one sentence.
func refusalText(e *gomod.UnsupportedError) string {
	what := map[gomod.Reason]string{
		gomod.ReasonWorkspace:     "go.work workspaces are not supported yet",
		gomod.ReasonVendor:        "vendored modules are not supported yet",
		gomod.ReasonNestedModule:  "nested modules are not supported yet",
		gomod.ReasonLocalReplace:  "replace directives with a local directory target are not supported yet",
		gomod.ReasonSubmodule:     "git submodules are not supported yet",
		gomod.ReasonSymlinkEscape: "a symlink leaves the repository",
		gomod.ReasonIrregularFile: "the repository holds a device, pipe or socket",
		gomod.ReasonTooLarge:      "the repository is too large",
		gomod.ReasonGoVersion:     "no toolchain image can build this go directive",
	}[e.Reason]
	if what == "" {
		what = "unsupported layout " + string(e.Reason)
	}
	s := what + " (" + e.Path
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	s += ")"
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Engine is what Inspect needs from the engine client;
// *dockerapi.Client implements it.
type Engine interface {
	toolchain.Engine
	ImageEngine
}

// Inspect is `stockade inspect`: it checks the layout of the tree it will
// validate, picks (or builds) the toolchain image, opens a run on the
// locked data directory (reaping what a crashed run left), snapshots the
// module, probes the mounts, acquires the modules, runs the baseline
// validation in one execute container with a fresh build cache, lists
// upgrade candidates, and returns the report. Every phase fits in
// o.Deadline, each with its own budget. Whatever the module does is in the
// report, a failed acquisition and a deadline that ran out included; an
// error is Stockade's own failure (engine, filesystem, lock timeout).
func Inspect(ctx context.Context, eng Engine, o InspectOptions) (*report.Report, error) {
	start := time.Now()
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	total := o.Deadline
	if total <= 0 {
		total = DefaultDeadline
	}
	b := budget{deadline: start.Add(total), now: time.Now}
	rep := report.New(o.Dir)
	var cur string
	var curStart time.Time
	var steps []report.Phase // the validation's own steps, listed after it
	phase := func(name string) {
		if cur != "" {
			rep.Timings.AddPhase(cur, time.Since(curStart))
			rep.Timings.Phases = append(rep.Timings.Phases, steps...)
			steps = nil
		}
		cur, curStart = name, time.Now()
		if name != "" {
			log.Debug("phase", "phase", name)
			if o.Progress != nil {
				o.Progress(name)
			}
		}
	}
	finish := func() (*report.Report, error) {
		phase("")
		if o.ScanOnly {
			rep.FinishScan(time.Since(start))
		} else {
			rep.Finish(time.Since(start))
		}
		return rep, nil
	}
	// limit is what bounds the current phase (phaseTime): the -deadline,
	// or the phase's own budget when that is less than what is left.
	var limit string
	phaseTime := func(max time.Duration, own string) (time.Duration, bool) {
		d, ok := b.phase(max)
		limit = fmt.Sprintf("the -deadline (%v)", total)
		if d >= max {
			limit = fmt.Sprintf("%s (%v)", own, max)
		}
		return d, ok
	}
	// timedOut ends the report in the current phase: the -deadline, or
	// the phase's own budget, ran out (TimedOutBy says which).
	timedOut := func() (*report.Report, error) {
		log.Debug("time ran out", "phase", cur, "limit", limit)
		rep.TimedOut, rep.TimedOutBy = cur, limit
		return finish()
	}
	// cut reports whether err came from the deadline of phase context pctx
	// rather than from the caller's ctx or a failure.
	cut := func(pctx context.Context, err error) bool {
		return err != nil && errors.Is(pctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	}

	if o.ScanOnly && o.VulnDB == "" {
		return nil, ErrScanNeedsDB
	}
	db, err := vulndb.OpenIfSet(o.VulnDB)
	if err != nil {
		return nil, err
	}
	defer db.Close()

	phase("check")
	m, src, err := checkTree(ctx, o.Dir, o.Worktree, o.DataDir)
	rep.Source = src
	if refusal(rep, m, err) {
		return finish()
	}
	if err != nil {
		return nil, err
	}

	phase("image")
	d, ok := phaseTime(imageBudget, "the image phase's budget")
	if !ok {
		return timedOut()
	}
	pctx, cancel := context.WithTimeout(ctx, d)
	ic, err := pickImage(pctx, eng, ImageRequest{Directive: m.Go, Toolchain: m.Toolchain, Image: o.Image, Pull: o.Pull, DataDir: o.DataDir, Cgo: o.Cgo, AptPackages: o.AptPackages}, log)
	cancel()
	if cut(pctx, err) {
		return timedOut()
	}
	if refusal(rep, m, err) {
		return finish()
	}
	if err != nil {
		return nil, err
	}
	rep.Image = &ic.img
	if ic.note != "" {
		rep.Notes = append(rep.Notes, ic.note)
	}

	dataDir, defaultDir := o.DataDir, o.DataDir == ""
	if defaultDir {
		if dataDir, err = DefaultDataDir(); err != nil {
			return nil, err
		}
	}
	var scan scanner.Scanner
	if o.VulnDB != "" {
		phase("scanner")
		if d, ok = phaseTime(scannerBudget, "the scanner phase's budget"); !ok {
			return timedOut()
		}
		pctx, cancel = context.WithTimeout(ctx, d)
		var note string
		scan, note, err = EnsureScanner(pctx, eng, o.DataDir, ic.img, o.Owner, o.LockTimeout, log)
		cancel()
		if cut(pctx, err) {
			return timedOut()
		}
		if err != nil {
			return nil, err
		}
		if note != "" {
			rep.Notes = append(rep.Notes, note)
		}
		if scan.Built {
			rep.Egress = append(rep.Egress, report.NewEgress("scanner", scan.Egress, scan.EgressLost))
		}
	}

	phase("lock")
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// The lock wait is LockTimeout, or what is left when that is less.
	lockWait, _ := b.phase(o.LockTimeout)
	if d, ok = phaseTime(o.LockTimeout+openBudget, "-lock-timeout and opening the run"); !ok {
		return timedOut()
	}
	pctx, cancel = context.WithTimeout(ctx, d)
	r, err := toolchain.Open(pctx, eng, toolchain.Options{
		DataDir:        dataDir,
		DefaultDataDir: defaultDir,
		Owner:          o.Owner,
		Config: toolchain.Config{Image: ic.img.ID, Proxy: o.Proxy, SumDB: o.SumDB, FixtureProxy: o.FixtureProxy, ScanTools: scan.Dir, ScanVulnDB: db.Dir,
			GateNetwork: o.GateNetwork, GateAllowPrivate: o.GateAllowPrivate, Access: o.Access},
		LockTimeout: max(lockWait, 0),
		OnLockWait:  o.OnLockWait,
		Logger:      log,
	})
	cancel()
	if cut(pctx, err) || errors.Is(err, toolchain.ErrLocked) && lockWait < o.LockTimeout {
		return timedOut()
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := r.Close(context.WithoutCancel(ctx)); err != nil {
			log.Warn("cleanup failed", "err", err)
		}
	}()

	phase("snapshot")
	snap, err := r.Snapshot(ctx, o.Dir, toolchain.SnapshotOptions{Worktree: o.Worktree})
	if err != nil {
		return nil, err
	}
	// The snapshot is what runs: check it too, since the directory may
	// have changed since the check above.
	m, refused, err := CheckSnapshot(snap, m.Go, o.DataDir, rep)
	if refused {
		rep.Image = nil
		return finish()
	}
	if err != nil {
		return nil, err
	}

	phase("seed")
	if d, ok = phaseTime(seedBudget, "the seed phase's budget"); !ok {
		return timedOut()
	}
	pctx, cancel = context.WithTimeout(ctx, d)
	seed := ensureSeed(pctx, eng, r, ic.img, o.Owner, rep, log)
	cancel()

	phase("probe")
	if d, ok = phaseTime(probeBudget, "the probe phase's budget"); !ok {
		return timedOut()
	}
	extra := ProbeDirs(seed)
	pctx, cancel = context.WithTimeout(ctx, d)
	err = r.Probe(pctx, extra...)
	cancel()
	if cut(pctx, err) {
		return timedOut()
	}
	if err != nil {
		return nil, err
	}

	// scanStep scans the snapshot (Vulns); with ScanOnly it ends the run.
	scanStep := func() (*report.Report, error) {
		phase("scan")
		max := scanBudget
		if o.ScanOnly && o.Timeout > 0 {
			max = o.Timeout // stockade scan's -timeout bounds the scanner
		}
		d, ok := phaseTime(max, "the scan's budget")
		if !ok {
			return timedOut()
		}
		vs, err := scanner.Scan(ctx, r, scan, snap.Dir, seed, scanner.Options{Timeout: d, OutputCap: o.ScanOutputCap, Logger: log})
		if err != nil {
			return nil, err
		}
		rep.Vulns = &vs
		if !o.ScanOnly {
			return rep, nil
		}
		return finish()
	}

	phase("acquire")
	if d, ok = phaseTime(acquireBudget, "the acquisition's budget"); !ok {
		return timedOut()
	}
	// One acquire container serves the acquisition and then, beside the
	// validation, the candidate listing; the validation's container
	// starts (and its working tree fills) beside the acquisition. Neither
	// runs anything of the repository's before the modules are in.
	acqLife, _ := b.phase(d + candidatesBudget)
	ac, err := StartAcquire(ctx, r, snap.Dir, acqLife+containerSlack)
	if err != nil {
		return nil, err
	}
	// What runs beside the main line is cancelled and waited for before
	// the containers it uses are removed, whichever way inspect returns.
	bgCtx, bgCancel := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer func() {
		bgCancel()
		bg.Wait()
		if err := ac.Close(context.WithoutCancel(ctx)); err != nil {
			log.Warn("removing the acquire container failed", "err", err)
		}
	}()
	var early *startedValidation
	if !o.ScanOnly {
		vLife, _ := b.phase(d + timeout)
		early = startValidation(bgCtx, r, snap.Dir, vLife, seed, &bg)
		defer early.discard(ctx, log)
	}
	shared := ac // the acquire container, while it holds the tree asked about
	got, snap2, err := AcquireSnapshot(ctx, r, ac, snap, m, ic.img, time.Now().Add(d))
	if err != nil {
		return nil, err
	}
	acquired, err := EgressOf(ctx, r, "acquire")
	if err != nil {
		return nil, err
	}
	rep.Egress = append(rep.Egress, acquired...)
	switch {
	case got.TimedOut:
		return timedOut()
	case got.NewerToolchain != nil:
		rep.Refusal = got.NewerToolchain
		return finish()
	case got.Failure != nil:
		rep.Acquisition = got.Failure
		for _, e := range acquired {
			rep.Acquisition.RefusedHosts = report.RefusedHosts(e.Records)
		}
		return finish()
	case got.Updated != nil:
		// From here on the tree with the updated manifests is the one
		// validated and asked about: neither container holds it.
		rep.Source.Updated = got.Updated
		snap, shared = snap2, nil
		early.discard(ctx, log)
	}

	if o.ScanOnly {
		return scanStep()
	}

	// The candidate listing runs beside the validation: it needs only the
	// acquired modules and the network, the validation neither.
	cands := listCandidates(bgCtx, r, shared, snap.Dir, m, b, &bg)

	phase("validate")
	vt, ok := phaseTime(timeout, "-timeout")
	if !ok {
		return timedOut()
	}
	var res Result
	if c, taken, err := early.take(); err != nil {
		return nil, err
	} else if taken {
		res, err = ValidateIn(ctx, c, vt, m.Path, log)
		if err != nil {
			return nil, err
		}
	} else if res, err = ValidateSnapshot(ctx, r, snap.Dir, vt, seed, m.Path, log); err != nil {
		return nil, err
	}
	rep.Checks = res.Checks
	steps = res.Phases

	if o.VulnDB != "" {
		if _, err := scanStep(); err != nil {
			return nil, err
		}
		if rep.TimedOut != "" {
			return rep, nil
		}
	}

	// The phase is the wait for the listing past the validation (and
	// scan); the listing itself began when the validation did.
	phase("candidates")
	l := <-cands
	if l.err != nil {
		return nil, l.err
	}
	if l.failure != "" {
		rep.CandidatesError = l.failure
	} else {
		rep.Candidates = l.cands
	}
	rep.Egress = append(rep.Egress, l.egress...)
	return finish()
}

// startedValidation is a validation container starting in the background
// (startValidation): the first of take and discard has it.
type startedValidation struct {
	done  chan struct{}
	c     *toolchain.Container
	err   error
	taken bool
}

// startValidation starts StartValidation in the background, counted in bg.
func startValidation(ctx context.Context, r *toolchain.Runner, snapDir string, lifetime time.Duration, seed cacheseed.Seed, bg *sync.WaitGroup) *startedValidation {
	s := &startedValidation{done: make(chan struct{})}
	bg.Add(1)
	go func() {
		defer bg.Done()
		defer close(s.done)
		s.c, s.err = StartValidation(ctx, r, snapDir, lifetime, seed)
	}()
	return s
}

// take waits for the start and hands the container to the caller, who
// then closes it; taken is false when there is none to take (s is nil, or
// discarded).
func (s *startedValidation) take() (c *toolchain.Container, taken bool, err error) {
	if s == nil || s.taken {
		return nil, false, nil
	}
	<-s.done
	s.taken = true
	return s.c, s.err == nil, s.err
}

// discard waits for the start and removes the container, unless it was
// taken; s may be nil.
func (s *startedValidation) discard(ctx context.Context, log *slog.Logger) {
	if s == nil || s.taken {
		return
	}
	<-s.done
	s.taken = true
	if s.err == nil {
		if err := s.c.Close(context.WithoutCancel(ctx)); err != nil {
			log.Warn("removing the validation container failed", "err", err)
		}
	}
}

// listing is what the candidate listing found: the candidates, or why
// they are not known (failure, for the report), and its egress record;
// err is Stockade's own failure.
type listing struct {
	cands   []report.Candidate
	failure string
	egress  []report.Egress
	err     error
}

// listCandidates lists m's upgrade candidates in the background, in ac
// (nil: one-shot acquire containers of the snapshot at src), within
// candidatesBudget and what is left of b, counted in bg; the channel
// delivers the one result.
func listCandidates(ctx context.Context, r *toolchain.Runner, ac *toolchain.Container, src string, m *gomod.Module, b budget, bg *sync.WaitGroup) <-chan listing {
	out := make(chan listing, 1)
	d, ok := b.phase(candidatesBudget)
	if !ok {
		out <- listing{failure: "not listed: the -deadline ran out first"}
		return out
	}
	acq := acquireExecer{r: r, c: ac, src: src, until: time.Now().Add(d)}
	bg.Add(1)
	go func() {
		defer bg.Done()
		var l listing
		cands, err := Candidates(ctx, acq, m.Direct())
		if err != nil {
			l.failure = err.Error()
		} else {
			l.cands = cands
		}
		l.egress, l.err = EgressOf(ctx, r, "candidates")
		out <- l
	}()
	return out
}

// maxAcquisitionDetail caps the go command's stderr kept in the report of
// a failed acquisition, in bytes.
const maxAcquisitionDetail = 4 << 10

// capText returns b as text, at most max bytes of it.
func capText(b []byte, max int) string {
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}

// needsNewerGo says whether a failed acquisition failed because a
// requirement needs a newer Go than the image's, and which. testjson
// classifies the go command's stderr; when it does not recognise the
// form the module loader printed, each requirement of go.mod is
// downloaded on its own with -json, whose per-module errors it does.
func needsNewerGo(ctx context.Context, acq Execer, out Output, m *gomod.Module) (mod, version, goVersion string, ok bool) {
	if n := testjson.NeedsNewerGo(out.Stderr); len(n) > 0 {
		return n[0].Module, n[0].Version, n[0].Go, true
	}
	var queries []string
	for _, r := range m.Requires {
		queries = append(queries, r.Path+"@"+r.Version.Version)
	}
	if len(queries) == 0 {
		return "", "", "", false
	}
	dl, err := acq.Exec(ctx, downloadArgv(queries), 0)
	if err != nil || outputReason(dl) != "" {
		return "", "", "", false
	}
	st, err := parseDownload(dl.Stdout)
	if err != nil {
		return "", "", "", false
	}
	for _, s := range st {
		if s.NeedsGo != "" {
			return s.Path, s.Version, s.NeedsGo, true
		}
	}
	return "", "", "", false
}

// seedSettings are the settings validations run with, as the seed must
// know them: the profile's GOFLAGS and every default.
var seedSettings = cacheseed.Settings{GOFLAGS: "-mod=mod"}

// ensureSeed returns the trusted build-cache seed for img, building it on
// first use. Without one (a toolchain too old for GOCACHEPROG, a failed
// build) the validation runs with an empty fresh cache: slower, equally
// correct; the report notes why.
func ensureSeed(ctx context.Context, eng Engine, r *toolchain.Runner, img report.Image, owner string, rep *report.Report, log *slog.Logger) cacheseed.Seed {
	seed, err := cacheseed.Ensure(ctx, eng, cacheseed.Config{
		DataDir: r.DataDir(), Image: img.ID, GoVersion: img.GoVersion, Settings: seedSettings,
		Owner: owner, Run: r.RunID(), Logger: log,
	})
	switch {
	case errors.Is(err, cacheseed.ErrUnsupported):
		return cacheseed.Seed{}
	case err != nil:
		log.Warn("no build-cache seed", "err", err)
		rep.Notes = append(rep.Notes, "validated with an empty build cache: the seed could not be built: "+err.Error())
		return cacheseed.Seed{}
	case seed.Built:
		rep.Notes = append(rep.Notes, fmt.Sprintf("built the standard-library build-cache seed for %s in %v", img.GoVersion, seed.Meta.BuildTime.Round(time.Second)))
	}
	return seed
}

func sourceOf(s toolchain.Snapshot) *report.Source {
	switch {
	case s.Git && s.Worktree:
		return &report.Source{Kind: "worktree", Commit: s.Commit, Subdir: s.Subdir}
	case s.Git:
		return &report.Source{Kind: "commit", Commit: s.Commit, Subdir: s.Subdir, Uncommitted: s.Uncommitted}
	}
	return &report.Source{Kind: "directory"}
}

// acquireExecer runs module commands in one-shot acquire containers on the
// snapshot, each ending by until, its phase's end; with a staging
// directory, in mutate containers with -modfile naming its go.mod, so the
// go command may update the manifests there; with c (and no staging), as
// execs in that long-lived acquire container of the snapshot.
type acquireExecer struct {
	r       *toolchain.Runner
	c       *toolchain.Container
	src     string
	staging string
	until   time.Time
}

// Exec runs argv for at most timeout (zero: the rest of the phase). With
// less than minPhase left of the phase it runs nothing and reports a
// timeout, as the in-container timeout would have.
func (a acquireExecer) Exec(ctx context.Context, argv []string, timeout time.Duration) (Output, error) {
	left := time.Until(a.until)
	if timeout <= 0 || timeout > left {
		timeout = left
	}
	if timeout < minPhase {
		return Output{ExitCode: -1, TimedOut: true}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+hostGrace)
	defer cancel()
	if a.c != nil && a.staging == "" {
		res, err := a.c.Exec(ctx, argv, toolchain.ExecOptions{Timeout: timeout})
		return outputOf(res), err
	}
	job := toolchain.Job{Profile: toolchain.Acquire, Cmd: argv, Source: a.src, Timeout: timeout}
	if a.staging != "" {
		job.Profile, job.Cmd, job.Staging = toolchain.Mutate, withModFile(argv), a.staging
	}
	res, err := a.r.Run(ctx, job)
	return outputOf(res), err
}

// execExecer runs validation steps as execs in the validation's one
// execute container.
type execExecer struct{ c *toolchain.Container }

func (e execExecer) Exec(ctx context.Context, argv []string, timeout time.Duration) (Output, error) {
	res, err := e.c.Exec(ctx, argv, toolchain.ExecOptions{Timeout: timeout})
	return outputOf(res), err
}

func outputOf(r toolchain.Result) Output {
	return Output{
		ExitCode:  r.ExitCode,
		Stdout:    r.Stdout,
		Stderr:    r.Stderr,
		Truncated: r.Truncated(),
		TimedOut:  r.TimedOut,
		OOMKilled: r.OOMKilled,
	}
}
