// Package toolchain runs Go toolchain commands against an untrusted
// repository, each in a container of one of four profiles: Acquire, Mutate,
// Execute and Tool.
//
// Threat model: the repository is hostile. Its code runs only in the
// Execute profile, which has no network (enforced by the engine), sees the
// source snapshot and the module cache read-only, and can write only a
// fresh, randomly named build cache of its own, a tmpfs at /tmp and, in a
// validation's long-lived container (Runner.Start), a throwaway copy of the
// snapshot as its working tree, removed with the container. Acquire
// and Mutate run only the toolchain's own module commands (ModuleCommands:
// any other argv, and GOCACHEPROG, is refused before a container exists),
// with a writable module cache and network only through the run's egress
// gate (internal/egress), which admits the configured proxy's and checksum
// database's hosts and nothing else (GatePolicy).
// Tool builds a pinned tool and shares nothing with the repository. Every
// container is made by internal/container (read-only root, every capability
// dropped, no new privileges, user 65534, an environment built from scratch,
// cpu/memory/pids limits), is wrapped in an in-container timeout, and carries
// labels naming the run, the profile and the data directory so a crashed
// run's containers can be reaped.
//
// NewSpec turns (configuration, job) into a container.Spec and is the only
// place the profiles are written down. A Runner owns one run: the locked data
// directory, the source snapshots, the caches, the mount probe, and the
// containers (one-shot with Run, long-lived with Start).
package toolchain

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/stockade/stockade/internal/cacheseed"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/defaults"
	"github.com/stockade/stockade/internal/egress"
	"github.com/stockade/stockade/internal/image"
)

// Profile is what a container is for; it decides its mounts, network and
// environment.
type Profile string

// The profiles of the seed's table.
const (
	// Acquire downloads modules: source read-only, module cache writable,
	// network only through the run's egress gate, to the configured
	// proxy's and checksum database's hosts (none with a fixture proxy).
	Acquire Profile = "acquire"
	// Mutate changes the manifests: as Acquire, plus a writable staging copy
	// of go.mod and go.sum at StagingDir.
	Mutate Profile = "mutate"
	// Execute builds, vets and tests the repository: no network, source and
	// module cache read-only, a fresh build cache of its own; a validation's
	// container (Runner.Start) works in a throwaway writable copy of the
	// source (Job.WorkTree).
	Execute Profile = "execute"
	// Tool builds a pinned tool: no source, fresh module and build caches of
	// its own, writable ToolsDir, network only through the run's egress
	// gate to proxy.golang.org and sum.golang.org.
	Tool Profile = "tool"
)

// Profiles lists every profile.
var Profiles = []Profile{Acquire, Mutate, Execute, Tool}

// Paths inside the containers.
const (
	SourceDir       = "/src"           // the source snapshot, read-only; Execute with a WorkTree: the working tree, writable
	SnapshotDir     = "/snapshot"      // Execute with a WorkTree: the source snapshot, read-only
	ModCacheDir     = "/modcache"      // GOMODCACHE
	BuildCacheDir   = "/gocache"       // GOCACHE
	StagingDir      = "/staging"       // Mutate's writable copy of go.mod/go.sum
	ToolsDir        = "/tools"         // Tool: GOBIN, writable; Execute: scanner, read-only
	VulnDBDir       = "/vulndb"        // Execute with a scan: vulnerability database, read-only
	FixtureProxyDir = "/fixture-proxy" // a GOPROXY file-layout directory, read-only
	// AuthDir is where Acquire and Mutate see the run's copy of the
	// credentials of ModuleAccess, read-only: netrc, helper, ca/ca.pem.
	// Execute and Tool never mount it.
	AuthDir = "/stockade-auth"
	TmpDir  = "/tmp" // exec-enabled tmpfs; HOME and TMPDIR (image.GoEnv)
)

// Public endpoints the Tool profile always uses, whatever the run uses.
const (
	ToolProxy = "https://proxy.golang.org"
	ToolSumDB = "sum.golang.org"
)

// Defaults and limits. Each is a budget with its unit in the name or comment.
const (
	// DefaultProxy is GOPROXY when Config.Proxy is empty.
	DefaultProxy = "https://proxy.golang.org"
	// DefaultSumDB is GOSUMDB when Config.SumDB is empty.
	DefaultSumDB = "sum.golang.org"
	// DefaultTimeout bounds one command when neither Job nor Config says.
	DefaultTimeout = 10 * time.Minute
	// MaxTimeout is the longest command timeout accepted.
	MaxTimeout = 2 * time.Hour
	// HostGrace is how much longer the host waits than the in-container
	// timeout before it kills the container itself.
	HostGrace = 10 * time.Second
	// DefaultOutputCap is how much of each of stdout and stderr a command
	// keeps, in bytes; the rest is counted and flagged as truncated.
	DefaultOutputCap = 16 << 20
	// ContainerUser is the user every profile runs as.
	ContainerUser = defaults.NobodyUser
)

