package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/stockade/stockade/internal/cacheseed"
	"github.com/stockade/stockade/internal/gomod"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/scanner"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/validate"
	"github.com/stockade/stockade/internal/vulndb"
)

// Plan says how one workflow's prelude differs from the others'.
type Plan struct {
	// Worktree checks and snapshots the working tree of a git checkout,
	// uncommitted changes included, instead of the committed tree
	// (inspect -worktree).
	Worktree bool
	// Check, when not nil, runs in the check step once the layout is
	// accepted, with go.mod's facts and the tree checked, before any
	// engine call: maintain's git checks. An error of it ends Prepare and
	// is returned as it is.
	Check func(ctx context.Context, m *gomod.Module, src *report.Source) error
	// SameCommit makes a snapshot of another commit than the one the
	// check read (HEAD moved) Stockade's failure: maintain's checks and
	// its proposal's parent are of that commit. Without it the snapshot
	// is checked again and worked on.
	SameCommit bool
	// Validation, when not zero, is the validation's timeout: its execute
	// container starts beside the acquisition (filling its working tree
	// meanwhile; nothing of the repository runs in it before Validate),
	// living the acquisition's time and this (inspect).
	Validation time.Duration
}

// Prepared is what the prelude found and made. Fields are set as far as
// its steps got; the workflow's steps use them, and its report is built
// from them.
type Prepared struct {
	// Module is go.mod's facts, from the check, then from the snapshot;
	// nil when go.mod does not parse.
	Module *gomod.Module
	// Source says which tree: the check's, then the snapshot's; with
	// Acquired.Updated, the update is in it.
	Source *report.Source
	// Refusal, when not nil, is why the layout is refused: by the check,
	// by image selection (a go directive newer than every image), or by
	// the check of the snapshot. No step after it ran.
	Refusal *report.Refusal
	// Image is the toolchain image, once chosen.
	Image *report.Image
	// Notes say what the prelude did or assumed on the way (an image,
	// the scanner or the seed built; a stand-in image), in order.
	Notes []string
	// Egress are the egress records of the scanner's build (when this
	// run built it) and of the acquisition.
	Egress []report.Egress
	// VulnDB is the database Options.VulnDB names, opened (the zero DB
	// without one).
	VulnDB vulndb.DB
	// Scanner is the verified scanner, with Options.VulnDB.
	Scanner scanner.Scanner
	// Runner is the run on the locked data directory; Close closes it.
	Runner *toolchain.Runner
	// Snapshot is the tree the workflow works on: the repository's, or,
	// with Acquired.Updated, a snapshot with the updated manifests.
	Snapshot toolchain.Snapshot
	// Seed is the trusted build-cache seed (the zero Seed without one:
	// validations then start from an empty cache, and Notes say why).
	Seed cacheseed.Seed
	// Acquired is the acquisition's outcome. NewerToolchain or Failure
	// (with the hosts the gate refused) ends the workflow; Updated says
	// Snapshot holds the go command's update of the manifests.
	Acquired Acquired

	eng  Engine
	o    Options
	plan Plan
	st   *Steps
	log  *slog.Logger
	// acq is the long-lived acquire container while it holds Snapshot:
	// the candidate listing runs in it as execs (Acquirer).
	acq   *toolchain.Container
	early *startedValidation
	// What runs beside the steps (Beside) is cancelled and waited for
	// before the containers it uses are removed.
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
}

// errEnded ends the prelude's steps with an outcome (a refusal, an
// acquisition that did not get the modules) rather than a failure.
var errEnded = errors.New("workflow: the prelude decided the outcome")

