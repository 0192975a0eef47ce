// Package docker is the sandbox backend for a Docker Engine (and Podman,
// through its Docker-compatible API): each session's sandbox is one
// container, built through internal/container (the one hardening code path
// Stockade has), with a size-bounded named volume for each of
// sandbox.WritablePaths under its read-only root, and a keeper container
// that holds those volumes.
//
// In short (docs/design/docker.md has the detail):
//
//   - Naming: every object's name is deterministic from the owner and the
//     session ("stockade-s-" + 8 hex digits of sha256(owner) + "-" + ID for
//     the container), and carries the labels of internal/label, so
//     Provision is idempotent across processes (one create wins, the others
//     adopt it after checking its labels) and nothing without our labels is
//     ever adopted or removed.
//   - Storage: each writable place is a tmpfs-typed volume of a fixed size
//     (a share of Hardening.EphemeralStorageBytes, at most half the memory
//     limit); a write past it is ENOSPC.
//   - Network: NetNone has loopback only; NetUnrestricted sessions share an
//     owner's bridge without inter-container traffic; NetLimited sessions
//     sit on an internal network of their own with their egress gate
//     (gate.go, docs/design/gate.md). Engines that cannot keep those
//     guarantees refuse with sandbox.ErrNetworkingUnsupported.
//   - Commands run in a wrapper; at the timeout a killer exec ends the whole
//     tree, and the container's restart is the backstop
//     (docs/design/killer.md). Unless Config.NoAgent, a resident agent
//     (internal/agent) runs them without engine calls.
//   - The out-of-memory verdict comes from the memory cgroup, read by a check
//     the session cannot write into, never from what the command printed.
//   - Every file byte is read and written as the sandbox user; Export reads
//     through the engine's archive API and is checked on the host
//     (sandbox.CheckArchive).
//   - With Config.Pool, a warm pool of NetNone sandboxes is claimed by an
//     atomic rename (docs/design/warm-pool.md).
//   - Provision refuses an image with a VOLUME outside the writable places
//     (sandbox.ErrUnsupportedImage) and replaces its ENTRYPOINT.
//   - Spec.Runtime (or Config.Runtime) names the engine's OCI runtime of the
//     session's container: sandbox.RuntimeRunsc runs it under gVisor;
//     Provision refuses a runtime the engine lacks
//     (sandbox.ErrRuntimeUnavailable), never falling back to runc.
package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/egress"
	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
	"github.com/stockade/stockade/sandbox/internal/backend"
	"github.com/stockade/stockade/sandbox/internal/sessiongate"
)

// Budgets of the engine calls that must finish even when the caller's
// context has ended: each runs on context.WithoutCancel with its own.
const (
	removeBudget = 60 * time.Second // container and volume removal, until gone
	// memberCreateBudget bounds a pool member's container and volume creates, which a
	// Close must not cut: a create the engine finishes after its caller
	// gave up would leave a container nobody knows of.
	memberCreateBudget = 60 * time.Second
)

// Config configures a Provider. The zero value works: the engine is found as
// dockerapi.New("") finds it, the owner is "default", and logs are dropped.
type Config struct {
	// Host is the engine address ("unix:///var/run/docker.sock",
	// "tcp://host:port"); empty means DOCKER_HOST or the usual sockets.
	Host string
	// Owner scopes Owned and Reap: several processes sharing one engine
	// each see and reap only their owner's sandboxes. Empty means "default".
	// It becomes a label value, so it is limited to 63 bytes of
	// [A-Za-z0-9_.-].
	Owner string
	// Logger receives what the provider does (keys container, session,
	// phase, dur); nil discards.
	Logger *slog.Logger
	// GateTokenRevoker revokes a session's gate token on Reap when the
	// session was not provisioned by this process (whose Spec's revoker is
	// used otherwise); nil means none.
	GateTokenRevoker sandbox.GateTokenRevoker
	// SubnetPool is the IPv4 range, in CIDR notation, from which the
	// owner's network for NetUnrestricted sandboxes takes a /24; empty
	// means DefaultSubnetPool. Choose a range no network of the host or its
	// neighbours uses: sandboxes could not reach those. Sessions' gate
	// networks take a /28 each from it too.
	SubnetPool string
	// GateNetwork names the network gates reach the outside on (their
	// only way out); empty means the engine's default "bridge".
	GateNetwork string
	// GateAllowPrivate lists the private ranges gates may reach (a
	// platform's internal registry, tests' upstreams); nil refuses every
	// private destination. Loopback, link-local (cloud metadata) and
	// unspecified destinations are refused whatever it says.
	GateAllowPrivate []netip.Prefix
	// GateImage is the image of every gate whose GateSpec names none: a
	// NetLimited session's without GateSpec.Image, and a NetUnrestricted
	// session's under GateUnrestricted (which has no GateSpec). Empty means
	// Stockade's own (stockade/gate:local), composed on first use from the
	// gate program this library carries (internal/programs): no Go
	// toolchain or source tree is needed.
	GateImage string
	// GateCacheDir is where composing Stockade's gate image (when neither
	// GateSpec.Image nor GateImage names one) keeps what it fetches
	// (image.Options.CacheDir): Debian's busybox-static on a host without a
	// static busybox at image.DefaultBusybox. Empty means nothing is
	// fetched, and on such a host the gate image cannot be built
	// (image.ErrNoBusybox): install busybox-static, set this, or give
	// GateSpec.Image.
	GateCacheDir string
	// GateExtraHosts are "name:address" lines added to every gate's
	// /etc/hosts, which the gate reads before DNS: to pin a name, or (in
	// tests) to point an allowed name at a refused address. The address
	// rules apply to them as to DNS answers.
	GateExtraHosts []string
	// GateUnrestricted routes NetUnrestricted sandboxes through a gate of
	// their own too, one that admits every host but keeps the address
	// rules (so the host's and other private addresses stay out of reach
	// unless GateAllowPrivate admits them) and records every request for
	// EgressLog. False gives them the owner's bridge network.
	GateUnrestricted bool
	// NoAgent runs every command through an engine exec, without the
	// resident agent. False (the default) places the agent
	// (internal/agent) read-only in every sandbox and runs the sandbox
	// user's commands through it, falling back to engine execs whenever it
	// is gone, hangs or breaks its protocol; the contract suite passes
	// both ways (and with the agent killed by the session between cases).
	NoAgent bool
	// Runtime is the engine's OCI runtime of every sandbox whose Spec names
	// none (sandbox.Spec.Runtime): sandbox.RuntimeRunsc runs them under
	// gVisor. Empty means the engine's default (runc). Only the session's
	// container takes it: its keeper and its gate run Stockade's own
	// programs, never the session's code, under the engine's default. A
	// runtime the engine does not offer makes Provision fail with
	// sandbox.ErrRuntimeUnavailable.
	Runtime string
	// Pool keeps sandboxes of the specs it names made and started ahead of
	// Provision (see PoolConfig and pool.go); the zero value keeps none,
	// and every Provision creates its sandbox. Close removes the pool.
	Pool PoolConfig
}

