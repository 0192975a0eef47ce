package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stockade/stockade/internal/inspect"
	"github.com/stockade/stockade/internal/modproxy"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/vulndb"
	"github.com/stockade/stockade/internal/workflow"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

func init() {
	register(&command{
		name:    "inspect",
		summary: "validate a Go module without trusting it",
		usage: `usage: stockade inspect [flags] DIR

Inspect validates the Go module in DIR without trusting it. It reaps
containers a crashed run left behind, takes the data directory's lock,
snapshots the repository (its committed tree when DIR is a git checkout,
or a directory in one: a module of a monorepo is its subtree of the
commit; with -worktree, the working tree; GIT_CEILING_DIRECTORIES stops
git's search for a repository above DIR, as it does for git), probes that the engine sees the mounted
directories, downloads the modules (acquire profile: module commands only,
proxy only), runs go list, go build, go vet and go test -json in one
container without network and with a fresh build cache (execute profile),
lists newer versions of the direct dependencies, and prints a report.

Acquisition reaches the network only through an egress gate of the run,
which admits the hosts of the -proxy entries and of the checksum database
and nothing else; each phase's requests are in the report (a one-line
summary; all of them with -json), and a host the gate refused during a
failed acquisition is named. -gate-network names the network the gate
reaches the proxy on (default the engine's bridge); -gate-allow-private
admits private ranges, such as a proxy on an internal network. With
-fixture-proxy there is no network at all.

Private modules are configured as for the go command, but every module
still comes from -proxy (GONOPROXY=none: never direct): -private sets
GOPRIVATE (those modules are not checked against the checksum database),
-nosumdb adds GONOSUMDB patterns, -sumdb names another checksum database.
The proxy's credentials come from a netrc file (-netrc; its machine names
the proxy's host, with the port when it has one) or a credential helper
the go command runs (-auth-helper, GOAUTH's command protocol, Go 1.24 and
later; it runs in the acquisition's container, so a static binary or a
script busybox's sh runs), and -proxy-ca trusts a private CA. A copy of
those files is mounted only where modules are fetched, never where the
repository's code runs; the go command sends them over HTTPS only, and
credentials in -proxy's URL are refused.

Layouts not supported yet (go.work workspaces, vendoring, nested modules,
local replace targets, submodules, symlinks leaving the repository) are
refused before any container runs, and so is a go directive newer than
every Go release available (the report names the 'stockade image build -go'
command that makes its image).
The check reads the tree that is validated: files git ignores count for
neither. When the committed tree is validated and the working tree differs
from it, the report says so.

The toolchain image is the one of the go directive's minor (or the
toolchain line's, when that is newer, as the go command would switch to
it): an image from 'stockade image build' the engine has, else one inspect
builds first and notes, from the host's Go or from a release Stockade
lists, which the go command fetches from the module proxy (go1.27.3 on our
machines). When none of those is of that minor, a newer minor stands in
and the report says so, with the 'stockade image build -go' command that
fetches a release of the module's own minor (inspect does not download a
toolchain by itself); the image it builds is chosen from then on. Runs
on one data directory build images one at a time: a run that waited for
another's build uses the image it made. -image names the image instead:
an image ID, or a registry image pinned by digest (name@sha256:...),
pulled only with -pull.

The image carries a C toolchain (gcc, binutils and the libc headers, from
Debian's packages at exact versions), so cgo is on as on a developer's
machine with a C compiler; a C header or library the module needs beyond
libc is a finding of its own (missing_c_header, missing_c_library).
-cgo=false validates in the smaller image without one (CGO_ENABLED=0).
-apt-packages adds Debian packages to that layer (a library's -dev package,
with what it depends on, at the versions the host's apt gives or the ones
named), composed the same way: the same packages give the same image,
built once and chosen again.

While it works on a terminal, inspect shows the current phase and the time
spent on stderr; otherwise it prints nothing but the report.

-deadline bounds the whole command; inside it each phase has its own
budget and gets what is left when that is less: the image 10m, the lock
wait -lock-timeout, the build-cache seed 20m, acquisition 10m, the
validation -timeout, the candidate listing 10m. When the deadline, or a
phase's own budget, leaves too little for a phase, the report is
inconclusive and names the phase and which of the two ran out.

The verdict decides the exit code (table below): clean 0; unsupported 2;
failing, inconclusive or (with -vulndb, every check passing and a called
vulnerability) vulnerable 3, so a CI job that adds -vulndb fails on what
the scan found; acquisition_failed 4 (a checksum mismatch, a version the
proxy does not have).

-min-age DURATION (default 0: none) is a cooldown for the candidates:
a version the module proxy published less than DURATION ago, by the
proxy's own time for it (its .info Time), is held back, and the newest
old enough version of its class is the candidate instead; a version the
proxy gives no time for is held back too. The report lists what was held
back and when each ages in. A week (168h) is a reasonable start; projects
use 7 to 30 days.

-sarif FILE also writes the findings as a SARIF 2.1.0 log for a
code-scanning view (docs/REPORT.md): one result per finding, a failing
test, vet diagnostic or build error at the file and line Go reported, a
fingerprint that stays the same while the code around it moves. It is
written whatever the verdict; a run that could not be trusted is marked
unsuccessful, with the reasons.

Examples:

	stockade inspect .
	stockade inspect -fixture-proxy testdata/modules testdata/repos/clean
	stockade inspect -json -timeout 5m -deadline 20m ~/src/github.com/google/uuid
	stockade inspect -worktree -v .
	stockade inspect -sarif inspect.sarif -vulndb ~/vulndb .
	stockade inspect -min-age 168h .`,
		flags: inspectFlags,
	})
}