// Prepare runs the prelude of a workflow as steps of st: check the layout
// (and plan.Check), choose the image, ensure the scanner (with
// o.VulnDB), open the run on the locked data directory, snapshot and
// check again, ensure the build-cache seed, probe the mounts, acquire the
// modules. It returns what it found, as far as it got; p is never nil and
// must be closed. A refusal or an acquisition outcome is in p, with a nil
// error; err is a *DeadlineError when time ran out (the report is then
// inconclusive), plan.Check's error, vulndb.ErrInvalid before any step, or
// Stockade's own failure.
func Prepare(ctx context.Context, eng Engine, o Options, st *Steps, plan Plan) (*Prepared, error) {
	p := &Prepared{eng: eng, o: o, plan: plan, st: st, log: o.Logger}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.bgCtx, p.bgCancel = context.WithCancel(ctx)
	var err error
	if p.VulnDB, err = vulndb.OpenIfSet(o.VulnDB); err != nil {
		return p, err
	}
	err = st.Run(ctx,
		Step{Name: "check", Budget: CheckBudget, Do: p.check},
		Step{Name: "image", Budget: ImageBudget, Do: p.image},
		Step{Name: "scanner", Budget: ScannerBudget, Do: p.ensureScanner, Skip: o.VulnDB == ""},
		Step{Name: "lock", Budget: lockBudget(o.LockTimeout), Do: p.open},
		Step{Name: "snapshot", Budget: Left, Do: p.snapshot},
		Step{Name: "seed", Budget: SeedBudget, Do: p.ensureSeed},
		Step{Name: "probe", Budget: ProbeBudget, Do: p.probe},
		Step{Name: "acquire", Budget: AcquireBudget, Do: p.acquire},
	)
	if errors.Is(err, errEnded) {
		return p, nil
	}
	return p, err
}

// check checks the layout of the tree the workflow works on (Check).
func (p *Prepared) check(ctx context.Context, _ time.Duration) error {
	m, src, ref, err := Check(ctx, p.o.Dir, p.plan.Worktree, p.o.DataDir)
	p.Module, p.Source, p.Refusal = m, src, ref
	switch {
	case err != nil:
		return err
	case ref != nil:
		return errEnded
	case p.plan.Check != nil:
		return p.plan.Check(ctx, m, src)
	}
	return nil
}

// image chooses (or builds) the toolchain image (SelectImage).
func (p *Prepared) image(ctx context.Context, _ time.Duration) error {
	img, note, err := SelectImage(ctx, p.eng, ImageRequest{
		Directive: p.Module.Go, Toolchain: p.Module.Toolchain, Image: p.o.Image, Pull: p.o.Pull,
		DataDir: p.o.DataDir, Cgo: p.o.Cgo, AptPackages: p.o.AptPackages,
	}, p.log)
	if p.Refusal = refusalOf(err); p.Refusal != nil {
		return errEnded
	}
	if err != nil {
		return err
	}
	p.Image = &img
	p.note(note)
	return nil
}

// ensureScanner returns the pinned vulnerability scanner for the image in
// the data directory, building it on first use in a toolchain run of its
// own (scanner.Ensure), and verifies the stored binary before any
// container of this run exists. The wait for another run's lock is
// -lock-timeout within the step's time d, as the lock step's.
func (p *Prepared) ensureScanner(ctx context.Context, d time.Duration) error {
	dataDir, isDefault, err := DataDir(p.o.DataDir)
	if err != nil {
		return err
	}
	wait := min(p.o.LockTimeout, d)
	s, err := scanner.Ensure(ctx, p.eng, scanner.Config{
		DataDir: dataDir, DefaultDataDir: isDefault, Image: p.Image.ID, GoVersion: p.Image.GoVersion,
		Owner: p.o.Owner, LockTimeout: wait, Logger: p.log,
	})
	if err != nil {
		return lockCut(err, wait, p.o.LockTimeout)
	}
	// Refuse a tampered scanner before any container runs; the scan
	// verifies the copy it mounts again.
	if err := s.VerifyCopy(s.Dir); err != nil {
		return err
	}
	p.Scanner = s
	if s.Built {
		p.note(fmt.Sprintf("built the vulnerability scanner (govulncheck %s) for %s in %v", s.Meta.Version, p.Image.GoVersion, (time.Duration(s.Meta.BuildMS) * time.Millisecond).Round(time.Second)))
		p.Egress = append(p.Egress, report.NewEgress("scanner", s.Egress, s.EgressLost))
	}
	return nil
}

