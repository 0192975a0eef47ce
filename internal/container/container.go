// Package container is the one place where Stockade turns what a container
// should be into the engine's container configuration. Session sandboxes
// (sandbox/docker) and toolchain profiles (internal/toolchain) both build
// their containers here, so the hardening is written once.
//
// Threat model: the code in the container is hostile. The zero value of every
// field is the most locked-down setting: no network, read-only root, every
// capability dropped, no new privileges, the unprivileged user 65534, an
// environment holding exactly Spec.Env, and default cpu, memory and pids
// limits. Loosening is explicit and named (Network, Mount.Writable, CapAdd).
package container

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"sort"
	"strings"

	"github.com/stockade/stockade/internal/defaults"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// Names and sizes every container shares.
const (
	// DefaultTmpfsBytes is the size of a tmpfs whose SizeBytes is zero.
	DefaultTmpfsBytes = 512 << 20
	// NamePrefix starts the name of every container Stockade creates, so a
	// leak is easy to spot with docker ps.
	NamePrefix = "stockade-"
)

// ErrInvalidSpec reports a Spec that cannot be made into a safe container.
var ErrInvalidSpec = errors.New("container: invalid spec")

// MountType is how a Mount is made.
type MountType string

// Mount types.
const (
	Bind   MountType = "bind"   // a host directory or file
	Volume MountType = "volume" // a named engine volume
	Tmpfs  MountType = "tmpfs"  // memory-backed, gone with the container
)

// Mount is one filesystem the container sees besides its read-only root.
// The zero Writable means read-only.
type Mount struct {
	Type   MountType
	Source string // host path (Bind) or volume name (Volume); empty for Tmpfs
	Target string // absolute, clean path in the container
	// Writable mounts a bind or volume read-write; false mounts it read-only.
	// A Tmpfs is always writable (it vanishes with the container).
	Writable bool
	// Exec allows executing files from a Tmpfs (the Go toolchain builds test
	// binaries under /tmp). Bind and volume mounts are always exec.
	Exec bool
	// SizeBytes bounds a Tmpfs; 0 means DefaultTmpfsBytes.
	SizeBytes int64
	// Mode is a Tmpfs's permission bits; 0 means 01777.
	Mode uint32
	// CopyUp lets the engine fill an empty Volume with what the image has
	// at Target when the container is made (started, on Podman); false
	// mounts the volume as it is. Only the container that makes a copy of
	// an image's directory sets it (toolchain.GoRoot).
	CopyUp bool
}

// Spec describes a container.
type Spec struct {
	Image string   // image ID or reference; required
	Cmd   []string // argv; empty keeps the image's
	// Entrypoint replaces the image's ENTRYPOINT (and then the image's
	// CMD is not used either); empty keeps them.
	Entrypoint []string
	// Env is the whole environment: the host's never leaks in. The engine
	// adds the image's own Env under it (images Stockade builds set PATH,
	// GOROOT, GOTOOLCHAIN=local and CGO_ENABLED=0), and Config adds
	// defaults.Env(); a name in Env wins.
	Env     map[string]string
	User    string // "uid:gid"; empty means defaults.NobodyUser
	Workdir string // absolute; empty keeps the image's
	// Network is "" or "none" (no interface but loopback, which works as
	// on a host: 127.0.0.1 and ::1, and localhost in /etc/hosts),
	// "bridge", or the name of a network.
	Network string
	// Aliases are DNS names the container has on Network (a user-defined
	// network); empty gives none but its name.
	Aliases []string
	// Address is the container's fixed IPv4 address on Network (a
	// user-defined network whose subnet holds it); the zero Addr lets the
	// engine choose.
	Address netip.Addr
	// ExtraHosts are "name:address" lines added to the container's
	// /etc/hosts; empty adds none.
	ExtraHosts []string
	Mounts     []Mount
	Limits     Limits
	// CapAdd names capabilities to give back after dropping all. Empty for
	// everything Stockade runs today.
	CapAdd   []string
	Labels   map[string]string
	Init     bool   // run docker-init as PID 1 to reap zombies
	Hostname string // empty lets the engine choose
	// StopTimeout is how long the engine waits between SIGTERM and SIGKILL
	// on stop, in seconds; 0 means 1.
	StopTimeout int
	// Runtime names the engine's OCI runtime for the container ("runsc":
	// gVisor, a kernel of its own between the container and the host's);
	// "" means the engine's default (runc). Check it with
	// Runtimes.Check first: an engine without it refuses the create.
	Runtime string
}

