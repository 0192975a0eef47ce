package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/workflow"
)

// runFlags are the flags of every command that runs the toolchain on a
// directory (inspect, maintain): where modules come from, the data
// directory, the toolchain image and the report's form. Each command adds
// its own bounds and choices.
type runFlags struct {
	cmd          string
	asJSON       *bool
	fixtureProxy *string
	proxy        *string
	dataDir      *string
	lockTimeout  *time.Duration
	image        *string
	pull         *bool
	cgo          *bool
	aptPackages  *string
	gateNetwork  *string
	gatePrivate  *string
	sumDB        *string
	goPrivate    *string
	noSumDB      *string
	netrc        *string
	authHelper   *string
	proxyCA      *string
	verbose      *bool
	runtime      *string
	// openVEX is -openvex FILE, defined by the commands that scan
	// (withOpenVEX); nil for the others.
	openVEX *string
	// sarif is -sarif FILE: the findings as a SARIF 2.1.0 log.
	sarif *string
	// minAge is -min-age, defined by the commands that list candidates
	// (withCooldown); nil for the others.
	minAge *time.Duration
}

// addRunFlags defines the shared flags on fs for command cmd.
func addRunFlags(fs *flag.FlagSet, cmd string) *runFlags {
	return &runFlags{
		cmd:          cmd,
		asJSON:       fs.Bool("json", false, "print the machine report (docs/REPORT.md) instead of the text report"),
		fixtureProxy: fs.String("fixture-proxy", "", "`DIR` in GOPROXY file layout (or module sources as in testdata/modules) to acquire modules from, offline, instead of -proxy"),
		proxy:        fs.String("proxy", "", "GOPROXY `URL` for acquisition (no direct fallback); default "+workflow.DefaultProxy),
		dataDir:      fs.String("data-dir", "", "`DIR` for caches, snapshots and the lock: new, empty or one Stockade marked; default $XDG_CACHE_HOME/stockade"),
		lockTimeout:  fs.Duration("lock-timeout", workflow.DefaultLockTimeout, "how long to wait for the data directory's lock, held briefly by a run starting or a reap (runs themselves go on side by side)"),
		image:        fs.String("image", "", "toolchain image `REF` to use instead of choosing one: an image ID or name@sha256:<digest>"),
		pull:         fs.Bool("pull", false, "pull the -image reference if the engine does not have it"),
		cgo:          fs.Bool("cgo", true, "use the image with the C toolchain (cgo on); -cgo=false: the small image, CGO_ENABLED=0"),
		aptPackages:  fs.String("apt-packages", "", "comma-separated Debian packages (`name[=version],...`) to add to the C toolchain layer, with what they depend on, such as zlib1g-dev"),
		gateNetwork:  fs.String("gate-network", "", "`NETWORK` the egress gate of acquisition reaches the -proxy on; default the engine's bridge"),
		gatePrivate:  fs.String("gate-allow-private", "", "comma-separated private `CIDR`s the egress gate may reach (a -proxy on an internal network); default none"),
		sumDB:        fs.String("sumdb", "", "GOSUMDB for acquisition: a checksum database `name[+key] [URL]` the egress gate also admits; default sum.golang.org"),
		goPrivate:    fs.String("private", "", "GOPRIVATE: comma-separated module path `patterns` of private modules, not checked against the checksum database and fetched from -proxy too (GONOPROXY=none)"),
		noSumDB:      fs.String("nosumdb", "", "GONOSUMDB: more comma-separated module path `patterns` the checksum database is not asked about"),
		netrc:        fs.String("netrc", "", "netrc `FILE` with -proxy's credentials, for acquisition only (never where the repository's code runs); sent over HTTPS only"),
		authHelper:   fs.String("auth-helper", "", "credential helper `PROGRAM` the go command runs in acquisition for -proxy's credentials (GOAUTH=command; Go 1.24+; static, or a script busybox's sh runs)"),
		proxyCA:      fs.String("proxy-ca", "", "PEM `FILE` of certificates acquisition trusts besides the image's, for a -proxy with a private CA"),
		verbose:      fs.Bool("v", false, "log debug detail to stderr"),
		sarif:        fs.String("sarif", "", "also write the findings as a SARIF 2.1.0 log to `FILE`, for a code-scanning view (docs/REPORT.md); written whatever the outcome, an untrusted run marked unsuccessful"),
		runtime:      fs.String("runtime", "", "the engine's OCI runtime `NAME` of the containers the repository's code runs in: runsc runs them under gVisor (registered with the engine: scripts/runsc-up); default $"+envRuntime+" when set, else the engine's default (runc)"),
	}
}