// Errors callers branch on. Every error from NewSpec and Config.Validate
// matches ErrInvalidConfig or ErrInvalidJob (and ErrWeakened when the
// problem is that the setting would weaken a profile).
var (
	// ErrInvalidConfig reports a Config that is malformed or weakens a profile.
	ErrInvalidConfig = errors.New("toolchain: invalid configuration")
	// ErrInvalidJob reports a Job that does not fit its profile.
	ErrInvalidJob = errors.New("toolchain: invalid job")
	// ErrWeakened reports a setting refused because it would weaken a
	// profile's guarantees (a direct proxy, the checksum database off, a
	// writable source, a missing fresh build cache).
	ErrWeakened = errors.New("toolchain: setting would weaken the profile")
	// ErrNoBuildCache reports an Execute job without its fresh build cache.
	ErrNoBuildCache = errors.New("toolchain: execute needs a fresh build cache")
	// ErrNotAllowed reports a command or variable a profile does not run:
	// in Acquire and Mutate anything but the go command's module
	// subcommands (ModuleCommands), and GOCACHEPROG anywhere but Execute
	// or pointing at anything but the build-cache seed's program.
	ErrNotAllowed = errors.New("toolchain: not allowed in this profile")
)

// ConfigError says which setting of a Config or Job was refused and why.
type ConfigError struct {
	Field  string // the Config or Job field, such as "Proxy"
	Reason string
	kind   error // ErrInvalidConfig or ErrInvalidJob
	weak   bool  // also matches ErrWeakened
	other  error // an extra sentinel, such as ErrNoBuildCache
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%v: %s: %s", e.kind, e.Field, e.Reason)
}

// Is matches ErrInvalidConfig or ErrInvalidJob, ErrWeakened for a
// weakening, and ErrNoBuildCache where it applies.
func (e *ConfigError) Is(target error) bool {
	return target == e.kind || (e.weak && target == ErrWeakened) || (e.other != nil && target == e.other)
}

func configErr(field, format string, args ...any) *ConfigError {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...), kind: ErrInvalidConfig}
}

func jobErr(field, format string, args ...any) *ConfigError {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...), kind: ErrInvalidJob}
}

func weak(e *ConfigError) *ConfigError { e.weak = true; return e }

// Config is what a run is configured with. The zero value, plus an Image,
// is the strictest configuration: proxy.golang.org with the checksum
// database, default limits and timeouts, no scan.
type Config struct {
	// Image is the toolchain image (an ID, pinned). Required.
	Image string
	// Proxy is GOPROXY for Acquire, Mutate and Execute: one or more proxy
	// URLs (https or http) separated by commas or pipes. "direct", "off"
	// and file URLs are refused (use FixtureProxy). Empty means
	// DefaultProxy. It must be empty with FixtureProxy.
	Proxy string
	// SumDB is GOSUMDB: empty means DefaultSumDB; "off" is refused unless
	// FixtureProxy is set, which turns it off.
	SumDB string
	// FixtureProxy is a host directory in GOPROXY file layout. When set,
	// Acquire and Mutate mount it read-only at FixtureProxyDir, use
	// GOPROXY=file:///fixture-proxy and GOSUMDB=off, and have no network.
	FixtureProxy string
	// ScanTools and ScanVulnDB are host directories mounted read-only in
	// Execute at ToolsDir and VulnDBDir. Both or neither: a scan needs the
	// scanner and its database.
	ScanTools, ScanVulnDB string
	// Limits are each container's resource limits; a zero field takes
	// container.ToolchainLimits.
	Limits container.Limits
	// Timeout bounds each command (and a long-lived container's life) when
	// the Job does not; zero means DefaultTimeout.
	Timeout time.Duration
	// OutputCap is how many bytes of each stream a command keeps; zero
	// means DefaultOutputCap.
	OutputCap int64
	// GateImage is the image of the run's egress gates (GatePolicy): an
	// image ID. Empty means Stockade's own (image.BuildGate), built on the
	// first job that needs a gate.
	GateImage string
	// GateNetwork names the network the run's gates reach the outside on,
	// their only way out; empty means the engine's "bridge".
	GateNetwork string
	// GateAllowPrivate lists the private ranges the run's gates may reach
	// (a module proxy on an internal network, tests' upstreams); nil
	// refuses every private destination. Loopback, link-local (cloud
	// metadata) and unspecified destinations are refused whatever it says.
	GateAllowPrivate []netip.Prefix
	// Access is how acquisition reaches private modules; the zero value
	// is public modules only.
	Access ModuleAccess
	// Runtime is the engine's OCI runtime of the containers the
	// repository's code runs in: Execute's, and the probe that checks
	// their mounts first. container.RuntimeRunsc runs them under gVisor
	// (a kernel of its own between that code and the host's). The other
	// profiles run only the go command's module subcommands or a pinned
	// tool, and the run's gates Stockade's own program: they take the
	// engine's default. Empty means the engine's default (runc). Open
	// refuses a runtime the engine does not offer
	// (container.ErrRuntimeUnavailable); nothing falls back to another.
	Runtime string

	// Owner, RunID and DataDirID label every container (label.Owner,
	// label.Run, label.DataDir). A Runner sets them; NewSpec requires them.
	Owner, RunID, DataDirID string
	// GoRoot is the volume holding a copy of Image's GOROOT (GoRoot),
	// mounted read-only over it in every profile. A Runner sets it; empty
	// means the image's own.
	GoRoot string
	// AuthCopy is the run's copy of Access's credential files, mounted at
	// AuthDir in Acquire and Mutate. A Runner sets it; NewSpec refuses
	// credentials without it.
	AuthCopy string
}