// Config returns the engine configuration for s: the hardening is applied
// here and nowhere else.
func (s Spec) Config() (dockerapi.ContainerConfig, error) {
	if s.Image == "" {
		return dockerapi.ContainerConfig{}, fmt.Errorf("%w: no image", ErrInvalidSpec)
	}
	if s.Workdir != "" && !CleanAbs(s.Workdir) {
		return dockerapi.ContainerConfig{}, fmt.Errorf("%w: workdir %q is not an absolute clean path", ErrInvalidSpec, s.Workdir)
	}
	env, err := envList(s.Env)
	if err != nil {
		return dockerapi.ContainerConfig{}, err
	}
	if s.Labels[label.Managed] != label.ManagedValue || s.Labels[label.Owner] == "" || s.Labels[label.Kind] == "" {
		return dockerapi.ContainerConfig{}, fmt.Errorf("%w: no Stockade labels (managed, owner, kind): start from a named spec", ErrInvalidSpec)
	}
	user := s.User
	if user == "" {
		user = defaults.NobodyUser
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "0" || uid == "root" {
		return dockerapi.ContainerConfig{}, fmt.Errorf("%w: containers never run as root", ErrInvalidSpec)
	}
	network := s.Network
	if network == "" {
		network = "none"
	}
	if network == "host" || strings.HasPrefix(network, "container:") {
		return dockerapi.ContainerConfig{}, fmt.Errorf("%w: network mode %q shares another namespace", ErrInvalidSpec, network)
	}
	if len(s.Aliases) > 0 && (network == "none" || network == "bridge") {
		return dockerapi.ContainerConfig{}, fmt.Errorf("%w: aliases need a user-defined network, not %q", ErrInvalidSpec, network)
	}
	if err := CheckRuntimeName(s.Runtime); err != nil {
		return dockerapi.ContainerConfig{}, err
	}
	stop := s.StopTimeout
	if stop <= 0 {
		stop = 1
	}
	lim := s.Limits.Or(SessionLimits())
	pids := lim.PidsLimit
	init := s.Init
	cfg := dockerapi.ContainerConfig{
		Image:       s.Image,
		Entrypoint:  s.Entrypoint,
		Cmd:         s.Cmd,
		Env:         env,
		User:        user,
		WorkingDir:  s.Workdir,
		Labels:      s.Labels,
		Hostname:    s.Hostname,
		StopTimeout: &stop,
		HostConfig: dockerapi.HostConfig{
			ReadonlyRootfs: true,
			NetworkMode:    network,
			CapDrop:        []string{"ALL"},
			CapAdd:         s.CapAdd,
			SecurityOpt:    []string{"no-new-privileges"},
			Privileged:     false,
			Memory:         lim.MemoryBytes,
			MemorySwap:     lim.MemoryBytes, // equal to Memory: no swap
			NanoCPUs:       lim.NanoCPUs,
			PidsLimit:      &pids,
			Init:           &init,
			IpcMode:        "private",
			// Output is read live (exec, attach) and capped; nothing a
			// container prints is written to the host's disk.
			LogConfig:  &dockerapi.LogConfig{Type: "none"},
			ShmSize:    64 << 20,
			Ulimits:    ulimits(),
			ExtraHosts: s.ExtraHosts,
			Runtime:    s.Runtime,
		},
	}
	if network == "none" {
		// NetworkMode "none" alone isolates: a namespace of its own with
		// nothing but loopback. NetworkDisabled would also leave
		// /etc/hosts empty, so localhost would not resolve; the engine
		// disables IPv6 in a "none" namespace, so ::1 would not exist.
		// Code that listens and dials on loopback works as on a host.
		cfg.HostConfig.Sysctls = map[string]string{"net.ipv6.conf.lo.disable_ipv6": "0"}
	}
	if s.Address.IsValid() && (!s.Address.Is4() || network == "none" || network == "bridge") {
		return dockerapi.ContainerConfig{}, fmt.Errorf("%w: a fixed address needs an IPv4 address and a user-defined network, not %v on %q", ErrInvalidSpec, s.Address, network)
	}
	if len(s.Aliases) > 0 || s.Address.IsValid() {
		ep := &dockerapi.EndpointSettings{Aliases: s.Aliases}
		if s.Address.IsValid() {
			ep.IPAMConfig = &dockerapi.EndpointIPAMConfig{IPv4Address: s.Address.String()}
		}
		cfg.NetworkingConfig = &dockerapi.NetworkingConfig{EndpointsConfig: map[string]*dockerapi.EndpointSettings{network: ep}}
	}
	seen := map[string]bool{}
	for _, m := range s.Mounts {
		if !CleanAbs(m.Target) || m.Target == "/" {
			return dockerapi.ContainerConfig{}, fmt.Errorf("%w: mount target %q is not an absolute clean path below /", ErrInvalidSpec, m.Target)
		}
		if seen[m.Target] {
			return dockerapi.ContainerConfig{}, fmt.Errorf("%w: two mounts at %q", ErrInvalidSpec, m.Target)
		}
		seen[m.Target] = true
		switch m.Type {
		case Bind, Volume:
			if m.Source == "" {
				return dockerapi.ContainerConfig{}, fmt.Errorf("%w: %s mount at %q has no source", ErrInvalidSpec, m.Type, m.Target)
			}
			if m.Type == Bind && m.CopyUp {
				return dockerapi.ContainerConfig{}, fmt.Errorf("%w: CopyUp at %q: only a volume is filled from the image", ErrInvalidSpec, m.Target)
			}
			if m.Type == Bind && !CleanAbs(m.Source) {
				return dockerapi.ContainerConfig{}, fmt.Errorf("%w: bind source %q is not an absolute clean path", ErrInvalidSpec, m.Source)
			}
			dm := dockerapi.Mount{Type: string(m.Type), Source: m.Source, Target: m.Target, ReadOnly: !m.Writable}
			if m.Type == Bind {
				// No propagation back to the host, and submounts are not
				// dragged in.
				dm.BindOptions = &dockerapi.BindOptions{Propagation: "rprivate", NonRecursive: true}
			} else {
				dm.VolumeOptions = &dockerapi.VolumeOptions{NoCopy: !m.CopyUp}
			}
			cfg.HostConfig.Mounts = append(cfg.HostConfig.Mounts, dm)
		case Tmpfs:
			if cfg.HostConfig.Tmpfs == nil {
				cfg.HostConfig.Tmpfs = map[string]string{}
			}
			cfg.HostConfig.Tmpfs[m.Target] = m.tmpfsOptions()
		default:
			return dockerapi.ContainerConfig{}, fmt.Errorf("%w: mount type %q", ErrInvalidSpec, m.Type)
		}
	}
	return cfg, nil
}

func (m Mount) tmpfsOptions() string {
	size := m.SizeBytes
	if size <= 0 {
		size = DefaultTmpfsBytes
	}
	mode := m.Mode
	if mode == 0 {
		mode = 0o1777
	}
	opts := []string{"rw", "nosuid", "nodev", fmt.Sprintf("size=%d", size), fmt.Sprintf("mode=%o", mode)}
	if m.Exec {
		opts = append(opts, "exec")
	} else {
		opts = append(opts, "noexec")
	}
	return strings.Join(opts, ",")
}

// envList renders env sorted, refusing names the engine would misread.
func envList(env map[string]string) ([]string, error) {
	all := defaults.Env()
	maps.Copy(all, env)
	out := make([]string, 0, len(all))
	for k, v := range all {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("%w: environment name %q", ErrInvalidSpec, k)
		}
		if strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("%w: environment value of %q has a NUL byte", ErrInvalidSpec, k)
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// RandomName returns NamePrefix + kind + "-" + 12 random hex digits.
func RandomName(kind string) string {
	return NamePrefix + kind + "-" + RandomHex(6)
}

// RandomHex returns 2n random hex digits.
func RandomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b)
}