// envRuntime names the variable that sets -runtime when the flag is not
// given.
const envRuntime = "STOCKADE_RUNTIME"

// runtimeName returns -runtime, or $STOCKADE_RUNTIME when it is empty.
func (f *runFlags) runtimeName() string {
	if *f.runtime != "" {
		return *f.runtime
	}
	return os.Getenv(envRuntime)
}

// withOpenVEX defines -openvex on fs, for a command whose report may hold
// a vulnerability scan. The document is a file beside the report, not a
// form of it (-json is that): it carries no verdict and cannot say
// "inconclusive", so the report on stdout and the exit code still do.
func (f *runFlags) withOpenVEX(fs *flag.FlagSet) *runFlags {
	f.openVEX = fs.String("openvex", "", "also write the vulnerability scan as an OpenVEX v0.2.0 document to `FILE` (docs/REPORT.md); not written, and the exit code is not 0, when the scan is inconclusive or did not run")
	return f
}

// withCooldown defines -min-age on fs, for a command that lists upgrade
// candidates (inspect, maintain).
func (f *runFlags) withCooldown(fs *flag.FlagSet) *runFlags {
	f.minAge = fs.Duration("min-age", 0, "hold back versions the module proxy published less than `DURATION` ago (its .info Time), such as 168h (a week); the report lists them with when they age in; 0 holds back none")
	return f
}

// check refuses flag combinations that make no sense.
func (f *runFlags) check() error {
	for _, out := range []struct {
		flag string
		name *string
	}{{"-openvex", f.openVEX}, {"-sarif", f.sarif}} {
		if out.name == nil || *out.name == "" {
			continue
		}
		if fi, err := os.Stat(filepath.Dir(*out.name)); err != nil || !fi.IsDir() {
			return f.usagef("%s %s: its directory does not exist", out.flag, *out.name)
		}
		if fi, err := os.Stat(*out.name); err == nil && !fi.Mode().IsRegular() {
			return f.usagef("%s %s is not a regular file", out.flag, *out.name)
		}
	}
	switch {
	case *f.fixtureProxy != "" && *f.proxy != "":
		return f.usagef("-fixture-proxy and -proxy cannot be used together")
	case *f.pull && *f.image == "":
		return f.usagef("-pull applies to -image only")
	case *f.lockTimeout < 0:
		return f.usagef("-lock-timeout must not be negative")
	case f.minAge != nil && *f.minAge < 0:
		return f.usagef("-min-age must not be negative")
	case len(f.apt()) > 0 && !*f.cgo:
		return f.usagef("-apt-packages adds to the C toolchain layer, which -cgo=false leaves out")
	case *f.fixtureProxy != "" && (*f.gateNetwork != "" || *f.gatePrivate != ""):
		return f.usagef("-fixture-proxy runs acquisition without network: -gate-network and -gate-allow-private do not apply")
	case *f.fixtureProxy != "" && (*f.sumDB != "" || *f.netrc != "" || *f.authHelper != "" || *f.proxyCA != ""):
		return f.usagef("-fixture-proxy is a directory without a checksum database: -sumdb, -netrc, -auth-helper and -proxy-ca do not apply")
	}
	if _, err := f.private(); err != nil {
		return err
	}
	if err := container.CheckRuntimeName(f.runtimeName()); err != nil {
		return f.usagef("-runtime: %v", err)
	}
	for _, e := range strings.FieldsFunc(*f.proxy, func(r rune) bool { return r == ',' || r == '|' }) {
		if u, err := url.Parse(strings.TrimSpace(e)); err == nil && u.User != nil {
			return f.usagef("-proxy %s carries credentials, which every container's GOPROXY would show, the repository's code included: give them with -netrc or -auth-helper", u.Redacted())
		}
	}
	_, err := f.access()
	return err
}