// ModuleAccess is how acquisition reaches modules that are not public, as
// Go users configure the go command for them: private module patterns,
// and credentials for the module proxy that serves them. Every module is
// still fetched through Config.Proxy only, and through the run's egress
// gate. The credentials reach the profiles that fetch (Acquire, Mutate),
// never Execute, where the repository's code runs, nor Tool.
type ModuleAccess struct {
	// Private is GOPRIVATE: comma-separated module path patterns (globs,
	// as the go command matches them) of private modules, which the
	// checksum database is not asked about. GONOPROXY is then "none":
	// Stockade never fetches direct, so private modules come from the
	// proxy too. Empty means none.
	Private string
	// NoSumDB is GONOSUMDB: more patterns the checksum database is not
	// asked about. Empty means only Private's.
	NoSumDB string
	// Netrc is a host netrc file with the proxy's credentials (NETRC,
	// GOAUTH=netrc); empty means none. The go command sends them over
	// HTTPS only.
	Netrc string
	// AuthHelper is a host program the go command runs in Acquire and
	// Mutate for the proxy's credentials (GOAUTH=command, Go 1.24 and
	// later): it must run there (a static binary, or a script busybox's
	// sh runs). Empty means none.
	AuthHelper string
	// ProxyCA is a host file of PEM certificates acquisition trusts
	// besides the image's (SSL_CERT_DIR), for a proxy with a private CA.
	// Empty means none.
	ProxyCA string
}

// credentials reports whether a carries credential files.
func (a ModuleAccess) credentials() bool {
	return a.Netrc != "" || a.AuthHelper != "" || a.ProxyCA != ""
}

// Validate refuses patterns the go command could misread and files that
// are not absolute clean paths.
func (a ModuleAccess) Validate() error {
	for f, v := range map[string]string{"Access.Private": a.Private, "Access.NoSumDB": a.NoSumDB} {
		if strings.ContainsAny(v, " \t\n\r\x00") {
			return configErr(f, "%q has whitespace or control characters", v)
		}
		for _, p := range strings.Split(v, ",") {
			if _, err := path.Match(p, ""); err != nil || v != "" && p == "" {
				return configErr(f, "%q is not a list of module path patterns", v)
			}
		}
	}
	for f, p := range map[string]string{"Access.Netrc": a.Netrc, "Access.AuthHelper": a.AuthHelper, "Access.ProxyCA": a.ProxyCA} {
		if p != "" && !cleanAbs(p) {
			return configErr(f, "%q is not an absolute clean path", p)
		}
	}
	return nil
}