func inspectFlags(fs *flag.FlagSet) func(ctx context.Context, env *cmdEnv, args []string) error {
	rf := addRunFlags(fs, "inspect").withOpenVEX(fs).withCooldown(fs)
	var (
		worktree = fs.Bool("worktree", false, "validate the working tree, uncommitted changes included, instead of the committed tree")
		timeout  = fs.Duration("timeout", inspect.DefaultTimeout, "bound on the validation (list, build, vet and test together), within -deadline")
		deadline = fs.Duration("deadline", inspect.DefaultDeadline, "bound on the whole command: every phase gets min(its budget, what is left)")
		vulnDB   = fs.String("vulndb", "", "also scan for vulnerabilities against the database in `DIR` (Go vulnerability database layout, or a .zip); default $"+vulndb.EnvDefault+" when set")
	)
	return func(ctx context.Context, env *cmdEnv, args []string) error {
		return rf.runInspect(ctx, env, args, inspect.Inspect, inspect.Options{Worktree: *worktree, Options: workflow.Options{
			Timeout: *timeout, Deadline: *deadline, VulnDB: vulnDBOr(*vulnDB),
		}})
	}
}

// vulnDBOr returns flag, or $STOCKADE_VULNDB when flag is empty.
func vulnDBOr(flag string) string {
	if flag == "" {
		return os.Getenv(vulndb.EnvDefault)
	}
	return flag
}

// runInspect checks the shared flags and DIR, completes opts (whose
// Worktree, Timeout, Deadline and VulnDB the command set) with them, runs
// run (inspect.Inspect or inspect.Scan) and prints its report; the
// report's exit code is the command's. inspect and scan run through it.
func (f *runFlags) runInspect(ctx context.Context, env *cmdEnv, args []string, run workflowFunc, opts inspect.Options) error {
	if err := f.check(); err != nil {
		return err
	}
	if opts.Timeout <= 0 || opts.Deadline <= 0 {
		return f.usagef("-timeout and -deadline must be positive")
	}
	if f.openVEX != nil && *f.openVEX != "" && opts.VulnDB == "" {
		return f.usagef("-openvex needs a vulnerability database: give -vulndb DIR or set %s", vulndb.EnvDefault)
	}
	shared, cleanup, err := f.options(env, args)
	if err != nil {
		return err
	}
	defer cleanup()
	shared.Timeout, shared.Deadline, shared.VulnDB = opts.Timeout, opts.Deadline, opts.VulnDB
	opts.Options = shared
	stopProgress := func() {}
	if !*f.verbose && isTerminal(env.stderr) {
		p := newProgress(env.stderr, f.cmd)
		stopProgress = p.stop
		opts.Progress = p.phase
		opts.OnLockWait = func(holder string) {
			p.phase(fmt.Sprintf("waiting up to %v for the data directory's lock (%s)", opts.LockTimeout, holder))
		}
	}
	rep, err := withEngine(ctx, run, opts)
	stopProgress() // erase the line before anything else is printed
	if errors.Is(err, vulndb.ErrInvalid) || errors.Is(err, inspect.ErrScanNeedsDB) {
		return f.usagef("%v", err)
	}
	if err != nil {
		return err
	}
	return f.emit(env, rep)
}