// lockCut is err, or ErrDeadline when err is a lock that stayed held for
// the wait it was given, which the step's time cut short of lockTimeout:
// time ran out, not the other run's patience.
func lockCut(err error, wait, lockTimeout time.Duration) error {
	if errors.Is(err, toolchain.ErrLocked) && wait < lockTimeout {
		return fmt.Errorf("%w: %w", ErrDeadline, err)
	}
	return err
}

// open opens the run on the locked data directory (toolchain.Open: it
// reaps what a crashed run left), waiting -lock-timeout for the lock
// within the step's time d.
func (p *Prepared) open(ctx context.Context, d time.Duration) error {
	dataDir, isDefault, err := DataDir(p.o.DataDir)
	if err != nil {
		return err
	}
	wait := max(min(p.o.LockTimeout, d), 0)
	r, err := toolchain.Open(ctx, p.eng, toolchain.Options{
		DataDir:        dataDir,
		DefaultDataDir: isDefault,
		Owner:          p.o.Owner,
		Config: toolchain.Config{Image: p.Image.ID, Proxy: p.o.Proxy, SumDB: p.o.SumDB, FixtureProxy: p.o.FixtureProxy,
			ScanTools: p.Scanner.Dir, ScanVulnDB: p.VulnDB.Dir, GateNetwork: p.o.GateNetwork, GateAllowPrivate: p.o.GateAllowPrivate, Access: p.o.Access,
			Runtime: p.o.Runtime},
		LockTimeout: wait,
		OnLockWait:  p.o.OnLockWait,
		Logger:      p.log,
	})
	if err != nil {
		return lockCut(err, wait, p.o.LockTimeout)
	}
	p.Runner = r
	return nil
}

// snapshot snapshots the tree the check read, and checks the snapshot,
// which is what runs: the directory may have changed since.
func (p *Prepared) snapshot(ctx context.Context, _ time.Duration) error {
	snap, err := p.Runner.Snapshot(ctx, p.o.Dir, toolchain.SnapshotOptions{Worktree: p.plan.Worktree})
	if err != nil {
		return err
	}
	if p.plan.SameCommit && snap.Commit != p.Source.Commit {
		return fmt.Errorf("workflow: HEAD moved from %s to %s since the layout check", p.Source.Commit, snap.Commit)
	}
	p.Snapshot, p.Source = snap, sourceOf(snap)
	m, ref, err := checkSnapshot(ctx, snap, p.Module.Go, p.o.DataDir)
	if m != nil {
		p.Module = m
	}
	if p.Refusal = ref; ref != nil {
		return errEnded
	}
	return err
}

// ensureSeed ensures the trusted build-cache seed for the image, building
// it on first use. Without one (a toolchain too old for GOCACHEPROG, a
// failed build) validations run with an empty fresh cache: slower, equally
// correct; a note says why.
func (p *Prepared) ensureSeed(ctx context.Context, _ time.Duration) error {
	seed, err := cacheseed.Ensure(ctx, p.eng, cacheseed.Config{
		DataDir: p.Runner.DataDir(), Image: p.Image.ID, GoVersion: p.Image.GoVersion, Settings: validate.SeedSettings,
		Owner: p.o.Owner, Run: p.Runner.RunID(), Logger: p.log,
	})
	switch {
	case errors.Is(err, cacheseed.ErrUnsupported):
		return nil
	case err != nil:
		p.log.Warn("no build-cache seed", "err", err)
		p.note("validated with an empty build cache: the seed could not be built: " + err.Error())
		return nil
	case seed.Built:
		p.note(fmt.Sprintf("built the standard-library build-cache seed for %s in %v", p.Image.GoVersion, seed.Meta.BuildTime.Round(time.Second)))
	}
	p.Seed = seed
	return nil
}