// Validate refuses a configuration that is malformed or would weaken a
// profile. It does not look at the filesystem.
func (c Config) Validate() error {
	if c.Image == "" {
		return configErr("Image", "no toolchain image")
	}
	if err := c.Access.Validate(); err != nil {
		return err
	}
	if c.FixtureProxy != "" {
		if !cleanAbs(c.FixtureProxy) {
			return configErr("FixtureProxy", "%q is not an absolute clean path", c.FixtureProxy)
		}
		if c.Access.credentials() {
			return configErr("Access", "a fixture proxy is a directory: it takes no credentials")
		}
		if c.Proxy != "" {
			return configErr("Proxy", "a fixture proxy replaces the configured proxy; set one, not both")
		}
		if c.SumDB != "" && c.SumDB != "off" {
			return configErr("SumDB", "a fixture proxy turns the checksum database off; %q cannot be used with it", c.SumDB)
		}
	} else {
		if err := checkProxy(c.Proxy); err != nil {
			return err
		}
		if err := checkSumDB(c.SumDB); err != nil {
			return err
		}
		if err := checkGateHosts(c); err != nil {
			return err
		}
	}
	if err := container.CheckRuntimeName(c.Runtime); err != nil {
		return configErr("Runtime", "%v", err)
	}
	for i, pr := range c.GateAllowPrivate {
		if !pr.IsValid() || pr.Masked() != pr {
			return configErr("GateAllowPrivate", "[%d] %v is not a masked prefix", i, pr)
		}
	}
	if (c.ScanTools == "") != (c.ScanVulnDB == "") {
		return configErr("ScanTools", "a scan needs both the tools and the vulnerability database directories")
	}
	for f, p := range map[string]string{"ScanTools": c.ScanTools, "ScanVulnDB": c.ScanVulnDB} {
		if p != "" && !cleanAbs(p) {
			return configErr(f, "%q is not an absolute clean path", p)
		}
	}
	if c.Timeout < 0 || c.Timeout > MaxTimeout {
		return configErr("Timeout", "%v is outside 0..%v", c.Timeout, MaxTimeout)
	}
	if c.OutputCap < 0 {
		return configErr("OutputCap", "negative")
	}
	if c.Limits.NanoCPUs < 0 || c.Limits.MemoryBytes < 0 || c.Limits.PidsLimit < 0 {
		return configErr("Limits", "negative limit")
	}
	return nil
}

// checkProxy refuses GOPROXY values that could reach anything but a proxy.
func checkProxy(p string) error {
	if p == "" {
		return nil
	}
	for _, e := range strings.FieldsFunc(p, func(r rune) bool { return r == ',' || r == '|' }) {
		e = strings.TrimSpace(e)
		switch strings.ToLower(e) {
		case "direct":
			return weak(configErr("Proxy", "%q falls back to direct: acquisition must go through the proxy only", p))
		case "off":
			return weak(configErr("Proxy", "%q turns the proxy off", p))
		}
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return configErr("Proxy", "%q is not an http(s) proxy URL (use FixtureProxy for a directory)", e)
		}
		if u.User != nil {
			return configErr("Proxy", "%q carries credentials, which every profile's GOPROXY would show; give them in a netrc file (ModuleAccess.Netrc)", e)
		}
	}
	if strings.ContainsAny(p, " \t\n\x00") {
		return configErr("Proxy", "%q has whitespace", p)
	}
	return nil
}

func checkSumDB(s string) error {
	if s == "" {
		return nil
	}
	if strings.EqualFold(strings.TrimSpace(s), "off") {
		return weak(configErr("SumDB", "the checksum database may be off only with a fixture proxy"))
	}
	if strings.ContainsAny(s, "\t\n\x00") {
		return configErr("SumDB", "%q has control characters", s)
	}
	return nil
}

// Job is one command in one profile. Host paths must be absolute and clean;
// a Runner fills in the caches it owns and checks the rest are its own.
type Job struct {
	Profile Profile
	// Cmd is the argv, run under `timeout -s KILL` in the container. It
	// must not be empty (except for Runner.Start, which supplies its own).
	// Acquire and Mutate run only ModuleCommands (ErrNotAllowed).
	Cmd []string
	// Dir is the working directory in the container; empty means SourceDir
	// when there is a source, else TmpDir.
	Dir string
	// Source is the host snapshot mounted read-only at SourceDir (at
	// SnapshotDir when the job has a WorkTree). Tool must
	// not have one.
	Source string
	// ModCache is the host module cache at ModCacheDir: writable in Acquire
	// and Mutate, read-only in Execute. Tool's must be its own (fresh).
	ModCache string
	// BuildCache is the host build cache at BuildCacheDir, always writable.
	// Required in every profile; Execute's must be fresh per validation.
	BuildCache string
	// WorkTree is Execute's throwaway working tree, mounted writable at
	// SourceDir while Source moves to SnapshotDir (read-only); the
	// container copies Source into it before anything else runs
	// (Runner.Start makes and fills one for every validation, and removes
	// it with the container). It needs a Source; only Execute may have one.
	WorkTree string
	// Staging is Mutate's writable copy of go.mod and go.sum at StagingDir
	// (go get -modfile=/staging/go.mod writes go.sum beside it). Only Mutate
	// may have one.
	Staging string
	// Tools is Tool's writable install directory at ToolsDir (GOBIN). Only
	// Tool may have one.
	Tools string
	// ReadOnly are extra host directories mounted read-only in Execute, such
	// as a trusted build-cache seed (internal/cacheseed: Seed.Mounts). Only
	// Bind mounts; Writable is refused; targets may not touch the profile's
	// own paths. A Runner accepts only sources that passed its Probe.
	ReadOnly []container.Mount
	// Env adds variables from an allowlist: CGO_ENABLED, GOOS, GOARCH,
	// GOAMD64, GOARM64, GOEXPERIMENT, GODEBUG, GOMAXPROCS, GOGC, GOMEMLIMIT,
	// GOTRACEBACK, and GOCACHEPROG in Execute only, naming the build-cache
	// seed's program (ErrNotAllowed otherwise). The variables each profile
	// sets, and any other that decides what is fetched or trusted, are
	// refused.
	Env map[string]string
	// Timeout bounds the command inside the container; zero means
	// Config.Timeout.
	Timeout time.Duration

	// anyCmd lets this package's engine tests run probe commands (sh,
	// cat) in Acquire and Mutate, and Start its long-lived container's
	// sleep; nothing outside the package can set it.
	anyCmd bool
	// gateNet is the gate network of the run's gate for the job's
	// profile, when it has network (GatePolicy): a Runner sets it, and
	// NewSpec refuses such a job without it.
	gateNet string
}