// emit prints rep (-json or text), writes -sarif's log and -openvex's
// document, and
// returns the command's exit: rep's exit code, or exitFindings when a
// document was asked for and cannot be made.
func (f *runFlags) emit(env *cmdEnv, rep *report.Report) error {
	var err error
	if *f.asJSON {
		err = report.WriteJSON(env.stdout, rep)
	} else {
		err = report.WriteText(env.stdout, rep)
	}
	if err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	if err := f.writeSARIF(rep.SARIF(f.cmd)); err != nil {
		return err
	}
	code := rep.ExitCode
	switch err := f.writeOpenVEX(env, rep); {
	case errors.Is(err, report.ErrNoVEX):
		if code == exitOK {
			code = exitFindings // a document was asked for and cannot be made
		}
	case err != nil:
		return err
	}
	if code != exitOK {
		return &exitError{code: code}
	}
	return nil
}

// workflowFunc is inspect.Inspect or inspect.Scan.
type workflowFunc func(context.Context, workflow.Engine, inspect.Options) (*report.Report, error)

// withEngine runs run on the engine; it refuses a layout before it calls
// the engine, and when no engine can even be found, a refusal is still
// reported (inspect.Refuse), and an input that cannot be read still named
// as such.
func withEngine(ctx context.Context, run workflowFunc, opts inspect.Options) (*report.Report, error) {
	eng, err := dockerapi.New("")
	if err != nil {
		rep, refused, rerr := inspect.Refuse(ctx, opts.Dir, opts.Worktree, opts.DataDir)
		switch {
		case refused:
			return rep, nil
		case rerr != nil:
			return nil, rerr
		}
		return nil, err
	}
	defer eng.Close()
	return run(ctx, eng, opts)
}

// fixtureProxyDir returns the absolute GOPROXY directory for dir: dir
// itself when it is in GOPROXY file layout, or, when it holds module
// sources in internal/modproxy's layout (such as testdata/modules), a
// proxy generated from them into a scratch directory of the data
// directory dataDir (empty: the default; toolchain.Scratch) that cleanup
// removes, and the next run removes if this process dies first.
func fixtureProxyDir(cmd, dir, dataDir string) (string, func(), error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", nil, usagef(cmd, "stockade %s: -fixture-proxy %s is not a directory", cmd, dir)
	}
	if _, err := modproxy.Scan(abs); err != nil {
		return abs, func() {}, nil // not module sources: a proxy already
	}
	dataDir, defaultDir, err := workflow.DataDir(dataDir)
	if err != nil {
		return "", nil, err
	}
	tmp, err := toolchain.NewScratch(dataDir, defaultDir)
	if err != nil {
		return "", nil, err
	}
	out := filepath.Join(tmp.Dir, "proxy")
	if err := modproxy.Generate(abs, out); err != nil {
		tmp.Close()
		return "", nil, err
	}
	return out, func() { tmp.Close() }, nil
}

// isTerminal reports whether w is a character device, without a terminal
// library: that is all the progress line needs to know.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressTick is how often the progress line's clock advances.
const progressTick = 250 * time.Millisecond

// progress keeps one line on a terminal: the current phase and the time
// since inspect started. It erases the line when it stops, so the report
// starts on a clean line.
type progress struct {
	w     io.Writer
	cmd   string // the command, named on the line
	start time.Time
	mu    sync.Mutex
	name  string
	done  chan struct{}
	wg    sync.WaitGroup
}

func newProgress(w io.Writer, cmd string) *progress {
	p := &progress{w: w, cmd: cmd, start: time.Now(), name: "starting", done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(progressTick)
		defer t.Stop()
		for {
			p.draw()
			select {
			case <-p.done:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *progress) phase(name string) {
	p.mu.Lock()
	p.name = name
	p.mu.Unlock()
	p.draw()
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\033[Kstockade %s: %s  %s", p.cmd, p.name, time.Since(p.start).Round(100*time.Millisecond))
}

func (p *progress) stop() {
	close(p.done)
	p.wg.Wait()
	fmt.Fprint(p.w, "\r\033[K")
}