// access returns the private modules' access of -private, -nosumdb,
// -netrc, -auth-helper and -proxy-ca, files made absolute; a file that is
// not a regular file is a usage error.
func (f *runFlags) access() (toolchain.ModuleAccess, error) {
	a := toolchain.ModuleAccess{Private: *f.goPrivate, NoSumDB: *f.noSumDB}
	for _, c := range []struct {
		flag, path string
		dst        *string
	}{{"-netrc", *f.netrc, &a.Netrc}, {"-auth-helper", *f.authHelper, &a.AuthHelper}, {"-proxy-ca", *f.proxyCA, &a.ProxyCA}} {
		if c.path == "" {
			continue
		}
		abs, err := filepath.Abs(c.path)
		if err != nil {
			return a, f.usagef("%s: %v", c.flag, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.Mode().IsRegular() {
			return a, f.usagef("%s %s is not a regular file", c.flag, c.path)
		}
		*c.dst = abs
	}
	if err := a.Validate(); err != nil {
		return a, f.usagef("-private, -nosumdb: %v", err)
	}
	return a, nil
}

// private returns -gate-allow-private's ranges.
func (f *runFlags) private() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, c := range strings.Split(*f.gatePrivate, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil || p.Masked() != p {
			return nil, f.usagef("-gate-allow-private: %q is not a masked CIDR", c)
		}
		out = append(out, p)
	}
	return out, nil
}

// apt returns -apt-packages' packages.
func (f *runFlags) apt() []string {
	var out []string
	for _, p := range strings.Split(*f.aptPackages, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// dir returns the one directory argument, absolute.
func (f *runFlags) dir(args []string) (string, error) {
	if len(args) != 1 {
		return "", usagef(f.cmd, "usage: stockade %s [flags] DIR", f.cmd)
	}
	dir, err := filepath.Abs(args[0])
	if err != nil {
		return "", f.usagef("%v", err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", f.usagef("%s is not a directory", args[0])
	}
	return dir, nil
}

// options returns the options every workflow shares, filled from the
// flags (checked first: check) and the one directory argument; the caller
// sets its bounds (Timeout, Deadline), the database and progress. cleanup
// removes what -fixture-proxy's proxy left.
func (f *runFlags) options(env *cmdEnv, args []string) (o workflow.Options, cleanup func(), err error) {
	if o.Dir, err = f.dir(args); err != nil {
		return o, nil, err
	}
	if o.GateAllowPrivate, err = f.private(); err != nil {
		return o, nil, err
	}
	if o.Access, err = f.access(); err != nil {
		return o, nil, err
	}
	if o.FixtureProxy, cleanup, err = f.fixture(); err != nil {
		return o, nil, err
	}
	o.Proxy, o.DataDir, o.LockTimeout, o.GateNetwork, o.SumDB = *f.proxy, *f.dataDir, *f.lockTimeout, *f.gateNetwork, *f.sumDB
	o.Image, o.Pull, o.Cgo, o.AptPackages, o.Logger = *f.image, *f.pull, *f.cgo, f.apt(), f.logger(env.stderr)
	if f.minAge != nil {
		o.Cooldown.MinAge = *f.minAge
	}
	o.Runtime = f.runtimeName()
	// Waiting is the one thing said off a terminal: a run that seems to
	// hang should say why.
	lockTimeout := o.LockTimeout
	o.OnLockWait = func(holder string) {
		fmt.Fprintf(env.stderr, "stockade %s: the data directory's lock is held (%s); waiting up to %v\n", f.cmd, holder, lockTimeout)
	}
	return o, cleanup, nil
}

// fixture returns the GOPROXY directory of -fixture-proxy ("" without it)
// and a cleanup that removes what making it left.
func (f *runFlags) fixture() (string, func(), error) {
	if *f.fixtureProxy == "" {
		return "", func() {}, nil
	}
	return fixtureProxyDir(f.cmd, *f.fixtureProxy, *f.dataDir)
}

// writeSARIF writes log to -sarif's file, atomically, when the flag is
// set.
func (f *runFlags) writeSARIF(log *report.SARIFLog) error {
	if *f.sarif == "" {
		return nil
	}
	if err := writeAtomic(*f.sarif, func(w io.Writer) error { return report.WriteSARIF(w, log) }); err != nil {
		return fmt.Errorf("writing the SARIF log: %w", err)
	}
	return nil
}

// logger logs debug detail to w with -v and discards otherwise.
func (f *runFlags) logger(w io.Writer) *slog.Logger {
	if !*f.verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (f *runFlags) usagef(format string, args ...any) error {
	return usagef(f.cmd, "stockade %s: %s", f.cmd, fmt.Sprintf(format, args...))
}