// engine is the part of *dockerapi.Client the backend uses.
type engine interface {
	Info(ctx context.Context) (dockerapi.Info, error)
	ContainerCreate(ctx context.Context, name string, cfg dockerapi.ContainerConfig) (string, error)
	ContainerStart(ctx context.Context, id string) error
	ContainerKill(ctx context.Context, id, signal string) error
	ContainerWait(ctx context.Context, id, condition string) (dockerapi.WaitResult, error)
	ContainerRemove(ctx context.Context, id string, opts dockerapi.RemoveOptions) error
	ContainerInspect(ctx context.Context, id string) (dockerapi.ContainerJSON, error)
	ContainerRename(ctx context.Context, id, name string) error
	ContainerList(ctx context.Context, opts dockerapi.ListOptions) ([]dockerapi.ContainerSummary, error)
	ExecCreate(ctx context.Context, containerID string, cfg dockerapi.ExecConfig) (string, error)
	ExecStart(ctx context.Context, execID string, stdout, stderr io.Writer) error
	ExecInspect(ctx context.Context, execID string) (dockerapi.ExecInspect, error)
	ExecAttach(ctx context.Context, execID string) (io.ReadWriteCloser, error)
	ExecStartStdin(ctx context.Context, execID string, stdin io.Reader, stdout, stderr io.Writer) error
	ArchiveStat(ctx context.Context, id, path string) (dockerapi.PathStat, error)
	ArchiveGet(ctx context.Context, id, path string) (io.ReadCloser, dockerapi.PathStat, error)
	ArchivePut(ctx context.Context, id, dir string, r io.Reader, opts dockerapi.PutOptions) error
	VolumeCreate(ctx context.Context, v dockerapi.VolumeCreate) (dockerapi.Volume, error)
	VolumeRemove(ctx context.Context, name string, force bool) error
	VolumeList(ctx context.Context, filters dockerapi.Filters) ([]dockerapi.Volume, error)
	NetworkCreate(ctx context.Context, n dockerapi.NetworkCreate) (string, error)
	NetworkList(ctx context.Context, filters dockerapi.Filters) ([]dockerapi.Network, error)
	NetworkRemove(ctx context.Context, id string) error
	NetworkConnect(ctx context.Context, network, container string, aliases ...string) error
}