// probe checks that the engine sees the run's mounted directories, and
// the seed's (Runner.Probe).
func (p *Prepared) probe(ctx context.Context, _ time.Duration) error {
	var extra []string
	if p.Seed.Valid() {
		// The seed itself is read-only (0555), even to the host user;
		// its parent is the host's to write the probe's marker into.
		extra = append(extra, filepath.Dir(p.Seed.Dir))
	}
	return p.Runner.Probe(ctx, extra...)
}

// acquire downloads the modules the snapshot requires (acquireSnapshot),
// within d, in one long-lived acquire container that lives on for the
// candidate listing (Acquirer) while it holds the tree asked about. With
// Plan.Validation the validation's container starts beside it. Neither
// runs anything of the repository's before the modules are in.
func (p *Prepared) acquire(ctx context.Context, d time.Duration) error {
	ac, err := p.Runner.Start(ctx, toolchain.Job{Profile: toolchain.Acquire, Source: p.Snapshot.Dir, Timeout: min(p.st.Left(), toolchain.MaxTimeout)})
	if err != nil {
		return err
	}
	p.acq = ac
	if p.plan.Validation > 0 {
		p.early = startValidation(p.bgCtx, p.Runner, p.Snapshot.Dir, min(d+p.plan.Validation, p.st.Left()), p.Seed, &p.bg)
	}
	got, updated, err := acquireSnapshot(ctx, p.Runner, ac, p.Snapshot, p.Module, *p.Image, time.Now().Add(d))
	if err != nil {
		return err
	}
	es, err := p.TakeEgress(ctx, "acquire")
	if err != nil {
		return err
	}
	p.Egress = append(p.Egress, es...)
	p.Acquired = got
	switch {
	case got.TimedOut:
		return ErrDeadline
	case got.NewerToolchain != nil:
		return errEnded
	case got.Failure != nil:
		for _, e := range es {
			got.Failure.RefusedHosts = report.RefusedHosts(e.Records)
		}
		return errEnded
	case got.Updated != nil:
		// From here on the tree with the updated manifests is the one
		// worked on: the commit's tree, manifests updated. Neither
		// container holds it.
		p.Source.Updated = got.Updated
		updated.Commit = p.Snapshot.Commit
		p.Snapshot = updated
		p.closeAcquire(ctx)
		p.early.discard(ctx, p.log)
	}
	return nil
}

// Ready reports whether the prelude got the workflow's tree ready: not
// refused, its modules acquired. Prepare returns it not ready, without an
// error, when the outcome is decided (Refusal, Acquired.NewerToolchain,
// Acquired.Failure).
func (p *Prepared) Ready() bool {
	return p.Refusal == nil && p.Acquired.NewerToolchain == nil && p.Acquired.Failure == nil && p.Runner != nil
}

// note adds a note, unless it is empty.
func (p *Prepared) note(n string) {
	if n != "" {
		p.Notes = append(p.Notes, n)
	}
}

func (p *Prepared) closeAcquire(ctx context.Context) {
	if p.acq == nil {
		return
	}
	if err := p.acq.Close(context.WithoutCancel(ctx)); err != nil {
		p.log.Warn("removing the acquire container failed", "err", err)
	}
	p.acq = nil
}

// Close ends what runs beside the steps, then removes the containers the
// prelude started and closes the run (its caches and gates, the lock) and
// the database. It logs what it cannot remove; p's fields stay readable.
func (p *Prepared) Close(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	p.bgCancel()
	p.bg.Wait()
	p.early.discard(ctx, p.log)
	p.closeAcquire(ctx)
	if p.Runner != nil {
		if err := p.Runner.Close(ctx); err != nil {
			p.log.Warn("cleanup failed", "err", err)
		}
	}
	if err := p.VulnDB.Close(); err != nil {
		p.log.Warn("removing the database copy failed", "err", err)
	}
}

// Beside runs fn in the background, beside the next steps, with a context
// Close cancels; Close waits for fn to return before it removes the
// containers fn may use.
func (p *Prepared) Beside(fn func(ctx context.Context)) {
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		fn(p.bgCtx)
	}()
}