// extraEnv is the allowlist of variables a Job may add. Everything that
// decides where modules come from, where caches are, or what is trusted is
// set by the profile and cannot be added.
var extraEnv = map[string]bool{
	"CGO_ENABLED": true, "GOOS": true, "GOARCH": true, "GOAMD64": true, "GOARM64": true,
	"GOEXPERIMENT": true, "GODEBUG": true, "GOMAXPROCS": true, "GOGC": true,
	"GOMEMLIMIT": true, "GOTRACEBACK": true, "GOCACHEPROG": true,
}

// timeoutOf resolves a job's timeout.
func timeoutOf(cfg Config, j Job) time.Duration {
	switch {
	case j.Timeout > 0:
		return j.Timeout
	case cfg.Timeout > 0:
		return cfg.Timeout
	}
	return DefaultTimeout
}

// Env returns the environment of profile p under cfg, built from scratch:
// exactly these variables, nothing from the host. A profile with network
// gets the proxy variables of its gate (egress.ProxyEnv).
func Env(p Profile, cfg Config) map[string]string {
	env := image.GoEnv()
	env["GOFLAGS"] = "-mod=mod"
	env["GOAUTH"] = "off"
	env["GOMODCACHE"] = ModCacheDir
	env["GOCACHE"] = BuildCacheDir
	if p != Tool {
		// The module's own configuration; Tool builds public tools.
		env["GOPRIVATE"], env["GONOSUMDB"] = cfg.Access.Private, cfg.Access.NoSumDB
		if cfg.Access.Private != "" {
			env["GONOPROXY"] = "none" // private modules from the proxy too: never direct
		}
	}
	if (p == Acquire || p == Mutate) && cfg.Access.credentials() {
		// Only the profiles that fetch see the credentials (AuthDir).
		var auth []string
		if cfg.Access.Netrc != "" {
			env["NETRC"] = AuthDir + "/netrc"
			auth = append(auth, "netrc")
		}
		if cfg.Access.AuthHelper != "" {
			auth = append(auth, AuthDir+"/helper") // a command: its own path
		}
		if len(auth) > 0 {
			env["GOAUTH"] = strings.Join(auth, ";")
		}
		if cfg.Access.ProxyCA != "" {
			env["SSL_CERT_DIR"] = AuthDir + "/ca" // besides the image's bundle
		}
	}
	switch {
	case p == Tool:
		env["GOPROXY"], env["GOSUMDB"] = ToolProxy, ToolSumDB
		env["GOBIN"] = ToolsDir
	case cfg.FixtureProxy != "":
		env["GOPROXY"], env["GOSUMDB"] = "file://"+FixtureProxyDir, "off"
	default:
		env["GOPROXY"], env["GOSUMDB"] = cfg.Proxy, cfg.SumDB
		if env["GOPROXY"] == "" {
			env["GOPROXY"] = DefaultProxy
		}
		if env["GOSUMDB"] == "" {
			env["GOSUMDB"] = DefaultSumDB
		}
	}
	if p == Tool || (p == Acquire || p == Mutate) && cfg.FixtureProxy == "" {
		for k, v := range egress.ProxyEnv() {
			env[k] = v // the run's gate (GatePolicy)
		}
	}
	return env
}