// Provider is the Docker implementation of sandbox.Provider.
type Provider struct {
	eng      engine
	owner    string
	log      *slog.Logger
	revokers sandbox.Revokers // each session's, and Config.GateTokenRevoker
	pool     netip.Prefix     // of owners' and gate networks' subnets

	// The egress gate's settings (Config.Gate…) and the engine that
	// builds its default image.
	gateOut     string
	engineHost  string // the engine's address (egress.HostAddrs)
	gatePrivate []netip.Prefix
	gateHosts   []string
	gateAny     bool // Config.GateUnrestricted
	images      image.Engine
	gateCache   string // Config.GateCacheDir
	gateImgMu   sync.Mutex
	gateImg     string // Config.GateImage, or the ID of Stockade's own once built

	mu   sync.Mutex
	cpus container.CPUs // the engine's, to clamp limits with

	agent    agentState          // the resident agent (agent.go)
	restarts backend.Restarts    // the backstop restarts of each sandbox
	oom      container.OOMRecord // oom_kill counts attributed, by container ID
	warm     *warmPool           // Config.Pool (pool.go); nil: none

	runtime  string             // Config.Runtime
	runtimes container.Runtimes // the engine's, as seen
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a provider for the engine cfg names. It does not contact the
// engine.
func New(cfg Config) (*Provider, error) {
	owner := cfg.Owner
	if owner == "" {
		owner = "default"
	}
	if len(owner) > 63 || domain.ID(owner).Validate() != nil {
		return nil, fmt.Errorf("docker: owner %q: want at most 63 bytes of letters, digits, '_', '.', '-'", owner)
	}
	pool, err := parsePool(cfg.SubnetPool)
	if err != nil {
		return nil, err
	}
	c, err := dockerapi.New(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	private, err := sessiongate.ParsePrivate(cfg.GateAllowPrivate)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if err := sessiongate.CheckExtraHosts(cfg.GateExtraHosts); err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if err := cfg.Pool.check(); err != nil {
		return nil, err
	}
	if err := container.CheckRuntimeName(cfg.Runtime); err != nil {
		return nil, fmt.Errorf("docker: Config.Runtime: %w", err)
	}
	out := cfg.GateNetwork
	if out == "" {
		out = "bridge"
	}
	return &Provider{eng: c, owner: owner, log: log, revokers: sandbox.Revokers{Default: cfg.GateTokenRevoker}, pool: pool,
		gateOut: out, engineHost: c.Host(), gatePrivate: private, gateHosts: slices.Clone(cfg.GateExtraHosts), gateAny: cfg.GateUnrestricted, images: c, gateCache: cfg.GateCacheDir, gateImg: cfg.GateImage,
		agent: agentState{off: cfg.NoAgent}, warm: newWarmPool(cfg.Pool), runtime: cfg.Runtime}, nil
}

// Owner returns the owner label value the provider uses.
func (p *Provider) Owner() string { return p.owner }

// objectName is the deterministic name of the owner's object of kind for
// suffix (a session ID, a pool member's token, a digest): NamePrefix, kind,
// "-", 8 hex digits of sha256 of the owner, "-", suffix. The kinds:
//
//	s   a session's container (its volumes add "-v0", "-v1", …)
//	k   a session's keeper
//	g   a session's gate
//	gn  a session's gate network
//	p   a pool member (volumes as a session's)
//	pk  a pool member's keeper
//	agent  the agent's volume, for a digest of the agent
//
// Distinct kinds keep the name spaces apart.
func (p *Provider) objectName(kind, suffix string) string {
	h := sha256.Sum256([]byte(p.owner))
	return container.NamePrefix + kind + "-" + hex.EncodeToString(h[:4]) + "-" + suffix
}

// containerName is the deterministic name of id's container.
func (p *Provider) containerName(id domain.ID) string { return p.objectName("s", string(id)) }

func volumeName(containerName string, i int) string {
	return containerName + "-v" + strconv.Itoa(i)
}

// keeperName is the deterministic name of id's keeper container.
func (p *Provider) keeperName(id domain.ID) string { return p.objectName("k", string(id)) }

// labels are what every object of session id carries.
func (p *Provider) labels(id domain.ID) map[string]string {
	l := label.Base(p.owner, label.KindSession)
	l[label.Session] = string(id)
	return l
}

// ours reports whether an object's labels say it is session id's, of this
// owner.
func (p *Provider) ours(l map[string]string, id domain.ID) bool {
	return label.Has(l, p.labels(id))
}

// resolved is a Spec validated and with its defaults filled in.
type resolved struct {
	spec     sandbox.Spec
	workdir  string
	roots    []string // sandbox.WritablePaths(workdir)
	uid      int64
	network  string              // "none" or the owner's network
	volOpts  []map[string]string // driver options of each root's volume
	digest   string
	cfg      container.Spec
	keeper   container.Spec
	keepName string
	keepWant map[string]string // labels the keeper must carry

	// The egress gate of a NetLimited session (resolveGate).
	gated        bool
	gate         container.Spec
	gateName     string
	gateNet      string       // the session's gate network
	gateSubnet   netip.Prefix // its range (ensureGateNetwork): the gate's clients
	gateDigest   string       // label.Spec of the gate container
	gateSettings gate.Settings
	minter       sandbox.GateTokenMinter
}

// volumeOptions are the local driver's options for a writable root's
// volume holding at most size bytes, for a sandbox of user uid. The mode
// is what the sandbox user needs (0777, /tmp 01777), and the owner is the
// user, both set at mount time so no setup is needed. The owner matters
// on Podman: without uid= and gid= it gives a new volume, at its first
// mount, the owner and mode of the image's directory at the mount point
// (root and 0755 for a WORKDIR), which the sandbox user cannot write;
// with them it leaves the volume as asked. Docker
// hands them to tmpfs unchanged.
func volumeOptions(root string, size, uid int64) map[string]string {
	mode := "0777"
	if root == "/tmp" {
		mode = "1777"
	}
	// The bound is given in pages (nr_blocks), not as size=: Podman's local
	// driver takes a size= option for a disk quota and refuses it on
	// filesystems without project quotas, while both engines hand
	// nr_blocks to the kernel's tmpfs unchanged.
	blocks := (size + tmpfsPageBytes - 1) / tmpfsPageBytes
	return map[string]string{"type": "tmpfs", "device": "tmpfs", "o": fmt.Sprintf("nr_blocks=%d,mode=%s,uid=%d,gid=%d,nosuid,nodev", blocks, mode, uid, uid)}
}

// sameVolumeOptions reports whether an existing volume's options got are
// those want asks, as far as adoption cares: the keys want has (Podman
// adds its own, UID and GID), and in "o" everything but the owner (the
// user is not part of what must match; volumes made before the owner was
// set have none).
func sameVolumeOptions(got, want map[string]string) bool {
	noOwner := func(o string) string {
		var keep []string
		for _, f := range strings.Split(o, ",") {
			if !strings.HasPrefix(f, "uid=") && !strings.HasPrefix(f, "gid=") {
				keep = append(keep, f)
			}
		}
		return strings.Join(keep, ",")
	}
	for k, v := range want {
		g, ok := got[k]
		if k == "o" {
			g, v = noOwner(g), noOwner(v)
		}
		if !ok || g != v {
			return false
		}
	}
	return true
}

// tmpfsPageBytes is the kernel page size tmpfs counts nr_blocks in: 4 KiB
// on amd64 and on the usual arm64 kernels. On a 64 KiB-page kernel the
// bound would be 16 times larger; TestStorageBound would say so.
const tmpfsPageBytes = 4096

// dockerDefaultCaps is the engine's default capability set: what a CapDrop
// without ALL keeps, minus what it names.
var dockerDefaultCaps = []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "NET_RAW", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}

// resolve validates spec (sandbox.Resolve, then the networking this backend
// gives) and computes the container spec; nothing has touched the engine
// yet.
func (p *Provider) resolve(ctx context.Context, spec sandbox.Spec) (*resolved, error) {
	c, err := sandbox.Resolve(spec)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	var network string
	switch spec.Networking.Mode() {
	case domain.NetNone:
		network = "none"
	case domain.NetUnrestricted:
		network = p.networkName()
		if p.gateAny {
			network = p.gateNetName(spec.SessionID)
		}
	case domain.NetLimited:
		if spec.Gate == nil {
			return nil, fmt.Errorf("docker: networking %q needs a Gate (egress only through the gate): %w", domain.NetLimited, sandbox.ErrNetworkingUnsupported)
		}
		network = p.gateNetName(spec.SessionID)
	}
	rt := c.Runtime
	if rt == "" {
		rt = p.runtime
	}
	// Never another runtime than the one asked: one the engine lacks is
	// refused here, before anything is made.
	if err := p.runtimes.Check(ctx, p.eng, rt); err != nil {
		return nil, fmt.Errorf("docker: session %s: %w", spec.SessionID, err)
	}
	var capAdd []string
	if !slices.Contains(c.CapDrop, "ALL") {
		for _, cp := range dockerDefaultCaps {
			if !slices.Contains(c.CapDrop, cp) {
				capAdd = append(capAdd, cp)
			}
		}
	}
	lim, err := p.cpus.Clamp(ctx, p.eng, container.Limits{NanoCPUs: c.CPUMillis * 1_000_000})
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if lim.NanoCPUs != c.CPUMillis*1_000_000 {
		p.log.Info("cpu limit clamped to the engine's", "session", string(spec.SessionID), "asked_millis", c.CPUMillis, "nano_cpus", lim.NanoCPUs)
	}
	gated := spec.Gate != nil || spec.Networking.Mode() == domain.NetUnrestricted && p.gateAny
	if gated {
		maps.Copy(c.Env, egress.ProxyEnv()) // ValidateEnv kept these names out of spec.Env
	}
	perRoot := c.StorageBytes / int64(len(c.Roots))
	r := &resolved{spec: spec, workdir: c.Workdir, roots: c.Roots, uid: c.UID, network: network,
		digest: sandbox.SpecDigest(spec.Image, c.Workdir, spec.Networking, network, perRoot, rt), keepName: p.keeperName(spec.SessionID),
		keepWant: p.labels(spec.SessionID)}
	for _, root := range c.Roots {
		r.volOpts = append(r.volOpts, volumeOptions(root, perRoot, c.UID))
	}
	name := p.containerName(spec.SessionID)
	r.cfg = container.SessionSpec(p.owner, string(spec.SessionID), c.UID)
	r.cfg.Labels[label.Spec] = r.digest
	r.cfg.Image, r.cfg.Env, r.cfg.Workdir, r.cfg.Network, r.cfg.CapAdd, r.cfg.Runtime = spec.Image, c.Env, c.Workdir, network, capAdd, rt
	r.cfg.Limits = container.Limits{NanoCPUs: lim.NanoCPUs, MemoryBytes: c.MemoryBytes, PidsLimit: c.PidsLimit}.Or(r.cfg.Limits)
	r.keeper = container.KeeperSpec(p.owner, string(spec.SessionID))
	r.keeper.Image = spec.Image
	for i, root := range r.roots {
		r.cfg.Mounts = append(r.cfg.Mounts, container.Mount{Type: container.Volume, Source: volumeName(name, i), Target: root, Writable: true})
		r.keeper.Mounts = append(r.keeper.Mounts, container.Mount{Type: container.Volume, Source: volumeName(name, i), Target: keeperTarget(i)})
	}
	if m, ok := p.agentMount(ctx, spec.Image); ok {
		r.cfg.Mounts = append(r.cfg.Mounts, m)
	}
	if gated {
		if err := p.resolveGate(ctx, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// keeperTarget is where the keeper mounts the volume of the i-th writable
// place: side by side, not at the places themselves, since one place may
// lie inside another (a workdir below /tmp), and a mount point inside a
// read-only mount cannot be made.
func keeperTarget(i int) string { return "/.stockade-keep/v" + strconv.Itoa(i) }

// maxProvisionAttempts bounds the create/adopt loop, which repeats only
// when a create conflicts and the inspect does not find the winner yet (or
// it vanished again); the waits between attempts add up to about 16s.
const maxProvisionAttempts = 40

// found is what one look or create of adoptOrCreate settled.
type found int

const (
	absent  found = iota // no such object: create it
	again                // nothing settled (a create lost the name, the object is not ready): wait, then look again
	settled              // the object is there and taken care of: done
)

// adoptOrCreate is how every object of a deterministic name (objectName)
// is made, so that concurrent creators in this process and others converge
// on one: each attempt calls look, which finds the object and, when it is
// there, checks and adopts it; when it is absent, create makes it (a
// create that loses the name says again). Before the attempt after an
// again it waits step times the attempts made. A nil look goes straight
// to create (an engine call that answers with the existing object). After
// attempts attempts it is errUnsettled; an error of look or create ends it
// at once.
func adoptOrCreate(ctx context.Context, name string, attempts int, step time.Duration, look func(attempt int) (found, error), create func() (found, error)) error {
	for attempt := 0; attempt < attempts; attempt++ {
		f := absent
		var err error
		if look != nil {
			f, err = look(attempt)
		}
		if err == nil && f == absent {
			f, err = create()
		}
		if err != nil || f == settled {
			return err
		}
		if err := container.Sleep(ctx, time.Duration(attempt+1)*step); err != nil {
			return fmt.Errorf("docker: create %s: %w", name, err)
		}
	}
	return fmt.Errorf("docker: create %s: %w", name, errUnsettled)
}

// errUnsettled is adoptOrCreate's answer when no attempt settled anything.
var errUnsettled = errors.New("the object kept vanishing, or its name kept being taken")

// Provision implements sandbox.Provider.
func (p *Provider) Provision(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return backend.Provision(ctx, spec, &p.revokers, p.provision)
}

func (p *Provider) provision(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	start := time.Now()
	r, err := p.resolve(ctx, spec)
	if err != nil {
		return nil, err
	}
	name := p.containerName(spec.SessionID)
	log := p.log.With("container", name, "session", string(spec.SessionID))
	cfg, err := r.cfg.Config()
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	// m is what this call created, the only objects its cleanup may
	// remove: a concurrent Provision in another process may be using
	// anything else of the session's.
	m := &made{session: spec.SessionID, token: container.RandomHex(8), revoker: spec.GateTokenRevoker}
	if m.revoker == nil {
		m.revoker = p.revokers.Default
	}
	p.startPool()
	var b *box
	look := func(int) (found, error) {
		c, err := p.eng.ContainerInspect(ctx, name)
		switch {
		case errors.Is(err, dockerapi.ErrNotFound):
			return absent, nil
		case err != nil:
			return absent, fmt.Errorf("docker: inspect %s: %w", name, err)
		}
		if b, err = p.adopt(ctx, r, c); err != nil {
			return absent, err
		}
		log.Debug("adopted", "phase", "provision", "dur", time.Since(start))
		return settled, nil
	}
	create := func() (found, error) {
		b2, taken := p.claim(ctx, r)
		if b2 != nil {
			b = b2
			log.Info("provisioned from the pool", "phase", "provision", "dur", time.Since(start))
			return settled, nil
		}
		if taken {
			return again, nil
		}
		b2, retry, err := p.create(ctx, r, cfg, m)
		switch {
		case err != nil:
			if derr := p.discard(ctx, m); derr != nil {
				log.Warn("cleaning up after a failed create", "err", derr)
			}
			return absent, err
		case retry:
			// Another Provision won the name, or a Reap elsewhere removed
			// the network meanwhile; adopt or create again once the engine
			// shows it (a create in flight holds the name before inspect
			// finds it).
			return again, nil
		}
		b = b2
		log.Info("provisioned", "phase", "provision", "dur", time.Since(start))
		p.agentConn(ctx, b)
		return settled, nil
	}
	if err := adoptOrCreate(ctx, name, maxProvisionAttempts, 20*time.Millisecond, look, create); err != nil {
		return nil, err
	}
	return b, nil
}

// made records what one Provision call created.
type made struct {
	session   domain.ID
	token     string   // label.CreatedBy value of this call's volumes
	volumes   []string // names
	keeper    string   // container ID; "" if this call made none
	container string   // container ID; "" if this call made none
	network   bool     // this call needed the owner's network
	gate      string   // gate container ID; "" if this call made none
	gateNet   bool     // this call created the session's gate network
	// gateToken says this call persisted (or tried to) its gate's token,
	// which revoker (its Spec's, or Config's) revokes when the gate goes.
	gateToken bool
	revoker   sandbox.GateTokenRevoker
}

// create makes the session's volumes, network (when it needs one), keeper
// and container, and starts them. retry reports that the container's name
// was taken, or the network vanished, so the caller should look again.
func (p *Provider) create(ctx context.Context, r *resolved, cfg dockerapi.ContainerConfig, m *made) (b *box, retry bool, err error) {
	name := p.containerName(r.spec.SessionID)
	if err := p.volumes(ctx, r, name, m); err != nil {
		return nil, false, err
	}
	switch {
	case r.gated:
		// The gate answers before the sandbox exists: a sandbox never
		// runs without its gate.
		if err := p.ensureGateNetwork(ctx, r, m); err != nil {
			return nil, false, err
		}
		if err := p.ensureGate(ctx, r, m); err != nil {
			return nil, false, err
		}
		addr, err := p.gateAddress(ctx, r)
		if err != nil {
			return nil, false, err
		}
		cfg.HostConfig.ExtraHosts = append(slices.Clip(cfg.HostConfig.ExtraHosts), egress.HostsLine(addr))
	case r.network != "none":
		m.network = true
		if _, err := p.networkFor(ctx); err != nil {
			return nil, false, err
		}
	}
	// The keeper starts beside the container (it only has to run before
	// the container first stops): that halves what it adds to Provision.
	// Each sets its own field of m.
	keepErr := make(chan error, 1)
	go func() { keepErr <- p.keep(ctx, r, m) }()
	b, retry, err = p.createContainer(ctx, r, cfg, m)
	if kerr := <-keepErr; kerr != nil {
		return nil, false, errors.Join(err, kerr)
	}
	return b, retry, err
}

// createContainer creates and starts session r's container; see create.
func (p *Provider) createContainer(ctx context.Context, r *resolved, cfg dockerapi.ContainerConfig, m *made) (b *box, retry bool, err error) {
	name := p.containerName(r.spec.SessionID)
	id, err := p.eng.ContainerCreate(ctx, name, cfg)
	switch {
	case errors.Is(err, dockerapi.ErrConflict):
		return nil, true, nil
	case errors.Is(err, dockerapi.ErrNotFound) && r.network != "none" && !r.gated && p.networkGone(ctx):
		return nil, true, nil
	case errors.Is(err, dockerapi.ErrNotFound):
		return nil, false, fmt.Errorf("docker: image %q is not present (sandboxes never pull): %w", r.spec.Image, err)
	case err != nil:
		return nil, false, fmt.Errorf("docker: create %s: %w", name, err)
	}
	m.container = id
	b = p.box(id, name, r.spec.SessionID, r.workdir, r.uid)
	if r.gated {
		b.gate = true
	}
	if err := p.startChecked(ctx, b, r); err != nil {
		if r.network != "none" && !r.gated && p.networkGone(ctx) {
			// A Reap elsewhere removed the network before this container
			// started (the engine lets it: only running containers hold a
			// network): remove the container and make both again.
			if rerr := p.removeContainer(ctx, id); rerr != nil {
				return nil, false, rerr
			}
			m.container = ""
			return nil, true, nil
		}
		return nil, false, err
	}
	return b, false, nil
}

// startChecked starts b, the container of r just created, and checks what
// the engine made of it before anyone uses it: it runs (an image that
// cannot run Stockade's main process fails the Provision, instead of
// handing out a sandbox already dead), and it has no mount but the ones r
// asked: an image VOLUME elsewhere would be a writable place on the
// engine's disk, outside every bound, and is sandbox.ErrUnsupportedImage.
// (A VOLUME at one of the writable places is covered by that place's
// volume; the engine makes none for it.)
func (p *Provider) startChecked(ctx context.Context, b *box, r *resolved) error {
	if err := b.start(ctx); err != nil {
		return err
	}
	c, err := p.eng.ContainerInspect(ctx, b.id)
	if err != nil {
		return fmt.Errorf("docker: inspect %s: %w", b.name, err)
	}
	if err := checkMounts(c, r); err != nil {
		return err
	}
	if !c.State.Running {
		return fmt.Errorf("docker: %s stopped as it started (%s, exit %d %s): the image cannot run the sandbox's main process (/bin/sh, sleep)",
			b.name, c.State.Status, c.State.ExitCode, c.State.Error)
	}
	return nil
}

// checkMounts refuses a container of r with a mount but the writable
// places and the agent's.
func checkMounts(c dockerapi.ContainerJSON, r *resolved) error {
	asked := map[string]bool{agentDir: true}
	for _, root := range r.roots {
		asked[root] = true
	}
	for _, m := range c.Mounts {
		if !asked[m.Destination] {
			return fmt.Errorf("docker: image %q declares VOLUME %s, outside the writable places %s: %w", r.spec.Image, m.Destination, strings.Join(r.roots, ", "), sandbox.ErrUnsupportedImage)
		}
	}
	return nil
}

// discard removes, on its own budget, what a failed Provision created: its
// container and keeper, and its volumes that no container uses (the
// engine refuses to remove a volume in use).
func (p *Provider) discard(ctx context.Context, m *made) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeBudget)
	defer cancel()
	var errs []error
	if m.container != "" {
		errs = append(errs, p.removeContainer(dctx, m.container))
	}
	// The keeper guards the volumes' files: while a session container
	// exists (a concurrent Provision's), it is that session's.
	if m.keeper != "" {
		_, err := p.eng.ContainerInspect(dctx, p.containerName(m.session))
		if errors.Is(err, dockerapi.ErrNotFound) {
			errs = append(errs, p.removeContainer(dctx, m.keeper))
		}
	}
	// A gate (and its network) this call made goes too, unless a sandbox
	// of the session exists (a concurrent Provision's, now using it).
	if m.gate != "" || m.gateNet {
		_, err := p.eng.ContainerInspect(dctx, p.containerName(m.session))
		if errors.Is(err, dockerapi.ErrNotFound) {
			if m.gate != "" {
				// The token this call persisted goes with its gate: the
				// gate goes whether or not the revocation worked (nothing
				// else holds the token), and a failed one is reported.
				if m.gateToken && m.revoker != nil {
					if err := m.revoker.Revoke(dctx, m.session); err != nil {
						errs = append(errs, fmt.Errorf("docker: revoke the gate token of %s: %w", m.session, err))
					}
				}
				errs = append(errs, p.removeContainer(dctx, m.gate))
			}
			if m.gateNet {
				if err := p.removeGateNetwork(dctx, m.session); err != nil && !errors.Is(err, dockerapi.ErrForbidden) && !errors.Is(err, dockerapi.ErrConflict) {
					errs = append(errs, err)
				}
			}
		}
	}
	// A network no session uses would be no session's, and so never
	// reaped: it goes before the volumes, by which Owned finds the session
	// if this is cut short. A concurrent Provision that loses it to this
	// removal makes it again (see createContainer).
	if m.network {
		errs = append(errs, p.removeNetworkIfUnused(dctx))
	}
	// So is the agent's volume, made by the first Provision of a provider.
	errs = append(errs, p.removeAgentIfUnused(dctx))
	for _, v := range m.volumes {
		err := p.eng.VolumeRemove(dctx, v, false)
		if err != nil && !errors.Is(err, dockerapi.ErrNotFound) && !errors.Is(err, dockerapi.ErrConflict) {
			errs = append(errs, fmt.Errorf("docker: remove volume %s: %w", v, err))
		}
	}
	return errors.Join(errs...)
}

// volumes creates (or finds) the writable volumes, refusing one that is not
// ours or was made for another storage bound, and records in m those this
// call created.
func (p *Provider) volumes(ctx context.Context, r *resolved, name string, m *made) error {
	errs := make([]error, len(r.roots))
	created := make([]bool, len(r.roots))
	var wg sync.WaitGroup
	for i := range r.roots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vn := volumeName(name, i)
			labels := p.labels(r.spec.SessionID)
			labels[label.CreatedBy] = m.token
			v, err := p.createVolume(ctx, dockerapi.VolumeCreate{Name: vn, Driver: "local", DriverOpts: r.volOpts[i], Labels: labels})
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("docker: create volume %s: %w", vn, err)
			case !p.ours(v.Labels, r.spec.SessionID):
				errs[i] = fmt.Errorf("docker: volume %s exists without this owner's labels; refusing to mount it", vn)
			default:
				created[i] = v.Labels[label.CreatedBy] == m.token
				if !sameVolumeOptions(v.Options, r.volOpts[i]) {
					errs[i] = fmt.Errorf("docker: session %s: %w: volume %s was made with options %q, the spec asks %q (reap the session first)",
						r.spec.SessionID, sandbox.ErrSpecMismatch, vn, v.Options, r.volOpts[i])
				}
			}
		}()
	}
	wg.Wait()
	for i, c := range created {
		if c && !slices.Contains(m.volumes, volumeName(name, i)) {
			m.volumes = append(m.volumes, volumeName(name, i))
		}
	}
	return errors.Join(errs...)
}