// Acquirer runs module commands on Snapshot, each ending by until: as
// execs in the acquisition's container while it holds Snapshot, else (the
// acquisition updated the manifests) in one-shot acquire containers.
func (p *Prepared) Acquirer(until time.Time) validate.Execer {
	return acquireExecer{r: p.Runner, c: p.acq, src: p.Snapshot.Dir, until: until}
}

// Candidates lists the upgrade candidates of the module's direct
// requirements (Candidates) through Acquirer(until), with the run's
// cooldown (Options.Cooldown).
func (p *Prepared) Candidates(ctx context.Context, until time.Time) ([]report.Candidate, []report.HeldBack, error) {
	return Candidates(ctx, p.Acquirer(until), p.Module.Direct(), p.o.Cooldown)
}

// AcquireTree downloads the modules of another snapshot of the run at dir
// (maintain's upgraded tree), with the prelude's module and image, in
// one-shot acquire containers within d.
func (p *Prepared) AcquireTree(ctx context.Context, dir string, d time.Duration) (Acquired, error) {
	return acquireModules(ctx, acquireExecer{r: p.Runner, src: dir, until: time.Now().Add(d)}, p.Module, *p.Image, sumsIncomplete(dir))
}

// Validate runs the validation of Snapshot for at most d: in the
// container started beside the acquisition (Plan.Validation) when it
// holds Snapshot, else in a new one (validate.ValidateSnapshot).
func (p *Prepared) Validate(ctx context.Context, d time.Duration) (validate.Result, error) {
	c, taken, err := p.early.take()
	if err != nil {
		return validate.Result{}, err
	}
	if taken {
		return validate.ValidateIn(ctx, c, d, p.Module.Path, p.log)
	}
	return validate.ValidateSnapshot(ctx, p.Runner, p.Snapshot.Dir, d, p.Seed, p.Module.Path, p.log)
}

// Scan scans the snapshot at dir (Snapshot's, or another of the run) with
// the verified scanner and the database, for at most d, keeping outputCap
// bytes of each of the scanner's streams (zero: scanner.DefaultOutputCap).
func (p *Prepared) Scan(ctx context.Context, dir string, d time.Duration, outputCap int64) (*report.VulnScan, error) {
	vs, err := scanner.Scan(ctx, p.Runner, p.Scanner, dir, p.Seed, scanner.Options{Timeout: d, OutputCap: outputCap, Logger: p.log})
	if err != nil {
		return nil, err
	}
	return &vs, nil
}

// TakeEgress returns the record of phase: what the run's egress gates saw
// since the phase before (toolchain.Runner.TakeEgress), as one
// report.Egress; a run without network (a fixture proxy) has none and
// returns nothing.
func (p *Prepared) TakeEgress(ctx context.Context, phase string) ([]report.Egress, error) {
	if p.Runner.Config().FixtureProxy != "" {
		return nil, nil
	}
	recs, lost, err := p.Runner.TakeEgress(ctx)
	if err != nil {
		return nil, fmt.Errorf("workflow: the egress record of %s: %w", phase, err)
	}
	return []report.Egress{report.NewEgress(phase, recs, lost)}, nil
}

// startedValidation is a validation container starting in the background
// (startValidation): the first of take and discard has it.
type startedValidation struct {
	done  chan struct{}
	c     *toolchain.Container
	err   error
	taken bool
}

// startValidation starts validate.StartValidation in the background,
// counted in bg.
func startValidation(ctx context.Context, r *toolchain.Runner, snapDir string, lifetime time.Duration, seed cacheseed.Seed, bg *sync.WaitGroup) *startedValidation {
	s := &startedValidation{done: make(chan struct{})}
	bg.Add(1)
	go func() {
		defer bg.Done()
		defer close(s.done)
		s.c, s.err = validate.StartValidation(ctx, r, snapDir, lifetime, seed)
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