// NewSpec returns the container for job under cfg: the profile's mounts,
// network, environment, limits, labels and in-container timeout. It refuses
// (with a *ConfigError) anything that does not fit the profile, before any
// container exists.
func NewSpec(cfg Config, job Job) (container.Spec, error) {
	if err := cfg.Validate(); err != nil {
		return container.Spec{}, err
	}
	if cfg.Owner == "" || cfg.RunID == "" || cfg.DataDirID == "" {
		return container.Spec{}, configErr("Owner", "owner, run id and data directory id label every container; a Runner sets them")
	}
	if err := checkJob(cfg, job); err != nil {
		return container.Spec{}, err
	}
	if cfg.Access.credentials() && cfg.AuthCopy == "" {
		return container.Spec{}, configErr("Access", "credentials reach the containers only as a Runner's copy (AuthCopy)")
	}
	_, networked := GatePolicy(job.Profile, cfg)
	if networked && job.gateNet == "" {
		return container.Spec{}, jobErr("Profile", "%s has network only behind the run's egress gate, which a Runner provides", job.Profile)
	}
	s, err := container.ToolchainSpec(scopeOf(cfg), string(job.Profile), cfg.Image, timeoutOf(cfg, job), job.Cmd)
	if err != nil {
		return container.Spec{}, err
	}
	s.Env, s.Workdir, s.Limits = Env(job.Profile, cfg), job.Dir, cfg.Limits.Or(s.Limits)
	for k, v := range job.Env {
		s.Env[k] = v
	}
	if s.Workdir == "" {
		s.Workdir = TmpDir
		if job.Source != "" {
			s.Workdir = SourceDir
		}
	}
	bind := func(src, dst string, writable bool) {
		if src != "" {
			s.Mounts = append(s.Mounts, container.Mount{Type: container.Bind, Source: src, Target: dst, Writable: writable})
		}
	}
	if job.WorkTree != "" {
		bind(job.Source, SnapshotDir, false)
		bind(job.WorkTree, SourceDir, true)
	} else {
		bind(job.Source, SourceDir, false)
	}
	bind(job.BuildCache, BuildCacheDir, true)
	if cfg.GoRoot != "" {
		s.Mounts = append(s.Mounts, container.Mount{Type: container.Volume, Source: cfg.GoRoot, Target: image.GoRootInImage})
	}
	switch job.Profile {
	case Acquire, Mutate:
		bind(job.ModCache, ModCacheDir, true)
		bind(job.Staging, StagingDir, true)
		bind(cfg.AuthCopy, AuthDir, false)
		if cfg.FixtureProxy != "" {
			bind(cfg.FixtureProxy, FixtureProxyDir, false)
			s.Network = "none"
		} else {
			s.Network = job.gateNet
		}
	case Execute:
		bind(job.ModCache, ModCacheDir, false)
		bind(cfg.ScanTools, ToolsDir, false)
		bind(cfg.ScanVulnDB, VulnDBDir, false)
		for _, m := range job.ReadOnly {
			bind(m.Source, m.Target, false)
		}
		s.Network = "none"
		s.Runtime = cfg.Runtime
	case Tool:
		bind(job.ModCache, ModCacheDir, true)
		bind(job.Tools, ToolsDir, true)
		s.Network = job.gateNet
	}
	return s, nil
}