// createVolume creates volume v, or returns the one of its name: the
// engine answers a create of an existing volume with that volume. Two
// creates racing for a name both get it from Docker; Podman answers the
// loser ErrConflict ("volume already exists"), and a create asked again
// gets the volume.
func (p *Provider) createVolume(ctx context.Context, v dockerapi.VolumeCreate) (got dockerapi.Volume, err error) {
	var lost error // the last conflict
	err = adoptOrCreate(ctx, v.Name, maxVolumeAttempts, 10*time.Millisecond, nil, func() (found, error) {
		if got, err = p.eng.VolumeCreate(ctx, v); errors.Is(err, dockerapi.ErrConflict) {
			lost = err
			return again, nil
		}
		return settled, err
	})
	if errors.Is(err, errUnsettled) {
		err = lost
	}
	return got, err
}

// maxVolumeAttempts bounds how often createVolume asks; the waits add up
// to about 0.5 s.
const maxVolumeAttempts = 11

// keep makes sure session r's keeper exists and runs, creating it (and
// recording it in m) if needed.
func (p *Provider) keep(ctx context.Context, r *resolved, m *made) error {
	look := func(int) (found, error) {
		c, err := p.eng.ContainerInspect(ctx, r.keepName)
		switch {
		case errors.Is(err, dockerapi.ErrNotFound):
			return absent, nil
		case err != nil:
			return absent, fmt.Errorf("docker: inspect %s: %w", r.keepName, err)
		case !label.Has(c.Config.Labels, r.keepWant):
			return absent, fmt.Errorf("docker: a container named %s exists without this owner's session labels; refusing to use it", r.keepName)
		case !c.State.Running:
			if err := p.eng.ContainerStart(ctx, c.ID); err != nil {
				return absent, fmt.Errorf("docker: start %s: %w", r.keepName, err)
			}
		}
		return settled, nil
	}
	create := func() (found, error) {
		cfg, err := r.keeper.Config()
		if err != nil {
			return absent, fmt.Errorf("docker: %w", err)
		}
		id, err := p.eng.ContainerCreate(ctx, r.keepName, cfg)
		switch {
		case errors.Is(err, dockerapi.ErrConflict):
			return again, nil
		case errors.Is(err, dockerapi.ErrNotFound):
			return absent, fmt.Errorf("docker: image %q is not present (sandboxes never pull): %w", r.spec.Image, err)
		case err != nil:
			return absent, fmt.Errorf("docker: create %s: %w", r.keepName, err)
		}
		m.keeper = id
		if err := p.eng.ContainerStart(ctx, id); err != nil {
			return absent, fmt.Errorf("docker: start %s: %w", r.keepName, err)
		}
		return settled, nil
	}
	return adoptOrCreate(ctx, r.keepName, maxProvisionAttempts, 20*time.Millisecond, look, create)
}