// checkJob refuses what does not fit job.Profile.
func checkJob(cfg Config, j Job) error {
	switch j.Profile {
	case Acquire, Mutate, Execute, Tool:
	default:
		return jobErr("Profile", "unknown profile %q", j.Profile)
	}
	if len(j.Cmd) == 0 {
		return jobErr("Cmd", "no command")
	}
	for _, a := range j.Cmd {
		if strings.ContainsRune(a, 0) {
			return jobErr("Cmd", "argument with a NUL byte")
		}
	}
	if (j.Profile == Acquire || j.Profile == Mutate) && !j.anyCmd {
		if err := checkModuleCmd(j.Profile, j.Cmd); err != nil {
			return err
		}
	}
	if j.Dir != "" && !cleanAbs(j.Dir) {
		return jobErr("Dir", "%q is not an absolute clean path", j.Dir)
	}
	if j.Timeout < 0 || j.Timeout > MaxTimeout {
		return jobErr("Timeout", "%v is outside 0..%v", j.Timeout, MaxTimeout)
	}
	for f, p := range map[string]string{"Source": j.Source, "WorkTree": j.WorkTree, "ModCache": j.ModCache, "BuildCache": j.BuildCache, "Staging": j.Staging, "Tools": j.Tools} {
		if p != "" && !cleanAbs(p) {
			return jobErr(f, "%q is not an absolute clean path", p)
		}
	}
	if j.BuildCache == "" {
		e := weak(jobErr("BuildCache", "profile %s has no build cache of its own", j.Profile))
		if j.Profile == Execute {
			e.other = ErrNoBuildCache
		}
		return e
	}
	// One host directory, one mount: a cache mounted twice (writable and
	// read-only) would make the read-only one meaningless.
	seen := map[string]string{}
	for _, f := range []struct{ name, p string }{{"Source", j.Source}, {"WorkTree", j.WorkTree}, {"ModCache", j.ModCache}, {"BuildCache", j.BuildCache}, {"Staging", j.Staging}, {"Tools", j.Tools}, {"FixtureProxy", cfg.FixtureProxy}, {"ScanTools", cfg.ScanTools}, {"ScanVulnDB", cfg.ScanVulnDB}, {"AuthCopy", cfg.AuthCopy}} {
		if f.p == "" {
			continue
		}
		if prev, dup := seen[f.p]; dup {
			return weak(jobErr(f.name, "%s is also %s", f.p, prev))
		}
		for q, prev := range seen {
			if container.Within(q, f.p) || container.Within(f.p, q) {
				return weak(jobErr(f.name, "%s overlaps %s (%s)", f.p, prev, q))
			}
		}
		seen[f.p] = f.name
	}
	if len(j.ReadOnly) > 0 && j.Profile != Execute {
		return weak(jobErr("ReadOnly", "only execute takes extra read-only mounts"))
	}
	reserved := []string{SourceDir, SnapshotDir, ModCacheDir, BuildCacheDir, StagingDir, ToolsDir, VulnDBDir, FixtureProxyDir, AuthDir, TmpDir}
	for _, m := range j.ReadOnly {
		if m.Type != container.Bind || m.Writable {
			return weak(jobErr("ReadOnly", "%s: only read-only bind mounts", m.Target))
		}
		if !cleanAbs(m.Source) || !cleanAbs(m.Target) {
			return jobErr("ReadOnly", "%q -> %q: not absolute clean paths", m.Source, m.Target)
		}
		for _, r := range reserved {
			if container.Within(r, m.Target) || container.Within(m.Target, r) {
				return weak(jobErr("ReadOnly", "%s overlaps the profile's %s", m.Target, r))
			}
		}
		for q, prev := range seen {
			if container.Within(q, m.Source) || container.Within(m.Source, q) {
				return weak(jobErr("ReadOnly", "%s overlaps %s (%s)", m.Source, prev, q))
			}
		}
	}
	if j.WorkTree != "" && (j.Profile != Execute || j.Source == "") {
		return weak(jobErr("WorkTree", "only execute has a writable working tree, and only as a copy of its source"))
	}
	if j.Staging != "" && j.Profile != Mutate {
		return weak(jobErr("Staging", "only mutate has a writable staging copy"))
	}
	if j.Tools != "" && j.Profile != Tool {
		return weak(jobErr("Tools", "only tool has a writable tools directory"))
	}
	if j.Profile == Tool {
		if j.Source != "" {
			return weak(jobErr("Source", "tool mounts no source"))
		}
		if j.ModCache == "" || j.Tools == "" {
			return jobErr("ModCache", "tool needs its own module cache and install directory")
		}
	}
	if j.Profile == Mutate && j.Staging == "" {
		return jobErr("Staging", "mutate needs its staging copy of the manifests")
	}
	names := make([]string, 0, len(j.Env))
	for k := range j.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !extraEnv[k] {
			return weak(jobErr("Env", "%s is set by the profile or not allowed", k))
		}
	}
	if v, ok := j.Env["GOCACHEPROG"]; ok {
		return checkCacheProg(j, v)
	}
	return nil
}

// seedCacheProg is the one GOCACHEPROG a job may set: the build-cache
// seed's program reading the seed's cache, both under the seed's
// read-only mount (internal/cacheseed: Seed.Env).
var seedCacheProg = cacheseed.ProgPath + " " + cacheseed.CacheTarget

// checkCacheProg refuses a GOCACHEPROG other than the seed's program in an
// Execute job that mounts the seed. The go command starts GOCACHEPROG
// before anything else: in a profile with network, a program of the
// repository's choosing would run with it.
func checkCacheProg(j Job, v string) error {
	notAllowed := func(format string, args ...any) error {
		e := weak(jobErr("Env", format, args...))
		e.other = ErrNotAllowed
		return e
	}
	if j.Profile != Execute {
		return notAllowed("GOCACHEPROG is for execute only, not %s", j.Profile)
	}
	if v != seedCacheProg {
		return notAllowed("GOCACHEPROG %q is not the build-cache seed's program %q", v, seedCacheProg)
	}
	for _, m := range j.ReadOnly {
		if m.Target == cacheseed.SeedTarget {
			return nil
		}
	}
	return notAllowed("GOCACHEPROG names the seed's program but the job does not mount the seed at %s", cacheseed.SeedTarget)
}