// adopt checks an existing container and starts it if needed.
func (p *Provider) adopt(ctx context.Context, r *resolved, c dockerapi.ContainerJSON) (*box, error) {
	name := strings.TrimPrefix(c.Name, "/")
	if !p.isSession(c.Config.Labels, c.Name, r.spec.SessionID) {
		return nil, fmt.Errorf("docker: a container named %s exists without this owner's session labels; refusing to adopt it", name)
	}
	if _, claimed := p.claimedSession(c.Config.Labels, c.Name); claimed {
		r.memberKeeper(p, c)
	}
	if got := c.Config.Labels[label.Spec]; got != r.digest {
		var diffs []string
		if !dockerapi.SameRef(c.Config.Image, r.spec.Image) {
			diffs = append(diffs, fmt.Sprintf("image %q, asked %q", c.Config.Image, r.spec.Image))
		}
		if c.Config.WorkingDir != r.workdir {
			diffs = append(diffs, fmt.Sprintf("workdir %q, asked %q", c.Config.WorkingDir, r.workdir))
		}
		if got := c.HostConfig.Runtime; got != r.cfg.Runtime && (r.cfg.Runtime != "" || got != "runc") {
			diffs = append(diffs, fmt.Sprintf("runtime %q, asked %q", got, r.cfg.Runtime))
		}
		if len(diffs) == 0 {
			diffs = append(diffs, "networking, storage bound or runtime differs")
		}
		return nil, fmt.Errorf("docker: session %s: %w: %s", r.spec.SessionID, sandbox.ErrSpecMismatch, strings.Join(diffs, "; "))
	}
	// Commands run as the container's user, whatever uid this spec asks
	// (the uid is not part of what must match), as with Attach.
	uid, err := parseUID(c.Config.User)
	if err != nil {
		return nil, fmt.Errorf("docker: session %s: %w", r.spec.SessionID, err)
	}
	// The keeper must run before the container stops again, or its files
	// go with the volumes' mounts; after an engine restart it starts here.
	// What this makes is the session's, never removed on failure.
	if err := p.keep(ctx, r, &made{}); err != nil {
		return nil, err
	}
	// The pairing: the session's gate network and gate, made for this
	// spec, running and answering, before the sandbox runs again.
	if r.gated {
		if err := p.ensureGateNetwork(ctx, r, &made{}); err != nil {
			return nil, err
		}
		if err := p.ensureGate(ctx, r, &made{}); err != nil {
			return nil, err
		}
	}
	if err := checkMounts(c, r); err != nil {
		return nil, err
	}
	b := p.box(c.ID, name, r.spec.SessionID, r.workdir, uid)
	b.gate = r.gated
	// Start (a no-op when running) and make sure the roots are ready: the
	// Provision that created the container may still be preparing them.
	return b, b.start(ctx)
}