// ModuleCommands are the go subcommands Acquire and Mutate run, with the
// flags each accepts. A flag taking a value is accepted in -flag=value form
// only, with the values listed ("" accepts any value without a slash).
// Everything else is refused before a container exists: these profiles
// have network and a writable module cache, so a build, a test, -toolexec,
// -exec, -overlay or a -modfile elsewhere would run or read what the
// repository chooses.
var ModuleCommands = []ModuleCommand{
	{Sub: []string{"mod", "download"}, Flags: []string{"-json", "-x"}, Args: true},
	{Sub: []string{"list"}, Flags: []string{"-m", "-e", "-json", "-versions", "-retracted", "-u"}, Args: true, Require: "-m"},
	{Sub: []string{"get"}, Flags: []string{"-u", "-u=patch", "-t", "-x", "-v"}, Args: true},
	{Sub: []string{"mod", "tidy"}, Flags: []string{"-e", "-v", "-x", "-diff", "-go=", "-compat="}},
	{Sub: []string{"mod", "verify"}},
	{Sub: []string{"version"}},
	{Sub: []string{"env"}, Flags: []string{"-json"}, Args: true, EnvNames: true},
}

// ModuleCommand is one allowed go subcommand of Acquire and Mutate.
type ModuleCommand struct {
	Sub   []string // after "go", such as ["mod", "download"]
	Flags []string // accepted flags; one ending in "=" takes any value
	// Args accepts positional arguments (module queries), none starting
	// with "-".
	Args bool
	// Require is a flag that must be present (list needs -m).
	Require string
	// EnvNames restricts arguments to variable names (go env).
	EnvNames bool
}

// StagingModFile is the only -modfile Mutate accepts: its staging copy.
const StagingModFile = StagingDir + "/go.mod"

// checkModuleCmd refuses argv unless it is one of ModuleCommands with
// flags it accepts; Mutate also accepts -modfile=/staging/go.mod.
func checkModuleCmd(p Profile, argv []string) error {
	refuse := func(format string, args ...any) error {
		e := weak(jobErr("Cmd", format, args...))
		e.other = ErrNotAllowed
		return e
	}
	if argv[0] != "go" {
		return refuse("%s runs the go command's module subcommands only, not %q", p, argv[0])
	}
	var mc *ModuleCommand
	for i := range ModuleCommands {
		c := &ModuleCommands[i]
		if len(argv) > len(c.Sub) && slices.Equal(argv[1:1+len(c.Sub)], c.Sub) {
			mc = c
			break
		}
		if len(argv) == 1+len(c.Sub) && slices.Equal(argv[1:], c.Sub) {
			mc = c
			break
		}
	}
	if mc == nil {
		return refuse("%s does not run %q: only go mod download, list -m, get, mod tidy, mod verify, version and env", p, strings.Join(argv, " "))
	}
	rest := argv[1+len(mc.Sub):]
	required := mc.Require == ""
	for _, a := range rest {
		if !strings.HasPrefix(a, "-") {
			if !mc.Args {
				return refuse("go %s takes no arguments, not %q", strings.Join(mc.Sub, " "), a)
			}
			if mc.EnvNames && !envName(a) {
				return refuse("go env: %q is not a variable name", a)
			}
			continue
		}
		if p == Mutate && a == "-modfile="+StagingModFile {
			continue
		}
		if !flagAllowed(mc.Flags, a) {
			return refuse("go %s: flag %q is not allowed in %s", strings.Join(mc.Sub, " "), a, p)
		}
		if a == mc.Require {
			required = true
		}
	}
	if !required {
		return refuse("go %s needs %s in %s", strings.Join(mc.Sub, " "), mc.Require, p)
	}
	return nil
}

// flagAllowed reports whether a is one of allowed: exactly, or as
// -name=value for an allowed "-name=" with a value holding no slash (a
// version such as -go=1.22, never a path).
func flagAllowed(allowed []string, a string) bool {
	for _, f := range allowed {
		if a == f {
			return true
		}
		if strings.HasSuffix(f, "=") && strings.HasPrefix(a, f) && !strings.ContainsAny(a[len(f):], "/\\") && a != f {
			return true
		}
	}
	return false
}

// envName reports whether s looks like an environment variable name.
func envName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// scopeOf is whose cfg's containers are: their labels.
func scopeOf(cfg Config) container.Scope {
	return container.Scope{Owner: cfg.Owner, Run: cfg.RunID, DataDir: cfg.DataDirID}
}

// cleanAbs is container.CleanAbs, without "/" itself: nothing the
// profiles mount or run in is the root.
func cleanAbs(p string) bool { return container.CleanAbs(p) && p != "/" }