// parseUID returns the uid of a container's "uid:gid" (or "uid") user, as
// resolve writes it. Anything else, root included, is an error: commands
// never run as a user guessed for them.
func parseUID(user string) (int64, error) {
	u, _, _ := strings.Cut(user, ":")
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("container user %q is not a non-root numeric uid", user)
	}
	return n, nil
}

// Attach implements sandbox.Provider.
func (p *Provider) Attach(ctx context.Context, sessionID domain.ID) (sandbox.Sandbox, error) {
	if err := sessionID.Validate(); err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	c, err := p.find(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if !c.State.Running {
		return nil, fmt.Errorf("docker: session %s: sandbox is %s: %w", sessionID, c.State.Status, sandbox.ErrNotFound)
	}
	uid, err := parseUID(c.Config.User)
	if err != nil {
		return nil, fmt.Errorf("docker: session %s: %w", sessionID, err)
	}
	b := p.box(c.ID, strings.TrimPrefix(c.Name, "/"), sessionID, c.Config.WorkingDir, uid)
	b.gate = c.HostConfig.NetworkMode == p.gateNetName(sessionID)
	return b, nil
}

// find returns session id's container in any state, or ErrNotFound.
func (p *Provider) find(ctx context.Context, id domain.ID) (dockerapi.ContainerJSON, error) {
	name := p.containerName(id)
	c, err := p.eng.ContainerInspect(ctx, name)
	if errors.Is(err, dockerapi.ErrNotFound) {
		return c, fmt.Errorf("docker: session %s: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return c, fmt.Errorf("docker: inspect %s: %w", name, err)
	}
	if !p.isSession(c.Config.Labels, c.Name, id) {
		return c, fmt.Errorf("docker: session %s: %s is not this owner's: %w", id, name, sandbox.ErrNotFound)
	}
	return c, nil
}

// Export implements sandbox.Provider. The archive has the same shape on
// every engine (see exportShape).
func (p *Provider) Export(ctx context.Context, sessionID domain.ID, root string) (io.ReadCloser, error) {
	if err := sessionID.Validate(); err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if err := sandbox.CheckPath(root); err != nil {
		return nil, fmt.Errorf("docker: export: %w", err)
	}
	c, err := p.find(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	rc, st, err := p.eng.ArchiveGet(ctx, c.ID, root)
	if errors.Is(err, dockerapi.ErrNotFound) {
		return nil, fmt.Errorf("docker: export %s: %w", root, sandbox.ErrFileNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("docker: export %s: %w", root, err)
	}
	return exportShape(rc, st, root)
}

// Owned implements sandbox.Provider. It lists every session that has a
// container (the sandbox or its keeper) or a volume of this owner, so the
// volumes a crash left between their creation and the container's are
// reaped too. The owner's network is no session's: each Reap removes it
// once no session container of the owner is left, and so does Owned when
// it finds none, since a crash can leave the network with no session to
// reap (a create the dead process had in flight completes after the
// restarted one's Reap; a Reap killed before the network's removal).
func (p *Provider) Owned(ctx context.Context) ([]domain.ID, error) {
	cs, err := p.sessionContainers(ctx)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		if err := p.removeNetworkIfUnused(ctx); err != nil {
			return nil, err
		}
		if err := p.removeAgentIfUnused(ctx); err != nil {
			return nil, err
		}
	}
	vs, err := p.eng.VolumeList(ctx, dockerapi.LabelsFilter(label.Base(p.owner, label.KindSession)))
	if err != nil {
		return nil, fmt.Errorf("docker: list volumes: %w", err)
	}
	// A gate network outlives a crash between its creation and the gate's.
	ns, err := p.eng.NetworkList(ctx, dockerapi.LabelsFilter(label.Base(p.owner, label.KindSession)))
	if err != nil {
		return nil, fmt.Errorf("docker: list networks: %w", err)
	}
	// What a cut-short removal of a claimed pool member left (its keeper,
	// its volumes) is no session's: it goes here, as the network does.
	if err := p.removeOrphanMembers(ctx, cs, vs, false); err != nil {
		return nil, err
	}
	labels := make([]map[string]string, 0, len(cs)+len(vs)+len(ns))
	for _, n := range ns {
		labels = append(labels, n.Labels)
	}
	for _, c := range cs {
		if len(c.Names) > 0 {
			// A claimed member is its session's by name.
			if id, ok := p.claimedSession(c.Labels, c.Names[0]); ok {
				labels = append(labels, p.labels(id))
				continue
			}
		}
		labels = append(labels, c.Labels)
	}
	for _, v := range vs {
		labels = append(labels, v.Labels)
	}
	session := func(l map[string]string) domain.ID { return domain.ID(l[label.Session]) }
	return backend.Owned(labels, session, p.ours), nil
}

// Reap implements sandbox.Provider.
func (p *Provider) Reap(ctx context.Context, sessionID domain.ID) error {
	if err := sessionID.Validate(); err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	return p.remove(ctx, sessionID, true)
}

// remove revokes (when asked and a revoker is known), then removes session
// id's container and keeper, the owner's network if no session container
// is left, and the session's volumes, and waits until they are gone.
func (p *Provider) remove(ctx context.Context, id domain.ID, revoke bool) error {
	if revoke {
		if err := p.revokers.Revoke(ctx, id); err != nil {
			return fmt.Errorf("docker: revoke gate token of %s (nothing removed): %w", id, err)
		}
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeBudget)
	defer cancel()
	start := time.Now()
	name := p.containerName(id)
	// The container, its keeper and its gate go together; the networks
	// and volumes after them.
	names := []string{name, p.keeperName(id), p.gateName(id)}
	errs := make([]error, len(names))
	var member string // the token of a claimed pool member's
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := p.eng.ContainerInspect(rctx, n)
			switch {
			case errors.Is(err, dockerapi.ErrNotFound):
			case err != nil:
				errs[i] = fmt.Errorf("docker: remove %s: %w", n, err)
			case !p.ours(c.Config.Labels, id) && !(i == 0 && p.isSession(c.Config.Labels, c.Name, id)):
				errs[i] = fmt.Errorf("docker: %s is not this owner's; not removing it", n)
			default:
				if i == 0 && c.Config.Labels[label.Role] == label.RolePool {
					member = c.Config.Labels[label.Pool]
				}
				p.forgetAgent(c.ID)
				p.oom.Forget(c.ID)
				errs[i] = p.removeContainer(rctx, c.ID)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if member != "" {
		// Its keeper and volumes keep their member names; cut short, they
		// are an orphan member's, which Owned removes.
		if err := p.removeMemberRest(rctx, member, true); err != nil {
			return err
		}
	}
	// The networks before the volumes: a crash between the two then
	// leaves volumes, by which Owned still finds the session and Reap
	// finishes.
	if err := p.removeGateNetwork(rctx, id); err != nil {
		return err
	}
	if err := p.removeNetworkIfUnused(rctx); err != nil {
		return err
	}
	if err := p.removeAgentIfUnused(rctx); err != nil {
		return err
	}
	vols, err := p.eng.VolumeList(rctx, dockerapi.LabelsFilter(p.labels(id)))
	if err != nil {
		return fmt.Errorf("docker: list volumes of %s: %w", id, err)
	}
	late := false
	for _, v := range vols {
		if !p.ours(v.Labels, id) {
			continue // the engine's filter matched loosely
		}
		err := p.removeVolume(rctx, v.Name, true, func() (bool, error) {
			// Still in use: the engine is releasing it, or a container
			// holds it that the removal above did not find: a create a
			// crashed process had in flight, which the engine lists
			// before it can remove it, or a concurrent Provision's.
			late = true
			return true, p.removeListed(rctx, id)
		})
		if err != nil {
			return err
		}
	}
	if late {
		if err := p.removeGateNetwork(rctx, id); err != nil {
			return err
		}
		if err := p.removeNetworkIfUnused(rctx); err != nil {
			return err
		}
	}
	p.revokers.Forget(id)
	p.log.Debug("removed", "container", name, "session", string(id), "phase", "remove", "dur", time.Since(start))
	return nil
}

// removeVolume removes volume name (force: even if the engine counts it in
// use). While the engine answers that it is in use, inUse says whether to
// ask again (after 100 ms); a volume that is gone counts as removed.
func (p *Provider) removeVolume(ctx context.Context, name string, force bool, inUse func() (again bool, err error)) error {
	for {
		err := p.eng.VolumeRemove(ctx, name, force)
		if err == nil || errors.Is(err, dockerapi.ErrNotFound) {
			return nil
		}
		if !errors.Is(err, dockerapi.ErrConflict) {
			return fmt.Errorf("docker: remove volume %s: %w", name, err)
		}
		again, err := inUse()
		if err != nil || !again {
			return err
		}
		if err := container.Sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("docker: remove volume %s: %w", name, err)
		}
	}
}

// sessionContainers lists the owner's session containers (sandboxes,
// keepers, gates; not the agent's fillers) in any state, checking the
// engine's filter again (label.Has).
func (p *Provider) sessionContainers(ctx context.Context) ([]dockerapi.ContainerSummary, error) {
	want := label.Base(p.owner, label.KindSession)
	cs, err := p.eng.ContainerList(ctx, dockerapi.ListOptions{All: true, Filters: dockerapi.LabelsFilter(want)})
	if err != nil {
		return nil, fmt.Errorf("docker: list sandboxes: %w", err)
	}
	return slices.DeleteFunc(cs, func(c dockerapi.ContainerSummary) bool {
		return !label.Has(c.Labels, want) || c.Labels[label.Role] == label.RoleAgent
	}), nil
}

// removeListed removes the containers the engine lists for session id.
// One it is still creating cannot be removed yet, and counts as removed
// (removeContainer): callers retry.
func (p *Provider) removeListed(ctx context.Context, id domain.ID) error {
	cs, err := p.eng.ContainerList(ctx, dockerapi.ListOptions{All: true, Filters: dockerapi.LabelsFilter(p.labels(id))})
	if err != nil {
		return fmt.Errorf("docker: list containers of %s: %w", id, err)
	}
	for _, c := range cs {
		if p.ours(c.Labels, id) {
			if err := p.removeContainer(ctx, c.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeContainer force-removes the container with ID id and waits until
// it is gone. Callers have checked it is theirs to remove.
func (p *Provider) removeContainer(ctx context.Context, id string) error {
	for {
		err := p.eng.ContainerRemove(ctx, id, dockerapi.RemoveOptions{Force: true, Volumes: true})
		if errors.Is(err, dockerapi.ErrNotFound) {
			return nil
		}
		if err != nil && !errors.Is(err, dockerapi.ErrConflict) {
			return fmt.Errorf("docker: remove container %s: %w", id, err)
		}
		// Gone once an inspect no longer finds it (a removal already in
		// progress answers ErrConflict).
		if _, err := p.eng.ContainerInspect(ctx, id); errors.Is(err, dockerapi.ErrNotFound) {
			return nil
		}
		if err := container.Sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("docker: remove container %s: %w", id, err)
		}
	}
}
